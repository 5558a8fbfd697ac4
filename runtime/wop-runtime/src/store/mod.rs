//! A small durable key-value store with compare-and-swap.
//!
//! The effect-claim state machine and usage records are built on the
//! [`KvStore`] trait. Keys are UTF-8 strings; values are bytes. Two backends
//! exist: [`MemoryStore`] (tests, ephemeral runs) and [`SledStore`] (on
//! disk, durable before every successful write returns).
//!
//! Every backend must pass the same conformance suite
//! (`store::conformance::run_all`).

#[doc(hidden)]
pub mod conformance;
mod memory;
mod sled;

pub use self::sled::{SledOptions, SledStore};
pub use memory::MemoryStore;

/// Why a store operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// Reading or writing the backing storage failed.
    #[error("store I/O error: {0}")]
    Io(String),
    /// The stored data is not what the store expects (e.g. a non-UTF-8 key).
    #[error("store data is corrupt: {0}")]
    Corrupt(String),
    /// The store cannot be used right now (e.g. locked by another process).
    #[error("store unavailable: {0}")]
    Unavailable(String),
}

/// The result of [`KvStore::compare_and_swap`]: `Ok(())` if the swap
/// happened, otherwise `Err(current value)`.
pub type CasResult = Result<(), Option<Vec<u8>>>;

/// A durable key-value store with atomic compare-and-swap.
#[async_trait::async_trait]
pub trait KvStore: Send + Sync {
    /// Atomically: if the current value of `key` equals `expected` (`None` =
    /// absent), replace it with `new` (`None` = delete) and return
    /// `Ok(Ok(()))`. Otherwise change nothing and return `Ok(Err(current))`.
    /// A successful swap is durable (on disk for persistent backends)
    /// before this returns.
    async fn compare_and_swap(
        &self,
        key: &str,
        expected: Option<&[u8]>,
        new: Option<Vec<u8>>,
    ) -> Result<CasResult, StoreError>;

    /// The current value of `key`, if any.
    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError>;

    /// Unconditional durable write.
    async fn put(&self, key: &str, value: Vec<u8>) -> Result<(), StoreError>;

    /// Durable delete (deleting an absent key succeeds).
    async fn remove(&self, key: &str) -> Result<(), StoreError>;

    /// All `(key, value)` pairs whose key starts with `prefix`, in key
    /// (byte) order, at most `limit` of them.
    async fn scan_prefix(
        &self,
        prefix: &str,
        limit: usize,
    ) -> Result<Vec<(String, Vec<u8>)>, StoreError>;

    /// A short name for messages (`"memory"`, `"sled"`).
    fn backend(&self) -> &'static str;
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn memory_conformance() {
        conformance::run_all(Arc::new(MemoryStore::new())).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn sled_conformance() {
        let dir = tempfile::tempdir().unwrap();
        let store = SledStore::open(&dir.path().join("db")).unwrap();
        conformance::run_all(Arc::new(store)).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn sled_conformance_without_group_commit() {
        let dir = tempfile::tempdir().unwrap();
        let store = SledStore::open_with(
            &dir.path().join("db"),
            SledOptions {
                group_commit: false,
            },
        )
        .unwrap();
        conformance::run_all(Arc::new(store)).await;
    }
}
