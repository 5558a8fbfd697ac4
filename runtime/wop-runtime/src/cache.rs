//! Compile-once cache: an in-memory map plus an on-disk store of compiled
//! components keyed by `sha256(wasm)` and the engine fingerprint. A second
//! load of the same pack does no compilation.
//!
//! On-disk format: 32 bytes of sha256 over the artifact, then the artifact
//! as produced by [`Component::serialize`]. A file whose checksum does not
//! match (torn write, corruption) is discarded and recompiled.
//!
//! Trust: the cache directory holds native code and must be writable only
//! by the operator running `wop` (like wasmtime's own cache).

#![allow(unsafe_code)] // Component::deserialize; see the SAFETY note below.

use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use wasmtime::Engine;
use wasmtime::component::Component;

/// Counters proving what the cache did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CacheStats {
    /// Components compiled from wasm by this runtime.
    pub compilations: u64,
    /// Loads served from the in-memory map.
    pub memory_hits: u64,
    /// Loads served from the disk cache.
    pub disk_hits: u64,
    /// Disk entries rejected (checksum mismatch, incompatible artifact).
    pub disk_rejected: u64,
}

#[derive(Default)]
pub(crate) struct CompileCache {
    dir: Option<PathBuf>,
    mem: Mutex<HashMap<String, Component>>,
    compilations: AtomicU64,
    memory_hits: AtomicU64,
    disk_hits: AtomicU64,
    disk_rejected: AtomicU64,
}

impl CompileCache {
    pub(crate) fn new(dir: Option<PathBuf>) -> Self {
        Self {
            dir,
            ..Default::default()
        }
    }

    pub(crate) fn stats(&self) -> CacheStats {
        CacheStats {
            compilations: self.compilations.load(Ordering::Relaxed),
            memory_hits: self.memory_hits.load(Ordering::Relaxed),
            disk_hits: self.disk_hits.load(Ordering::Relaxed),
            disk_rejected: self.disk_rejected.load(Ordering::Relaxed),
        }
    }

    fn key(wasm_sha256: &str, fingerprint: &str) -> String {
        format!("{wasm_sha256}-{fingerprint}")
    }

    /// The path an artifact is stored at (for tests that tamper with it).
    pub(crate) fn path_for(&self, wasm_sha256: &str, fingerprint: &str) -> Option<PathBuf> {
        self.dir
            .as_ref()
            .map(|d| d.join(format!("{}.cwasm", Self::key(wasm_sha256, fingerprint))))
    }

    /// Returns the compiled component for `wasm`, compiling at most once.
    pub(crate) fn get_or_compile(
        &self,
        engine: &Engine,
        fingerprint: &str,
        wasm_sha256: &str,
        wasm: &[u8],
    ) -> wasmtime::Result<Component> {
        let key = Self::key(wasm_sha256, fingerprint);
        if let Some(c) = self.lock().get(&key) {
            self.memory_hits.fetch_add(1, Ordering::Relaxed);
            return Ok(c.clone());
        }
        let path = self.path_for(wasm_sha256, fingerprint);
        if let Some(p) = &path
            && let Some(c) = self.read_disk(engine, p)
        {
            self.disk_hits.fetch_add(1, Ordering::Relaxed);
            self.lock().insert(key, c.clone());
            return Ok(c);
        }
        let c = Component::new(engine, wasm)?;
        self.compilations.fetch_add(1, Ordering::Relaxed);
        if let Some(p) = &path
            && let Err(e) = write_disk(&c, p)
        {
            tracing::warn!(path = %p.display(), error = %e, "cannot write the compile cache");
        }
        self.lock().insert(key, c.clone());
        Ok(c)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Component>> {
        match self.mem.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
    }

    fn read_disk(&self, engine: &Engine, path: &Path) -> Option<Component> {
        let bytes = std::fs::read(path).ok()?;
        let reject = |why: &str| {
            tracing::warn!(path = %path.display(), why, "discarding compile cache entry");
            self.disk_rejected.fetch_add(1, Ordering::Relaxed);
            let _ = std::fs::remove_file(path);
            None
        };
        if bytes.len() < 32 {
            return reject("too short");
        }
        let (sum, artifact) = bytes.split_at(32);
        if Sha256::digest(artifact).as_slice() != sum {
            return reject("checksum mismatch");
        }
        // SAFETY: `artifact` was produced by `Component::serialize` of an
        // engine with the same fingerprint (the fingerprint is part of the
        // file name), its checksum matches what we wrote, and the cache
        // directory is operator-owned (see the module docs). wasmtime also
        // checks the artifact's header against the engine's configuration.
        match unsafe { Component::deserialize(engine, artifact) } {
            Ok(c) => Some(c),
            Err(_) => reject("incompatible artifact"),
        }
    }
}

fn write_disk(c: &Component, path: &Path) -> std::io::Result<()> {
    let artifact = c.serialize().map_err(std::io::Error::other)?;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    let mut out = Vec::with_capacity(32 + artifact.len());
    out.extend_from_slice(&Sha256::digest(&artifact));
    out.extend_from_slice(&artifact);
    std::fs::write(&tmp, &out)?;
    std::fs::rename(&tmp, path)
}
