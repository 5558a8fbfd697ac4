//! OpenWOP WASM ABI v1 core-module packs (`runtime.language: "wasm"`,
//! RFC 0008) under the protocol's sandbox contract (RFC 0035).
//!
//! A core module exports `openwop_abi_version`, `openwop_pack_name`,
//! `openwop_node_count`, `openwop_node_id_at`, `openwop_alloc`,
//! `openwop_free` and `openwop_node_invoke`, and may import the host
//! functions of module `openwop`. Strings and JSON cross as (ptr, len) in
//! the module's memory; every (ptr, len) result is accepted as multi-value
//! `(i32 i32)` or as one packed `i64` (ptr low, len high), decided per
//! function from the signature the module declares.
//!
//! Loading, in order: read (`pack.json` with integrity check, or a bare
//! `.wasm`) → compile on the shared engine → the static import gate
//! ([`imports`]) on the compiled module's imports, before anything is
//! instantiated → link with the declared signatures → identification in a
//! fresh sandbox, reading `openwop_abi_version` **first** (only
//! [`SUPPORTED_ABI_VERSIONS`] go further) → name and node ids checked
//! against the manifest → typeIds registered.
//!
//! Invocation: a fresh store and instance per call on the process-wide
//! engine, with the same limiter (every memory, imported or module-defined),
//! fuel, fuel-yield + deadline wall clock, bounded log and replay seeds as
//! components; failures go through the one [`crate::classify::classify`].
//!
//! Grants: `openwop_log`, `openwop_now_ms` and `openwop_random` are base
//! (capabilities `log`, `clock`, `random`); `openwop_variable_get/set` need
//! `variables`, `openwop_channel_read/write` need `channels` and
//! `openwop_interrupt` needs `interrupt` — requested in `x-wop.capabilities`
//! **and** granted in the policy's `[packs.<name>] capabilities`. A bare
//! `.wasm` (no manifest) gets the base set only and no integrity check.

mod host;
pub mod imports;
mod invoke;
mod loader;
mod probe;

pub use host::PairEncoding;
pub use invoke::AbiExports;
pub use probe::{ProbeError, ProbeOptions, ProbeReport, ProbeVerdict, probe};

use invoke::{CoreCall, CoreReturned, Linked, Setup, execute};
use loader::Mode;
use serde_json::{Map, Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::atomic::AtomicU64;
use wop_core::capability::{Capability, effective};
use wop_core::error::{ErrorCode, LoadError, NodeError};
use wop_core::limits::Limits;
use wop_core::manifest::{Language, Manifest, NodeDecl, RuntimeDecl, WopBlock};
use wop_core::model::{InvocationReport, InvokeRequest};
use wop_core::pack::Inspection;
use wop_core::policy::Policy;
use wop_core::replay::Seed;

pub use wop_core::abi::{SUPPORTED_ABI_VERSIONS, supported_versions};

/// Whether `path` is a directory (a pack directory) rather than a file
/// (a bare module). Symlinks to directories count as directories; what a
/// non-directory is, the bounded reader decides when it reads it.
fn is_dir(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_dir())
}

/// Whether `path` is an ABI v1 pack: anything but a directory (a bare core
/// module, read later by the bounded reader, which refuses what is not a
/// regular file), or a directory whose `pack.json` says `runtime.language:
/// "wasm"`. That `pack.json` is read by the bounded, no-follow reader
/// ([`wop_core::packfile`]), and its refusal is the load's: a `pack.json`
/// that is a FIFO, a device or too large is never read whole or waited on.
pub(crate) fn is_core_pack(path: &Path) -> Result<bool, LoadError> {
    if std::fs::symlink_metadata(path).is_err() {
        // Nothing there: the component path says so.
        return Ok(false);
    }
    if !is_dir(path) {
        return Ok(true);
    }
    let bytes = wop_core::pack::read_manifest_bytes(path)?;
    Ok(serde_json::from_slice::<Value>(&bytes)
        .ok()
        .is_some_and(|v| v["runtime"]["language"] == "wasm"))
}

/// A loaded, identified ABI v1 pack.
pub(crate) struct CoreModulePack {
    pub inspection: Inspection,
    linked: Linked,
    /// typeId → `openwop_node_id_at` index.
    nodes: BTreeMap<String, u32>,
}

/// What was read from disk.
struct Source {
    manifest: Option<Manifest>,
    bytes: Vec<u8>,
    sha256: String,
}

fn read_source(path: &Path, policy: &Policy) -> Result<Source, LoadError> {
    if !is_dir(path) {
        // A bare module has no pack.json to sign (decision 0009). Its
        // identity is the name it declares (`openwop_pack_name`), known
        // only after identification, where `trust::check_bare` judges it
        // (decision 0016). Refused here already, before a byte is read,
        // when no name could escape the requirement, or its file name
        // names a pack that requires one.
        let file = path.display().to_string();
        let stem = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        if wop_core::trust::signature_required_for_all(policy)
            || wop_core::trust::signature_required(policy, &stem)
        {
            return Err(LoadError::Signature {
                reason: "missing",
                key_id: None,
                message: format!(
                    "{file} is a bare core module (no pack.json, so no signature), and the policy requires a signature"
                ),
            });
        }
        use sha2::Digest;
        let bytes = wop_core::packfile::read_path(path, wop_core::packfile::MAX_ENTRY_BYTES)
            .map_err(|r| r.into_load_error(&file, &file))?;
        let sha256 = hex::encode(sha2::Sha256::digest(&bytes));
        return Ok(Source {
            manifest: None,
            bytes,
            sha256,
        });
    }
    let (manifest, bytes, sha256) = wop_core::pack::read_pack_trusted(path, policy)?;
    if manifest.runtime.language != Language::Wasm {
        return Err(LoadError::Unsupported(
            "not a `wasm` (ABI v1) pack".to_owned(),
        ));
    }
    Ok(Source {
        manifest: Some(manifest),
        bytes,
        sha256,
    })
}

/// Grants, limits and the (possibly still empty) manifest for a source.
struct Resolved {
    manifest: Manifest,
    requested: Vec<Capability>,
    granted: Vec<Capability>,
    effective: BTreeSet<Capability>,
    limits: Limits,
    clamps: Vec<wop_core::limits::Clamp>,
    /// Shown by `wop inspect`; ABI v1 has no fetch import, so it is unused.
    egress: wop_core::pack::EgressView,
}

fn resolve(policy: &Policy, src: &Source, path: &Path) -> Resolved {
    let bare = src.manifest.is_none();
    let manifest = match &src.manifest {
        Some(m) => m.clone(),
        // Replaced by the module's own name and node ids once it is
        // identified; until then the file stem stands in.
        None => bare_manifest(
            &path
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default(),
            &[],
            path,
            &src.sha256,
        ),
    };
    let r = wop_core::pack::resolve(policy, &manifest);
    if bare {
        // No manifest, no request: the base capabilities and the ceilings.
        return Resolved {
            manifest,
            requested: Vec::new(),
            granted: Vec::new(),
            effective: effective(&[], &[]),
            limits: policy.limits(),
            clamps: Vec::new(),
            egress: r.egress,
        };
    }
    Resolved {
        requested: manifest.wop.capabilities.clone(),
        manifest,
        granted: r.granted,
        effective: r.effective,
        limits: r.limits,
        clamps: r.clamps,
        egress: r.egress,
    }
}

fn bare_manifest(name: &str, ids: &[String], path: &Path, sha256: &str) -> Manifest {
    Manifest {
        name: name.to_owned(),
        version: "0.0.0".to_owned(),
        openwop: ">=1.0.0".to_owned(),
        nodes: ids
            .iter()
            .map(|t| NodeDecl {
                type_id: t.clone(),
                version: "0.0.0".to_owned(),
                category: "unspecified".to_owned(),
                role: "worker".to_owned(),
            })
            .collect(),
        runtime: RuntimeDecl {
            language: Language::Wasm,
            entry: path
                .file_name()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default(),
        },
        wop: WopBlock {
            sha256: sha256.to_owned(),
            ..Default::default()
        },
    }
}

fn code_of(code: &str) -> ErrorCode {
    ErrorCode::parse(code).unwrap_or(ErrorCode::SandboxInvocationError)
}

/// Everything up to (not including) running code.
struct Prepared {
    src: Source,
    res: Resolved,
    gate: loader::GateResult,
    linked: Result<(Linked, Option<String>), LoadError>,
}

async fn prepare(path: &Path, policy: &Policy) -> Result<Prepared, LoadError> {
    let engine = crate::engine::engine().map_err(|e| LoadError::Io(e.to_string()))?;
    let src = read_source(path, policy)?;
    let res = resolve(policy, &src, path);
    crate::sandbox::check_declared_tables(&src.bytes, crate::sandbox::table_cap(&res.limits))?;
    let module = loader::compile(engine, src.bytes.clone()).await?;
    let granted = imports::granted_names(&res.effective);
    let gate = loader::gate(&module, &granted);
    let linked = if gate.refusal.is_none() {
        loader::link(engine, &module, &gate.judged, &res.limits, Mode::Pack)
    } else {
        Err(LoadError::Io(
            "not linked: refused by the import gate".to_owned(),
        ))
    };
    Ok(Prepared {
        src,
        res,
        gate,
        linked,
    })
}

fn inspection(path: &Path, p: &Prepared, manifest: Manifest) -> Inspection {
    Inspection {
        dir: path.to_path_buf(),
        manifest,
        sha256: p.src.sha256.clone(),
        imports: p.gate.reports.clone(),
        requested: p.res.requested.clone(),
        granted: p.res.granted.clone(),
        effective: p.res.effective.clone(),
        limits: p.res.limits,
        clamps: p.res.clamps.clone(),
        filesystem: None,
        egress: p.res.egress.clone(),
        refusal: None,
    }
}

/// Runs identification in a fresh sandbox and checks it.
async fn identify(
    linked: &Linked,
    problem: Option<&str>,
    limits: Limits,
    instantiations: Option<&AtomicU64>,
) -> Result<(String, Vec<String>), LoadError> {
    let exec = execute(
        Setup {
            linked,
            limits,
            seed: Seed::new("wop:load", "describe", 1),
            node_id: "describe".to_owned(),
            variables: Map::new(),
            channels: Map::new(),
            resume: None,
            instantiations,
            binding: Default::default(),
            breakdown: false,
            tap: None,
        },
        CoreCall::Identify,
    )
    .await;
    let id = match exec.result {
        Ok(CoreReturned::Identity(id)) => id,
        Ok(_) => {
            return Err(LoadError::Io(
                "identification returned no identity".to_owned(),
            ));
        }
        Err(c) => {
            return Err(LoadError::Component {
                code: code_of(&c.error.code),
                message: format!("identifying the module at load failed: {}", c.error.message),
            });
        }
    };
    if !SUPPORTED_ABI_VERSIONS.contains(&id.version) {
        return Err(LoadError::AbiVersion {
            version: id.version,
            supported: supported_versions(),
        });
    }
    if let Some(p) = problem {
        return Err(LoadError::Component {
            code: ErrorCode::PackValidationFailed,
            message: p.to_owned(),
        });
    }
    let Some(name) = id.name else {
        return Err(LoadError::Io("identification read no name".to_owned()));
    };
    Ok((name, id.node_ids))
}

/// Checks the module's identity against its manifest (or synthesizes one).
fn reconcile(
    manifest: &Manifest,
    bare: bool,
    name: &str,
    ids: &[String],
    path: &Path,
    sha256: &str,
) -> Result<Manifest, LoadError> {
    let mut seen = BTreeSet::new();
    for t in ids {
        if t.trim().is_empty() || !seen.insert(t.as_str()) {
            return Err(LoadError::validation(
                "openwop_node_id_at",
                format!("node typeId `{t}` is empty or reported twice"),
            ));
        }
    }
    if ids.is_empty() {
        return Err(LoadError::validation(
            "openwop_node_count",
            "the module reports no node types",
        ));
    }
    if bare {
        if !wop_core::manifest::valid_name(name) {
            return Err(LoadError::validation(
                "openwop_pack_name",
                format!("`{name}` must be lowercase letters, digits and `-._@/`"),
            ));
        }
        return Ok(bare_manifest(name, ids, path, sha256));
    }
    if name != manifest.name {
        return Err(LoadError::validation(
            "$.name",
            format!(
                "pack.json says `{}` but openwop_pack_name() says `{name}`",
                manifest.name
            ),
        ));
    }
    let declared: BTreeSet<&str> = manifest.nodes.iter().map(|n| n.type_id.as_str()).collect();
    if declared != seen {
        return Err(LoadError::validation(
            "$.nodes",
            format!(
                "pack.json declares [{}] but the module reports [{}]",
                declared.into_iter().collect::<Vec<_>>().join(", "),
                seen.into_iter().collect::<Vec<_>>().join(", ")
            ),
        ));
    }
    Ok(manifest.clone())
}

/// Loads an ABI v1 pack (a directory with `pack.json`, or a bare `.wasm`).
/// Nothing of a refused module runs; a module whose ABI version is not
/// supported is refused after `openwop_abi_version` and nothing else.
pub(crate) async fn load(
    path: &Path,
    policy: &Policy,
    instantiations: &AtomicU64,
) -> Result<CoreModulePack, LoadError> {
    let mut p = prepare(path, policy).await?;
    if let Some(r) = p.gate.refusal.take() {
        return Err(r);
    }
    let bare = p.src.manifest.is_none();
    let (linked, problem) = std::mem::replace(&mut p.linked, Err(LoadError::Io(String::new())))?;
    let (name, ids) = identify(
        &linked,
        problem.as_deref(),
        p.res.limits,
        Some(instantiations),
    )
    .await?;
    let manifest = reconcile(&p.res.manifest, bare, &name, &ids, path, &p.src.sha256)?;
    if bare {
        wop_core::trust::check_bare(policy, &manifest, &path.display().to_string())?;
    }
    let nodes = ids
        .iter()
        .enumerate()
        .map(|(i, t)| (t.clone(), i as u32))
        .collect();
    let insp = inspection(path, &p, manifest);
    Ok(CoreModulePack {
        inspection: insp,
        linked,
        nodes,
    })
}

/// Inspects an ABI v1 pack without loading it. For a pack directory no
/// module code runs. A bare `.wasm` has no manifest, so — only if the
/// import gate passes — its identification exports run in a sandbox to
/// learn its name and node ids.
pub(crate) async fn inspect(path: &Path, policy: &Policy) -> Result<Inspection, LoadError> {
    let p = prepare(path, policy).await?;
    let bare = p.src.manifest.is_none();
    let mut insp = inspection(path, &p, p.res.manifest.clone());
    if let Some(r) = &p.gate.refusal {
        insp.refusal = Some(r.to_node_error());
        return Ok(insp);
    }
    match &p.linked {
        Err(e) => insp.refusal = Some(e.to_node_error()),
        Ok((linked, problem)) if bare => {
            match identify(linked, problem.as_deref(), p.res.limits, None)
                .await
                .and_then(|(name, ids)| {
                    let m = reconcile(&insp.manifest, true, &name, &ids, path, &p.src.sha256)?;
                    wop_core::trust::check_bare(policy, &m, &path.display().to_string())?;
                    Ok(m)
                }) {
                Ok(m) => insp.manifest = m,
                Err(e) => insp.refusal = Some(e.to_node_error()),
            }
        }
        Ok((_, Some(problem))) => {
            insp.refusal = Some(
                LoadError::Component {
                    code: ErrorCode::PackValidationFailed,
                    message: problem.clone(),
                }
                .to_node_error(),
            );
        }
        Ok(_) => {}
    }
    Ok(insp)
}

impl CoreModulePack {
    /// Runs one node invocation in a fresh sandbox.
    pub(crate) async fn invoke(
        &self,
        req: &InvokeRequest,
        instantiations: &AtomicU64,
        limits: Limits,
        binding: wop_core::admission::Binding,
        breakdown: bool,
        tap: Option<wop_core::logbuf::Tap>,
    ) -> InvocationReport {
        let m = &self.inspection.manifest;
        let index = self.nodes.get(&req.type_id).copied().unwrap_or(0);
        let agent = if req.principal.id == "core.system" {
            Value::Null
        } else {
            json!({"agentId": req.principal.id})
        };
        let request = json!({
            "abiVersion": 1,
            "nodeContext": {
                "runId": req.context.run_id,
                "nodeId": req.context.node_id,
                "tenantId": req.context.tenant_id,
                "attempt": req.context.attempt,
                "configurable": req.config,
                "agent": agent,
            },
            "inputs": req.inputs,
        });
        let seeded = |key: &str| match req.config.get(key) {
            Some(Value::Object(o)) => o.clone(),
            _ => Map::new(),
        };
        let exec = execute(
            Setup {
                linked: &self.linked,
                limits,
                seed: Seed::new(
                    &req.context.run_id,
                    &req.context.node_id,
                    req.context.attempt,
                ),
                node_id: req.context.node_id.clone(),
                variables: seeded("variables"),
                channels: seeded("channels"),
                resume: req.resume.clone(),
                instantiations: Some(instantiations),
                binding,
                breakdown,
                tap,
            },
            CoreCall::Invoke {
                index,
                request: request.to_string().into_bytes(),
            },
        )
        .await;
        let mut usage = exec.usage;
        usage.pack = m.name.clone();
        usage.pack_version = m.version.clone();
        usage.type_id = req.type_id.clone();
        usage.tenant_id = req.context.tenant_id.clone();
        usage.run_id = req.context.run_id.clone();
        usage.node_id = req.context.node_id.clone();
        usage.attempt = req.context.attempt;
        let mut events = exec.events;
        let outcome = match exec.result {
            Ok(CoreReturned::Response(bytes)) => {
                // Suspending needs the `interrupt` grant (as the host call does).
                let may_suspend = self.inspection.effective.contains(&Capability::Interrupt);
                crate::sandbox::interpret_return(
                    wop_core::outcome::PackReturn::Envelope(bytes),
                    limits.output_bytes,
                    may_suspend,
                    &exec.verdicts,
                    &req.context.node_id,
                    &mut usage,
                    &mut events,
                )
            }
            // `openwop_interrupt` already required the grant; its payload
            // is the outcome, under the same cap and counted the same way.
            Ok(CoreReturned::Suspended(interrupt)) => crate::sandbox::interpret_return(
                wop_core::outcome::PackReturn::Suspended(interrupt),
                limits.output_bytes,
                true,
                &exec.verdicts,
                &req.context.node_id,
                &mut usage,
                &mut events,
            ),
            Ok(_) => Err(NodeError::runtime(
                ErrorCode::InternalError,
                "invoke returned no response",
                Default::default(),
            )),
            Err(c) => Err(c.error),
        };
        InvocationReport {
            outcome,
            events,
            usage,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wasm_manifests() {
        let base = json!({
            "kind": "node", "name": "core", "version": "1.0.0",
            "engines": {"openwop": ">=1.0.0"},
            "nodes": [{"typeId": "t.x", "version": "1.0.0", "category": "c", "role": "worker"}],
            "runtime": {"language": "wasm", "entry": "m.wasm"},
            "x-wop": {"sha256": "a".repeat(64), "capabilities": ["variables", "interrupt"]}
        });
        let parse = |v: &Value| Manifest::parse(v.to_string().as_bytes());
        let m = parse(&base).map_err(|e| e.to_string());
        assert_eq!(
            m.map(|m| (m.runtime.language, m.wop.capabilities)),
            Ok((
                Language::Wasm,
                vec![Capability::Variables, Capability::Interrupt]
            ))
        );
        let mut v = base.clone();
        v["runtime"]["format"] = json!("wasm");
        v["runtime"]["wasm"] = json!({"abiVersion": 1});
        assert!(parse(&v).is_ok());
        v["runtime"]["format"] = json!("wasm-component");
        assert!(
            matches!(parse(&v), Err(LoadError::Validation { path, .. }) if path == "$.runtime.format")
        );
        v["runtime"]["format"] = json!("wasm");
        v["runtime"]["wasm"] = json!({"abiVersion": 2});
        assert!(matches!(
            parse(&v),
            Err(LoadError::AbiVersion { version: 2, .. })
        ));
        v["runtime"]["wasm"] = json!({"abiVersion": "1"});
        assert!(
            matches!(parse(&v), Err(LoadError::Validation { path, .. }) if path == "$.runtime.wasm.abiVersion")
        );
        v = base.clone();
        v["x-wop"].as_object_mut().map(|o| o.remove("sha256"));
        assert!(parse(&v).is_err(), "integrity stays required");
    }
}
