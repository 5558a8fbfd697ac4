//! A registry JavaScript pack, turned into a component on the operator's
//! machine with nothing but `wop`.
//!
//! The pack's ES modules are loaded into QuickJS (the engine in
//! `engine/`, embedded here as `engine.wasm`) by running the engine's
//! initializer under wizer, and the initialized heap is snapshotted into
//! the component: every invocation starts from a fresh copy-on-write image
//! with the pack already loaded. The build is deterministic (fixed clock,
//! zero random bytes, sorted bundle), so the same pack and the same `wop`
//! give the same component bytes; [`build_id`] names that pair for caches.
//!
//! The component imports every `openwop:node-pack` host interface (one
//! engine serves every pack); what a pack may call is its grants', judged
//! at each call like every other pack's (`capability_denied`).

mod build;
mod error;
mod preview1;
mod services;
mod source;

pub use error::JsBuildError;
pub use services::{referenced_services, service_names};
pub use source::{Identity, MAX_FILES, MAX_SOURCE_BYTES, Source, derived_capabilities};

use sha2::{Digest, Sha256};

/// The engine: QuickJS behind `openwop:node-pack`, built by
/// `engine/build.sh` (CI checks these bytes are what the source builds).
pub const ENGINE_WASM: &[u8] = include_bytes!("../engine.wasm");

/// The `runtime.language` of the packs this crate builds.
pub const LANGUAGE: &str = "javascript";

/// Lowercase hex sha256 of [`ENGINE_WASM`] (computed once).
pub fn engine_sha256() -> String {
    static SHA: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    SHA.get_or_init(|| hex::encode(Sha256::digest(ENGINE_WASM)))
        .clone()
}

/// The identity of a build: sha256 over the engine and the bundle. Equal
/// ids give equal component bytes.
pub fn build_id(identity: &Identity, source: &Source) -> String {
    let mut h = Sha256::new();
    h.update(ENGINE_WASM);
    h.update(source::bundle(identity, source));
    hex::encode(h.finalize())
}

/// Builds the pack's component.
pub fn build(identity: &Identity, source: &Source) -> Result<Vec<u8>, JsBuildError> {
    let bundle = source::bundle(identity, source);
    let core = build::snapshot(ENGINE_WASM, &bundle)?;
    build::encode(&core)
}
