//! Loading a component pack: read (signature and integrity first), compile
//! once (cached), judge the imports before any code runs, link against the
//! `openwop:node-pack` world, check `describe()` against the manifest.

use super::bindings::{NodePackPre, node};
use super::execute::{Call, Returned, execute};
use super::state::HostState;
use super::{ComponentPack, Reach};
use crate::cache::{CacheStats, CompileCache};
use crate::env::{LoadEnv, RunEnv, internal_context};
use crate::sandbox::Grants;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use wasmtime::Engine;
use wasmtime::component::{Component, Linker};
use wop_core::error::{ConfigError, ErrorCode, LoadError};
use wop_core::identity::{self, Described};
use wop_core::manifest::{Language, Manifest};
use wop_core::model::Principal;
use wop_core::pack::{Inspection, judge_engine_imports, judge_imports, require_component, resolve};
use wop_core::policy::Policy;

/// What every component load shares: the engine, the linker of the
/// `openwop:node-pack` world, and the compile cache.
pub(crate) struct Components {
    engine: &'static Engine,
    linker: Linker<HostState>,
    cache: Arc<CompileCache>,
    /// The engine's fingerprint (part of the compile cache key).
    fingerprint: String,
    /// Components built from JavaScript packs.
    js: super::js::JsBuilds,
}

impl Components {
    /// The linker and cache for `engine` (`cache_dir`: also on disk).
    pub(crate) fn new(
        engine: &'static Engine,
        cache_dir: Option<PathBuf>,
    ) -> Result<Self, ConfigError> {
        let linker = super::host::linker(engine)
            .map_err(|e| ConfigError::Engine(format!("cannot link host interfaces: {e:#}")))?;
        Ok(Self {
            engine,
            linker,
            js: super::js::JsBuilds::new(cache_dir.as_deref()),
            cache: Arc::new(CompileCache::new(cache_dir)),
            fingerprint: crate::engine::fingerprint(engine),
        })
    }

    /// The compile cache's counters.
    pub(crate) fn cache_stats(&self) -> CacheStats {
        self.cache.stats()
    }

    /// The on-disk cache file for an entry sha256.
    pub(crate) fn cache_path(&self, entry_sha256: &str) -> Option<PathBuf> {
        self.cache.path_for(entry_sha256, &self.fingerprint)
    }

    async fn compile(
        &self,
        policy: &Policy,
        sha: &str,
        wasm: Vec<u8>,
    ) -> Result<Component, LoadError> {
        // A declared table above the limit is the table limit, not bad wasm.
        let tables = crate::sandbox::table_cap(&policy.limits());
        crate::sandbox::check_declared_tables(&wasm, tables)?;
        let (engine, cache) = (self.engine, self.cache.clone());
        let (fingerprint, sha) = (self.fingerprint.clone(), sha.to_owned());
        let res = tokio::task::spawn_blocking(move || {
            cache.get_or_compile(engine, &fingerprint, &sha, &wasm)
        })
        .await
        .map_err(|e| LoadError::Io(format!("compile task failed: {e}")))?;
        res.map_err(|e| LoadError::Component {
            code: ErrorCode::PackValidationFailed,
            message: format!(
                "the entry is not a valid WebAssembly component ({e:#}); build it with `cargo build --target wasm32-wasip2` or another component toolchain"
            ),
        })
    }

    /// Reads, compiles and judges a pack without running any of its code.
    async fn read(
        &self,
        dir: &Path,
        policy: &Policy,
    ) -> Result<(Inspection, Component), LoadError> {
        // Signature and escalation are judged before the entry is read
        // or compiled (decision 0009).
        let (mut manifest, mut wasm, mut sha) = wop_core::pack::read_pack_trusted(dir, policy)?;
        require_component(&manifest)?;
        let javascript = manifest.runtime.language == Language::Javascript;
        let mut services = Vec::new();
        if javascript {
            let built = self.js.component(dir, &mut manifest).await?;
            (wasm, sha, services) = (built.wasm, built.sha256, built.services);
        }
        let component = self.compile(policy, &sha, wasm).await?;
        let r = resolve(policy, &manifest);
        let ty = component.component_type();
        let judge = if javascript {
            judge_engine_imports
        } else {
            judge_imports
        };
        let (imports, refusal) = judge(
            &manifest.name,
            ty.imports(self.engine).map(|(name, _)| name),
            &r.effective,
        );
        Ok((
            Inspection {
                dir: dir.to_path_buf(),
                requested: manifest.wop.capabilities.clone(),
                manifest,
                sha256: sha,
                imports,
                granted: r.granted,
                effective: r.effective,
                limits: r.limits,
                clamps: r.clamps,
                filesystem: r.filesystem,
                egress: r.egress,
                refusal: refusal.map(|e| e.to_node_error()),
                services,
            },
            component,
        ))
    }
}

/// Validates a component pack and judges its imports without running any
/// of its code. A pack that would be refused still yields an inspection,
/// with the reason in [`Inspection::refusal`].
pub(crate) async fn inspect(
    dir: &Path,
    env: &LoadEnv<'_>,
    components: &Components,
) -> Result<Inspection, LoadError> {
    Ok(components.read(dir, env.policy).await?.0)
}

/// Loads a component pack: everything [`inspect`] does, then refuses
/// forbidden or ungranted imports, links, and checks `describe()` against
/// the manifest in a sandbox with the base capabilities only.
pub(crate) async fn load(
    dir: &Path,
    env: &LoadEnv<'_>,
    components: &Components,
) -> Result<ComponentPack, LoadError> {
    let (insp, component) = components.read(dir, env.policy).await?;
    if let Some(refusal) = &insp.refusal {
        // Re-derive the typed error from the first offending import.
        let (_, err) = judge_imports(
            &insp.manifest.name,
            insp.imports.iter().map(|i| i.name.as_str()),
            &insp.effective,
        );
        return Err(err.unwrap_or_else(|| LoadError::Component {
            code: ErrorCode::SandboxCapabilityDenied,
            message: refusal.message.clone(),
        }));
    }
    let pre = components
        .linker
        .instantiate_pre(&component)
        .and_then(NodePackPre::new)
        .map_err(|e| LoadError::Component {
            code: ErrorCode::PackValidationFailed,
            message: format!("the component does not fit the openwop:node-pack@0.1.0 world: {e:#}"),
        })?;
    let m = &insp.manifest;
    let grant = env.policy.grant(&m.name);
    // A JavaScript pack's host services as the operator mapped them: each
    // mapped tool is declared and granted for it by that mapping.
    let services = if m.runtime.language == Language::Javascript {
        super::services::Services::new(&m.name, grant.services.clone())
    } else {
        super::services::Services::default()
    };
    let mut declared = m.wop.tools.clone();
    let mut granted = grant.tools;
    for t in services.tools() {
        declared.push(t.clone());
        granted.push(t.clone());
    }
    let reach = Reach {
        pack: m.name.clone(),
        grants: Grants::of(&insp.effective),
        fs: insp.filesystem.clone(),
        gate: env.gate.clone(),
        declared,
        granted,
        services: Arc::new(services),
        egress: Some(wop_gate::PackEgress {
            engine: env.egress.clone(),
            allow: insp.egress.allow.clone(),
        }),
        mcp: Some({
            let grant = env.policy.mcp_grant(&m.name);
            // A JavaScript pack declares no servers: the grant is its request.
            let request = if m.runtime.language == Language::Javascript && m.wop.mcp.is_empty() {
                wop_core::policy::mcp::McpRequest::from_grant(&grant)
            } else {
                m.wop.mcp.clone()
            };
            env.mcp.for_pack(request, grant)
        }),
        meter: env.meter.clone(),
    };
    let schemas = wop_core::pack::read_node_schemas(dir, m)?;
    let pack = ComponentPack {
        inspection: insp,
        pre,
        reach,
        schemas,
    };
    check_describe(&pack, env).await?;
    Ok(pack)
}

/// Runs `describe()` with the base capabilities only (no tools, no egress,
/// no MCP, no filesystem grant) and checks it against the manifest.
async fn check_describe(pack: &ComponentPack, env: &LoadEnv<'_>) -> Result<(), LoadError> {
    let m = &pack.inspection.manifest;
    let context = internal_context("wop:load", "describe");
    let principal = Principal::default();
    let run = RunEnv::internal(
        &context,
        &principal,
        pack.inspection.limits,
        Some(env.instantiations),
    );
    let exec = execute(&pack.pre, &pack.reach.base(), &run, Call::Describe).await;
    let info = match exec.result {
        Ok(Returned::Describe(info)) => info,
        Ok(Returned::Invoke(_)) => {
            return Err(LoadError::Io(
                "describe returned an invoke result".to_owned(),
            ));
        }
        Err(c) => {
            return Err(LoadError::Component {
                code: ErrorCode::parse(&c.error.code).unwrap_or(ErrorCode::SandboxInvocationError),
                message: format!("describe() failed at load: {}", c.error.message),
            });
        }
    };
    check_description(m, &info)
}

/// The manifest and `describe()` must agree on name, version and node
/// types ([`identity::check`], the same check as ABI v1 identification).
fn check_description(m: &Manifest, info: &node::PackInfo) -> Result<(), LoadError> {
    let nodes = info
        .nodes
        .iter()
        .map(|n| (n.type_id.as_str(), Some(n.version.as_str())))
        .collect();
    identity::check(
        m,
        &Described {
            by: "describe()",
            name: &info.name,
            version: Some(&info.version),
            nodes,
        },
    )
}
