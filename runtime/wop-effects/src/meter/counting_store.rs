//! A test store: the in-memory one, counting its operations.

use crate::store::{CasResult, KvStore, MemoryStore, StoreError};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// A memory store that counts its writes (and its reads).
#[derive(Default)]
pub(super) struct Counting {
    inner: MemoryStore,
    pub(super) swaps: AtomicUsize,
    pub(super) puts: AtomicUsize,
    pub(super) removes: AtomicUsize,
    pub(super) gets: AtomicUsize,
    /// Removes are counted but not applied (a store whose deletes lag).
    pub(super) ignore_removes: AtomicBool,
    /// Range scans.
    pub(super) scans: AtomicUsize,
    /// The range scans made before the first swap that deleted (0: none
    /// yet).
    pub(super) scans_before_first_delete: AtomicUsize,
}

impl Counting {
    pub(super) fn counts(&self) -> (usize, usize, usize) {
        (
            self.swaps.load(Ordering::Relaxed),
            self.puts.load(Ordering::Relaxed),
            self.removes.load(Ordering::Relaxed),
        )
    }
}

#[async_trait::async_trait]
impl KvStore for Counting {
    async fn compare_and_swap(
        &self,
        key: &str,
        expected: Option<&[u8]>,
        new: Option<Vec<u8>>,
    ) -> Result<CasResult, StoreError> {
        self.swaps.fetch_add(1, Ordering::Relaxed);
        if new.is_none() {
            let scans = self.scans.load(Ordering::Relaxed);
            let first = &self.scans_before_first_delete;
            let _ = first.compare_exchange(0, scans, Ordering::Relaxed, Ordering::Relaxed);
        }
        self.inner.compare_and_swap(key, expected, new).await
    }
    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        self.gets.fetch_add(1, Ordering::Relaxed);
        self.inner.get(key).await
    }
    async fn put(&self, key: &str, value: Vec<u8>) -> Result<(), StoreError> {
        self.puts.fetch_add(1, Ordering::Relaxed);
        self.inner.put(key, value).await
    }
    async fn remove(&self, key: &str) -> Result<(), StoreError> {
        self.removes.fetch_add(1, Ordering::Relaxed);
        if self.ignore_removes.load(Ordering::Relaxed) {
            return Ok(());
        }
        self.inner.remove(key).await
    }
    async fn scan_prefix(
        &self,
        prefix: &str,
        limit: usize,
    ) -> Result<Vec<(String, Vec<u8>)>, StoreError> {
        self.inner.scan_prefix(prefix, limit).await
    }
    async fn scan_range(
        &self,
        start: &str,
        end: Option<&str>,
        limit: usize,
    ) -> Result<Vec<(String, Vec<u8>)>, StoreError> {
        self.scans.fetch_add(1, Ordering::Relaxed);
        self.inner.scan_range(start, end, limit).await
    }
    fn failed_swap_reads_free(&self) -> bool {
        self.inner.failed_swap_reads_free()
    }
    fn backend(&self) -> &'static str {
        "counting"
    }
}
