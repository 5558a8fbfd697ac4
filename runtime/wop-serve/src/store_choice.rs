//! Which effect store `wop serve` uses, and opening it with the
//! settings of `serve.toml`.

use crate::config::ServeConfig;
use std::sync::Arc;
use wop_runtime::store::{KvStore, MemoryStore, SledOptions};

/// `usageDeferMs` on a store only this process uses (sled, memory).
const DEFAULT_USAGE_DEFER_MS: u64 = 10;

/// Where effect claims, recorded responses and usage live.
#[derive(Clone)]
pub enum StoreChoice {
    /// A sled directory or a `postgres://` URL (`wop_runtime::store::open`).
    Spec(String),
    /// In memory: lost at exit (tests, benchmarks).
    Memory,
    /// A store the embedder built.
    Custom(Arc<dyn KvStore>),
}

impl StoreChoice {
    /// Opens the store: in memory with `memoryStoreBytes`, sled keeping
    /// `diskReserveBytes` free (decision 0053).
    pub(crate) fn open(&self, cfg: &ServeConfig) -> Result<Arc<dyn KvStore>, String> {
        Ok(match self {
            StoreChoice::Memory => Arc::new(MemoryStore::with_capacity(cfg.memory_store_bytes)),
            StoreChoice::Spec(s) => {
                let sled = SledOptions {
                    reserve: cfg.disk_reserve_bytes,
                    ..SledOptions::default()
                };
                wop_runtime::store::open_with(s, sled).map_err(|e| e.to_string())?
            }
            StoreChoice::Custom(s) => s.clone(),
        })
    }

    /// `usageDeferMs` unless `serve.toml` says: 0 where other executors
    /// may read the same usage (PostgreSQL, a store the embedder built).
    pub(crate) fn usage_defer_ms(&self) -> u64 {
        match self {
            StoreChoice::Spec(s) if wop_runtime::store::is_postgres_url(s) => 0,
            StoreChoice::Custom(_) => 0,
            StoreChoice::Spec(_) | StoreChoice::Memory => DEFAULT_USAGE_DEFER_MS,
        }
    }
}
