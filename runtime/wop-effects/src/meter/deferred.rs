//! Usage of runs without a budget, committed off the invocation's path
//! ([`UsageCommit::Deferred`]).
//!
//! Nothing decides anything from an unbudgeted run's usage while it runs:
//! its roll-ups and records are reports. So when the operator chooses it,
//! [`Meter::record_with`] only queues them here and returns; a background
//! flush writes the queue (summed per key, then through the same grouped
//! roll-up writes as a durable record: `batch.rs`) at most `window` after
//! the first queued record, or at once when `max_records` are waiting
//! (that recorder waits for the write: the queue never grows past its
//! bound). Every read of usage
//! ([`Meter::usage`], [`Meter::run_rollup`], [`Meter::rollup`],
//! [`Meter::purge`]) and [`Meter::flush`] (drain) write the queue first,
//! so this process always reads its own records. A crash loses at most
//! the queue: usage records and roll-up counts of unbudgeted runs, never
//! an effect claim, a ledger or a budget debit (budgeted runs are always
//! recorded before the report returns).

use super::{Meter, MeterError};
use std::sync::Mutex;
use std::time::Duration;
use wop_core::model::Usage;

/// How the usage of a run without a budget is committed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UsageCommit {
    /// Durable before the invocation's report returns.
    Durable,
    /// Queued in this process and written within `window` or once
    /// `max_records` are queued, whichever comes first; written at
    /// [`Meter::flush`] (drain). A crash loses at most the queue.
    Deferred {
        /// Longest a queued record waits for its write.
        window: Duration,
        /// Most records queued; the recorder that reaches it writes them.
        max_records: usize,
    },
}

impl UsageCommit {
    /// The deferred commit with the bounds issue 35 names: 10 ms or 1,000
    /// records.
    pub const DEFERRED: UsageCommit = UsageCommit::Deferred {
        window: Duration::from_millis(10),
        max_records: 1000,
    };
}

/// The queue (shared by a meter's clones).
#[derive(Default)]
pub(super) struct Queue {
    /// Waiting records: the usage (its breakdown cut to what is stored)
    /// and when it was recorded.
    waiting: Mutex<Vec<Queued>>,
    /// Held while a flush writes, so that a reader's flush returns only
    /// after every record queued before it is stored.
    writing: tokio::sync::Mutex<()>,
    /// Timed flushes that failed, for the log.
    failures: Mutex<Failures>,
}

/// How often a failing timed flush is logged: the first failure, then at
/// most once per [`Failures::EVERY`] with the count since the last line.
/// A store refusing writes (a full disk) fails every batch window, up to
/// 100 times a second under load.
#[derive(Default)]
pub(super) struct Failures {
    /// When the last line was logged.
    logged: Option<std::time::Instant>,
    /// Failures since then, not logged.
    quiet: u64,
}

impl Failures {
    /// The least time between two lines.
    pub(super) const EVERY: Duration = Duration::from_secs(10);

    /// A failure at `now`: `Some(n)` if it is to be logged, `n` the
    /// failures not logged before it.
    pub(super) fn failed(&mut self, now: std::time::Instant) -> Option<u64> {
        match self.logged {
            Some(at) if now.duration_since(at) < Self::EVERY => {
                self.quiet += 1;
                None
            }
            _ => {
                self.logged = Some(now);
                Some(std::mem::take(&mut self.quiet))
            }
        }
    }
}

pub(super) struct Queued {
    pub(super) usage: Usage,
    /// Breakdown entries cut before queueing.
    pub(super) dropped: u64,
    pub(super) at_ms: u64,
}

impl Queue {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Queued>> {
        self.waiting.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Meter {
    /// Queues an unbudgeted invocation's usage (see the module docs), or
    /// returns it when this meter commits usage durably or no tokio
    /// runtime can run the timed flush.
    pub(super) async fn defer(&self, usage: &Usage, at_ms: u64) -> Result<bool, MeterError> {
        let UsageCommit::Deferred {
            window,
            max_records,
        } = self.options.usage_commit
        else {
            return Ok(false);
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return Ok(false);
        };
        // Only what the stored record keeps of the breakdown (its one
        // list that grows with the invocation's host calls), so the queue
        // stays bounded whatever the invocations did.
        let mut kept = usage.clone();
        let cut = kept
            .host_call_breakdown
            .len()
            .saturating_sub(self.options.breakdown_entries);
        kept.host_call_breakdown
            .truncate(self.options.breakdown_entries);
        let queued = {
            let mut q = self.queue.lock();
            q.push(Queued {
                usage: kept,
                dropped: cut as u64,
                at_ms,
            });
            q.len()
        };
        if queued >= max_records.max(1) {
            self.flush().await?;
        } else if queued == 1 {
            let meter = self.clone();
            runtime.spawn(async move {
                tokio::time::sleep(window).await;
                if let Err(e) = meter.flush().await {
                    let mut f = meter
                        .queue
                        .failures
                        .lock()
                        .unwrap_or_else(|p| p.into_inner());
                    if let Some(quiet) = f.failed(std::time::Instant::now()) {
                        tracing::error!(
                            error = %e,
                            failures_not_logged = quiet,
                            "cannot persist deferred usage (logged at most every 10 s)"
                        );
                    }
                }
            });
        }
        Ok(true)
    }

    /// Writes every queued usage record and roll-up (see
    /// [`UsageCommit::Deferred`]); returns when they are stored. Call it
    /// at drain. With durable usage, or nothing queued, it returns at
    /// once. The first failure is returned after every record was tried.
    ///
    /// The writing runs in a task of its own: a caller that stops waiting
    /// (an invocation or a usage read whose request was cancelled) never
    /// leaves a taken batch half-written.
    pub async fn flush(&self) -> Result<(), MeterError> {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return self.flush_here().await;
        };
        let meter = self.clone();
        runtime
            .spawn(async move { meter.flush_here().await })
            .await
            .map_err(|e| MeterError::Batch(format!("a deferred usage write failed: {e}")))?
    }

    /// [`Meter::flush`]'s work, on the caller's task.
    async fn flush_here(&self) -> Result<(), MeterError> {
        // Taken even when nothing is queued: a flush in progress may hold
        // records this caller must be able to read when it returns.
        let _writing = self.queue.writing.lock().await;
        let batch = std::mem::take(&mut *self.queue.lock());
        if batch.is_empty() {
            return Ok(());
        }
        self.record_batch(&batch).await
    }
}

#[cfg(test)]
mod tests;
