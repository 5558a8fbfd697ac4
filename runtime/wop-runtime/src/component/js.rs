//! JavaScript packs (the registry's): their component is built here from
//! the pack's ES modules (`wop-js`: QuickJS pre-initialized with the
//! pack), once per build id — in memory, and on disk when the runtime has
//! a cache directory — and then loaded like any other component.

use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use wop_core::capability::Capability;
use wop_core::error::LoadError;
use wop_core::manifest::Manifest;

/// Built components by build id.
pub(crate) struct JsBuilds {
    memo: Mutex<HashMap<String, Arc<Vec<u8>>>>,
    dir: Option<PathBuf>,
}

/// What a JavaScript pack's capabilities are: what it declares (`x-wop`,
/// if it has one) and what its code can reach ([`wop_js::derived_capabilities`]).
fn derive(manifest: &mut Manifest, source: &wop_js::Source) {
    for name in wop_js::derived_capabilities(source) {
        let cap = match name {
            "tools" => Capability::Tools,
            "http" => Capability::Http,
            "mcp" => Capability::Mcp,
            _ => continue,
        };
        if !manifest.wop.capabilities.contains(&cap) {
            manifest.wop.capabilities.push(cap);
        }
    }
}

/// A JavaScript pack's sources and identity, read from its directory.
fn prepare(
    dir: &Path,
    manifest: &Manifest,
) -> Result<(wop_js::Identity, wop_js::Source), LoadError> {
    let mut source = wop_js::Source::new(&manifest.runtime.entry);
    for (path, bytes) in wop_core::pack::read_module_sources(dir)? {
        source.add(&path, bytes).map_err(build_error)?;
    }
    let identity = wop_js::Identity {
        name: manifest.name.clone(),
        version: manifest.version.clone(),
        nodes: manifest
            .nodes
            .iter()
            .map(|n| (n.type_id.clone(), n.version.clone()))
            .collect(),
    };
    Ok((identity, source))
}

/// A JavaScript pack's component, ready to compile.
pub(crate) struct JsComponent {
    pub wasm: Vec<u8>,
    /// Lowercase hex sha256 of `wasm`.
    pub sha256: String,
    /// The host services its code names ([`wop_js::referenced_services`]).
    pub services: Vec<String>,
}

/// What building a JavaScript pack produced (for `pack-lock.json`).
#[derive(Debug, Clone)]
pub struct JsBuild {
    /// The component.
    pub component: Vec<u8>,
    /// Its lowercase hex sha256.
    pub sha256: String,
    /// sha256 over the engine and the pack's bundle: equal ids, equal bytes.
    pub build_id: String,
    /// The engine's sha256 (`wop_js::engine_sha256`).
    pub engine_sha256: String,
}

/// Builds the JavaScript pack in `dir` (manifest already verified) into
/// its component, with no cache: what `wop install` runs before it keeps
/// a pack, so a pack whose code cannot build is refused and nothing is
/// written. Blocking (a few hundred milliseconds for a large pack).
pub fn build_javascript_pack(dir: &Path, manifest: &Manifest) -> Result<JsBuild, LoadError> {
    let (identity, source) = prepare(dir, manifest)?;
    let build_id = wop_js::build_id(&identity, &source);
    let component = wop_js::build(&identity, &source).map_err(build_error)?;
    Ok(JsBuild {
        sha256: hex::encode(Sha256::digest(&component)),
        component,
        build_id,
        engine_sha256: wop_js::engine_sha256(),
    })
}

fn build_error(e: wop_js::JsBuildError) -> LoadError {
    LoadError::Build {
        reason: e.code().to_owned(),
        message: e.message(),
    }
}

impl JsBuilds {
    /// Builds kept in memory, and under `cache_dir/js/` when there is one.
    pub(crate) fn new(cache_dir: Option<&Path>) -> Self {
        Self {
            memo: Mutex::new(HashMap::new()),
            dir: cache_dir.map(|d| d.join("js")),
        }
    }

    /// The component of the JavaScript pack in `dir` and its sha256; adds
    /// the derived capabilities to `manifest`.
    pub(crate) async fn component(
        &self,
        dir: &Path,
        manifest: &mut Manifest,
    ) -> Result<JsComponent, LoadError> {
        let (identity, source) = prepare(dir, manifest)?;
        derive(manifest, &source);
        let services = wop_js::referenced_services(&source)
            .into_iter()
            .map(str::to_owned)
            .collect();
        let id = wop_js::build_id(&identity, &source);
        let bytes = self.get_or_build(&id, identity, source).await?;
        let sha256 = hex::encode(Sha256::digest(bytes.as_slice()));
        Ok(JsComponent {
            wasm: bytes.as_ref().clone(),
            sha256,
            services,
        })
    }

    async fn get_or_build(
        &self,
        id: &str,
        identity: wop_js::Identity,
        source: wop_js::Source,
    ) -> Result<Arc<Vec<u8>>, LoadError> {
        if let Some(b) = self.memo.lock().ok().and_then(|m| m.get(id).cloned()) {
            return Ok(b);
        }
        let file = self.dir.as_ref().map(|d| d.join(format!("{id}.component")));
        let cached = file.as_deref().and_then(read_checked);
        let bytes = match cached {
            Some(b) => b,
            None => {
                let built = tokio::task::spawn_blocking(move || wop_js::build(&identity, &source))
                    .await
                    .map_err(|e| LoadError::Io(format!("build task failed: {e}")))?
                    .map_err(build_error)?;
                if let (Some(d), Some(f)) = (&self.dir, &file) {
                    // A cache that cannot be written costs a rebuild, nothing else.
                    write_checked(d, f, &built);
                }
                built
            }
        };
        let bytes = Arc::new(bytes);
        if let Ok(mut m) = self.memo.lock() {
            m.insert(id.to_owned(), bytes.clone());
        }
        Ok(bytes)
    }
}

/// A cached build: 32 bytes of sha256 over the component, then the
/// component. `None` (and the file removed) when it is missing, torn or
/// corrupt: the pack is built again instead of failing to load. (Trust is
/// the compile cache's: the directory is the operator's.)
fn read_checked(file: &Path) -> Option<Vec<u8>> {
    let raw = std::fs::read(file).ok()?;
    let ok = raw.len() > 32 && Sha256::digest(&raw[32..]).as_slice() == &raw[..32];
    if !ok {
        let _ = std::fs::remove_file(file);
        return None;
    }
    Some(raw[32..].to_vec())
}

/// Writes `component` to `file` under `dir` as [`read_checked`] reads it,
/// through a temporary file and a rename (never a torn file in place).
fn write_checked(dir: &Path, file: &Path, component: &[u8]) {
    let tmp = file.with_extension(format!("tmp{}", std::process::id()));
    let mut out = Sha256::digest(component).to_vec();
    out.extend_from_slice(component);
    if std::fs::create_dir_all(dir).is_ok() && std::fs::write(&tmp, &out).is_ok() {
        let _ = std::fs::rename(&tmp, file);
    }
}
