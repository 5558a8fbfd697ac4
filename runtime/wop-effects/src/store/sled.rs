//! A durable on-disk [`KvStore`] backed by [sled](https://docs.rs/sled).
//!
//! Every successful write (CAS, put, remove) is flushed to disk before it
//! returns. With group commit (the default), writers whose writes complete
//! while a flush is in progress share the next flush instead of each
//! issuing their own: a writer takes a write generation after its write,
//! then waits until a flush that *started* after that generation has
//! completed. Only one task flushes at a time.
//!
//! **Reads never return a value that is not yet durable.** sled makes a
//! write visible in its in-memory index before it is flushed, so without
//! care a concurrent reader (or a losing compare-and-swap, which reports the
//! current value) could see another writer's successful claim before it is
//! on disk, act on it (replay a recorded result), and a crash could then
//! lose the record. Every write therefore registers its key as *pending*
//! before touching sled and unregisters it once a flush covers it; a read
//! (`get`, a losing CAS, or a `scan_prefix` whose prefix covers a pending
//! key) that finds its key pending first makes every write completed so far
//! durable (sharing the group-commit flush), then returns. Reads of keys
//! with no write in flight cost one uncontended mutex lookup more.

use super::{CasResult, KvStore, StoreError, StoreRoom};
use failed::Failure;
pub use room::{DEFAULT_RESERVE_MAX, DEFAULT_RESERVE_MIN, default_reserve};
use room::{Growth, Room};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

/// Bytes of sled's page cache. Opening a store reads only what recovery
/// needs; what stays in memory is bounded by this cache, not by the size
/// of the store's history (sled's own default is 1 GiB, so a store grown
/// large could make every later process that opens it hold that much).
/// 16 MiB: the soak run's RSS grew with a 64 MiB cache for minutes while
/// it filled; hot data (ledgers of active runs, recent claims) fits.
pub const SLED_CACHE_BYTES: u64 = 16 << 20;

/// Options for [`SledStore::open_with`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SledOptions {
    /// Share flushes between concurrent writers (see the module docs).
    /// When off, every successful write issues its own flush.
    pub group_commit: bool,
    /// Bytes of free space kept on the store's disk (decision 0053): a
    /// write that would leave less is refused with [`StoreError::Full`]
    /// before it reaches sled, which does not recover from a disk that
    /// fills (see the `room` module). `None` (the default):
    /// [`default_reserve`] of the filesystem, a tenth of it within 16 MiB
    /// to 256 MiB. `Some(0)`: no reserve.
    pub reserve: Option<u64>,
}

impl Default for SledOptions {
    fn default() -> Self {
        SledOptions {
            group_commit: true,
            reserve: None,
        }
    }
}

/// A key with writes that may not be durable yet.
#[derive(Debug, Default)]
struct Pending {
    /// Writers between registering and taking their ticket.
    writers: u32,
    /// The highest ticket of a completed write to this key.
    ticket: u64,
}

/// A durable [`KvStore`] in a sled database directory.
///
/// sled locks the directory: only one process (and one open `SledStore`)
/// may use a path at a time.
#[derive(Debug)]
pub struct SledStore {
    /// `None` only while the store is dropped.
    db: Option<sled::Db>,
    path: PathBuf,
    group_commit: bool,
    /// Number of writes that have completed in the in-memory index.
    written: AtomicU64,
    /// All writes numbered `<= durable` are on disk.
    durable: AtomicU64,
    /// Held by the task that is flushing.
    flush_lock: tokio::sync::Mutex<()>,
    /// Flushes issued (for tests and benchmarks).
    flushes: AtomicU64,
    /// Flushes that completed successfully.
    flushes_done: AtomicU64,
    /// Reads that waited for a flush because their key was pending.
    read_waits: AtomicU64,
    /// Keys with writes that may not be durable yet.
    pending: Mutex<HashMap<String, Pending>>,
    flush_delay: std::time::Duration,
    /// The free space kept on the store's disk.
    room: Room,
    /// Set by sled's first I/O error: the store serves nothing more.
    failure: Failure,
}

impl SledStore {
    /// Opens (creating it and its parent directories if needed) the store at
    /// `path` with default options (group commit on).
    pub fn open(path: &Path) -> Result<SledStore, StoreError> {
        Self::open_with(path, SledOptions::default())
    }

    /// Opens (creating it if needed) the store at `path` with `options`.
    pub fn open_with(path: &Path, options: SledOptions) -> Result<SledStore, StoreError> {
        std::fs::create_dir_all(path).map_err(|e| {
            StoreError::Io(format!(
                "cannot create store directory {}: {e}",
                path.display()
            ))
        })?;
        let db = sled::Config::new()
            .path(path)
            .cache_capacity(SLED_CACHE_BYTES)
            .open()
            .map_err(|e| open_error(path, e))?;
        let room = Room::new(path, options.reserve)?;
        Ok(SledStore {
            db: Some(db),
            path: path.to_owned(),
            group_commit: options.group_commit,
            written: AtomicU64::new(0),
            durable: AtomicU64::new(0),
            flush_lock: tokio::sync::Mutex::new(()),
            flushes: AtomicU64::new(0),
            flushes_done: AtomicU64::new(0),
            read_waits: AtomicU64::new(0),
            pending: Mutex::new(HashMap::new()),
            flush_delay: std::time::Duration::ZERO,
            room,
            failure: Failure::default(),
        })
    }

    /// Makes every flush wait `delay` before it starts (tests only: widens
    /// the window between a write becoming visible and its flush).
    #[doc(hidden)]
    pub fn with_flush_delay(mut self, delay: std::time::Duration) -> Self {
        self.flush_delay = delay;
        self
    }

    /// The directory this store lives in.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The bytes of free space this store keeps on its disk (0: none).
    pub fn reserve(&self) -> u64 {
        self.room.reserve()
    }

    /// How many flushes this store has issued since it was opened.
    pub fn flushes(&self) -> u64 {
        self.flushes.load(Ordering::Relaxed)
    }

    /// How many flushes have completed successfully since it was opened.
    pub fn flushes_completed(&self) -> u64 {
        self.flushes_done.load(Ordering::SeqCst)
    }

    /// How many reads waited for a flush because they read a key with a
    /// write in flight.
    pub fn read_waits(&self) -> u64 {
        self.read_waits.load(Ordering::Relaxed)
    }

    fn pending(&self) -> MutexGuard<'_, HashMap<String, Pending>> {
        // Every critical section leaves the map consistent.
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Registers a write to `key` before it touches sled.
    fn begin_write(&self, key: &str) {
        self.pending().entry(key.to_owned()).or_default().writers += 1;
    }

    /// After the sled operation: `ticket` is the write's ticket if it
    /// changed the store, `None` if it changed nothing.
    fn end_write(&self, key: &str, ticket: Option<u64>) {
        let durable = self.durable.load(Ordering::SeqCst);
        let mut p = self.pending();
        if let Some(e) = p.get_mut(key) {
            e.writers = e.writers.saturating_sub(1);
            if let Some(t) = ticket {
                e.ticket = e.ticket.max(t);
            }
            if e.writers == 0 && e.ticket <= durable {
                p.remove(key);
            }
        }
    }

    /// Whether a value of `key` just read may not be durable yet.
    fn is_pending(&self, key: &str) -> bool {
        let durable = self.durable.load(Ordering::SeqCst);
        let mut p = self.pending();
        match p.get(key) {
            Some(e) if e.writers > 0 || e.ticket > durable => true,
            Some(_) => {
                // Left by a write whose flush failed; a later one covered it.
                p.remove(key);
                false
            }
            None => false,
        }
    }

    /// Whether any key under `prefix` may have a non-durable value.
    fn any_pending_under(&self, prefix: &str) -> bool {
        let durable = self.durable.load(Ordering::SeqCst);
        self.pending()
            .iter()
            .any(|(k, e)| k.starts_with(prefix) && (e.writers > 0 || e.ticket > durable))
    }

    /// Whether any key in `[start, end)` may have a non-durable value.
    fn any_pending_in(&self, start: &str, end: Option<&str>) -> bool {
        let durable = self.durable.load(Ordering::SeqCst);
        self.pending().iter().any(|(k, e)| {
            k.as_str() >= start
                && end.is_none_or(|end| k.as_str() < end)
                && (e.writers > 0 || e.ticket > durable)
        })
    }

    /// Called by a read that saw a pending key: makes every write completed
    /// so far (including the one whose value it read) durable.
    async fn wait_durable_for_read(&self) -> Result<(), StoreError> {
        self.read_waits.fetch_add(1, Ordering::Relaxed);
        let ticket = self.ticket();
        self.make_durable(ticket).await
    }

    /// A write to `key` completed in the index: makes it durable and
    /// unregisters it.
    async fn write_done(&self, key: &str) -> Result<(), StoreError> {
        let ticket = self.ticket();
        let r = self.make_durable(ticket).await;
        // On failure the registration keeps `ticket` above `durable`, so
        // reads of `key` keep waiting for (and retrying) a flush until one
        // covers it.
        self.end_write(key, Some(ticket));
        r
    }

    /// A ticket: every write complete in the index before this call is
    /// numbered at or below it.
    fn ticket(&self) -> u64 {
        self.written.fetch_add(1, Ordering::SeqCst) + 1
    }

    /// Waits until every write numbered at or below `mine` is durable,
    /// flushing if needed.
    async fn make_durable(&self, mine: u64) -> Result<(), StoreError> {
        if !self.group_commit {
            self.flush().await?;
            self.durable.fetch_max(mine, Ordering::SeqCst);
            return Ok(());
        }
        if self.durable.load(Ordering::SeqCst) >= mine {
            return Ok(());
        }
        // A flush that waited for sled's failed write is never woken and
        // holds the lock: stop waiting once the store has failed.
        let _guard = tokio::select! {
            g = self.flush_lock.lock() => g,
            () = self.failure.wait() => return self.failure.check(),
        };
        // Let the writes polled alongside this one in the same task (a
        // recorder's roll-ups and usage record, joined) reach the index
        // first, so that this flush covers them all: without it each
        // waited for a flush of its own (measured: 2.4 flushes per
        // invocation at one client, `fuel-benches` `languages`).
        tokio::task::yield_now().await;
        // A flush that started after our write may have finished meanwhile.
        if self.durable.load(Ordering::SeqCst) >= mine {
            return Ok(());
        }
        // Every write numbered <= target completed before this load, hence
        // before the flush below starts, so the flush covers it.
        let target = self.written.load(Ordering::SeqCst);
        tokio::select! {
            r = self.flush() => r?,
            () = self.failure.wait() => return self.failure.check(),
        }
        self.durable.fetch_max(target, Ordering::SeqCst);
        Ok(())
    }

    async fn flush(&self) -> Result<(), StoreError> {
        self.flushes.fetch_add(1, Ordering::Relaxed);
        if !self.flush_delay.is_zero() {
            tokio::time::sleep(self.flush_delay).await;
        }
        // sled's `flush_async` stalls when many tasks call it at once
        // (measured: 16 concurrent claimers never finished); the blocking
        // flush on a blocking thread does not. Known sled 0.34 bug:
        // spacejam/sled#1308 and #1241 (fixed only on unreleased main).
        let db = self.db()?.clone();
        match tokio::task::spawn_blocking(move || db.flush()).await {
            Ok(r) => {
                r.map_err(|e| self.write_error("flush to disk", e))?;
                self.flushes_done.fetch_add(1, Ordering::SeqCst);
                Ok(())
            }
            Err(e) => {
                self.log("flush to disk", &e);
                Err(StoreError::Unavailable(format!(
                    "the flush of the sled effect store did not complete: {e}"
                )))
            }
        }
    }

    /// The error of a sled operation, as callers (tenants among them)
    /// see it: what failed and what to do, without the store's path on
    /// this host, which goes to the log with the error. For a read: sled
    /// keeps no error from a failed read (a blob file it cannot read), so
    /// the store goes on (a write's is [`write_error`](Self::write_error)).
    fn error(&self, what: &str, e: sled::Error) -> StoreError {
        self.log(what, &e);
        match e {
            sled::Error::Corruption { .. } => StoreError::Corrupt(format!(
                "{what} failed: the sled effect store is corrupt ({e}); restore it from a \
                 backup or move it aside (its path is in the server's log)"
            )),
            sled::Error::Io(io) if is_no_room(&io) => StoreError::Full(format!(
                "{what} failed: the disk holding the sled effect store has no room ({io}); \
                 free space on it"
            )),
            e => StoreError::Io(format!("{what} failed on the sled effect store: {e}")),
        }
    }

    /// The error of a write or a flush: an I/O error fails the store for
    /// good (see [`failed`]), as sled then refuses everything, and the
    /// error says so.
    fn write_error(&self, what: &str, e: sled::Error) -> StoreError {
        let io = matches!(e, sled::Error::Io(_));
        let error = self.error(what, e);
        if !io {
            return error;
        }
        if self.failure.check().is_ok() {
            tracing::error!(
                store = %self.path.display(),
                "sled store failed: it serves nothing more until the process is restarted"
            );
        }
        self.failure.set(error.clone());
        self.failure.check().err().unwrap_or(error)
    }

    /// The sled database (always there but while the store is dropped).
    fn db(&self) -> Result<&sled::Db, StoreError> {
        self.db
            .as_ref()
            .ok_or_else(|| StoreError::Unavailable("the sled effect store is closed".into()))
    }

    /// Logs a failed operation with the store's path, for the operator.
    fn log(&self, what: &str, e: &dyn std::fmt::Display) {
        tracing::error!(store = %self.path.display(), error = %e, "sled store: {what} failed");
    }

    fn decode_key(&self, key: &[u8]) -> Result<String, StoreError> {
        String::from_utf8(key.to_vec()).map_err(|_| {
            self.log("decoding a key", &hex::encode(key));
            StoreError::Corrupt(
                "the sled effect store holds a non-UTF-8 key; it was not written by wop or is \
                 damaged (the key and the store's path are in the server's log)"
                    .to_owned(),
            )
        })
    }
}

/// About what a write of `key` = `value` adds to the store on disk.
fn written_bytes(key: &str, value: &[u8]) -> u64 {
    u64::try_from(key.len() + value.len()).unwrap_or(u64::MAX)
}

/// An I/O error that means the disk (or the user's quota, or the file
/// size limit) has no room for the write.
fn is_no_room(io: &std::io::Error) -> bool {
    use std::io::ErrorKind::{FileTooLarge, QuotaExceeded, StorageFull};
    matches!(io.kind(), StorageFull | QuotaExceeded | FileTooLarge)
}

fn open_error(path: &Path, e: sled::Error) -> StoreError {
    let locked = match &e {
        sled::Error::Io(io) => {
            io.kind() == std::io::ErrorKind::WouldBlock
                || io.to_string().contains("could not acquire lock")
        }
        _ => false,
    };
    if locked {
        StoreError::Unavailable(format!(
            "store at {} is locked; another wop process may hold it (stop it or use a \
             different store path): {e}",
            path.display()
        ))
    } else if let sled::Error::Corruption { .. } = e {
        StoreError::Corrupt(format!(
            "cannot open sled store at {}: it is corrupt ({e}); restore it from a backup or \
             move it aside",
            path.display()
        ))
    } else {
        StoreError::Io(format!("cannot open sled store at {}: {e}", path.display()))
    }
}

/// sled flushes when its last handle is dropped. On a failed store that
/// flush never ends (sled parks it, as the flush that waited for the
/// failed write), so the database is dropped on a thread of its own: the
/// store's owner (a process shutting down) does not wait for it.
impl Drop for SledStore {
    fn drop(&mut self) {
        let Some(db) = self.db.take() else {
            return;
        };
        if self.failure.check().is_ok() {
            drop(db);
            return;
        }
        let dropped = std::thread::Builder::new()
            .name("wop-sled-failed-drop".into())
            .spawn(move || drop(db));
        if let Err(e) = dropped {
            tracing::error!(error = %e, "sled store: cannot drop the failed store on a thread");
        }
    }
}

#[async_trait::async_trait]
impl KvStore for SledStore {
    async fn compare_and_swap(
        &self,
        key: &str,
        expected: Option<&[u8]>,
        new: Option<Vec<u8>>,
    ) -> Result<CasResult, StoreError> {
        self.failure.check()?;
        if let Some(v) = &new {
            let growth = match expected {
                None => Growth::New,
                Some(_) => Growth::Replace,
            };
            if let Err(refused) = self.room.admit(growth, written_bytes(key, v)) {
                // A swap that would fail writes nothing: answer it as sled
                // would (a replay finds its recorded claim on a full disk).
                let current = self.get(key).await?;
                if current.as_deref() != expected {
                    return Ok(Err(current));
                }
                self.room.count_refusal();
                return Err(refused);
            }
        }
        let db = self.db()?;
        self.begin_write(key);
        let swapped = match db.compare_and_swap(key.as_bytes(), expected, new) {
            Ok(s) => s,
            Err(e) => {
                self.end_write(key, None);
                return Err(self.write_error("compare-and-swap", e));
            }
        };
        match swapped {
            Ok(()) => {
                self.write_done(key).await?;
                Ok(Ok(()))
            }
            Err(conflict) => {
                self.end_write(key, None);
                // The value that beat us may still be on its way to disk.
                if self.is_pending(key) {
                    self.wait_durable_for_read().await?;
                }
                Ok(Err(conflict.current.map(|v| v.to_vec())))
            }
        }
    }

    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        self.failure.check()?;
        let v = self
            .db()?
            .get(key.as_bytes())
            .map_err(|e| self.error("get", e))?
            .map(|v| v.to_vec());
        if self.is_pending(key) {
            self.wait_durable_for_read().await?;
        }
        Ok(v)
    }

    async fn put(&self, key: &str, value: Vec<u8>) -> Result<(), StoreError> {
        self.failure.check()?;
        if let Err(refused) = self.room.admit(Growth::New, written_bytes(key, &value)) {
            // Writing the value the key already holds changes nothing (a
            // replayed claim's index entry).
            if self.get(key).await?.as_deref() == Some(&value[..]) {
                return Ok(());
            }
            self.room.count_refusal();
            return Err(refused);
        }
        let db = self.db()?;
        self.begin_write(key);
        if let Err(e) = db.insert(key.as_bytes(), value) {
            self.end_write(key, None);
            return Err(self.write_error("put", e));
        }
        self.write_done(key).await
    }

    async fn remove(&self, key: &str) -> Result<(), StoreError> {
        self.failure.check()?;
        let db = self.db()?;
        self.begin_write(key);
        if let Err(e) = db.remove(key.as_bytes()) {
            self.end_write(key, None);
            return Err(self.write_error("remove", e));
        }
        self.write_done(key).await
    }

    async fn scan_prefix(
        &self,
        prefix: &str,
        limit: usize,
    ) -> Result<Vec<(String, Vec<u8>)>, StoreError> {
        self.failure.check()?;
        let mut out = Vec::new();
        for item in self.db()?.scan_prefix(prefix.as_bytes()).take(limit) {
            let (k, v) = item.map_err(|e| self.error("scan", e))?;
            out.push((self.decode_key(&k)?, v.to_vec()));
        }
        // Also when empty: a pending delete may be what emptied it.
        if self.any_pending_under(prefix) {
            self.wait_durable_for_read().await?;
        }
        Ok(out)
    }

    async fn scan_range(
        &self,
        start: &str,
        end: Option<&str>,
        limit: usize,
    ) -> Result<Vec<(String, Vec<u8>)>, StoreError> {
        self.failure.check()?;
        let iter = match end {
            Some(e) if e <= start => return Ok(Vec::new()),
            Some(e) => self.db()?.range(start.as_bytes()..e.as_bytes()),
            None => self.db()?.range(start.as_bytes()..),
        };
        let mut out = Vec::new();
        for item in iter.take(limit) {
            let (k, v) = item.map_err(|e| self.error("scan", e))?;
            out.push((self.decode_key(&k)?, v.to_vec()));
        }
        if self.any_pending_in(start, end) {
            self.wait_durable_for_read().await?;
        }
        Ok(out)
    }

    fn failed_swap_reads_free(&self) -> bool {
        true
    }

    fn room(&self) -> Option<StoreRoom> {
        self.room.now().ok()
    }

    fn failure(&self) -> Option<String> {
        self.failure.describe()
    }

    fn backend(&self) -> &'static str {
        "sled"
    }
}

mod failed;
mod room;
#[cfg(test)]
mod tests;
