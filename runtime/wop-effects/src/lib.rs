//! # wop-effects
//!
//! The durable state of `wop`, behind one small trait.
//!
//! ## Core concepts
//!
//! **Store** ([`store`]). A [`KvStore`] is a key-value store with
//! compare-and-swap and prefix/range scans. Backends: [`MemoryStore`]
//! (tests, ephemeral runs), [`SledStore`] (the embedded durable default)
//! and, with the default-on feature `postgres`, `PostgresStore` (many
//! executors sharing one database). [`store::open`] picks one from a
//! directory path or a `postgres://` URL. Every backend runs the same
//! conformance suite (`store::conformance::run_all`).
//!
//! **Effects** ([`effects`]). An effect's identity comes from a business key
//! or the activity recipe; the claim that guards it is an atomic
//! insert-if-absent, durable before the effect fires. A retried or
//! duplicated call replays the recorded outcome; an effect whose outcome is
//! unknown is never re-fired unless its tool is idempotent.
//!
//! **Meter** ([`meter`]). Run ledgers (budgets, updated with CAS so that
//! executors sharing a store share a budget), roll-up records per run and
//! per pack (exact, maintained on write), and capped, size-bounded
//! per-invocation usage records with retention ([`Meter::purge`]).
//! The budget math itself is pure (`wop_core::budget`).

pub mod effects;
pub mod keys;
pub mod meter;
pub mod store;

pub use effects::{EffectError, EffectRecord, EffectState, EffectSummary, EffectTimings, Effects};
pub use meter::{
    Meter, MeterError, MeterOptions, RunRollup, USAGE_ENTRIES_IN_MEMORY, UsageCommit, UsageScope,
};
pub use store::{KvStore, MemoryStore, SledOptions, SledStore, StoreError};
#[cfg(feature = "postgres")]
pub use store::{PostgresOptions, PostgresStore};
