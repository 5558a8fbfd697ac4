//! An in-memory [`KvStore`]: nothing survives the process.

use super::{CasResult, KvStore, StoreError};
use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};

/// An in-memory [`KvStore`] backed by a `BTreeMap`. Not durable.
#[derive(Debug, Default)]
pub struct MemoryStore {
    map: Mutex<BTreeMap<String, Vec<u8>>>,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, BTreeMap<String, Vec<u8>>> {
        // Every operation leaves the map consistent, so a poisoned lock (a
        // panic elsewhere while holding it) is safe to recover.
        self.map.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[async_trait::async_trait]
impl KvStore for MemoryStore {
    async fn compare_and_swap(
        &self,
        key: &str,
        expected: Option<&[u8]>,
        new: Option<Vec<u8>>,
    ) -> Result<CasResult, StoreError> {
        let mut map = self.lock();
        let current = map.get(key);
        if current.map(Vec::as_slice) != expected {
            return Ok(Err(current.cloned()));
        }
        match new {
            Some(v) => {
                map.insert(key.to_owned(), v);
            }
            None => {
                map.remove(key);
            }
        }
        Ok(Ok(()))
    }

    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self.lock().get(key).cloned())
    }

    async fn put(&self, key: &str, value: Vec<u8>) -> Result<(), StoreError> {
        self.lock().insert(key.to_owned(), value);
        Ok(())
    }

    async fn remove(&self, key: &str) -> Result<(), StoreError> {
        self.lock().remove(key);
        Ok(())
    }

    async fn scan_prefix(
        &self,
        prefix: &str,
        limit: usize,
    ) -> Result<Vec<(String, Vec<u8>)>, StoreError> {
        let map = self.lock();
        Ok(map
            .range::<str, _>((
                std::ops::Bound::Included(prefix),
                std::ops::Bound::Unbounded,
            ))
            .take_while(|(k, _)| k.starts_with(prefix))
            .take(limit)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect())
    }

    async fn scan_range(
        &self,
        start: &str,
        end: Option<&str>,
        limit: usize,
    ) -> Result<Vec<(String, Vec<u8>)>, StoreError> {
        let map = self.lock();
        let upper = match end {
            Some(e) if e <= start => return Ok(Vec::new()),
            Some(e) => std::ops::Bound::Excluded(e),
            None => std::ops::Bound::Unbounded,
        };
        Ok(map
            .range::<str, _>((std::ops::Bound::Included(start), upper))
            .take(limit)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect())
    }

    fn backend(&self) -> &'static str {
        "memory"
    }
}
