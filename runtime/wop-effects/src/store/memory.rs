//! An in-memory [`KvStore`]: nothing survives the process.
//!
//! Optionally bounded in bytes ([`MemoryStore::with_capacity`]): the
//! store is process memory, and what a client can make it hold (recorded
//! responses of idempotent invocations, effect records, usage) must not
//! be able to exhaust the process (decision 0046).

use super::{CasResult, KvStore, StoreError};
use key::Key;
use std::collections::BTreeMap;
use std::collections::btree_map::Entry;
use std::sync::{Mutex, MutexGuard};

/// What one entry costs beyond its key and value bytes, roughly: its key
/// (64 bytes, [`key::Key`]) and value (24) in the map's nodes, the nodes'
/// slack, and the two heap headers.
const ENTRY_OVERHEAD: u64 = 128;

/// The capacity the runtime's default in-memory store and `wop serve
/// --memory-store` get (1 GiB; `memoryStoreBytes` in `serve.toml`).
pub const MEMORY_STORE_BYTES: u64 = 1 << 30;

/// An in-memory [`KvStore`] backed by a `BTreeMap` (keys with their head
/// inline: decision 0058). Not durable.
#[derive(Debug, Default)]
pub struct MemoryStore {
    inner: Mutex<Inner>,
    /// The most bytes of new entries it takes (`None`: unbounded).
    capacity: Option<u64>,
    /// Writes refused for want of room.
    refused: std::sync::atomic::AtomicU64,
}

#[derive(Debug, Default)]
struct Inner {
    map: BTreeMap<Key, Vec<u8>>,
    /// Σ over entries of key + value + [`ENTRY_OVERHEAD`].
    bytes: u64,
}

fn entry_bytes(key: &str, value: &[u8]) -> u64 {
    (key.len() + value.len()) as u64 + ENTRY_OVERHEAD
}

impl MemoryStore {
    /// An empty, unbounded store.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty store that holds at most about `bytes` (keys, values and
    /// a fixed overhead per entry). A write of a **new** key that would
    /// take it past `bytes` fails with [`StoreError::Full`] and changes
    /// nothing: a claim is refused before its effect fires. A write that
    /// replaces an existing key's value (settling a claim: recording the
    /// outcome of an effect that already fired) may use a further eighth
    /// of `bytes`, so what was claimed can still be recorded; past that it
    /// fails too. Removing always succeeds and frees its bytes.
    pub fn with_capacity(bytes: u64) -> Self {
        MemoryStore {
            inner: Mutex::default(),
            capacity: Some(bytes),
            refused: Default::default(),
        }
    }

    /// The capacity given to [`with_capacity`](Self::with_capacity).
    pub fn capacity(&self) -> Option<u64> {
        self.capacity
    }

    /// The bytes its entries take now (as the capacity counts them).
    pub fn bytes(&self) -> u64 {
        self.lock().bytes
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // Every operation leaves the map consistent, so a poisoned lock (a
        // panic elsewhere while holding it) is safe to recover.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether writing `value` at `key` (whose current value is `current`)
    /// into a store holding `held` bytes fits; the error says what to do
    /// when not.
    fn admit(
        &self,
        held: u64,
        key: &str,
        current: Option<&[u8]>,
        value: &[u8],
    ) -> Result<(), StoreError> {
        let Some(cap) = self.capacity else {
            return Ok(());
        };
        let old = current.map_or(0, |c| entry_bytes(key, c));
        let after = held - old + entry_bytes(key, value);
        if after <= held {
            return Ok(());
        }
        let limit = match current {
            None => cap,
            Some(_) => cap.saturating_add(cap / 8),
        };
        if after <= limit {
            return Ok(());
        }
        self.refused
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Err(StoreError::Full(format!(
            "the in-memory store holds {held} of its {cap} bytes and this write needs {} more; \
             nothing was written. Use a durable store (`wop serve --store`), raise the \
             capacity (`memoryStoreBytes` in serve.toml), or purge old records",
            after - held
        )))
    }

    /// Writes `new` at `key` (`None`: removes it) if its current value is
    /// `expected` (`Check::Any`: whatever it is). One descent of the map:
    /// the key is made once, up front, as a new entry needs it.
    fn write(
        &self,
        key: &str,
        expected: Check<'_>,
        new: Option<Vec<u8>>,
    ) -> Result<CasResult, StoreError> {
        let mut inner = self.lock();
        let Inner { map, bytes } = &mut *inner;
        match map.entry(Key::new(key)) {
            Entry::Vacant(slot) => {
                if let Check::Is(Some(_)) = expected {
                    return Ok(Err(None));
                }
                if let Some(v) = new {
                    self.admit(*bytes, key, None, &v)?;
                    *bytes += entry_bytes(key, &v);
                    slot.insert(v);
                }
            }
            Entry::Occupied(mut slot) => {
                if let Check::Is(e) = expected
                    && e != Some(slot.get().as_slice())
                {
                    return Ok(Err(Some(slot.get().clone())));
                }
                match new {
                    Some(v) => {
                        self.admit(*bytes, key, Some(slot.get()), &v)?;
                        *bytes += entry_bytes(key, &v);
                        let old = slot.insert(v);
                        *bytes -= entry_bytes(key, &old);
                    }
                    None => {
                        let old = slot.remove();
                        *bytes -= entry_bytes(key, &old);
                    }
                }
            }
        }
        Ok(Ok(()))
    }
}

/// What a write expects to find.
#[derive(Clone, Copy)]
enum Check<'a> {
    /// Anything (a plain put).
    Any,
    /// This value (`None`: absent).
    Is(Option<&'a [u8]>),
}

impl Inner {
    /// The pairs with `start <= key < end` (`end = None`: no upper
    /// bound), in key order; none when `end <= start`.
    fn range<'a>(
        &'a self,
        start: &str,
        end: Option<&str>,
    ) -> impl Iterator<Item = (&'a Key, &'a Vec<u8>)> + 'a {
        use std::ops::Bound;
        let upper = match end {
            Some(e) if e <= start => None,
            Some(e) => Some(Bound::Excluded(Key::new(e))),
            None => Some(Bound::Unbounded),
        };
        upper
            .map(|upper| self.map.range((Bound::Included(Key::new(start)), upper)))
            .into_iter()
            .flatten()
    }

    fn remove(&mut self, key: &str) -> Option<Vec<u8>> {
        let old = self.map.remove(&Key::new(key))?;
        self.bytes -= entry_bytes(key, &old);
        Some(old)
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
        self.write(key, Check::Is(expected), new)
    }

    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let key = Key::new(key);
        Ok(self.lock().map.get(&key).cloned())
    }

    async fn put(&self, key: &str, value: Vec<u8>) -> Result<(), StoreError> {
        self.write(key, Check::Any, Some(value)).map(|_| ())
    }

    async fn remove(&self, key: &str) -> Result<(), StoreError> {
        self.lock().remove(key);
        Ok(())
    }

    async fn remove_returning(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self.lock().remove(key))
    }

    async fn scan_prefix(
        &self,
        prefix: &str,
        limit: usize,
    ) -> Result<Vec<(String, Vec<u8>)>, StoreError> {
        let from = Key::new(prefix);
        let inner = self.lock();
        Ok(inner
            .map
            .range(from..)
            .map(|(k, v)| (k.as_str(), v))
            .take_while(|(k, _)| k.starts_with(prefix))
            .take(limit)
            .map(|(k, v)| (k.to_owned(), v.clone()))
            .collect())
    }

    async fn scan_range(
        &self,
        start: &str,
        end: Option<&str>,
        limit: usize,
    ) -> Result<Vec<(String, Vec<u8>)>, StoreError> {
        let inner = self.lock();
        Ok(inner
            .range(start, end)
            .take(limit)
            .map(|(k, v)| (k.as_str().to_owned(), v.clone()))
            .collect())
    }

    async fn scan_range_keys(
        &self,
        start: &str,
        end: Option<&str>,
        limit: usize,
    ) -> Result<Vec<String>, StoreError> {
        let inner = self.lock();
        Ok(inner
            .range(start, end)
            .take(limit)
            .map(|(k, _)| k.as_str().to_owned())
            .collect())
    }

    fn failed_swap_reads_free(&self) -> bool {
        true
    }

    fn room(&self) -> Option<super::StoreRoom> {
        let cap = self.capacity?;
        Some(super::StoreRoom {
            free_bytes: cap.saturating_sub(self.bytes()),
            reserve_bytes: 0,
            refused_writes: self.refused.load(std::sync::atomic::Ordering::Relaxed),
            share_refused_writes: 0,
        })
    }

    fn backend(&self) -> &'static str {
        "memory"
    }
}

mod key;
#[cfg(test)]
mod tests;
