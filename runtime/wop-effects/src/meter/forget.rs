//! The bound on what usage a process-local store holds
//! ([`MeterOptions::usage_entries`](super::MeterOptions::usage_entries)).
//!
//! On the in-memory store every invocation of a new run adds a run
//! roll-up and a usage record, and nothing else ever removes them:
//! `wop serve --memory-store` under load grew by about 1 KiB per request
//! without end (250,000 requests: +270 MiB; decision 0043). With a bound,
//! this meter counts the usage records and run roll-ups it stored, per
//! tenant and run, and once they are over the bound forgets runs — their
//! roll-up and usage records are deleted, as [`Meter::purge`] deletes an
//! idle run's — until they are under it again. Ledgers (budgets) and
//! effect claims are never touched; the packs' all-time roll-ups stay
//! exact.
//!
//! **Which runs go** (decision 0045): the least recently recorded run of
//! the tenant holding the most entries. A tenant that floods the service
//! with new runs forgets its own runs first; another tenant's usage goes
//! only once the flooding tenant holds no more than it (max-min fair
//! shares: every active tenant keeps at least the bound divided by the
//! number of tenants, and a quiet tenant loses nothing while it holds
//! less). The run being recorded is never the one forgotten.

use super::{Meter, MeterError};
use std::collections::hash_map::Entry;
use std::collections::{BTreeSet, HashMap, VecDeque};
use std::sync::{Arc, Mutex};

/// Runs this meter stored usage for, per tenant, least recently recorded
/// first.
#[derive(Default)]
pub(super) struct Recent(Mutex<Runs>);

#[derive(Default)]
struct Runs {
    /// Tenant key segment → its runs.
    tenants: HashMap<Arc<str>, Tenant>,
    /// (entries, tenant) of every tenant in `tenants`: the largest last.
    sizes: BTreeSet<(u64, Arc<str>)>,
    /// Σ entries of every tenant.
    entries: u64,
    /// Σ runs of every tenant.
    runs: usize,
    /// Σ queue entries of every tenant (live and stale).
    queued: usize,
    stamp: u64,
}

struct Tenant {
    name: Arc<str>,
    /// Run roll-up key → (its stored entries: the roll-up and its usage
    /// records, stamp of its last recording).
    runs: HashMap<Arc<str>, (u64, u64)>,
    /// (run roll-up key, stamp), oldest first; an entry whose stamp is not
    /// its run's current one is stale and skipped.
    order: VecDeque<(Arc<str>, u64)>,
    /// Σ entries of its runs.
    entries: u64,
}

impl Tenant {
    /// Whether it has a run to forget other than `keep`.
    fn has_other_than(&self, keep: &str) -> bool {
        self.runs.len() > 1 || (self.runs.len() == 1 && !self.runs.contains_key(keep))
    }

    /// Drops its stale queue entries; returns how many.
    fn compact(&mut self) -> usize {
        let before = self.order.len();
        let runs = &self.runs;
        self.order
            .retain(|(k, s)| runs.get(k).is_some_and(|(_, cur)| cur == s));
        before - self.order.len()
    }
}

/// The tenant segment of a run roll-up key (`rollup/run/<tenant>/<run>`,
/// each segment escaped so it holds no `/`); a key of any other shape is
/// its own tenant.
fn tenant_of(run_key: &str) -> &str {
    run_key
        .strip_prefix("rollup/run/")
        .and_then(|s| s.split_once('/'))
        .map_or(run_key, |(tenant, _)| tenant)
}

impl Runs {
    /// `records` more usage records of the run `key` were stored (and its
    /// roll-up, if the run is new here).
    fn note(&mut self, key: &str, records: u64) {
        self.stamp += 1;
        let stamp = self.stamp;
        let name = tenant_of(key);
        if !self.tenants.contains_key(name) {
            let name: Arc<str> = Arc::from(name);
            self.sizes.insert((0, name.clone()));
            let tenant = Tenant {
                name: name.clone(),
                runs: HashMap::new(),
                order: VecDeque::new(),
                entries: 0,
            };
            self.tenants.insert(name, tenant);
        }
        let Some(t) = self.tenants.get_mut(name) else {
            return;
        };
        // One allocation and one lookup: the queue's copy of the key is
        // the one the lookup was made with.
        let k: Arc<str> = Arc::from(key);
        let added = match t.runs.entry(k.clone()) {
            Entry::Occupied(mut e) => {
                let (n, s) = e.get_mut();
                *n += records;
                *s = stamp;
                records
            }
            Entry::Vacant(e) => {
                e.insert((1 + records, stamp));
                self.runs += 1;
                1 + records
            }
        };
        if added > 0 {
            self.sizes.remove(&(t.entries, t.name.clone()));
            t.entries += added;
            self.sizes.insert((t.entries, t.name.clone()));
        }
        self.entries += added;
        t.order.push_back((k, stamp));
        self.queued += 1;
        if self.queued > 2 * self.runs + 1024 {
            for t in self.tenants.values_mut() {
                self.queued -= t.compact();
            }
        }
    }

    /// Takes runs out until the rest hold at most `max` entries — each
    /// time the least recently recorded run of the tenant holding the
    /// most entries, never `keep` — and returns their roll-up keys.
    fn over(&mut self, max: u64, keep: &str) -> Vec<Arc<str>> {
        let mut out = Vec::new();
        while self.entries > max {
            let Some(name) = self
                .sizes
                .iter()
                .rev()
                .find(|(_, n)| self.tenants.get(n).is_some_and(|t| t.has_other_than(keep)))
                .map(|(_, n)| n.clone())
            else {
                break;
            };
            let Some(t) = self.tenants.get_mut(&name) else {
                break;
            };
            let Some(n) = forget_oldest(t, keep) else {
                break;
            };
            self.queued = self.queued.saturating_sub(n.queue_popped);
            self.runs -= 1;
            self.entries = self.entries.saturating_sub(n.entries);
            self.sizes.remove(&(t.entries, name.clone()));
            t.entries = t.entries.saturating_sub(n.entries);
            if t.runs.is_empty() {
                self.queued = self.queued.saturating_sub(t.order.len());
                self.tenants.remove(&name);
            } else {
                self.sizes.insert((t.entries, name));
            }
            out.push(n.key);
        }
        out
    }
}

/// A run [`forget_oldest`] took out of its tenant.
struct Forgotten {
    key: Arc<str>,
    entries: u64,
    /// Queue entries popped to reach it (stale ones and its own).
    queue_popped: usize,
}

/// Takes the least recently recorded run of `t` other than `keep` out of
/// its runs (not its entries: the caller updates those).
fn forget_oldest(t: &mut Tenant, keep: &str) -> Option<Forgotten> {
    let mut popped = 0;
    let mut kept = None;
    let found = loop {
        let Some((key, stamp)) = t.order.pop_front() else {
            break None;
        };
        popped += 1;
        let Entry::Occupied(e) = t.runs.entry(key) else {
            continue;
        };
        if e.get().1 != stamp {
            continue; // stale: the run was recorded again since
        }
        if &**e.key() == keep {
            kept = Some((e.key().clone(), stamp));
            popped -= 1;
            continue;
        }
        let (key, (n, _)) = e.remove_entry();
        break Some(Forgotten {
            key,
            entries: n,
            queue_popped: popped,
        });
    };
    // `keep` is the newest and so normally the last in the queue; if it
    // was passed over, it goes back in front.
    if let Some(k) = kept {
        t.order.push_front(k);
    }
    found
}

impl Recent {
    fn lock(&self) -> std::sync::MutexGuard<'_, Runs> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Meter {
    /// Counts what was stored for the run roll-up `run_key` (its roll-up,
    /// and `records` usage records), then forgets runs while over the
    /// bound (see the module's doc). Nothing when unbounded.
    pub(super) async fn note_stored(&self, run_key: &str, records: u64) -> Result<(), MeterError> {
        let Some(max) = self.options.usage_entries else {
            return Ok(());
        };
        // Never below one full run.
        let max = max.max(self.options.usage_records_per_run.saturating_add(1));
        let doomed = {
            let mut runs = self.rollups.recent.lock();
            runs.note(run_key, records);
            runs.over(max, run_key)
        };
        let mut first = Ok(());
        for key in doomed {
            if let Err(e) = self.forget_run(&key).await
                && first.is_ok()
            {
                first = Err(e);
            }
        }
        first
    }

    /// Deletes the run roll-up `run_key` and its usage records.
    async fn forget_run(&self, run_key: &str) -> Result<(), MeterError> {
        let Some(scope) = run_key.strip_prefix("rollup/run/") else {
            return Ok(());
        };
        // Paged by key, not re-scanned until empty: a store whose removal
        // lagged could not keep this loop going. Keys only: the records
        // are old, out of every cache, and nobody reads them now.
        let doomed = self.keys_under(&format!("usage/{scope}/")).await?;
        for k in doomed {
            self.kv.remove(&k).await?;
        }
        self.kv.remove(run_key).await?;
        self.rollups.run_last.forget(run_key);
        Ok(())
    }
}

#[cfg(test)]
mod tests;
