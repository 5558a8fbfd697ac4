//! Recording a finished invocation: ledger, roll-ups and kept usage records.

use super::combine::Combiner;
use super::stored::{PackShard, Record, RunRollup, StoredUsage, add_rollup, cut, pack_label};
use super::{Meter, MeterError, PACK_SHARDS};
use crate::keys;
use crate::store::KvStore;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use wop_core::budget::*;
use wop_core::events::Event;
use wop_core::model::Usage;

/// This process's id, read once: `std::process::id()` is a `getpid`
/// system call each time, and recording an invocation needs it twice
/// (issue 35). The process never forks without exec'ing.
fn process_id() -> u32 {
    static PID: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    *PID.get_or_init(std::process::id)
}

/// The key of this process's shard of the pack roll-up of `label`
/// (`pack@version`).
pub(super) fn pack_key(label: &str) -> String {
    format!(
        "rollup/pack/{}/{}",
        keys::part(label),
        u64::from(process_id()) % PACK_SHARDS
    )
}

/// A new usage record's key: the run's usage prefix, then when it was
/// recorded, this process and a sequence number (unique in the process).
pub(super) fn record_key(tenant: &str, run: &str, now: u64) -> String {
    static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let seq = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!(
        "{}{now:013}-{}-{seq}",
        keys::usage_prefix(tenant, Some(run)),
        process_id(),
    )
}

/// Rounds of a roll-up compare-and-swap before giving up (each lost round
/// means another recorder's update went in).
const MAX_ROLLUP_ROUNDS: usize = 4096;

impl Meter {
    /// Records a finished invocation: when the run has a budget, adds its
    /// fuel and cost to the run's ledger; adds it to the run's and the
    /// pack's roll-ups; and keeps its (bounded) usage record if the run is
    /// under its cap. Returns the budget events.
    pub async fn record(&self, usage: &Usage, node_id: &str) -> Result<Vec<Event>, MeterError> {
        self.record_with(usage, node_id, None).await
    }

    /// [`record`](Self::record), told whether the run has a budget when
    /// the caller already knows (it opened the run's ledger to admit the
    /// invocation, and a run's budget never changes after its first
    /// invocation): the ledger is then read only for a run that has one.
    pub async fn record_with(
        &self,
        usage: &Usage,
        node_id: &str,
        has_budget: Option<bool>,
    ) -> Result<Vec<Event>, MeterError> {
        let (tenant, run) = (usage.tenant_id.as_str(), usage.run_id.as_str());
        let has_budget = match has_budget {
            Some(known) => known,
            None => self
                .ledger(tenant, run)
                .await?
                .is_some_and(|l| !l.budget.is_empty()),
        };
        let mut events = Vec::new();
        if has_budget {
            let (_, (), ev) = self
                .update(tenant, run, &RunBudget::default(), |l, out| {
                    l.invocations += 1;
                    l.consumed.fuel += usage.fuel_consumed;
                    l.consumed.cost_usd += usage.cost - self.prices.tool_call_total(usage);
                    out.push(l.consumed_event());
                    l.cross_thresholds(out);
                    for d in [Dimension::Fuel, Dimension::Cost] {
                        // Fuel stops exactly at the budget; cost can overshoot.
                        let over = |used: f64, limit: f64| match d {
                            Dimension::Fuel => used >= limit,
                            _ => used > limit,
                        };
                        if let Some(limit) = l.limit(d)
                            && over(l.used(d), limit)
                            && l.exhausted.is_none()
                        {
                            let used = l.used(d);
                            l.exhaust(d, used, node_id, out);
                            // The cap.breached for an after-the-fact overrun is
                            // reported by the invocation that is refused next.
                            out.pop();
                        }
                    }
                })
                .await?;
            events = ev;
        }
        let now = wop_core::time::now_ms();
        if !has_budget && self.defer(usage, now).await? {
            return Ok(events);
        }
        self.record_now(usage, 0, now).await?;
        Ok(events)
    }

    /// Writes an invocation's roll-ups and (under the run's cap) its usage
    /// record, as of `now`; durable when this returns. `dropped`: entries
    /// of the host-call breakdown already cut from `usage` (counted in the
    /// stored record like those cut here).
    pub(super) async fn record_now(
        &self,
        usage: &Usage,
        dropped: u64,
        now: u64,
    ) -> Result<(), MeterError> {
        let (tenant, run) = (usage.tenant_id.as_str(), usage.run_id.as_str());
        let label = pack_label(usage);
        let mut delta = Rollup {
            currency: self.prices.currency.clone(),
            ..Default::default()
        };
        delta.add(usage);
        // The run's roll-up (which decides whether this invocation's record
        // is kept) and this process's shard of the pack's roll-up, written
        // together; each grouped with concurrent recorders of the same key.
        let run_key = keys::run_rollup(tenant, run);
        let pack_key = pack_key(&label);
        let run_write = self.submit_run(
            &run_key,
            (tenant, run),
            RunDelta {
                label,
                rollup: delta.clone(),
                at_ms: now,
                remember: true,
            },
        );
        let pack_write = self.submit_pack(&pack_key, usage, delta);
        // The invocation's own record is written alongside the roll-ups, so
        // that one flush makes all three durable (the store's group commit):
        // written after them, it waited for a flush of its own. Whether it
        // is kept is known once the run's roll-up is written: a run this
        // process last wrote at its cap skips it, and a record written past
        // the cap (other processes' invocations reached it first) is
        // removed again (and one kept that was skipped, written after).
        // All three run to completion (`join!`, not `try_join!`): none is
        // abandoned half-way when another fails.
        let write_record = self.records_left(&run_key) > 0;
        let written_key = write_record.then(|| record_key(tenant, run, now));
        let record_write = async {
            if let Some(key) = &written_key {
                self.kv
                    .put(key, self.bounded(usage, dropped).encode())
                    .await?;
            }
            Ok::<(), MeterError>(())
        };
        let (kept, pack, record) = tokio::join!(run_write, pack_write, record_write);
        let (kept, (), ()) = (kept?, pack?, record?);
        match written_key {
            Some(key) if kept == 0 => self.kv.remove(&key).await?,
            // Kept though this process thought the run full: its run
            // roll-up was purged since this process last wrote it.
            None if kept > 0 => {
                let key = record_key(tenant, run, now);
                self.kv
                    .put(&key, self.bounded(usage, dropped).encode())
                    .await?;
            }
            _ => {}
        }
        self.note_stored(&run_key, kept.min(1)).await
    }

    /// Adds `delta` to the run roll-up `run_key` (of `ids`: tenant, run),
    /// grouped with this process's concurrent writers of the same key;
    /// returns how many of the delta's invocations keep their usage
    /// record (the first of them, up to the run's cap).
    pub(super) async fn submit_run(
        &self,
        run_key: &str,
        (tenant, run): (&str, &str),
        delta: RunDelta,
    ) -> Result<u64, MeterError> {
        self.rollups
            .run
            .submit(run_key, delta, |batch| {
                let (kv, rollups) = (self.kv.clone(), self.rollups.clone());
                let key = run_key.to_owned();
                let ids = (tenant.to_owned(), run.to_owned());
                let cap = self.options.usage_records_per_run;
                async move { write_run(kv, &rollups.run_last, &key, ids, cap, batch).await }
            })
            .await
    }

    /// Adds `delta` to this process's shard `pack_key` of the pack
    /// roll-up of `of`'s pack and version, grouped like
    /// [`submit_run`](Self::submit_run).
    pub(super) async fn submit_pack(
        &self,
        pack_key: &str,
        of: &Usage,
        delta: Rollup,
    ) -> Result<(), MeterError> {
        self.rollups
            .pack
            .submit(pack_key, delta, |batch| {
                let (kv, rollups, key) =
                    (self.kv.clone(), self.rollups.clone(), pack_key.to_owned());
                let (pack, version) = (of.pack.clone(), of.pack_version.clone());
                async move { write_pack(kv, &rollups.pack_last, &key, pack, version, batch).await }
            })
            .await
    }

    /// At most how many more usage records the run roll-up `run_key` can
    /// keep, as far as this process knows: the cap less what it last
    /// wrote there (counts only grow, so the truth is never more).
    pub(super) fn records_left(&self, run_key: &str) -> u64 {
        self.rollups
            .run_last
            .records_left(run_key, self.options.usage_records_per_run)
    }

    /// The copy of `u` that is stored: identifiers cut, breakdown and
    /// per-tool counts capped (`dropped` breakdown entries were cut
    /// before).
    pub(super) fn bounded(&self, u: &Usage, dropped: u64) -> StoredUsage {
        let o = &self.options;
        let max = o.identifier_bytes;
        let id = |k: &String| {
            let mut k = k.clone();
            cut(&mut k, max);
            k
        };
        // Cut in place, and the maps rebuilt only when one of their keys
        // (or their number) is over its bound: a usual record is one clone.
        let mut v = u.clone();
        for s in [
            &mut v.pack,
            &mut v.pack_version,
            &mut v.type_id,
            &mut v.tenant_id,
            &mut v.run_id,
            &mut v.node_id,
            &mut v.currency,
        ] {
            cut(s, max);
        }
        if u.host_calls.keys().any(|k| k.len() > max) {
            v.host_calls = u.host_calls.iter().map(|(k, n)| (id(k), *n)).collect();
        }
        if u.tool_calls_by_id.len() > o.tool_ids || u.tool_calls_by_id.keys().any(|k| k.len() > max)
        {
            let mut tools = BTreeMap::new();
            let mut other = 0;
            for (i, (k, n)) in u.tool_calls_by_id.iter().enumerate() {
                if i < o.tool_ids {
                    *tools.entry(id(k)).or_insert(0) += n;
                } else {
                    other += n;
                }
            }
            if other > 0 {
                *tools.entry("(other)".to_owned()).or_insert(0) += other;
            }
            v.tool_calls_by_id = tools;
        }
        let dropped = dropped
            + u.host_call_breakdown
                .len()
                .saturating_sub(o.breakdown_entries) as u64;
        v.host_call_breakdown.truncate(o.breakdown_entries);
        for r in &mut v.host_call_breakdown {
            cut(&mut r.interface, max);
            if let Some(t) = &mut r.target {
                cut(t, max.min(64));
            }
        }
        StoredUsage {
            usage: v,
            host_call_breakdown_dropped: dropped,
        }
    }
}

/// The roll-up records' group commits (see `combine.rs`), and what this
/// process last wrote to each.
#[derive(Default)]
pub(super) struct Rollups {
    /// `rollup/run/<run>`: output = how many of the delta's invocations
    /// keep their usage record.
    run: Combiner<RunDelta, u64>,
    /// `rollup/pack/<pack@version>/<shard>`.
    pack: Combiner<Rollup, ()>,
    /// The run roll-ups this process wrote last (see [`LastWritten`]).
    pub(super) run_last: LastWritten<RunRollup>,
    /// The pack roll-up shards this process wrote last.
    pack_last: LastWritten<PackShard>,
    /// The runs this process stored usage for, when their entries are
    /// bounded (`forget.rs`).
    pub(super) recent: super::forget::Recent,
}

/// Keys this process wrote last, with the bytes it wrote and their
/// decoded value. The next update of such a key starts from them instead
/// of reading and decoding the record: its compare-and-swap expects
/// exactly those bytes, so a record another writer changed meanwhile
/// fails the swap and is read and decoded as usual. A key it created is
/// kept only when the writer asks ([`cas_update`]'s `remember_new`).
/// Bounded: emptied when it holds [`LAST_WRITTEN_KEYS`] keys.
pub(super) struct LastWritten<T>(Mutex<HashMap<String, (Vec<u8>, T)>>);

impl<T> Default for LastWritten<T> {
    fn default() -> Self {
        Self(Mutex::new(HashMap::new()))
    }
}

impl LastWritten<RunRollup> {
    /// `cap` less the invocations this process last wrote to the run
    /// roll-up `key` (`cap` when it has not written it): the run's next
    /// invocations past that many are surely past the cap (counts only
    /// grow), so their usage records are not kept.
    fn records_left(&self, key: &str, cap: u64) -> u64 {
        self.0
            .lock()
            .ok()
            .and_then(|m| m.get(key).map(|(_, r)| cap.saturating_sub(r.invocations())))
            .unwrap_or(cap)
    }
}

/// The most keys a [`LastWritten`] holds.
const LAST_WRITTEN_KEYS: usize = 1024;

impl<T> LastWritten<T> {
    fn take(&self, key: &str) -> Option<(Vec<u8>, T)> {
        self.0.lock().ok()?.remove(key)
    }

    /// Whether it holds `key`.
    #[cfg(test)]
    pub(super) fn holds(&self, key: &str) -> bool {
        self.0.lock().is_ok_and(|m| m.contains_key(key))
    }

    /// Drops what this process knew of `key` (its record was deleted).
    pub(super) fn forget(&self, key: &str) {
        drop(self.take(key));
    }

    fn put(&self, key: &str, bytes: Vec<u8>, value: T) {
        if let Ok(mut m) = self.0.lock() {
            if m.len() >= LAST_WRITTEN_KEYS {
                m.clear();
            }
            m.insert(key.to_owned(), (bytes, value));
        }
    }
}

/// Invocations of one pack's contribution to their run's roll-up (one
/// invocation's on the durable path, a flushed batch's on the deferred
/// one: `rollup.invocations` of them).
pub(super) struct RunDelta {
    pub(super) label: String,
    pub(super) rollup: Rollup,
    /// When the last of them was recorded.
    pub(super) at_ms: u64,
    /// Whether this process keeps the roll-up it writes ([`LastWritten`])
    /// even when it creates it. The durable path does: a run's next
    /// invocation then swaps at once, within the same group commit as its
    /// record. A flushed batch does not for a run it writes once (see
    /// [`cas_update`]).
    pub(super) remember: bool,
}

/// Folds `batch` (in order) into the run's roll-up; for each delta, how
/// many of its invocations keep their usage record (the run's first `cap`
/// invocations do).
async fn write_run(
    kv: Arc<dyn KvStore>,
    last: &LastWritten<RunRollup>,
    key: &str,
    (tenant, run): (String, String),
    cap: u64,
    batch: Vec<RunDelta>,
) -> Result<Vec<u64>, MeterError> {
    let mut keep = Vec::with_capacity(batch.len());
    let remember = batch.iter().any(|d| d.remember);
    cas_update::<RunRollup>(&*kv, last, key, remember, |r| {
        let mut r = r.unwrap_or_else(|| RunRollup {
            tenant_id: tenant.clone(),
            run_id: run.clone(),
            ..Default::default()
        });
        keep.clear();
        for d in &batch {
            let before = r.invocations();
            add_rollup(r.by_pack.entry(d.label.clone()).or_default(), &d.rollup);
            let n = d.rollup.invocations;
            r.records_kept = r
                .records_kept
                .saturating_add(n)
                .min(cap.max(r.records_kept));
            r.last_at_ms = r.last_at_ms.max(d.at_ms);
            keep.push(n.min(cap.saturating_sub(before)));
        }
        r
    })
    .await?;
    Ok(keep)
}

/// Folds `batch` into one shard of the pack's roll-up.
async fn write_pack(
    kv: Arc<dyn KvStore>,
    last: &LastWritten<PackShard>,
    key: &str,
    pack: String,
    pack_version: String,
    batch: Vec<Rollup>,
) -> Result<Vec<()>, MeterError> {
    cas_update::<PackShard>(&*kv, last, key, true, |p| {
        let mut p = p.unwrap_or_else(|| PackShard {
            pack: pack.clone(),
            pack_version: pack_version.clone(),
            rollup: Rollup::default(),
        });
        for d in &batch {
            add_rollup(&mut p.rollup, d);
        }
        p
    })
    .await?;
    Ok(vec![(); batch.len()])
}

/// Read-modify-write of one JSON record with compare-and-swap, starting
/// from what this process wrote last when it has it (`last`). Otherwise,
/// on a store whose failed swap reads for free
/// ([`KvStore::failed_swap_reads_free`]), from no record at all: a key
/// this process has not written is usually new (a run's first
/// invocation, in `wop serve` every request's run), and when it is not,
/// the failed swap returns what is stored, as the read would have.
///
/// A record this creates is remembered only with `remember_new`. Without
/// it (a flushed batch's run written once in it), neither the record nor
/// a copy of its bytes is kept: in `wop serve` nearly every such run is an
/// anonymous request's, never written again, and the 1,024 kept were
/// dropped together when the map filled. A run that is written again
/// takes one failed swap (or read) more, once, and is remembered from
/// then on.
async fn cas_update<T: Record>(
    kv: &dyn KvStore,
    last: &LastWritten<T>,
    key: &str,
    remember_new: bool,
    mut f: impl FnMut(Option<T>) -> T,
) -> Result<(), MeterError> {
    let (mut cur, mut known) = match last.take(key) {
        Some((bytes, value)) => (Some(bytes), Some(value)),
        None if kv.failed_swap_reads_free() => (None, None),
        None => (kv.get(key).await?, None),
    };
    for _ in 0..MAX_ROLLUP_ROUNDS {
        let old = match (&cur, known.take()) {
            (Some(_), Some(value)) => Some(value),
            (Some(b), None) => {
                Some(T::decode(b).ok_or_else(|| MeterError::Corrupt(key.to_owned()))?)
            }
            (None, _) => None,
        };
        let next = f(old);
        let bytes = next.encode();
        let (sent, kept) = match cur.is_some() || remember_new {
            true => (bytes.clone(), Some(bytes)),
            false => (bytes, None),
        };
        match kv.compare_and_swap(key, cur.as_deref(), Some(sent)).await? {
            Ok(()) => {
                if let Some(bytes) = kept {
                    last.put(key, bytes, next);
                }
                return Ok(());
            }
            Err(actual) => {
                cur = actual;
                tokio::task::yield_now().await;
            }
        }
    }
    Err(MeterError::Contended(key.to_owned()))
}
