//! The store's contract: the [`KvStore`] trait every backend implements,
//! its error and the compare-and-swap result. The lowest piece of the
//! crate: the backends, the key-layout upgrade and the claim and meter
//! logic all build on it.

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
    /// The store holds its capacity (a bounded in-memory store): nothing
    /// was written.
    #[error("store full: {0}")]
    Full(String),
    /// The write's tenant holds its share of the store
    /// (`maxStoreBytesPerTenant`, decisions 0054 and 0055): nothing was
    /// written. A kind of [`Full`](Self::Full) ([`is_full`](Self::is_full)),
    /// with the figures for programs.
    #[error("store full: {}", .0.message)]
    OverShare(Box<ShareRefusal>),
}

impl StoreError {
    /// Whether the store refused the write for want of room (its own, or
    /// the tenant's share of it).
    pub fn is_full(&self) -> bool {
        matches!(self, StoreError::Full(_) | StoreError::OverShare(_))
    }

    /// The figures of a refusal for the tenant's share, if it is one.
    pub fn share_refusal(&self) -> Option<&ShareRefusal> {
        match self {
            StoreError::OverShare(r) => Some(r),
            _ => None,
        }
    }
}

/// A write (or an invocation's start) refused because its tenant holds its
/// share of the store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShareRefusal {
    /// What the tenant is told: what it holds, its share, what to do.
    pub message: String,
    /// The tenant.
    pub tenant: String,
    /// Bytes of records the tenant held when it was refused.
    pub held_bytes: u64,
    /// Bytes the refused write needed (`None`: an invocation refused at
    /// its start, before it wrote anything).
    pub needed_bytes: Option<u64>,
    /// The tenant's share (`maxStoreBytesPerTenant`).
    pub share_bytes: u64,
}

impl ShareRefusal {
    /// The figures as an error's `details`: `tenant`, `heldBytes`,
    /// `maxStoreBytesPerTenant` and, for a write, `neededBytes`.
    pub fn details(&self) -> serde_json::Map<String, serde_json::Value> {
        let mut d = serde_json::Map::new();
        d.insert("tenant".into(), self.tenant.clone().into());
        d.insert("heldBytes".into(), self.held_bytes.into());
        d.insert("maxStoreBytesPerTenant".into(), self.share_bytes.into());
        if let Some(n) = self.needed_bytes {
            d.insert("neededBytes".into(), n.into());
        }
        d
    }
}

/// How much room a store has left, for operators (`wop serve`'s
/// `/metrics` and `/healthz`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoreRoom {
    /// Bytes the store can still grow by: free space on a sled store's
    /// disk, what is left of a bounded in-memory store's capacity.
    pub free_bytes: u64,
    /// Of those, what is kept back: below it, writes that create a key
    /// are refused (a sled store's `diskReserveBytes`; 0 in memory).
    pub reserve_bytes: u64,
    /// Writes refused for want of room since the store was opened.
    pub refused_writes: u64,
    /// New effect records refused because their tenant held its share of
    /// the store (a [`TenantShare`](super::TenantShare); 0 without one).
    pub share_refused_writes: u64,
}

impl StoreRoom {
    /// Whether the store refuses new keys now (new claims, ledgers, usage).
    pub fn is_low(&self) -> bool {
        self.free_bytes <= self.reserve_bytes
    }
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

    /// [`remove`](Self::remove), answering the value it deleted (`None`:
    /// the key was absent), for a caller that accounts for what a key
    /// held (a tenant's share). The default reads, then deletes; the
    /// in-memory store does both in one step, without copying the value.
    async fn remove_returning(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let old = self.get(key).await?;
        self.remove(key).await?;
        Ok(old)
    }

    /// All `(key, value)` pairs whose key starts with `prefix`, in key
    /// (byte) order, at most `limit` of them.
    async fn scan_prefix(
        &self,
        prefix: &str,
        limit: usize,
    ) -> Result<Vec<(String, Vec<u8>)>, StoreError>;

    /// All `(key, value)` pairs with `start <= key < end` (`end = None`:
    /// no upper bound), in key (byte) order, at most `limit` of them. For
    /// paging: the next page starts at the last key returned plus `"\0"`.
    async fn scan_range(
        &self,
        start: &str,
        end: Option<&str>,
        limit: usize,
    ) -> Result<Vec<(String, Vec<u8>)>, StoreError>;

    /// The keys of [`scan_range`](Self::scan_range)'s pairs, without
    /// their values: for a caller that only deletes what it finds (the
    /// usage bound forgetting a run), so that a store which can does not
    /// read or copy values nobody looks at. The default scans the pairs
    /// and drops the values; the in-memory store overrides it.
    async fn scan_range_keys(
        &self,
        start: &str,
        end: Option<&str>,
        limit: usize,
    ) -> Result<Vec<String>, StoreError> {
        let pairs = self.scan_range(start, end, limit).await?;
        Ok(pairs.into_iter().map(|(k, _)| k).collect())
    }

    /// Compare-and-deletes each `(key, expected)` pair: a key is deleted
    /// only if it still holds `expected` (as `compare_and_swap(key,
    /// Some(expected), None)`). Returns the keys deleted, in no particular
    /// order. For retention, a page at a time. The default makes one call
    /// per pair; a backend that can do many in one round trip
    /// (PostgreSQL: one statement) overrides it.
    async fn remove_unchanged(
        &self,
        pairs: Vec<(String, Vec<u8>)>,
    ) -> Result<Vec<String>, StoreError> {
        let mut gone = Vec::new();
        for (k, v) in pairs {
            if self.compare_and_swap(&k, Some(&v), None).await?.is_ok() {
                gone.push(k);
            }
        }
        Ok(gone)
    }

    /// Durably writes `marker` = `marker_value` (unconditionally, as
    /// [`put`](Self::put)), then inserts `key` = `value` if `key` is absent
    /// (as `compare_and_swap(key, None, Some(value))`): `Ok(Ok(()))` if it
    /// inserted, `Ok(Err(current))` if `key` already held a value (or,
    /// rarely, `Err(None)` when a racing writer removed it again). The
    /// marker is written either way, and never after the insert.
    ///
    /// This is the first write of an effect claim (index entry, then the
    /// claim). The default makes two calls; a backend that can do both in
    /// one round trip (PostgreSQL: one statement) overrides it.
    async fn put_then_insert(
        &self,
        marker: &str,
        marker_value: Vec<u8>,
        key: &str,
        value: Vec<u8>,
    ) -> Result<CasResult, StoreError> {
        self.put(marker, marker_value).await?;
        self.compare_and_swap(key, None, Some(value)).await
    }

    /// Whether a failed [`compare_and_swap`](Self::compare_and_swap) costs
    /// no more than a [`get`](Self::get) of the key (a local store: the
    /// failed swap has read the current value anyway). Then a writer that
    /// expects a key to be absent swaps first instead of reading first:
    /// one operation when it is absent, two when it is not, as before.
    /// PostgreSQL's compare-and-swap statement answers with the value it
    /// found, so it says `true` too. A networked store whose failed swap
    /// needs a second round trip to report the current value keeps the
    /// default, `false`.
    fn failed_swap_reads_free(&self) -> bool {
        false
    }

    /// How much room the store has left, when it knows (a sled store: its
    /// disk's free space, read now; a bounded in-memory store: its
    /// capacity). The default, for a store that does not: `None`.
    fn room(&self) -> Option<StoreRoom> {
        None
    }

    /// Why the store serves no operation any more, once it has failed
    /// for good in this process (a sled store after an I/O error: it
    /// recovers only when it is opened again, so the process must be
    /// restarted); `None` while it works. `wop serve`'s `/healthz`
    /// answers `503` then. The default, for a store that cannot fail
    /// this way: `None`.
    fn failure(&self) -> Option<String> {
        None
    }

    /// A short name for messages (`"memory"`, `"sled"`, `"postgres"`).
    fn backend(&self) -> &'static str;
}
