//! A test store: the in-memory one, counting its operations.

use crate::store::MemoryStore;
use crate::store::tap::{Op, Tap, Tapped};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// What [`Counting`] counts.
#[derive(Default)]
pub(super) struct Counts {
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

#[async_trait::async_trait]
impl Tap for Counts {
    async fn before(&self, op: Op<'_>) -> bool {
        match op {
            Op::Swap { deletes, .. } => {
                self.swaps.fetch_add(1, Ordering::Relaxed);
                if deletes {
                    let scans = self.scans.load(Ordering::Relaxed);
                    let first = &self.scans_before_first_delete;
                    let _ = first.compare_exchange(0, scans, Ordering::Relaxed, Ordering::Relaxed);
                }
            }
            Op::Get { .. } => {
                self.gets.fetch_add(1, Ordering::Relaxed);
            }
            Op::Put { .. } => {
                self.puts.fetch_add(1, Ordering::Relaxed);
            }
            Op::Remove { .. } => {
                self.removes.fetch_add(1, Ordering::Relaxed);
                return !self.ignore_removes.load(Ordering::Relaxed);
            }
            Op::ScanRange { .. } => {
                self.scans.fetch_add(1, Ordering::Relaxed);
            }
            Op::ScanPrefix { .. } | Op::PutThenInsert { .. } => {}
        }
        true
    }
}

/// A memory store that counts its writes (and its reads).
pub(super) type Counting = Tapped<Counts>;

impl Default for Counting {
    fn default() -> Self {
        Tapped {
            inner: Arc::new(MemoryStore::new()),
            tap: Counts::default(),
        }
    }
}

impl Counting {
    pub(super) fn counts(&self) -> (usize, usize, usize) {
        let c = &self.tap;
        (
            c.swaps.load(Ordering::Relaxed),
            c.puts.load(Ordering::Relaxed),
            c.removes.load(Ordering::Relaxed),
        )
    }
}
