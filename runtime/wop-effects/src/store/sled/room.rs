//! The free space a sled store keeps on its disk (decision 0053).
//!
//! sled 0.34 does not recover from a write that fails for want of room:
//! after `ENOSPC` it refuses every later operation until the process
//! reopens it, and requests in flight at that moment were seen to stall
//! for 15 s to minutes. So the store never lets its own writes take the
//! disk that far: before a write that can grow the store it checks the
//! filesystem's free space (`statvfs`) against a reserve, and refuses with
//! [`StoreError::Full`] instead of writing. The refusal is not sticky: once
//! retention or the operator frees space, writes resume by themselves.
//!
//! Two tiers, so that work already admitted can finish:
//! - a write that **creates** a key (a new claim, run ledger, usage
//!   record) needs the reserve left after it;
//! - a write that **replaces** a value (a claim settled with its result, a
//!   ledger debited) needs half the reserve left after it;
//! - a **removal** is always allowed (it is how space comes back).
//!
//! `statvfs` is a system call, so the figure is cached: it is read again
//! after [`RECHECK`] or once the writes since the last reading add up to
//! an eighth of the reserve, and always before a refusal, so a refusal is
//! never based on a stale figure.

use super::super::{StoreError, StoreRoom};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The most free space the default reserve asks for.
pub const DEFAULT_RESERVE_MAX: u64 = 256 << 20;
/// The least free space the default reserve asks for: room for the largest
/// write the runtime makes (a recorded result of up to 1 MiB with its
/// request) several times over, plus sled's buffers.
pub const DEFAULT_RESERVE_MIN: u64 = 16 << 20;
/// How long a reading of the free space is trusted.
pub const RECHECK: Duration = Duration::from_millis(100);

/// What a write does to the store's size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Growth {
    /// Creates a key.
    New,
    /// Replaces the value of a key (or may; an unconditional put counts
    /// as [`Growth::New`]).
    Replace,
}

/// The reserve of one store and its cached reading of the free space.
#[derive(Debug)]
pub(crate) struct Room {
    dir: PathBuf,
    reserve: u64,
    seen: Mutex<Seen>,
    /// Writes refused since the store was opened.
    refused: AtomicU64,
}

#[derive(Debug)]
struct Seen {
    at: Instant,
    free: u64,
    /// Bytes written since `free` was read.
    since: u64,
}

/// Bytes available to this process on the filesystem holding `dir`, and
/// that filesystem's size.
fn stat(dir: &Path) -> Result<(u64, u64), StoreError> {
    let s = rustix::fs::statvfs(dir).map_err(|e| {
        StoreError::Io(format!(
            "cannot read the free space of the disk holding the effect store: {e}"
        ))
    })?;
    let unit = if s.f_frsize > 0 {
        s.f_frsize
    } else {
        s.f_bsize
    };
    Ok((
        s.f_bavail.saturating_mul(unit),
        s.f_blocks.saturating_mul(unit),
    ))
}

/// The default reserve on a filesystem of `size` bytes: a tenth of it,
/// within [`DEFAULT_RESERVE_MIN`]..=[`DEFAULT_RESERVE_MAX`].
pub fn default_reserve(size: u64) -> u64 {
    (size / 10).clamp(DEFAULT_RESERVE_MIN, DEFAULT_RESERVE_MAX)
}

impl Room {
    /// The room of the store in `dir`: `reserve` bytes kept free (`None`:
    /// [`default_reserve`] of its filesystem; `Some(0)`: no reserve).
    pub(crate) fn new(dir: &Path, reserve: Option<u64>) -> Result<Room, StoreError> {
        let (free, size) = stat(dir)?;
        Ok(Room {
            dir: dir.to_owned(),
            reserve: reserve.unwrap_or_else(|| default_reserve(size)),
            seen: Mutex::new(Seen {
                at: Instant::now(),
                free,
                since: 0,
            }),
            refused: AtomicU64::new(0),
        })
    }

    /// Counts a write refused for want of room.
    pub(crate) fn count_refusal(&self) {
        self.refused.fetch_add(1, Ordering::Relaxed);
    }

    /// The free space now (read afresh), the reserve and the refusals.
    pub(crate) fn now(&self) -> Result<StoreRoom, StoreError> {
        let (free, _) = stat(&self.dir)?;
        Ok(StoreRoom {
            free_bytes: free,
            reserve_bytes: self.reserve,
            refused_writes: self.refused.load(Ordering::Relaxed),
            share_refused_writes: 0,
        })
    }

    /// The bytes this store keeps free.
    pub(crate) fn reserve(&self) -> u64 {
        self.reserve
    }

    /// Whether a write of about `bytes` that does `growth` leaves enough
    /// free; counts it toward the next reading when it does.
    pub(crate) fn admit(&self, growth: Growth, bytes: u64) -> Result<(), StoreError> {
        if self.reserve == 0 {
            return Ok(());
        }
        let keep = match growth {
            Growth::New => self.reserve,
            Growth::Replace => self.reserve / 2,
        };
        // Every critical section leaves `Seen` consistent.
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        let stale = seen.at.elapsed() >= RECHECK || seen.since >= self.reserve / 8;
        let fits = |s: &Seen| s.free.saturating_sub(s.since).saturating_sub(bytes) >= keep;
        if stale || !fits(&seen) {
            let (free, _) = stat(&self.dir)?;
            *seen = Seen {
                at: Instant::now(),
                free,
                since: 0,
            };
        }
        if !fits(&seen) {
            return Err(StoreError::Full(format!(
                "the effect store's disk has {} free, and this write of {} would leave less \
                 than the {} kept free for the store (`diskReserveBytes`); nothing was \
                 written. Free space on that disk or let retention purge old records; writes \
                 resume by themselves",
                mib(seen.free),
                mib(bytes),
                mib(keep)
            )));
        }
        seen.since = seen.since.saturating_add(bytes);
        Ok(())
    }
}

/// `bytes` for messages: in MiB from 1 MiB, else in bytes.
fn mib(bytes: u64) -> String {
    if bytes < 1 << 20 {
        return format!("{bytes} bytes");
    }
    format!("{:.1} MiB", bytes as f64 / f64::from(1u32 << 20))
}
