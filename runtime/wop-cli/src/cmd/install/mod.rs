//! `wop install <name>[@<version>] --registry <url>`: a pack from an
//! OpenWOP registry, the way the protocol's registry publishes it
//! (DESIGN.md §8; decision 0021). Resolve through the discovery document's
//! `endpoints`, choose a version (never a yanked one unless pinned; warn on
//! deprecated), download the archive (capped, through the SSRF-guarded
//! client), check its `integrity` before unpacking
//! (`pack_integrity_failure`), verify the signature against the operator's
//! `[trust.keys]` (or the registry's keys with `--trust-registry`), gate
//! `runtime.requires[]` and escalation, check the entry's pinned sha256,
//! then move it into the packs directory and record it in
//! `pack-lock.json`. With the lockfile, an install is the locked version
//! and integrity, and `--offline` reinstalls from the archives kept next to
//! the packs.

mod client;
mod index;
mod lock;

use crate::common::{Failure, exit, usage};
use clap::Args;
use std::collections::BTreeMap;
use std::path::PathBuf;
use wop_core::trust::{SigFile, TrustSection, protocol};
use wop_runtime::{ErrorCode, Policy};

/// `wop install` arguments.
#[derive(Args)]
pub(crate) struct InstallArgs {
    /// `<name>` or `<name>@<version>`; without it, every pack of the
    /// lockfile is installed at its locked version.
    pack: Option<String>,
    /// The registry's base URL (its `/.well-known/openwop-registry.json`
    /// is read first). Default: the lockfile's registry.
    #[arg(long)]
    registry: Option<String>,
    /// The packs directory (each pack becomes `<packs>/<name>/`).
    #[arg(long, default_value = "packs")]
    packs: PathBuf,
    /// The lockfile.
    #[arg(long, default_value = "pack-lock.json")]
    lock: PathBuf,
    /// Operator policy (TOML): `[trust.keys]`, grants (for
    /// `runtime.requires[]`), `approved` versions, `[egress]`.
    #[arg(long)]
    policy: Option<PathBuf>,
    /// Also trust the registry's own signing keys (its `signingKeys[]`,
    /// each limited to its `permittedNamespaces`).
    #[arg(long)]
    trust_registry: bool,
    /// Install a pack that carries no signature.
    #[arg(long)]
    allow_unsigned: bool,
    /// Use only archives kept from earlier installs (`<packs>/.archives/`)
    /// and the lockfile; no network.
    #[arg(long)]
    offline: bool,
}

/// A refusal with its protocol code.
fn refused(code: ErrorCode, message: impl std::fmt::Display) -> Failure {
    Failure {
        code: exit::PACK_REJECTED,
        error: anyhow::anyhow!("{}: {message}", code.as_str()),
    }
}

fn usage_s(message: String) -> Failure {
    usage(anyhow::anyhow!(message))
}

fn failed(message: impl std::fmt::Display) -> Failure {
    Failure {
        code: exit::INTERNAL,
        error: anyhow::anyhow!("{message}"),
    }
}

/// What is to be installed.
struct Want {
    name: String,
    pin: Option<String>,
}

fn parse_want(s: &str) -> Result<Want, Failure> {
    let (name, pin) = match s.rsplit_once('@') {
        Some((n, v)) if !n.is_empty() => (n, Some(v.to_owned())),
        _ => (s, None),
    };
    if !wop_runtime::manifest::valid_name(name) {
        return Err(usage(anyhow::anyhow!("`{name}` is not a pack name")));
    }
    if name.contains('/') || name.starts_with('.') {
        return Err(usage(anyhow::anyhow!(
            "`{name}` cannot be installed: a registry pack name is one path segment (e.g. vendor.acme.fetch)"
        )));
    }
    if let Some(v) = &pin
        && !wop_runtime::manifest::valid_version(v)
    {
        return Err(usage(anyhow::anyhow!(
            "`{v}` is not a version (MAJOR.MINOR.PATCH)"
        )));
    }
    if name.starts_with("local.") {
        return Err(usage(anyhow::anyhow!(
            "`{name}` is in the `local.*` namespace, which is never published to a registry; \
             load it from its directory instead"
        )));
    }
    Ok(Want {
        name: name.to_owned(),
        pin,
    })
}

pub(crate) async fn install(a: InstallArgs) -> Result<u8, Failure> {
    let policy = match &a.policy {
        Some(p) => Policy::from_file(p).map_err(usage)?,
        None => Policy::default(),
    };
    let mut lock = lock::Lock::read(&a.lock).map_err(usage_s)?;
    let wants: Vec<Want> = match &a.pack {
        Some(p) => vec![parse_want(p)?],
        None if lock.packs.is_empty() => {
            return Err(usage(anyhow::anyhow!(
                "name a pack (`wop install <name>[@<version>] --registry <url>`), or run it next to a pack-lock.json"
            )));
        }
        None => lock
            .packs
            .iter()
            .map(|p| parse_want(&format!("{}@{}", p.name, p.version)))
            .collect::<Result<_, _>>()?,
    };
    let registry = a.registry.clone().or_else(|| lock.registry.clone());
    let before = lock.clone();
    for w in wants {
        let locked = lock.get(&w.name).cloned();
        let pin = w
            .pin
            .clone()
            .or_else(|| locked.as_ref().map(|l| l.version.clone()));
        let got = if a.offline {
            offline(&a, &w.name, pin.as_deref(), locked.as_ref())?
        } else {
            let Some(reg) = registry.as_deref() else {
                return Err(usage(anyhow::anyhow!("give --registry <url>")));
            };
            online(&a, &policy, reg, &w.name, pin.as_deref(), locked.as_ref()).await?
        };
        let (installed, verdict, component) = place(&a, &policy, &w.name, &got, locked.as_ref())?;
        println!(
            "installed {}@{} -> {} ({}; {verdict})",
            w.name,
            got.version,
            installed.display(),
            got.integrity,
        );
        lock.put(lock::Locked {
            name: w.name.clone(),
            version: got.version.clone(),
            integrity: got.integrity.clone(),
            resolved: got.resolved.clone(),
            component,
        });
        if lock.registry.is_none() {
            lock.registry = registry.clone();
        }
    }
    if lock.packs != before.packs || lock.registry != before.registry {
        let now = wop_core::time::now_ms();
        lock.write(&a.lock, &rfc3339(now)).map_err(failed)?;
        println!("locked in {}", a.lock.display());
    }
    Ok(0)
}

/// A downloaded (or kept) archive, checked and read.
struct Got {
    version: String,
    integrity: String,
    resolved: Option<String>,
    files: BTreeMap<String, Vec<u8>>,
    archive: Vec<u8>,
    keys: TrustSection,
}

fn archive_path(a: &InstallArgs, name: &str, version: &str) -> PathBuf {
    a.packs
        .join(".archives")
        .join(format!("{name}-{version}.tgz"))
}

fn read_files(bytes: &[u8], what: &str) -> Result<BTreeMap<String, Vec<u8>>, Failure> {
    wop_core::archive::read_tgz(bytes).map_err(|e| {
        let numbers = match (e.limit, e.observed) {
            (Some(l), Some(o)) => format!(", limit: {l}, observed: {o}"),
            _ => String::new(),
        };
        refused(
            e.code,
            format!("{what}: {} (reason: {}{numbers})", e.message, e.reason),
        )
    })
}

fn check_lock(
    locked: Option<&lock::Locked>,
    version: &str,
    integrity: &str,
) -> Result<(), Failure> {
    if let Some(l) = locked
        && l.version == version
        && l.integrity != integrity
    {
        return Err(refused(
            ErrorCode::PackIntegrityMismatch,
            format!(
                "{}@{version} is {integrity}, but pack-lock.json pins {}; the archive changed since it was locked",
                l.name, l.integrity
            ),
        ));
    }
    Ok(())
}

/// The same archive built by the same engine must give the component the
/// lock recorded: a different one means the build is not what was
/// reviewed (or not reproducible), and nothing is installed. Another
/// engine (a newer `wop`) builds other bytes and records them.
fn check_build(
    locked: Option<&lock::Locked>,
    version: &str,
    built: &lock::LockedComponent,
) -> Result<(), Failure> {
    let Some(l) = locked.filter(|l| l.version == version) else {
        return Ok(());
    };
    match &l.component {
        Some(c) if c.engine == built.engine && c.sha256 != built.sha256 => Err(refused(
            ErrorCode::PackIntegrityMismatch,
            format!(
                "{}@{version} built into component sha256 {} with {}, but pack-lock.json pins {} for the same engine; the build differs from the locked one (report it; reinstall without the lock entry to accept the new build)",
                l.name, built.sha256, built.engine, c.sha256
            ),
        )),
        _ => Ok(()),
    }
}

fn offline(
    a: &InstallArgs,
    name: &str,
    pin: Option<&str>,
    locked: Option<&lock::Locked>,
) -> Result<Got, Failure> {
    let (Some(version), Some(l)) = (pin, locked) else {
        return Err(usage(anyhow::anyhow!(
            "--offline installs only locked packs; `{name}` is not in pack-lock.json"
        )));
    };
    let path = archive_path(a, name, version);
    let bytes = crate::archive_input::read_archive_file(&path).map_err(|e| {
        refused(
            ErrorCode::PackVersionNotFound,
            format!("{name}@{version}: {e} (no kept archive; install online first)"),
        )
    })?;
    let integrity = wop_core::archive::integrity(&bytes);
    check_lock(Some(l), version, &integrity)?;
    Ok(Got {
        version: version.to_owned(),
        integrity,
        resolved: l.resolved.clone(),
        files: read_files(&bytes, &path.display().to_string())?,
        archive: bytes,
        keys: TrustSection::default(),
    })
}

async fn online(
    a: &InstallArgs,
    policy: &Policy,
    registry: &str,
    name: &str,
    pin: Option<&str>,
    locked: Option<&lock::Locked>,
) -> Result<Got, Failure> {
    let c = client::Client::new(registry, policy).map_err(usage_s)?;
    let unreachable = |e: client::GetError| {
        if e.too_large {
            refused(ErrorCode::RegistryDocumentTooLarge, e)
        } else {
            failed(format!("pack_registry_unreachable: {e}"))
        }
    };
    let disc_url = c
        .url(".well-known/openwop-registry.json")
        .map_err(usage_s)?;
    let disc = index::discovery(&c.json(&disc_url).await.map_err(unreachable)?).map_err(failed)?;
    let idx_url = c
        .url(&index::fill(&disc.pack_metadata, &[("name", name)]))
        .map_err(usage_s)?;
    let idx = c.json(&idx_url).await.map_err(|e| {
        if e.too_large {
            refused(
                ErrorCode::RegistryDocumentTooLarge,
                format!("the registry's index of `{name}` is too large: {e}"),
            )
        } else {
            refused(
                ErrorCode::NotFound,
                format!("the registry has no readable index of `{name}`: {e}"),
            )
        }
    })?;
    let rows = index::rows(&idx).map_err(failed)?;
    let row = index::choose(&rows, pin).map_err(|e| match e {
        index::NoVersion::NotFound(v) => refused(
            ErrorCode::PackVersionNotFound,
            format!("`{name}` has no version {v} in the registry"),
        ),
        index::NoVersion::AllYanked => refused(
            ErrorCode::PackVersionNotFound,
            format!("every version of `{name}` is yanked; pin one with `{name}@<version>` to install it anyway"),
        ),
    })?;
    if row.yanked {
        eprintln!(
            "wop: warning: {name}@{} is yanked; installing it because it is pinned",
            row.version
        );
    }
    if row.deprecated {
        eprintln!("wop: warning: {name}@{} is deprecated", row.version);
    }
    let tarball = match (&row.tarball_url, &disc.version_tarball) {
        (Some(u), _) => u.clone(),
        (None, Some(t)) => index::fill(t, &[("name", name), ("version", &row.version)]),
        (None, None) => return Err(failed("the registry names no tarball for this version")),
    };
    let tar_url = c.url(&tarball).map_err(usage_s)?;
    let bytes = c
        .get(&tar_url, client::MAX_TARBALL_BYTES)
        .await
        .map_err(|e| {
            if e.too_large {
                refused(ErrorCode::PackTooLarge, e)
            } else {
                failed(format!("pack_registry_unreachable: {e}"))
            }
        })?;
    let integrity = wop_core::archive::integrity(&bytes);
    if integrity != row.integrity {
        return Err(refused(
            ErrorCode::PackIntegrityFailure,
            format!(
                "{name}@{}: the archive is {integrity}, the registry published {}; nothing was unpacked",
                row.version, row.integrity
            ),
        ));
    }
    check_lock(locked, &row.version, &integrity)?;
    let mut keys = TrustSection::default();
    if a.trust_registry {
        for (id, url, namespaces) in &disc.keys {
            let path = match (url, &disc.public_key) {
                (Some(u), _) => u.clone(),
                (None, Some(t)) => index::fill(t, &[("keyId", id)]),
                (None, None) => continue,
            };
            let pem = c
                .get(&c.url(&path).map_err(usage_s)?, client::MAX_DOC_BYTES)
                .await
                .map_err(unreachable)?;
            let (key, dropped) = policy
                .trust
                .registry_key(String::from_utf8_lossy(&pem).into_owned(), namespaces);
            for d in dropped {
                eprintln!(
                    "wop: warning: the registry's key `{id}` declares `{d}`, which is not a name pattern (exact, `prefix.*` or `*`); ignored"
                );
            }
            keys.keys.insert(id.clone(), key);
        }
    }
    Ok(Got {
        version: row.version.clone(),
        integrity,
        resolved: Some(tar_url.to_string()),
        files: read_files(&bytes, tar_url.as_ref())?,
        archive: bytes,
        keys,
    })
}

/// Verifies the unpacked pack and moves it into the packs directory.
fn place(
    a: &InstallArgs,
    policy: &Policy,
    name: &str,
    got: &Got,
    locked: Option<&lock::Locked>,
) -> Result<
    (
        PathBuf,
        wop_core::trust::TrustVerdict,
        Option<lock::LockedComponent>,
    ),
    Failure,
> {
    let Some(manifest_bytes) = got.files.get("pack.json") else {
        return Err(refused(
            ErrorCode::PackValidationFailed,
            "the archive has no pack.json at its root",
        ));
    };
    // Provenance first (decision 0025): the archive's integrity was
    // checked on download; now the signature, against the operator's keys
    // and the registry's if trusted (a registry key never replaces an
    // operator key of the same id, and never signs a name an operator key
    // covers). Only then is the manifest judged, starting with whether
    // the pack can run here.
    let mut trust = got.keys.clone();
    trust.keys.extend(policy.trust.keys.clone());
    let sig = got
        .files
        .get(protocol::SIG_PATH)
        .map(|s| SigFile::Protocol(s));
    let signed_name =
        wop_core::trust::signed_name(manifest_bytes).map_err(|e| refused(e.code(), e))?;
    if signed_name != name {
        return Err(refused(
            ErrorCode::PackValidationFailed,
            format!("the archive of `{name}` holds a pack named `{signed_name}`; refused"),
        ));
    }
    let verdict =
        wop_core::trust::verify(&trust, &signed_name, !a.allow_unsigned, manifest_bytes, sig)
            .map_err(|e| refused(e.code(), e))?;
    let manifest = wop_core::manifest::Manifest::parse(manifest_bytes).map_err(|e| {
        if wop_core::runnable::is_not_runnable(&e) {
            refused(
                e.code(),
                format!(
                    "{name}@{} is verified ({verdict}) but cannot run here: {e}",
                    got.version
                ),
            )
        } else {
            refused(e.code(), e)
        }
    })?;
    if manifest.version != got.version {
        return Err(refused(
            ErrorCode::PackValidationFailed,
            format!(
                "the archive of version {} holds version {}",
                got.version, manifest.version
            ),
        ));
    }
    wop_core::pack::requires::check(policy, &manifest).map_err(|e| refused(e.code(), e))?;
    wop_core::pack::check_escalation(policy, &manifest).map_err(|e| refused(e.code(), e))?;

    std::fs::create_dir_all(&a.packs)?;
    let staging = tempfile::Builder::new()
        .prefix(".wop-install-")
        .tempdir_in(&a.packs)?;
    crate::archive_input::unpack_into(staging.path(), &got.files)?;
    // The whole load-time check on the unpacked files: the entry's pinned
    // sha256 included.
    let mut checked = policy.clone();
    checked.trust = trust;
    checked.trust.require_signature = !a.allow_unsigned;
    wop_core::pack::read_pack_trusted(staging.path(), &checked)
        .map_err(|e| refused(e.code(), e))?;
    // A JavaScript pack is built here, before anything is kept: a pack
    // whose code does not build is refused with its reason and position.
    let component = if manifest.runtime.language == wop_core::manifest::Language::Javascript {
        let built = wop_runtime::build_javascript_pack(staging.path(), &manifest)
            .map_err(|e| refused(e.code(), e))?;
        let component = lock::LockedComponent {
            sha256: built.sha256,
            build_id: built.build_id,
            engine: format!("wop-js/{}", built.engine_sha256),
        };
        check_build(locked, &got.version, &component)?;
        Some(component)
    } else {
        None
    };

    let keep = archive_path(a, &manifest.name, &got.version);
    if let Some(d) = keep.parent() {
        std::fs::create_dir_all(d)?;
    }
    std::fs::write(&keep, &got.archive)?;
    let dest = a.packs.join(&manifest.name);
    let old = a
        .packs
        .join(format!(".{}.old-{}", manifest.name, std::process::id()));
    if dest.exists() {
        std::fs::rename(&dest, &old)?;
    }
    std::fs::rename(staging.keep(), &dest)?;
    if old.exists() {
        std::fs::remove_dir_all(&old)?;
    }
    Ok((dest, verdict, component))
}

/// `YYYY-MM-DDTHH:MM:SSZ` for ms since the epoch.
fn rfc3339(ms: u64) -> String {
    let secs = ms / 1000;
    let days = i64::try_from(secs / 86_400).unwrap_or(0);
    let rem = secs % 86_400;
    // Civil from days (Howard Hinnant).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn timestamps() {
        assert_eq!(super::rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(super::rfc3339(1_796_083_200_000), "2026-12-01T00:00:00Z");
        assert_eq!(
            super::rfc3339(1_709_164_800_000 + 3_723_000),
            "2024-02-29T01:02:03Z"
        );
    }
}
