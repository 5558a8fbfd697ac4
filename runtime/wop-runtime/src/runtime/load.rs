//! The load path: inspect, compile, judge imports, check `describe()`, register.

use super::{PackSummary, PacksDirLoad, Runtime};
use crate::bindings::{NodePackPre, node};
use crate::invoke::{Call, Returned, execute};
use crate::registry::{ComponentPack, PackKind};
use crate::state::InvocationScope;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Instant;
use wasmtime::component::Component;
use wop_core::capability::Capability;
use wop_core::error::{ErrorCode, LoadError};
use wop_core::events::Transport;
use wop_core::manifest::Manifest;
use wop_core::model::Principal;
use wop_core::pack::{Inspection, judge_imports, require_component, resolve};
use wop_gate::CallSite;

impl Runtime {
    async fn compile(&self, sha: &str, wasm: Vec<u8>) -> Result<Component, LoadError> {
        // A declared table above the limit is the table limit, not bad wasm.
        let tables = crate::sandbox::table_cap(&self.inner.policy.limits());
        crate::sandbox::check_declared_tables(&wasm, tables)?;
        let inner = self.inner.clone();
        let sha = sha.to_owned();
        let res = tokio::task::spawn_blocking(move || {
            inner
                .cache
                .get_or_compile(inner.engine, &inner.fingerprint, &sha, &wasm)
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

    /// Validates a pack and judges its imports without running any of its
    /// code. A pack that would be refused still yields an inspection, with
    /// the reason in [`Inspection::refusal`].
    pub async fn inspect_pack(&self, dir: &Path) -> Result<Inspection, LoadError> {
        // ABI v1 core modules (pack.json `language: "wasm"`, or a bare .wasm).
        if crate::abi_v1::is_core_pack(dir)? {
            return crate::abi_v1::inspect(dir, &self.inner.policy).await;
        }
        Ok(self.inspect_inner(dir).await?.0)
    }

    async fn inspect_inner(&self, dir: &Path) -> Result<(Inspection, Component), LoadError> {
        // Signature and escalation are judged before the entry is read
        // or compiled (decision 0009).
        let (manifest, wasm, sha) = wop_core::pack::read_pack_trusted(dir, &self.inner.policy)?;
        require_component(&manifest)?;
        let component = self.compile(&sha, wasm).await?;
        let r = resolve(&self.inner.policy, &manifest);
        let ty = component.component_type();
        let (imports, refusal) = judge_imports(
            ty.imports(self.inner.engine).map(|(name, _)| name),
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
            },
            component,
        ))
    }

    /// Loads a pack directory: validates `pack.json`, verifies the entry's
    /// sha256, compiles (once; cached), refuses forbidden or ungranted
    /// imports before any code runs, checks `describe()` against the
    /// manifest, and registers the pack's node types. Loading a pack of a
    /// name already loaded replaces it (a reload); to load a directory of
    /// packs, where two packs of one name are an error, use
    /// [`Runtime::load_packs_dir`].
    pub async fn load_pack(&self, dir: &Path) -> Result<PackSummary, LoadError> {
        let pack = self.prepare_pack(dir).await?;
        self.inner.registry.register(pack)
    }

    /// Loads every pack in `dir` (its subdirectories and `.wasm` files,
    /// in path order). Each is prepared as [`Runtime::load_pack`] would;
    /// then packs are grouped by the name they **declare** (the manifest's
    /// `name`, or a bare module's `openwop_pack_name`): two or more packs
    /// declaring one name are all refused (`pack_validation_failed`,
    /// `details.reason: duplicate-name`), so none silently replaces
    /// another. A pack refused for its own reason is listed with it. `Err`
    /// only when `dir` cannot be listed.
    pub async fn load_packs_dir(&self, dir: &Path) -> Result<PacksDirLoad, LoadError> {
        let mut out = PacksDirLoad::default();
        let mut prepared = Vec::new();
        for entry in pack_entries(dir)? {
            match self.prepare_pack(&entry).await {
                Ok(p) => prepared.push((entry, p)),
                Err(e) => out.refused.push((entry, e)),
            }
        }
        let mut by_name: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (entry, p) in &prepared {
            by_name
                .entry(p.inspection().manifest.name.clone())
                .or_default()
                .push(entry.display().to_string());
        }
        for (entry, p) in prepared {
            let name = p.inspection().manifest.name.clone();
            match by_name.get(&name) {
                Some(paths) if paths.len() > 1 => out.refused.push((
                    entry,
                    LoadError::DuplicateName {
                        name,
                        paths: paths.clone(),
                    },
                )),
                _ => match self.inner.registry.register(p) {
                    Ok(s) => out.loaded.push((entry, s)),
                    Err(e) => out.refused.push((entry, e)),
                },
            }
        }
        out.refused.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(out)
    }

    /// Everything [`Runtime::load_pack`] does but registering.
    async fn prepare_pack(&self, dir: &Path) -> Result<PackKind, LoadError> {
        // ABI v1 core modules (pack.json `language: "wasm"`, or a bare .wasm).
        if crate::abi_v1::is_core_pack(dir)? {
            let pack =
                crate::abi_v1::load(dir, &self.inner.policy, &self.inner.instantiations).await?;
            return Ok(PackKind::AbiV1(pack));
        }
        let (insp, component) = self.inspect_inner(dir).await?;
        if let Some(refusal) = &insp.refusal {
            // Re-derive the typed error from the first offending import.
            let (_, err) = judge_imports(
                insp.imports.iter().map(|i| i.name.as_str()),
                &insp.effective,
            );
            return Err(err.unwrap_or_else(|| LoadError::Component {
                code: ErrorCode::SandboxCapabilityDenied,
                message: refusal.message.clone(),
            }));
        }
        let pre = self
            .inner
            .linker
            .instantiate_pre(&component)
            .and_then(NodePackPre::new)
            .map_err(|e| LoadError::Component {
                code: ErrorCode::PackValidationFailed,
                message: format!(
                    "the component does not fit the openwop:node-pack@0.1.0 world: {e:#}"
                ),
            })?;
        let pack = ComponentPack {
            inspection: insp,
            pre,
        };
        self.check_describe(&pack).await?;
        Ok(PackKind::Component(pack))
    }

    async fn check_describe(&self, pack: &ComponentPack) -> Result<(), LoadError> {
        let m = &pack.inspection.manifest;
        let scope = InvocationScope {
            run_id: "wop:load".to_owned(),
            node_id: "describe".to_owned(),
            tenant_id: "wop:load".to_owned(),
            attempt: 1,
            type_id: String::new(),
            capabilities: Capability::BASE.into_iter().collect(),
        };
        // describe() may call nothing but the base capabilities: no tools,
        // no egress, and (see `params`) no filesystem grant.
        let site = CallSite {
            principal: Principal::default(),
            context: wop_core::model::RunContext {
                run_id: scope.run_id.clone(),
                node_id: scope.node_id.clone(),
                tenant_id: scope.tenant_id.clone(),
                attempt: 1,
            },
            pack: m.name.clone(),
            declared: Vec::new(),
            granted: Vec::new(),
            deadline: Instant::now(),
            depth: 0,
            transport: Transport::Native,
            meter: None,
        };
        let mut params = self.params(pack, scope, site);
        params.fs = None;
        let exec = execute(params, Call::Describe).await;
        let info = match exec.result {
            Ok(Returned::Describe(info)) => info,
            Ok(Returned::Invoke(_)) => {
                return Err(LoadError::Io(
                    "describe returned an invoke result".to_owned(),
                ));
            }
            Err(c) => {
                return Err(LoadError::Component {
                    code: ErrorCode::parse(&c.error.code)
                        .unwrap_or(ErrorCode::SandboxInvocationError),
                    message: format!("describe() failed at load: {}", c.error.message),
                });
            }
        };
        check_description(m, &info)
    }
}

/// The pack candidates under `dir`: subdirectories (symlinks to
/// directories included) and `.wasm` files (whatever their kind: the
/// bounded reader refuses those that are not regular files), sorted.
fn pack_entries(dir: &Path) -> Result<Vec<PathBuf>, LoadError> {
    let rd = std::fs::read_dir(dir)
        .map_err(|e| LoadError::Io(format!("cannot read packs dir {}: {e}", dir.display())))?;
    let mut v: Vec<PathBuf> = rd
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.is_dir() || p.extension().is_some_and(|x| x == "wasm"))
        .collect();
    v.sort();
    Ok(v)
}

/// The manifest and `describe()` must agree on name, version and node types.
fn check_description(m: &Manifest, info: &node::PackInfo) -> Result<(), LoadError> {
    if info.name != m.name {
        return Err(LoadError::validation(
            "$.name",
            format!(
                "pack.json says `{}` but describe() says `{}`",
                m.name, info.name
            ),
        ));
    }
    if info.version != m.version {
        return Err(LoadError::validation(
            "$.version",
            format!(
                "pack.json says `{}` but describe() says `{}`",
                m.version, info.version
            ),
        ));
    }
    let declared: BTreeSet<(&str, &str)> = m
        .nodes
        .iter()
        .map(|n| (n.type_id.as_str(), n.version.as_str()))
        .collect();
    let described: BTreeSet<(&str, &str)> = info
        .nodes
        .iter()
        .map(|n| (n.type_id.as_str(), n.version.as_str()))
        .collect();
    if declared != described {
        let fmt = |s: &BTreeSet<(&str, &str)>| {
            s.iter()
                .map(|(t, v)| format!("{t}@{v}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        return Err(LoadError::validation(
            "$.nodes",
            format!(
                "pack.json declares [{}] but describe() reports [{}]",
                fmt(&declared),
                fmt(&described)
            ),
        ));
    }
    Ok(())
}
