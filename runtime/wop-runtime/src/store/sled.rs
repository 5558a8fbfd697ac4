//! A durable on-disk [`KvStore`] backed by [sled](https://docs.rs/sled).
//!
//! Every successful write (CAS, put, remove) is flushed to disk before it
//! returns. With group commit (the default), writers whose writes complete
//! while a flush is in progress share the next flush instead of each
//! issuing their own: a writer takes a write generation after its write,
//! then waits until a flush that *started* after that generation has
//! completed. Only one task flushes at a time.

use super::{CasResult, KvStore, StoreError};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Options for [`SledStore::open_with`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SledOptions {
    /// Share flushes between concurrent writers (see the module docs).
    /// When off, every successful write issues its own flush.
    pub group_commit: bool,
}

impl Default for SledOptions {
    fn default() -> Self {
        SledOptions { group_commit: true }
    }
}

/// A durable [`KvStore`] in a sled database directory.
///
/// sled locks the directory: only one process (and one open `SledStore`)
/// may use a path at a time.
#[derive(Debug)]
pub struct SledStore {
    db: sled::Db,
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
            .open()
            .map_err(|e| open_error(path, e))?;
        Ok(SledStore {
            db,
            path: path.to_owned(),
            group_commit: options.group_commit,
            written: AtomicU64::new(0),
            durable: AtomicU64::new(0),
            flush_lock: tokio::sync::Mutex::new(()),
            flushes: AtomicU64::new(0),
        })
    }

    /// The directory this store lives in.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// How many flushes this store has issued since it was opened.
    pub fn flushes(&self) -> u64 {
        self.flushes.load(Ordering::Relaxed)
    }

    /// Makes every write that completed before this call durable.
    async fn make_durable(&self) -> Result<(), StoreError> {
        if !self.group_commit {
            return self.flush().await;
        }
        // Our write is complete in the index; number it.
        let mine = self.written.fetch_add(1, Ordering::SeqCst) + 1;
        if self.durable.load(Ordering::SeqCst) >= mine {
            return Ok(());
        }
        let _guard = self.flush_lock.lock().await;
        // A flush that started after our write may have finished meanwhile.
        if self.durable.load(Ordering::SeqCst) >= mine {
            return Ok(());
        }
        // Every write numbered <= target completed before this load, hence
        // before the flush below starts, so the flush covers it.
        let target = self.written.load(Ordering::SeqCst);
        self.flush().await?;
        self.durable.fetch_max(target, Ordering::SeqCst);
        Ok(())
    }

    async fn flush(&self) -> Result<(), StoreError> {
        self.flushes.fetch_add(1, Ordering::Relaxed);
        // sled's `flush_async` stalls when many tasks call it at once
        // (measured: 16 concurrent claimers never finished); the blocking
        // flush on a blocking thread does not. Known sled 0.34 bug:
        // spacejam/sled#1308 and #1241 (fixed only on unreleased main).
        let db = self.db.clone();
        match tokio::task::spawn_blocking(move || db.flush()).await {
            Ok(r) => r.map(|_| ()).map_err(|e| self.error("flush to disk", e)),
            Err(e) => Err(StoreError::Unavailable(format!(
                "the flush of sled store at {} did not complete: {e}",
                self.path.display()
            ))),
        }
    }

    fn error(&self, what: &str, e: sled::Error) -> StoreError {
        match e {
            sled::Error::Corruption { .. } => StoreError::Corrupt(format!(
                "{what} failed: sled store at {} is corrupt ({e}); restore it from a backup or \
                 move it aside",
                self.path.display()
            )),
            e => StoreError::Io(format!(
                "{what} failed on sled store at {}: {e}",
                self.path.display()
            )),
        }
    }

    fn decode_key(&self, key: &[u8]) -> Result<String, StoreError> {
        String::from_utf8(key.to_vec()).map_err(|_| {
            StoreError::Corrupt(format!(
                "sled store at {} holds a non-UTF-8 key ({}); it was not written by wop or is \
                 damaged",
                self.path.display(),
                hex::encode(key)
            ))
        })
    }
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

#[async_trait::async_trait]
impl KvStore for SledStore {
    async fn compare_and_swap(
        &self,
        key: &str,
        expected: Option<&[u8]>,
        new: Option<Vec<u8>>,
    ) -> Result<CasResult, StoreError> {
        let swapped = self
            .db
            .compare_and_swap(key.as_bytes(), expected, new)
            .map_err(|e| self.error("compare-and-swap", e))?;
        match swapped {
            Ok(()) => {
                self.make_durable().await?;
                Ok(Ok(()))
            }
            Err(conflict) => Ok(Err(conflict.current.map(|v| v.to_vec()))),
        }
    }

    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self
            .db
            .get(key.as_bytes())
            .map_err(|e| self.error("get", e))?
            .map(|v| v.to_vec()))
    }

    async fn put(&self, key: &str, value: Vec<u8>) -> Result<(), StoreError> {
        self.db
            .insert(key.as_bytes(), value)
            .map_err(|e| self.error("put", e))?;
        self.make_durable().await
    }

    async fn remove(&self, key: &str) -> Result<(), StoreError> {
        self.db
            .remove(key.as_bytes())
            .map_err(|e| self.error("remove", e))?;
        self.make_durable().await
    }

    async fn scan_prefix(
        &self,
        prefix: &str,
        limit: usize,
    ) -> Result<Vec<(String, Vec<u8>)>, StoreError> {
        let mut out = Vec::new();
        for item in self.db.scan_prefix(prefix.as_bytes()).take(limit) {
            let (k, v) = item.map_err(|e| self.error("scan", e))?;
            out.push((self.decode_key(&k)?, v.to_vec()));
        }
        Ok(out)
    }

    fn backend(&self) -> &'static str {
        "sled"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[tokio::test]
    async fn durable_across_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nested/db");
        {
            let store = SledStore::open(&path).unwrap();
            assert_eq!(store.backend(), "sled");
            assert_eq!(
                store
                    .compare_and_swap("claim/1", None, Some(b"claimed".to_vec()))
                    .await
                    .unwrap(),
                Ok(())
            );
            store.put("other", b"x".to_vec()).await.unwrap();
            store.put("gone", b"y".to_vec()).await.unwrap();
            store.remove("gone").await.unwrap();
            assert!(store.flushes() >= 1);
        }
        let store = SledStore::open(&path).unwrap();
        assert_eq!(
            store.get("claim/1").await.unwrap().as_deref(),
            Some(&b"claimed"[..])
        );
        assert_eq!(
            store.get("other").await.unwrap().as_deref(),
            Some(&b"x"[..])
        );
        assert_eq!(store.get("gone").await.unwrap(), None);
    }

    #[tokio::test]
    async fn second_open_of_locked_path_is_unavailable() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        let _first = SledStore::open(&path).unwrap();
        match SledStore::open(&path) {
            Err(StoreError::Unavailable(msg)) => {
                assert!(msg.contains(&path.display().to_string()), "{msg}");
                assert!(msg.contains("another wop process"), "{msg}");
            }
            other => panic!("expected Unavailable, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn failed_cas_does_not_flush() {
        let dir = tempfile::tempdir().unwrap();
        let store = SledStore::open(&dir.path().join("db")).unwrap();
        store
            .compare_and_swap("k", None, Some(b"1".to_vec()))
            .await
            .unwrap()
            .unwrap();
        let before = store.flushes();
        assert_eq!(
            store
                .compare_and_swap("k", None, Some(b"2".to_vec()))
                .await
                .unwrap(),
            Err(Some(b"1".to_vec()))
        );
        assert_eq!(store.flushes(), before);
    }

    async fn concurrent_inserts(path: &Path, options: SledOptions, n: usize) -> u64 {
        let store = Arc::new(SledStore::open_with(path, options).unwrap());
        let barrier = Arc::new(tokio::sync::Barrier::new(n));
        let mut tasks = Vec::new();
        for i in 0..n {
            let store = store.clone();
            let barrier = barrier.clone();
            tasks.push(tokio::spawn(async move {
                barrier.wait().await;
                store
                    .compare_and_swap(&format!("k/{i:03}"), None, Some(i.to_string().into_bytes()))
                    .await
                    .unwrap()
                    .unwrap();
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        store.flushes()
    }

    async fn assert_all_present(path: &Path, n: usize) {
        let store = SledStore::open(path).unwrap();
        let all = store.scan_prefix("k/", usize::MAX).await.unwrap();
        assert_eq!(all.len(), n);
        for (i, (k, v)) in all.into_iter().enumerate() {
            assert_eq!(k, format!("k/{i:03}"));
            assert_eq!(v, i.to_string().into_bytes());
        }
    }

    // A current-thread runtime makes the count deterministic: every task
    // finishes its CAS and queues for the flush lock while the first flush
    // runs on sled's thread pool, so the rest share one further flush.
    #[tokio::test(flavor = "current_thread")]
    async fn group_commit_shares_flushes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        let flushes = concurrent_inserts(&path, SledOptions::default(), 64).await;
        assert!(flushes >= 1);
        assert!(
            flushes < 64,
            "group commit issued {flushes} flushes for 64 writes"
        );
        assert_all_present(&path, 64).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn without_group_commit_every_write_flushes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        let flushes = concurrent_inserts(
            &path,
            SledOptions {
                group_commit: false,
            },
            64,
        )
        .await;
        assert_eq!(flushes, 64);
        assert_all_present(&path, 64).await;
    }
}
