//! A store that hands every operation to another one and tells a [`Tap`]
//! about it: for tests and benchmarks that count what a caller asks of
//! its store, hold an operation until they let it go, or make writes lag.
//! Not for production: [`Tapped`] is `#[doc(hidden)]`.

use super::{CasResult, KvStore, StoreError, StoreRoom};
use std::sync::Arc;

/// One operation, as the tap sees it before it reaches the inner store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op<'a> {
    /// A compare-and-swap; `deletes` when its new value is absent.
    Swap {
        /// The key swapped.
        key: &'a str,
        /// Whether the swap deletes the key.
        deletes: bool,
    },
    /// A read of one key.
    Get {
        /// The key read.
        key: &'a str,
    },
    /// An unconditional write.
    Put {
        /// The key written.
        key: &'a str,
    },
    /// A delete.
    Remove {
        /// The key deleted.
        key: &'a str,
    },
    /// A prefix scan.
    ScanPrefix {
        /// The prefix scanned.
        prefix: &'a str,
    },
    /// A range scan.
    ScanRange {
        /// The first key of the range.
        start: &'a str,
        /// The first key past it, if any.
        end: Option<&'a str>,
    },
    /// An effect claim's first write (marker, then the claim).
    PutThenInsert {
        /// The marker written.
        marker: &'a str,
        /// The key inserted.
        key: &'a str,
    },
}

/// What a [`Tapped`] store tells, and asks, its owner.
#[async_trait::async_trait]
pub trait Tap: Send + Sync {
    /// Before `op` reaches the inner store (it may wait). `false` for a
    /// put or a remove acknowledges the write without applying it (a
    /// store whose writes lag); for other operations it is ignored.
    async fn before(&self, _op: Op<'_>) -> bool {
        true
    }

    /// An error `op` fails with instead of reaching the inner store (a
    /// store whose disk fails), or `None` to let it through.
    fn fails(&self, _op: Op<'_>) -> Option<StoreError> {
        None
    }

    /// After an operation succeeded: the bytes of the values (and, for
    /// scans, keys) it read back, a failed swap's current value included.
    fn read(&self, _bytes: usize) {}

    /// Whether an effect claim's first write is made as it was before the
    /// combined write: a put, a read and an insert, each its own call to
    /// the inner store (benchmarks compare the two).
    fn three_round_trip_claims(&self) -> bool {
        false
    }
}

/// A [`KvStore`] that hands every operation to `inner` and tells `tap`.
pub struct Tapped<T> {
    /// The store that does the work.
    pub inner: Arc<dyn KvStore>,
    /// Told of every operation.
    pub tap: T,
}

impl<T: Tap> Tapped<T> {
    /// `inner`, tapped by `tap`.
    pub fn new(inner: Arc<dyn KvStore>, tap: T) -> Arc<Self> {
        Arc::new(Tapped { inner, tap })
    }

    /// Asks the tap about `op`: its error, or whether to apply it.
    async fn ask(&self, op: Op<'_>) -> Result<bool, StoreError> {
        match self.tap.fails(op) {
            Some(e) => Err(e),
            None => Ok(self.tap.before(op).await),
        }
    }
}

fn scanned(pairs: &[(String, Vec<u8>)]) -> usize {
    pairs.iter().map(|(k, v)| k.len() + v.len()).sum()
}

#[async_trait::async_trait]
impl<T: Tap> KvStore for Tapped<T> {
    async fn compare_and_swap(
        &self,
        key: &str,
        expected: Option<&[u8]>,
        new: Option<Vec<u8>>,
    ) -> Result<CasResult, StoreError> {
        let deletes = new.is_none();
        self.ask(Op::Swap { key, deletes }).await?;
        let r = self.inner.compare_and_swap(key, expected, new).await?;
        if let Err(Some(current)) = &r {
            self.tap.read(current.len());
        }
        Ok(r)
    }

    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        self.ask(Op::Get { key }).await?;
        let v = self.inner.get(key).await?;
        self.tap.read(v.as_ref().map_or(0, Vec::len));
        Ok(v)
    }

    async fn put(&self, key: &str, value: Vec<u8>) -> Result<(), StoreError> {
        if !self.ask(Op::Put { key }).await? {
            return Ok(());
        }
        self.inner.put(key, value).await
    }

    async fn remove(&self, key: &str) -> Result<(), StoreError> {
        if !self.ask(Op::Remove { key }).await? {
            return Ok(());
        }
        self.inner.remove(key).await
    }

    async fn remove_returning(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        if !self.ask(Op::Remove { key }).await? {
            return Ok(None);
        }
        let old = self.inner.remove_returning(key).await?;
        self.tap.read(old.as_ref().map_or(0, Vec::len));
        Ok(old)
    }

    async fn scan_prefix(
        &self,
        prefix: &str,
        limit: usize,
    ) -> Result<Vec<(String, Vec<u8>)>, StoreError> {
        self.ask(Op::ScanPrefix { prefix }).await?;
        let v = self.inner.scan_prefix(prefix, limit).await?;
        self.tap.read(scanned(&v));
        Ok(v)
    }

    async fn scan_range(
        &self,
        start: &str,
        end: Option<&str>,
        limit: usize,
    ) -> Result<Vec<(String, Vec<u8>)>, StoreError> {
        self.ask(Op::ScanRange { start, end }).await?;
        let v = self.inner.scan_range(start, end, limit).await?;
        self.tap.read(scanned(&v));
        Ok(v)
    }

    async fn scan_range_keys(
        &self,
        start: &str,
        end: Option<&str>,
        limit: usize,
    ) -> Result<Vec<String>, StoreError> {
        self.ask(Op::ScanRange { start, end }).await?;
        let v = self.inner.scan_range_keys(start, end, limit).await?;
        self.tap.read(v.iter().map(String::len).sum());
        Ok(v)
    }

    // `remove_unchanged` keeps the trait's default: one tapped swap per
    // pair, so a tap sees each delete.

    async fn put_then_insert(
        &self,
        marker: &str,
        marker_value: Vec<u8>,
        key: &str,
        value: Vec<u8>,
    ) -> Result<CasResult, StoreError> {
        let op = Op::PutThenInsert { marker, key };
        if let Some(e) = self.tap.fails(op) {
            return Err(e);
        }
        if self.tap.three_round_trip_claims() {
            self.inner.put(marker, marker_value).await?;
            if let Some(v) = self.inner.get(key).await? {
                return Ok(Err(Some(v)));
            }
            return self.inner.compare_and_swap(key, None, Some(value)).await;
        }
        self.tap.before(op).await;
        let r = self
            .inner
            .put_then_insert(marker, marker_value, key, value)
            .await?;
        if let Err(Some(current)) = &r {
            self.tap.read(current.len());
        }
        Ok(r)
    }

    fn failed_swap_reads_free(&self) -> bool {
        self.inner.failed_swap_reads_free()
    }

    fn room(&self) -> Option<StoreRoom> {
        self.inner.room()
    }

    fn failure(&self) -> Option<String> {
        self.inner.failure()
    }

    fn backend(&self) -> &'static str {
        self.inner.backend()
    }
}
