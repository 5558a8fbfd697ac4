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
    /// The private key file written by `wop keygen`.
    #[arg(long)]
    key: PathBuf,
}

/// `wop verify` arguments.
#[derive(Args)]
pub(crate) struct VerifyArgs {
    /// The pack directory.
    pack_dir: PathBuf,
    /// Operator policy (TOML) holding `[trust]`. Default: no trusted keys.
    #[arg(long)]
    policy: Option<PathBuf>,
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

/// Generates an Ed25519 key pair.
pub(crate) async fn keygen(a: KeygenArgs) -> Result<u8, Failure> {
    let mut seed = [0u8; 32];
    getrandom::fill(&mut seed).map_err(|e| anyhow::anyhow!("no randomness: {e}"))?;
    let public = trust::public_key_of(&seed);
    let id = match a.id {
        Some(id) => id,
        None => {
            use sha2::Digest;
            let raw = b64().decode(&public)?;
            format!("ed25519-{}", &hex::encode(sha2::Sha256::digest(raw))[..16])
        }
    };
    std::fs::create_dir_all(&a.out)?;
    let key_path = a.out.join(format!("{id}.key"));
    let pub_path = a.out.join(format!("{id}.pub"));
    let private =
        json!({"algorithm": trust::ALGORITHM, "keyId": id, "privateKey": b64().encode(seed)});
    write_private(&key_path, &(serde_json::to_string_pretty(&private)? + "\n"))?;
    let public_doc = json!({"algorithm": trust::ALGORITHM, "keyId": id, "publicKey": public});
    std::fs::write(&pub_path, serde_json::to_string_pretty(&public_doc)? + "\n")?;
    println!(
        "wrote {} (private, keep it secret) and {}",
        key_path.display(),
        pub_path.display()
    );
    println!("trust it in the operator policy:\n");
    println!("[trust.keys.\"{id}\"]\npublicKey = \"{public}\"\npacks = [\"<name-pattern>.*\"]");
    Ok(0)
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

/// Signs a pack directory: writes `pack.sig`.
pub(crate) async fn sign(a: SignArgs) -> Result<u8, Failure> {
    let text = std::fs::read_to_string(&a.key)
        .with_context(|| format!("cannot read the key file {}", a.key.display()))
        .map_err(usage)?;
    let doc: serde_json::Value = serde_json::from_str(&text)
        .map_err(|_| usage(anyhow::anyhow!("{} is not a wop key file", a.key.display())))?;
    let (Some(id), Some(private)) = (doc["keyId"].as_str(), doc["privateKey"].as_str()) else {
        return Err(usage(anyhow::anyhow!(
            "{} is not a private key file from `wop keygen`",
            a.key.display()
        )));
    };
    let seed: [u8; 32] = b64()
        .decode(private)
        .ok()
        .and_then(|v| v.try_into().ok())
        .ok_or_else(|| {
            usage(anyhow::anyhow!(
                "{}: the private key is malformed",
                a.key.display()
            ))
        })?;
    let manifest_path = a.pack_dir.join("pack.json");
    let manifest = wop_core::pack::read_manifest_bytes(&a.pack_dir)
        .with_context(|| format!("cannot read {}", manifest_path.display()))
        .map_err(usage)?;
    wop_core::manifest::Manifest::parse(&manifest).map_err(|e| Failure {
        code: exit::PACK_REJECTED,
        error: anyhow::anyhow!("{}: {e}", manifest_path.display()),
    })?;
    let sig = trust::sign(&manifest, &seed, id).map_err(|e| anyhow::anyhow!(e))?;
    let out = a.pack_dir.join(trust::SIG_FILE);
    std::fs::write(&out, serde_json::to_string_pretty(&sig)? + "\n")?;
    println!(
        "signed {} with key `{id}` -> {}",
        a.pack_dir.display(),
        out.display()
    );
    Ok(0)
}

/// Checks signature, trust and integrity (no pack code is compiled or run).
pub(crate) async fn verify(a: VerifyArgs) -> Result<u8, Failure> {
    let policy = match &a.policy {
        Some(p) => Policy::from_file(p).map_err(usage)?,
        None => Policy::default(),
    };
    let verdict = wop_core::pack::trust_verdict(&a.pack_dir, &policy)
        .and_then(|v| wop_core::pack::read_pack_trusted(&a.pack_dir, &policy).map(|_| v));
    match verdict {
        Ok(v) => {
            if a.json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(
                        &json!({"pack": a.pack_dir.display().to_string(), "verified": true, "trust": v})
                    )?
                );
            } else {
                println!("{}: {v}; entry sha256 matches", a.pack_dir.display());
            }
            Ok(0)
        }
        Err(e) => {
            if a.json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(
                        &json!({"pack": a.pack_dir.display().to_string(), "verified": false, "error": e.to_node_error()})
                    )?
                );
            }
            Err(Failure {
                code: exit::PACK_REJECTED,
                error: anyhow::anyhow!("pack {} refused: {e}", a.pack_dir.display()),
            })
        }
    }
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
