//! Writing a flushed batch of deferred usage ([`UsageCommit::Deferred`]):
//! one roll-up write per key, not one per record.
//!
//! A batch holds up to `max_records` invocations, usually of a few runs
//! and packs. They are summed first — per run and pack, and per pack —
//! and each sum goes through the same grouped compare-and-swap as a
//! durable record's delta ([`Meter::submit_run`], [`Meter::submit_pack`]):
//! the roll-ups come out the same as recording the batch's records one by
//! one (counts and sums; costs are added in another order, as concurrent
//! recorders' already were). Of a run's invocations in the batch, the
//! run roll-up's write says how many keep their usage record (the first
//! of them in the batch, up to the run's cap); those records are written
//! alongside the roll-ups, as on the durable path, and any written past
//! what the roll-up kept are removed again.
//!
//! [`UsageCommit::Deferred`]: super::UsageCommit::Deferred

use super::deferred::Queued;
use super::recording::{RunDelta, pack_key, record_key};
use super::stored::pack_label;
use super::{Meter, MeterError};
use crate::keys;
use futures_util::StreamExt;
use std::collections::HashMap;
use std::collections::hash_map::Entry;
use wop_core::budget::Rollup;
use wop_core::model::Usage;

/// Writes of a batch in flight at a time: a write's future is kilobytes,
/// and a whole batch polled at once was one multi-megabyte allocation per
/// flush, mapped and page-faulted afresh each time (issue 31's faults per
/// call).
const FLUSH_CONCURRENCY: usize = 64;

/// One run's invocations of one pack in a batch.
struct RunGroup<'a> {
    /// The first of them (for the run's and the pack's identifiers).
    first: &'a Usage,
    run_key: String,
    delta: Rollup,
    at_ms: u64,
    /// Their places in the batch, in order.
    members: Vec<usize>,
    /// How many of `members` (from the first) get their record written
    /// with the roll-ups: as many as this process knows the run can keep.
    written: usize,
    /// How many the run's roll-up kept, once it is written.
    kept: Option<usize>,
    /// The run's group of its next pack in the batch, if any.
    next_of_run: Option<usize>,
    /// Another group of the batch writes the same run roll-up (the run's
    /// invocations of another pack): this process keeps the roll-up it
    /// writes, so that the other group's write, if it is not grouped
    /// with this one, starts from it.
    shares_key: bool,
}

/// One pack's (and version's) invocations in a batch.
struct PackGroup<'a> {
    first: &'a Usage,
    delta: Rollup,
}

/// One write of a batch.
enum Write {
    Run(usize),
    Pack(usize),
    /// The usage record of the batch's `n`th invocation.
    Record(usize),
}

/// A batch, summed per run and pack and per pack.
struct Sums<'a> {
    runs: Vec<RunGroup<'a>>,
    packs: Vec<PackGroup<'a>>,
}

impl<'a> Sums<'a> {
    fn of(batch: &'a [Queued], currency: &str) -> Self {
        let zero = || Rollup {
            currency: currency.to_owned(),
            ..Default::default()
        };
        let mut runs: Vec<RunGroup<'a>> = Vec::new();
        let mut packs: Vec<PackGroup<'a>> = Vec::new();
        // (tenant, run) → the run's first group; its other packs' groups
        // follow it through `next_of_run` (nearly always none, and at
        // most one per installed pack version: a caller chooses its runs,
        // not the packs).
        let mut run_at: HashMap<(&'a str, &'a str), usize> = HashMap::new();
        let mut pack_at: HashMap<(&'a str, &'a str), usize> = HashMap::new();
        for (i, q) in batch.iter().enumerate() {
            let u = &q.usage;
            let (pack, version) = (u.pack.as_str(), u.pack_version.as_str());
            let (tenant, run) = (u.tenant_id.as_str(), u.run_id.as_str());
            let group = |runs: &mut Vec<RunGroup<'a>>| {
                runs.push(RunGroup {
                    first: u,
                    run_key: keys::run_rollup(tenant, run),
                    delta: zero(),
                    at_ms: 0,
                    members: Vec::new(),
                    written: 0,
                    kept: None,
                    next_of_run: None,
                    shares_key: false,
                });
                runs.len() - 1
            };
            let r = match run_at.entry((tenant, run)) {
                Entry::Vacant(e) => *e.insert(group(&mut runs)),
                Entry::Occupied(e) => {
                    let first = *e.get();
                    let mut at = first;
                    loop {
                        let g = &runs[at];
                        if g.first.pack == pack && g.first.pack_version == version {
                            break at;
                        }
                        if let Some(next) = g.next_of_run {
                            at = next;
                            continue;
                        }
                        // The run's first invocation of another pack in
                        // the batch: all its groups share its roll-up.
                        let new = group(&mut runs);
                        runs[at].next_of_run = Some(new);
                        let mut k = Some(first);
                        while let Some(n) = k {
                            runs[n].shares_key = true;
                            k = runs[n].next_of_run;
                        }
                        break new;
                    }
                }
            };
            let g = &mut runs[r];
            g.delta.add(u);
            g.at_ms = g.at_ms.max(q.at_ms);
            g.members.push(i);
            let p = *pack_at.entry((pack, version)).or_insert_with(|| {
                packs.push(PackGroup {
                    first: u,
                    delta: zero(),
                });
                packs.len() - 1
            });
            packs[p].delta.add(u);
        }
        Sums { runs, packs }
    }
}

impl Meter {
    /// Writes `batch` (see the module docs); durable when this returns.
    /// Every write is tried; the first failure is returned.
    pub(super) async fn record_batch(&self, batch: &[Queued]) -> Result<(), MeterError> {
        let mut sums = Sums::of(batch, &self.prices.currency);
        let mut record_keys: Vec<Option<String>> = vec![None; batch.len()];
        let writes = self.plan(&mut sums, batch, &mut record_keys);
        let (kept, mut first) = self.write_all(&sums, batch, &record_keys, writes).await;
        for (r, k) in kept {
            sums.runs[r].kept = Some(usize::try_from(k).unwrap_or(usize::MAX));
        }
        // Records written past what the roll-up kept are removed; any it
        // kept beyond what was written (only if this process's idea of the
        // run was wrong: its roll-up was purged since) are written now.
        let mut fixes = Vec::new();
        for g in &sums.runs {
            let Some(kept) = g.kept else { continue };
            let kept = kept.min(g.members.len());
            for &m in &g.members[kept.min(g.written)..kept] {
                record_keys[m] = Some(new_record_key(&batch[m]));
                fixes.push((m, true));
            }
            fixes.extend(
                g.members[kept..g.written.max(kept)]
                    .iter()
                    .map(|&m| (m, false)),
            );
        }
        let keys = &record_keys;
        let mut fixing = futures_util::stream::iter(fixes)
            .map(|(m, put)| async move {
                match (&keys[m], put) {
                    (key, true) => self.put_record(key, &batch[m]).await,
                    (Some(key), false) => Ok(self.kv.remove(key).await?),
                    (None, false) => Ok(()),
                }
            })
            .buffer_unordered(FLUSH_CONCURRENCY);
        while let Some(r) = fixing.next().await {
            keep_first(&mut first, r);
        }
        drop(fixing);
        for g in &sums.runs {
            if let Some(kept) = g.kept {
                let kept = u64::try_from(kept.min(g.members.len())).unwrap_or(u64::MAX);
                keep_first(&mut first, self.note_stored(&g.run_key, kept).await);
            }
        }
        first
    }

    /// The writes of a batch: each run-and-pack sum, then as many of its
    /// records as this process knows the run can keep (their keys made in
    /// `record_keys`), and each pack sum.
    fn plan(
        &self,
        sums: &mut Sums<'_>,
        batch: &[Queued],
        record_keys: &mut [Option<String>],
    ) -> Vec<Write> {
        let mut writes = Vec::with_capacity(sums.runs.len() + sums.packs.len());
        for (r, g) in sums.runs.iter_mut().enumerate() {
            writes.push(Write::Run(r));
            let left = usize::try_from(self.records_left(&g.run_key)).unwrap_or(usize::MAX);
            g.written = g.members.len().min(left);
            for &m in &g.members[..g.written] {
                record_keys[m] = Some(new_record_key(&batch[m]));
                writes.push(Write::Record(m));
            }
        }
        writes.extend((0..sums.packs.len()).map(Write::Pack));
        writes
    }

    /// Runs `writes`, at most [`FLUSH_CONCURRENCY`] at a time, every one
    /// to its end; returns what each run roll-up's write kept (per run
    /// group) and the first failure.
    async fn write_all(
        &self,
        sums: &Sums<'_>,
        batch: &[Queued],
        record_keys: &[Option<String>],
        writes: Vec<Write>,
    ) -> (Vec<(usize, u64)>, Result<(), MeterError>) {
        let pack_keys: Vec<String> = sums
            .packs
            .iter()
            .map(|p| pack_key(&pack_label(p.first)))
            .collect();
        let pack_keys = &pack_keys;
        let mut done = futures_util::stream::iter(writes)
            .map(|w| async move {
                match w {
                    Write::Run(r) => {
                        let g = &sums.runs[r];
                        let delta = RunDelta {
                            label: pack_label(g.first),
                            rollup: g.delta.clone(),
                            at_ms: g.at_ms,
                            remember: g.shares_key,
                        };
                        let ids = (g.first.tenant_id.as_str(), g.first.run_id.as_str());
                        self.submit_run(&g.run_key, ids, delta)
                            .await
                            .map(|k| Some((r, k)))
                    }
                    Write::Pack(p) => {
                        let g = &sums.packs[p];
                        self.submit_pack(&pack_keys[p], g.first, g.delta.clone())
                            .await
                            .map(|()| None)
                    }
                    Write::Record(m) => self
                        .put_record(&record_keys[m], &batch[m])
                        .await
                        .map(|()| None),
                }
            })
            .buffer_unordered(FLUSH_CONCURRENCY);
        let (mut kept, mut first) = (Vec::new(), Ok(()));
        while let Some(r) = done.next().await {
            match r {
                Ok(k) => kept.extend(k),
                Err(e) => keep_first(&mut first, Err(e)),
            }
        }
        (kept, first)
    }

    /// Writes a queued invocation's (bounded) usage record at `key`.
    async fn put_record(&self, key: &Option<String>, q: &Queued) -> Result<(), MeterError> {
        let Some(key) = key else {
            return Ok(());
        };
        let stored = self.bounded(&q.usage, q.dropped).encode();
        Ok(self.kv.put(key, stored).await?)
    }
}

/// Keeps the first failure in `first`.
fn keep_first(first: &mut Result<(), MeterError>, r: Result<(), MeterError>) {
    if let Err(e) = r
        && first.is_ok()
    {
        *first = Err(e);
    }
}

/// A key for a queued invocation's usage record.
fn new_record_key(q: &Queued) -> String {
    record_key(&q.usage.tenant_id, &q.usage.run_id, q.at_ms)
}

#[cfg(test)]
mod tests;
