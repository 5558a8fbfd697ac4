//! The meter: persisted run ledgers and usage records, with roll-ups per
//! run and per pack.
//!
//! Everything persists in the same [`KvStore`] as effect claims. The math
//! lives in `wop_core::budget`.
//!
//! Every per-run record is keyed by the run's tenant and id
//! ([`crate::keys`]): two tenants' runs of one id share nothing.
//!
//! - `ledger/<tenant>/<run>`: a run's budget and what it consumed, updated
//!   with compare-and-swap, so several executors sharing a store share a
//!   budget.
//! - `rollup/run/<tenant>/<run>`: the run's roll-up, per pack
//!   ([`RunRollup`]), updated with compare-and-swap by every
//!   [`Meter::record`]; exact.
//! - `rollup/pack/<pack@version>/<shard>`: the pack's all-time roll-up,
//!   split over [`PACK_SHARDS`] records (a process picks one by its id) so
//!   that executors sharing a store rarely contend; exact (the sum of the
//!   shards).
//!
//! Concurrent recorders of one roll-up record in one process share one
//! compare-and-swap (group commit, `combine.rs`); each returns only once
//! the write carrying its invocation is stored.
//! - `usage/<tenant>/<run>/<ms>-<pid>-<seq>`: one invocation's
//!   [`Usage`](wop_core::model::Usage), kept only for the first
//!   [`MeterOptions::usage_records_per_run`] invocations of a run and
//!   bounded in size (long identifiers cut, the per-host-call breakdown and
//!   per-tool counts capped; the stored JSON then carries
//!   `hostCallBreakdownDropped`). [`Meter::purge`] deletes them (and the
//!   roll-ups of runs idle) past a retention.
//!
//! `<tenant>`, `<run>` and `<pack@version>` in keys are escaped (`%` →
//! `%25`, `/` → `%2F`) and, past 96 bytes, cut and suffixed with a digest,
//! so that a prefix scan of one run never reaches another's records. Roll-ups are
//! computed from roll-up records only, never by reading usage records.

use crate::store::{KvStore, StoreError};
use std::sync::Arc;
use wop_core::budget::*;

mod batch;
mod combine;
mod compact;
#[cfg(test)]
mod counting_store;
mod deferred;
mod forget;
mod ledger;
mod queries;
mod recording;
mod stored;

pub use deferred::UsageCommit;
pub use queries::{MAX_ROLLUP_PAGE, RollupPage, UsageScope};
pub use stored::RunRollup;

/// Errors of the meter.
#[derive(Debug, thiserror::Error)]
pub enum MeterError {
    /// The backend failed.
    #[error("usage store: {0}")]
    Store(#[from] StoreError),
    /// A record could not be decoded.
    #[error("usage store holds a corrupt record at {0}")]
    Corrupt(String),
    /// Contention did not settle.
    #[error("the ledger of run {0} is changing too fast; retry")]
    Contended(String),
    /// The grouped roll-up write that carried this invocation failed.
    #[error("usage roll-up: {0}")]
    Batch(String),
}

impl MeterError {
    /// Whether the store refused a write for want of room
    /// ([`StoreError::Full`]).
    pub fn is_store_full(&self) -> bool {
        matches!(self, MeterError::Store(e) if e.is_full())
    }
}

/// How many records a pack's roll-up is split over.
pub const PACK_SHARDS: u64 = 8;

/// Bounds on what the meter keeps (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MeterOptions {
    /// Per-invocation usage records kept per run: the first this many
    /// invocations of a run are kept; later ones count in the roll-ups
    /// only. Default 1000.
    pub usage_records_per_run: u64,
    /// Host-call breakdown entries kept in a stored usage record (their
    /// `target`s cut to 64 bytes). Default 8.
    pub breakdown_entries: usize,
    /// Per-tool call counts kept in a stored usage record (the rest are
    /// summed under `"(other)"`). Default 32.
    pub tool_ids: usize,
    /// Identifiers (pack, node, run, tool ids, ...) in a stored usage record
    /// are cut to this many bytes. Default 128.
    pub identifier_bytes: usize,
    /// How the usage of a run without a budget is committed. Default
    /// [`UsageCommit::Durable`].
    pub usage_commit: UsageCommit,
    /// For a store only this process uses and nothing purges (the
    /// in-memory one): the most usage records and run roll-ups it keeps.
    /// Past it, runs are forgotten — the least recently recorded of the
    /// tenant holding the most entries (fair shares between tenants) —
    /// their roll-up and usage records deleted, never a ledger or an
    /// effect claim; never less than one full run, never the run being
    /// recorded. Default `None` (unbounded:
    /// a durable store's retention is [`Meter::purge`]); the runtime sets
    /// [`USAGE_ENTRIES_IN_MEMORY`] on its default in-memory store.
    pub usage_entries: Option<u64>,
}

/// The bound the runtime puts on its default in-memory store's usage
/// ([`MeterOptions::usage_entries`]): about 50 MiB of records.
pub const USAGE_ENTRIES_IN_MEMORY: u64 = 100_000;

impl Default for MeterOptions {
    fn default() -> Self {
        Self {
            usage_records_per_run: 1000,
            breakdown_entries: 8,
            tool_ids: 32,
            identifier_bytes: 128,
            usage_commit: UsageCommit::Durable,
            usage_entries: None,
        }
    }
}

/// The meter: ledgers and usage records in a [`KvStore`].
#[derive(Clone)]
pub struct Meter {
    kv: Arc<dyn KvStore>,
    prices: Prices,
    options: MeterOptions,
    /// Group commit of the roll-up records, shared by this meter's clones.
    rollups: Arc<recording::Rollups>,
    /// Usage of unbudgeted runs waiting for its write
    /// ([`UsageCommit::Deferred`]), shared by this meter's clones.
    queue: Arc<deferred::Queue>,
}

impl Meter {
    /// A meter on `kv` with `prices` and default [`MeterOptions`].
    pub fn new(kv: Arc<dyn KvStore>, prices: Prices) -> Self {
        Self::with_options(kv, prices, MeterOptions::default())
    }

    /// A meter on `kv` with `prices` and `options`.
    pub fn with_options(kv: Arc<dyn KvStore>, prices: Prices, options: MeterOptions) -> Self {
        Self {
            kv,
            prices,
            options,
            rollups: Arc::default(),
            queue: Arc::default(),
        }
    }

    /// The bounds in force.
    pub fn options(&self) -> &MeterOptions {
        &self.options
    }

    /// The price table.
    pub fn prices(&self) -> &Prices {
        &self.prices
    }
}

#[cfg(test)]
mod tests;
