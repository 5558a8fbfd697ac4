//! Loading and inspecting an ABI v1 pack: read, compile on the shared
//! engine, the static import gate before anything is instantiated, link,
//! then identification in a fresh sandbox (`openwop_abi_version` first)
//! checked against the manifest.

use super::execute::{AbiCall, AbiReturned, Linked, execute};
use super::host::NodeState;
use super::loader::{self, Mode};
use super::source::{Resolved, Source, bare_manifest, read_source, resolve};
use super::{AbiV1Pack, SUPPORTED_ABI_VERSIONS, imports, supported_versions};
use crate::env::LoadEnv;
use crate::env::{RunEnv, internal_context};
use crate::sandbox::Grants;
use std::collections::BTreeSet;
use std::path::Path;
use std::sync::atomic::AtomicU64;
use wop_core::error::{ErrorCode, LoadError};
use wop_core::identity::{self, Described};
use wop_core::manifest::Manifest;
use wop_core::model::Principal;
use wop_core::pack::Inspection;
use wop_core::policy::Policy;

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
    let pack = src.manifest.as_ref().map(|m| m.name.as_str());
    let gate = loader::gate(&module, &granted, pack);
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
        services: Vec::new(),
    }
}

/// Runs identification in a fresh sandbox and checks it.
async fn identify(
    linked: &Linked,
    problem: Option<&str>,
    res: &Resolved,
    instantiations: Option<&AtomicU64>,
) -> Result<(String, Vec<String>), LoadError> {
    let context = internal_context("wop:load", "describe");
    let principal = Principal::default();
    let env = RunEnv::internal(&context, &principal, res.limits, instantiations);
    let grants = Grants::of(&res.effective);
    let call = AbiCall::Identify;
    let exec = execute(linked, &env, grants, NodeState::default(), call).await;
    let id = match exec.result {
        Ok(AbiReturned::Identity(id)) => id,
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

/// Checks the module's identity: well-formed node ids, then against its
/// manifest ([`identity::check`], the same check as a component's
/// `describe()`), or synthesizes a manifest for a bare module.
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
    let described = Described {
        by: "the module",
        name,
        version: None,
        nodes: ids.iter().map(|t| (t.as_str(), None)).collect(),
    };
    identity::check(manifest, &described)?;
    Ok(manifest.clone())
}

/// Loads an ABI v1 pack (a directory with `pack.json`, or a bare `.wasm`).
/// Nothing of a refused module runs; a module whose ABI version is not
/// supported is refused after `openwop_abi_version` and nothing else.
pub(crate) async fn load(path: &Path, env: &LoadEnv<'_>) -> Result<AbiV1Pack, LoadError> {
    let mut p = prepare(path, env.policy).await?;
    if let Some(r) = p.gate.refusal.take() {
        return Err(r);
    }
    let bare = p.src.manifest.is_none();
    let (linked, problem) = std::mem::replace(&mut p.linked, Err(LoadError::Io(String::new())))?;
    let (name, ids) = identify(
        &linked,
        problem.as_deref(),
        &p.res,
        Some(env.instantiations),
    )
    .await?;
    let manifest = reconcile(&p.res.manifest, bare, &name, &ids, path, &p.src.sha256)?;
    if bare {
        wop_core::pack::check_bare(env.policy, &manifest, &path.display().to_string())?;
    }
    let nodes = ids
        .iter()
        .enumerate()
        .map(|(i, t)| (t.clone(), i as u32))
        .collect();
    let insp = inspection(path, &p, manifest);
    Ok(AbiV1Pack::new(insp, linked, nodes))
}

/// Inspects an ABI v1 pack without loading it. For a pack directory no
/// module code runs. A bare `.wasm` has no manifest, so — only if the
/// import gate passes — its identification exports run in a sandbox to
/// learn its name and node ids.
pub(crate) async fn inspect(path: &Path, env: &LoadEnv<'_>) -> Result<Inspection, LoadError> {
    let p = prepare(path, env.policy).await?;
    let bare = p.src.manifest.is_none();
    let mut insp = inspection(path, &p, p.res.manifest.clone());
    if let Some(r) = &p.gate.refusal {
        insp.refusal = Some(r.to_node_error());
        return Ok(insp);
    }
    match &p.linked {
        Err(e) => insp.refusal = Some(e.to_node_error()),
        Ok((linked, problem)) if bare => {
            match identify(linked, problem.as_deref(), &p.res, None)
                .await
                .and_then(|(name, ids)| {
                    let m = reconcile(&insp.manifest, true, &name, &ids, path, &p.src.sha256)?;
                    wop_core::pack::check_bare(env.policy, &m, &path.display().to_string())?;
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
