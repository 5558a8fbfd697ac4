//! `wop keygen`, `wop sign`, `wop verify`, `wop diff`: signed packs and
//! safe upgrades (decision 0009). The logic is `wop_core::trust`; this
//! file reads and writes the files.

use crate::common::{Failure, exit, usage};
use anyhow::Context;
use base64::Engine as _;
use clap::Args;
use serde_json::json;
use std::path::{Path, PathBuf};
use wop_core::trust;
use wop_runtime::Policy;

/// `wop keygen` arguments.
#[derive(Args)]
pub(crate) struct KeygenArgs {
    /// Where to write `<id>.key` (private, mode 0600) and `<id>.pub`.
    #[arg(long, default_value = ".")]
    out: PathBuf,
    /// The key id (default: `ed25519-` and 16 hex digits of the public key's sha256).
    #[arg(long)]
    id: Option<String>,
}

/// `wop sign` arguments.
#[derive(Args)]
pub(crate) struct SignArgs {
    /// The pack directory (holding pack.json).
    pack_dir: PathBuf,
    /// The private key: PKCS#8 PEM (`wop keygen`, `openssl genpkey
    /// -algorithm ed25519`) or a key file of earlier `wop keygen` versions.
    #[arg(long)]
    key: PathBuf,
    /// The key id recorded in `signing.publicKeyRef` (default: the key
    /// file's name without its extension).
    #[arg(long)]
    key_id: Option<String>,
}

/// `wop verify` arguments.
#[derive(Args)]
pub(crate) struct VerifyArgs {
    /// The pack directory, or its `.tgz` archive.
    pack_dir: PathBuf,
    /// Operator policy (TOML) holding `[trust]`. Default: no trusted keys.
    #[arg(long)]
    policy: Option<PathBuf>,
    /// The integrity a registry published for the archive
    /// (`sha256-<base64>`, its index's `integrity`): checked before
    /// anything in it is looked at.
    #[arg(long)]
    integrity: Option<String>,
    /// Print one JSON document.
    #[arg(long)]
    json: bool,
}

/// `wop diff` arguments.
#[derive(Args)]
pub(crate) struct DiffArgs {
    /// The old (approved) pack directory or pack.json.
    old: PathBuf,
    /// The new pack directory or pack.json.
    new: PathBuf,
    /// Print one JSON document.
    #[arg(long)]
    json: bool,
}

fn b64() -> base64::engine::GeneralPurpose {
    base64::engine::general_purpose::STANDARD
}

/// Generates an Ed25519 key pair: `<id>.key` (PKCS#8 PEM, mode 0600) and
/// `<id>.pub` (SPKI PEM, what a registry serves at `/keys/{keyId}.pub`).
pub(crate) async fn keygen(a: KeygenArgs) -> Result<u8, Failure> {
    let mut seed = zeroize::Zeroizing::new([0u8; 32]);
    getrandom::fill(&mut *seed).map_err(|e| anyhow::anyhow!("no randomness: {e}"))?;
    let public = trust::public_key_of(&seed);
    let raw: [u8; 32] = b64()
        .decode(&public)?
        .try_into()
        .map_err(|_| anyhow::anyhow!("the public key is not 32 bytes"))?;
    let id = match a.id {
        Some(id) => id,
        None => {
            use sha2::Digest;
            format!("ed25519-{}", &hex::encode(sha2::Sha256::digest(raw))[..16])
        }
    };
    std::fs::create_dir_all(&a.out)?;
    let key_path = a.out.join(format!("{id}.key"));
    let pub_path = a.out.join(format!("{id}.pub"));
    write_private(&key_path, &trust::pem::seed_to_pem(&seed))?;
    std::fs::write(&pub_path, trust::pem::public_to_pem(&raw))?;
    println!(
        "wrote {} (private, keep it secret) and {} (public, PEM)",
        key_path.display(),
        pub_path.display()
    );
    println!("trust it in the operator policy:\n");
    println!(
        "[trust.keys.\"{id}\"]\npublicKeyFile = \"{}\"   # or publicKey = \"{public}\"\npacks = [\"vendor.<org>.*\"]",
        pub_path.display()
    );
    Ok(0)
}

/// The 32-byte seed of a private key file: PKCS#8 PEM (`wop keygen`,
/// `openssl genpkey -algorithm ed25519`) or the JSON file of earlier
/// `wop keygen` versions.
fn read_seed(path: &Path) -> Result<zeroize::Zeroizing<[u8; 32]>, Failure> {
    let text = zeroize::Zeroizing::new(
        std::fs::read_to_string(path)
            .with_context(|| format!("cannot read the key file {}", path.display()))
            .map_err(usage)?,
    );
    if text.trim_start().starts_with("-----BEGIN") {
        return trust::pem::seed_from_pem(&text)
            .map_err(|e| usage(anyhow::anyhow!("{}: {e}", path.display())));
    }
    let doc: serde_json::Value = serde_json::from_str(&text).map_err(|_| {
        usage(anyhow::anyhow!(
            "{} is neither a PEM private key nor a key file from `wop keygen`",
            path.display()
        ))
    })?;
    doc["privateKey"]
        .as_str()
        .and_then(|p| b64().decode(p).ok())
        .and_then(|v| <[u8; 32]>::try_from(v).ok())
        .map(zeroize::Zeroizing::new)
        .ok_or_else(|| {
            usage(anyhow::anyhow!(
                "{}: the private key is malformed",
                path.display()
            ))
        })
}

fn write_private(path: &Path, text: &str) -> Result<(), Failure> {
    use std::io::Write;
    let mut o = std::fs::OpenOptions::new();
    o.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        o.mode(0o600);
    }
    let mut f = o
        .open(path)
        .with_context(|| format!("cannot create {} (it must not exist yet)", path.display()))
        .map_err(usage)?;
    f.write_all(text.as_bytes())?;
    Ok(())
}

/// Signs a pack directory in the protocol's format: rewrites `pack.json`
/// as the canonical JSON of the manifest with its `signing` block and
/// writes the raw signature to `keys/pack.json.sig` (removing a legacy
/// `pack.sig`).
pub(crate) async fn sign(a: SignArgs) -> Result<u8, Failure> {
    let seed = read_seed(&a.key)?;
    let id = a.key_id.clone().or_else(|| {
        a.key
            .file_stem()
            .and_then(|s| s.to_str())
            .map(str::to_owned)
    });
    let Some(id) = id else {
        return Err(usage(anyhow::anyhow!(
            "give the key id with --key-id (the signing key's id in the registry)"
        )));
    };
    let manifest_path = a.pack_dir.join("pack.json");
    let manifest = wop_core::pack::read_manifest_bytes(&a.pack_dir)
        .with_context(|| format!("cannot read {}", manifest_path.display()))
        .map_err(usage)?;
    wop_core::manifest::Manifest::parse(&manifest).map_err(|e| Failure {
        code: exit::PACK_REJECTED,
        error: anyhow::anyhow!("{}: {e}", manifest_path.display()),
    })?;
    let (bytes, sig) =
        trust::protocol::sign(&manifest, &seed, &id).map_err(|e| anyhow::anyhow!(e))?;
    let sig_path = a.pack_dir.join(trust::protocol::SIG_PATH);
    if let Some(parent) = sig_path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::write(&manifest_path, &bytes)?;
    std::fs::write(&sig_path, sig)?;
    let legacy = a.pack_dir.join(trust::SIG_FILE);
    if legacy.is_file() {
        std::fs::remove_file(&legacy)?;
        println!("removed the legacy {}", legacy.display());
    }
    println!(
        "signed {} with key `{id}`: pack.json (canonical, with its signing block) and {}",
        a.pack_dir.display(),
        sig_path.display()
    );
    Ok(0)
}

/// Checks provenance first, for a pack of any kind (decision 0025): the
/// archive's integrity when `--integrity` is given, then the signature of
/// `pack.json` against `[trust]`; only then whether the pack can run here
/// (`wop_core::runnable`) and, for a pack that can, the rest of the
/// manifest and the entry's pinned sha256. No pack code is compiled or
/// run.
///
/// Exit 0 when the pack verifies, runnable here or not (the second line
/// says which, with the code); 3 when provenance fails, or when a verified
/// pack that is runnable here is refused by the rest of the check.
pub(crate) async fn verify(a: VerifyArgs) -> Result<u8, Failure> {
    let policy = match &a.policy {
        Some(p) => Policy::from_file(p).map_err(usage)?,
        None => Policy::default(),
    };
    let input = crate::archive_input::open(&a.pack_dir, a.json)?;
    let shown = a.pack_dir.display().to_string();
    let refuse = |e: wop_runtime::LoadError, verified: bool| -> Result<u8, Failure> {
        if a.json {
            println!(
                "{}",
                serde_json::to_string_pretty(
                    &json!({"pack": shown, "verified": verified, "error": e.to_node_error()})
                )?
            );
        }
        Err(Failure {
            code: exit::PACK_REJECTED,
            error: anyhow::anyhow!("pack {shown} refused: {e}"),
        })
    };
    if let Some(want) = &a.integrity {
        let Some(got) = input.integrity() else {
            return Err(usage(anyhow::anyhow!(
                "--integrity is for an archive (.tgz); {shown} is a directory"
            )));
        };
        if got != want {
            return refuse(
                wop_runtime::LoadError::Component {
                    code: wop_runtime::ErrorCode::PackIntegrityFailure,
                    message: format!(
                        "the archive is {got}, the registry published {want}; nothing in it was looked at"
                    ),
                },
                false,
            );
        }
    }
    let verdict = match wop_core::pack::trust_verdict(input.dir(), &policy) {
        Ok(v) => v,
        Err(e) => return refuse(e, false),
    };
    let raw = wop_core::pack::read_manifest_bytes(input.dir()).ok();
    let field = |k: &str| {
        raw.as_deref()
            .and_then(|r| serde_json::from_slice::<serde_json::Value>(r).ok())
            .and_then(|v| v.get(k).and_then(|x| x.as_str()).map(str::to_owned))
    };
    let (name, version) = (field("name"), field("version"));
    let checked = match wop_core::pack::read_pack_trusted(input.dir(), &policy) {
        Ok(_) => None,
        Err(e) if wop_core::runnable::is_not_runnable(&e) => Some(e),
        Err(e) => return refuse(e, true),
    };
    if a.json {
        let runnable = match &checked {
            None => json!({"runnable": true}),
            Some(e) => json!({"runnable": false, "error": e.to_node_error()}),
        };
        let mut doc = json!({
            "pack": shown, "name": name, "version": version,
            "verified": true, "trust": verdict, "integrity": input.integrity(),
        });
        if let (Some(o), Some(r)) = (doc.as_object_mut(), runnable.as_object()) {
            o.extend(r.clone());
        }
        println!("{}", serde_json::to_string_pretty(&doc)?);
    } else {
        let what = match (&name, &version) {
            (Some(n), Some(v)) => format!(" ({n}@{v})"),
            _ => String::new(),
        };
        println!("{shown}{what}: verified: {verdict}");
        match &checked {
            None => println!("runnable here; entry sha256 matches"),
            Some(e) => println!("not runnable here: {e}"),
        }
    }
    Ok(0)
}

fn manifest_of(p: &Path) -> Result<wop_core::manifest::Manifest, Failure> {
    trust::read_approved(p).map_err(|e| usage(anyhow::anyhow!(e)))
}

/// What the new version requests beyond the old one.
pub(crate) async fn diff(a: DiffArgs) -> Result<u8, Failure> {
    let (old, new) = (manifest_of(&a.old)?, manifest_of(&a.new)?);
    let adds = trust::diff::additions(&old, &new);
    if a.json {
        let doc =
            json!({"name": new.name, "from": old.version, "to": new.version, "additions": adds});
        println!("{}", serde_json::to_string_pretty(&doc)?);
    } else if adds.is_empty() {
        println!(
            "{} {} -> {}: requests nothing new",
            new.name, old.version, new.version
        );
    } else {
        println!(
            "{} {} -> {} requests more:",
            new.name, old.version, new.version
        );
        for x in &adds {
            println!("  + {x}");
        }
    }
    Ok(0)
}

/// One line for `wop inspect`: the signer and the trust verdict.
pub(crate) fn verdict_line(dir: &Path, policy: &Policy) -> String {
    if dir.is_file() {
        return "unsigned (bare core module)".to_owned();
    }
    match wop_core::pack::trust_verdict(dir, policy) {
        Ok(v) => v.to_string(),
        Err(e) => format!("refused: {e}"),
    }
}
