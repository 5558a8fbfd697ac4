//! Loading a pack directory under the operator's policy: its provenance
//! ([`provenance`](mod@provenance)), its approval ([`approval`]), its runtime requirements
//! ([`requires`]), manifest and integrity, the import gate, the describe()
//! check ([`identity`]) and its node schemas ([`schema`]).
//!
//! Every file is read by [`crate::files::packfile`] through a `cap-std`
//! `Dir` rooted at the pack directory, so no manifest path can leave it
//! (`..`, absolute paths fail), and only regular files are read: no
//! symlink is followed, no FIFO waited on, no size unchecked.

pub mod approval;
pub mod identity;
pub mod provenance;
pub mod requires;
pub mod schema;

pub use approval::{check_escalation, check_rollback};
pub use provenance::{check_bare, provenance, signature_required, signature_required_for_all};

use crate::capability::{Capability, ImportVerdict, classify_import, effective};
use crate::error::LoadError;
use crate::limits::{Clamp, Limits};
use crate::manifest::{Language, Manifest};
use crate::policy::{FsGrant, Policy};
use cap_std::fs::Dir;
use serde::Serialize;
use sha2::{Digest, Sha256};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::files::packfile::{MAX_ENTRY_BYTES, MAX_MANIFEST_BYTES, MAX_SIG_BYTES};

/// One import of the component and the verdict on it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ImportReport {
    /// The import name (`wasi:cli/stdout@0.2.6`, `openwop:node-pack/log@0.1.0`).
    pub name: String,
    /// `allowed`, `granted`, `not-granted`, `escape:<kind>`, `unknown`.
    pub verdict: String,
}

/// What `wop inspect` shows, computed without running any pack code.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Inspection {
    /// The pack directory.
    pub dir: PathBuf,
    /// The validated manifest.
    pub manifest: Manifest,
    /// sha256 of the entry (verified against the manifest).
    pub sha256: String,
    /// The component's imports, in declaration order, with verdicts.
    pub imports: Vec<ImportReport>,
    /// Capabilities the manifest requests.
    pub requested: Vec<Capability>,
    /// Capabilities the operator grants to this pack (beyond the base).
    pub granted: Vec<Capability>,
    /// The effective set: base ∪ (requested ∩ granted).
    pub effective: BTreeSet<Capability>,
    /// Effective limits per invocation.
    pub limits: Limits,
    /// Requests that were clamped to the operator's ceilings.
    pub clamps: Vec<Clamp>,
    /// The directory mounted at `/data`, if granted.
    pub filesystem: Option<FsGrant>,
    /// What safe-fetch may reach.
    pub egress: EgressView,
    /// Why the pack would be refused, if it would be.
    pub refusal: Option<crate::error::NodeError>,
    /// A JavaScript pack: the host services of the protocol's `ctx` its
    /// code names (`callAI`, `db.sql.query`, …), each reachable only when
    /// the operator maps it to a tool (`[packs.<name>] services`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub services: Vec<String>,
}

/// A pack's safe-fetch allow-list and the operator settings that shape it.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EgressView {
    /// Patterns the manifest requests (`x-wop.egress`).
    pub requested: Vec<String>,
    /// Patterns the operator grants (`[packs.<name>] egress`).
    pub granted: Vec<String>,
    /// The test-only loopback switch (`[egress] allowLoopback`): when on,
    /// packs can reach this machine. Shown loudly by `wop inspect`.
    pub allow_loopback: bool,
    /// Redirect hops followed (0: none).
    pub max_redirects: u32,
    /// The compiled allow-list (requested ∩ granted).
    #[serde(skip)]
    pub allow: std::sync::Arc<crate::egress::AllowList>,
}

/// Reads and verifies the pack's files; returns the manifest, the entry
/// bytes and their sha256. No signature check: see [`read_pack_trusted`].
pub fn read_pack(dir: &Path) -> Result<(Manifest, Vec<u8>, String), LoadError> {
    let root = open_root(dir)?;
    let raw = read_capped(&root, MANIFEST_FILE, MAX_MANIFEST_BYTES, "$")?;
    let manifest = Manifest::parse(&raw)?;
    read_entry(&root, manifest)
}

/// [`read_pack`] in the order of decision 0025: the provenance of
/// `pack.json` first ([`provenance()`]: the signature against
/// `[trust]`, before anything in the manifest but its name is judged),
/// then what the pack is and whether it can run here
/// ([`crate::manifest::Manifest::parse`], which asks
/// [`crate::manifest::runnable`]), then escalation against `[packs.<name>]
/// approved` and the `runtime.requires[]` gate ([`crate::pack::requires::check`]),
/// and only then the entry is read and its pinned sha256 checked.
pub fn read_pack_trusted(
    dir: &Path,
    policy: &Policy,
) -> Result<(Manifest, Vec<u8>, String), LoadError> {
    let root = open_root(dir)?;
    let raw = read_capped(&root, MANIFEST_FILE, MAX_MANIFEST_BYTES, "$")?;
    let sig = read_sig(&root)?;
    crate::pack::provenance(policy, &raw, sig.as_ref().map(Found::file))?;
    let manifest = Manifest::parse(&raw)?;
    crate::pack::check_escalation(policy, &manifest)?;
    crate::pack::requires::check(policy, &manifest)?;
    read_entry(&root, manifest)
}

/// The pack's provenance verdict under `policy`, without judging anything
/// else in the manifest and without reading the entry (for `wop inspect` /
/// `wop verify`): a pack of any kind or language gets one.
pub fn trust_verdict(dir: &Path, policy: &Policy) -> Result<crate::trust::TrustVerdict, LoadError> {
    let root = open_root(dir)?;
    let raw = read_capped(&root, MANIFEST_FILE, MAX_MANIFEST_BYTES, "$")?;
    let sig = read_sig(&root)?;
    crate::pack::provenance(policy, &raw, sig.as_ref().map(Found::file)).map(|(_, v)| v)
}

/// The manifest's file name inside a pack directory.
pub const MANIFEST_FILE: &str = "pack.json";

/// The bytes of `pack.json` in the pack directory `dir`, read by the
/// bounded, no-follow reader ([`crate::files::packfile`]): the one way anything
/// (the ABI v1 detection included) looks at a manifest.
pub fn read_manifest_bytes(dir: &Path) -> Result<Vec<u8>, LoadError> {
    let root = open_root(dir)?;
    read_capped(&root, MANIFEST_FILE, MAX_MANIFEST_BYTES, "$")
}

/// The name `dir`'s manifest declares, read and validated as the loaders
/// do (for grouping packs by their declared identity).
pub fn declared_name(dir: &Path) -> Result<String, LoadError> {
    Manifest::parse(&read_manifest_bytes(dir)?).map(|m| m.name)
}

fn open_root(dir: &Path) -> Result<Dir, LoadError> {
    Dir::open_ambient_dir(dir, cap_std::ambient_authority()).map_err(|e| {
        LoadError::validation(
            dir.display().to_string(),
            format!("cannot open the pack directory: {e}"),
        )
    })
}

/// The signature file found in a pack directory.
enum Found {
    Protocol(Vec<u8>),
    Legacy(Vec<u8>),
}

impl Found {
    fn file(&self) -> crate::trust::SigFile<'_> {
        match self {
            Found::Protocol(b) => crate::trust::SigFile::Protocol(b),
            Found::Legacy(b) => crate::trust::SigFile::Legacy(b),
        }
    }
}

/// A pack file, if there is anything by that name (which must then be a
/// regular file like every pack file).
fn read_optional(root: &Dir, file: &str) -> Result<Option<Vec<u8>>, LoadError> {
    match crate::files::packfile::kind_in(root, file) {
        Ok(None) => Ok(None),
        Ok(Some(_)) => read_capped(root, file, MAX_SIG_BYTES, file).map(Some),
        Err(r) => Err(r.into_load_error(file, file)),
    }
}

/// `keys/pack.json.sig` (the protocol's), else the legacy `pack.sig`; a
/// pack carrying both is refused (which one would count?).
fn read_sig(root: &Dir) -> Result<Option<Found>, LoadError> {
    let protocol = match crate::files::packfile::kind_in(root, "keys") {
        Ok(Some(_)) => read_optional(root, crate::trust::protocol::SIG_PATH)?,
        Ok(None) => None,
        Err(r) => return Err(r.into_load_error("keys", "keys")),
    };
    let legacy = read_optional(root, crate::trust::SIG_FILE)?;
    match (protocol, legacy) {
        (Some(_), Some(_)) => Err(LoadError::Signature {
            reason: crate::trust::SigFailure::Malformed.as_str(),
            key_id: None,
            message: format!(
                "the pack has both {} and the legacy {}; remove {} (re-sign with `wop sign`)",
                crate::trust::protocol::SIG_PATH,
                crate::trust::SIG_FILE,
                crate::trust::SIG_FILE
            ),
        }),
        (Some(p), None) => Ok(Some(Found::Protocol(p))),
        (None, Some(l)) => Ok(Some(Found::Legacy(l))),
        (None, None) => Ok(None),
    }
}

fn read_entry(root: &Dir, manifest: Manifest) -> Result<(Manifest, Vec<u8>, String), LoadError> {
    let entry = read_capped(
        root,
        &manifest.runtime.entry,
        MAX_ENTRY_BYTES,
        "$.runtime.entry",
    )?;
    let actual = hex::encode(Sha256::digest(&entry));
    // A JavaScript pack without `x-wop.sha256` (the registry's): its
    // sources are bound by the archive's integrity and the build's id.
    let unpinned_js =
        manifest.runtime.language == Language::Javascript && manifest.wop.sha256.is_empty();
    if !unpinned_js && actual != manifest.wop.sha256 {
        return Err(LoadError::Integrity {
            entry: manifest.runtime.entry.clone(),
            expected: manifest.wop.sha256.clone(),
            actual,
        });
    }
    Ok((manifest, entry, actual))
}

/// Every pack file is read here: [`crate::files::packfile::read_in`] (regular
/// files only, no blocking open, size checked before reading).
fn read_capped(root: &Dir, rel: &str, cap: u64, json_path: &str) -> Result<Vec<u8>, LoadError> {
    crate::files::packfile::read_in(root, rel, cap).map_err(|r| r.into_load_error(json_path, rel))
}

/// The import gate: every import judged in declaration order; the first
/// offending one decides. `pack` names the pack in a refusal (the policy
/// table that would grant the capability).
pub fn judge_imports<'a>(
    pack: &str,
    names: impl Iterator<Item = &'a str>,
    effective: &BTreeSet<Capability>,
) -> (Vec<ImportReport>, Option<LoadError>) {
    judge(pack, names, effective, false)
}

/// [`judge_imports`] for a component built by `wop` around a shared engine
/// (a JavaScript pack): the engine imports every host interface whatever
/// the pack's code uses, so an ungranted one is not a refusal; it is
/// reported `not-granted:denied-at-call` and every call to it fails with
/// `sandbox_capability_denied` (the sandbox checks the grant on each host
/// call). Escapes and unknown imports are refused as for any pack.
pub fn judge_engine_imports<'a>(
    pack: &str,
    names: impl Iterator<Item = &'a str>,
    effective: &BTreeSet<Capability>,
) -> (Vec<ImportReport>, Option<LoadError>) {
    judge(pack, names, effective, true)
}

fn judge<'a>(
    pack: &str,
    names: impl Iterator<Item = &'a str>,
    effective: &BTreeSet<Capability>,
    shared_engine: bool,
) -> (Vec<ImportReport>, Option<LoadError>) {
    let mut reports = Vec::new();
    let mut refusal = None;
    for name in names {
        let v = classify_import(name, effective);
        let (verdict, err) = match &v {
            ImportVerdict::Allowed => ("allowed".to_owned(), None),
            ImportVerdict::Granted(_) => ("granted".to_owned(), None),
            ImportVerdict::NotGranted(_) if shared_engine => {
                ("not-granted:denied-at-call".to_owned(), None)
            }
            ImportVerdict::NotGranted(c) => (
                "not-granted".to_owned(),
                Some(LoadError::CapabilityDenied {
                    import: name.to_owned(),
                    grant: Some(c.as_str().to_owned()),
                    pack: Some(pack.to_owned()),
                }),
            ),
            ImportVerdict::Escape(k) => (
                format!("escape:{}", k.as_str()),
                Some(LoadError::Escape {
                    kind: k.as_str(),
                    import: name.to_owned(),
                }),
            ),
            ImportVerdict::Unknown => (
                "unknown".to_owned(),
                Some(LoadError::CapabilityDenied {
                    import: name.to_owned(),
                    grant: None,
                    pack: Some(pack.to_owned()),
                }),
            ),
        };
        if refusal.is_none() {
            refusal = err;
        }
        reports.push(ImportReport {
            name: name.to_owned(),
            verdict,
        });
    }
    (reports, refusal)
}

/// Grants and limits for a manifest under a policy.
pub struct Resolved {
    /// What the operator grants the pack.
    pub granted: Vec<Capability>,
    /// requested ∩ granted, plus the base capabilities.
    pub effective: BTreeSet<Capability>,
    /// The ceilings tightened by the manifest's request.
    pub limits: Limits,
    /// Requests above a ceiling (shown by `wop inspect`).
    pub clamps: Vec<Clamp>,
    /// The directory granted to the pack, if any.
    pub filesystem: Option<FsGrant>,
    /// What safe-fetch may reach.
    pub egress: EgressView,
}

/// The grants and limits of `manifest` under `policy`.
pub fn resolve(policy: &Policy, manifest: &Manifest) -> Resolved {
    let grant = policy.grant(&manifest.name);
    let effective = effective(&manifest.wop.capabilities, &grant.capabilities);
    let (limits, clamps) = policy.limits().apply(&manifest.wop.limits);
    // Both lists were validated (manifest parse, policy load); anything
    // unparsable here grants nothing.
    let parse = |v: &[String]| crate::egress::allow::parse_all(v).unwrap_or_default();
    // The protocol's JavaScript packs declare no destinations (their code
    // builds URLs from config and inputs): what the operator grants is
    // the whole list.
    let requested =
        if manifest.runtime.language == Language::Javascript && manifest.wop.egress.is_empty() {
            &grant.egress
        } else {
            &manifest.wop.egress
        };
    let settings = policy.egress.settings();
    let egress = EgressView {
        requested: manifest.wop.egress.clone(),
        granted: grant.egress.clone(),
        allow_loopback: settings.allow_loopback,
        max_redirects: settings.max_redirects,
        allow: std::sync::Arc::new(crate::egress::AllowList::new(
            parse(requested),
            parse(&grant.egress),
        )),
    };
    Resolved {
        egress,
        granted: grant.capabilities,
        effective,
        limits,
        clamps,
        filesystem: grant.filesystem,
    }
}

/// Refuses languages this runtime does not run as components.
pub fn require_component(m: &Manifest) -> Result<(), LoadError> {
    match m.runtime.language {
        Language::WasmComponent => Ok(()),
        Language::Javascript => Ok(()),
        Language::Wasm => Err(LoadError::Unsupported(
            "runtime.language `wasm` (WASM ABI v1 core modules) is not supported yet".to_owned(),
        )),
    }
}

/// Most module files a JavaScript pack may hold.
pub const MAX_JS_MODULES: usize = 256;
/// Deepest directory a JavaScript pack's modules may sit in.
const MAX_JS_DEPTH: usize = 8;
/// Largest single module source.
const MAX_JS_MODULE_BYTES: u64 = 4 << 20;

/// Every ES module file (`.mjs`, `.js`) of a JavaScript pack in `dir`, as
/// `(path inside the pack, bytes)`, sorted, read by the bounded no-follow
/// reader (symbolic links and special files are skipped: a pack is built
/// from regular files only).
pub fn read_module_sources(dir: &Path) -> Result<Vec<(String, Vec<u8>)>, LoadError> {
    let root = open_root(dir)?;
    let mut out = Vec::new();
    let mut pending = vec![(String::new(), 0usize)];
    while let Some((rel_dir, depth)) = pending.pop() {
        let listing = if rel_dir.is_empty() {
            root.entries()
        } else {
            root.read_dir(&rel_dir)
        }
        .map_err(|e| {
            LoadError::validation("$", format!("cannot list {rel_dir:?} in the pack: {e}"))
        })?;
        for entry in listing.flatten() {
            let Ok(name) = entry.file_name().into_string() else {
                continue;
            };
            let rel = if rel_dir.is_empty() {
                name.clone()
            } else {
                format!("{rel_dir}/{name}")
            };
            let Ok(ft) = entry.file_type() else { continue };
            if ft.is_dir()
                && depth < MAX_JS_DEPTH
                && name != "node_modules"
                && !name.starts_with('.')
            {
                pending.push((rel, depth + 1));
            } else if ft.is_file() && (name.ends_with(".mjs") || name.ends_with(".js")) {
                if out.len() >= MAX_JS_MODULES {
                    return Err(LoadError::validation(
                        "$.runtime.entry",
                        format!("the pack holds more than {MAX_JS_MODULES} module files"),
                    ));
                }
                let bytes = read_capped(&root, &rel, MAX_JS_MODULE_BYTES, "$.runtime.entry")?;
                out.push((rel, bytes));
            }
        }
    }
    out.sort();
    Ok(out)
}

/// Largest schema file.
/// Largest node schema file.
pub const MAX_SCHEMA_BYTES: u64 = 1 << 20;

/// Every node's schemas (`configSchemaRef`, `inputSchemaRef`) read from the
/// pack in `dir` by the bounded no-follow reader and compiled, by type id.
/// A missing, unreadable or unusable schema refuses the pack (at its JSON
/// path): a schema the host cannot check is not silently skipped.
pub fn read_node_schemas(
    dir: &Path,
    manifest: &Manifest,
) -> Result<std::collections::BTreeMap<String, crate::pack::schema::NodeSchemas>, LoadError> {
    use crate::pack::schema::{NodeSchemas, Schema};
    let mut out = std::collections::BTreeMap::new();
    if manifest
        .nodes
        .iter()
        .all(|n| n.config_schema_ref.is_none() && n.input_schema_ref.is_none())
    {
        return Ok(out);
    }
    let root = open_root(dir)?;
    for (i, n) in manifest.nodes.iter().enumerate() {
        let one = |r: &Option<String>, key: &str| -> Result<Option<Schema>, LoadError> {
            let Some(file) = r else { return Ok(None) };
            let path = format!("$.nodes[{i}].{key}");
            let raw = read_capped(
                &root,
                file.trim_start_matches("./"),
                MAX_SCHEMA_BYTES,
                &path,
            )?;
            Schema::compile(&raw, file, &path).map(Some)
        };
        let schemas = NodeSchemas {
            config: one(&n.config_schema_ref, "configSchemaRef")?,
            inputs: one(&n.input_schema_ref, "inputSchemaRef")?,
        };
        out.insert(n.type_id.clone(), schemas);
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
