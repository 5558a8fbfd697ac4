//! Reading usage records and roll-ups back, and retention.

use super::stored::{PackShard, Record, RunRollup, StoredUsage, add_rollup};
use super::{Meter, MeterError};
use crate::keys;
use std::collections::BTreeMap;
use wop_core::budget::*;
use wop_core::model::Usage;

/// Which runs a usage query covers. Run ids are only meaningful within a
/// tenant: two tenants' runs of the same id are two runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UsageScope<'a> {
    /// Every tenant's runs (operators).
    All,
    /// Every run of one tenant.
    Tenant(&'a str),
    /// One tenant's run.
    Run {
        /// The tenant.
        tenant: &'a str,
        /// The run id.
        run: &'a str,
    },
}

impl Meter {
    /// Usage records in `scope`, optionally of one pack (name). Only the
    /// kept, bounded records (see [`MeterOptions`](super::MeterOptions));
    /// totals come from [`rollup`](Self::rollup).
    pub async fn usage(
        &self,
        scope: UsageScope<'_>,
        pack: Option<&str>,
    ) -> Result<Vec<Usage>, MeterError> {
        // This process's deferred usage first: a reader sees its own.
        self.flush().await?;
        let prefix = match scope {
            UsageScope::All => "usage/".to_owned(),
            UsageScope::Tenant(t) => keys::usage_prefix(t, None),
            UsageScope::Run { tenant, run } => keys::usage_prefix(tenant, Some(run)),
        };
        let mut out = Vec::new();
        for (k, v) in self.scan_all(&prefix).await? {
            let u = StoredUsage::decode(&v).ok_or(MeterError::Corrupt(k))?;
            if pack.is_none_or(|p| u.usage.pack == p) {
                out.push(u.usage);
            }
        }
        Ok(out)
    }

    /// Every pair under `prefix`, read in pages.
    async fn scan_all(&self, prefix: &str) -> Result<Vec<(String, Vec<u8>)>, MeterError> {
        let mut out = Vec::new();
        self.for_each_page(prefix, |page| {
            out.extend(page);
            Ok(())
        })
        .await?;
        Ok(out)
    }

    /// Calls `f` with successive pages of the pairs under `prefix`.
    pub(super) async fn for_each_page(
        &self,
        prefix: &str,
        mut f: impl FnMut(Vec<(String, Vec<u8>)>) -> Result<(), MeterError>,
    ) -> Result<(), MeterError> {
        let mut pages = Pages::new(prefix);
        while let Some(page) = pages.next(self).await? {
            f(page)?;
        }
        Ok(())
    }

    /// Every key under `prefix`, read in pages without their values.
    pub(super) async fn keys_under(&self, prefix: &str) -> Result<Vec<String>, MeterError> {
        let mut pages = Pages::new(prefix);
        let mut out = Vec::new();
        while let Some(page) = pages.next_keys(self).await? {
            out.extend(page);
        }
        Ok(out)
    }

    /// Compare-and-deletes the pairs under `prefix` that `doomed` picks,
    /// a page at a time: what it holds is one page, whatever the store
    /// holds. Returns how many it deleted (a pair changed meanwhile stays).
    async fn purge_pages(
        &self,
        prefix: &str,
        mut doomed: impl FnMut(&str, &[u8]) -> Result<bool, MeterError>,
    ) -> Result<usize, MeterError> {
        let mut pages = Pages::new(prefix);
        let mut n = 0;
        while let Some(page) = pages.next(self).await? {
            let mut picked = Vec::new();
            for (k, v) in page {
                if doomed(&k, &v)? {
                    picked.push((k, v));
                }
            }
            if !picked.is_empty() {
                n += self.kv.remove_unchanged(picked).await?.len();
            }
        }
        Ok(n)
    }

    /// The roll-up record of `tenant`'s run `run`, if it has one.
    pub async fn run_rollup(
        &self,
        tenant: &str,
        run: &str,
    ) -> Result<Option<RunRollup>, MeterError> {
        // This process's deferred usage first: a reader sees its own.
        self.flush().await?;
        let k = keys::run_rollup(tenant, run);
        match self.kv.get(&k).await? {
            Some(b) => RunRollup::decode(&b)
                .map(Some)
                .ok_or(MeterError::Corrupt(k)),
            None => Ok(None),
        }
    }

    /// Roll-ups per run and per `pack@version` in `scope`, optionally of
    /// one pack (name). Read from the roll-up records (exact), never from
    /// usage records. The per-run map is keyed by run id within a tenant's
    /// scope and by `<tenant>/<run>` for [`UsageScope::All`]. The per-pack
    /// map is the run's, or the tenant's runs' summed; for `All` it is the
    /// packs' all-time totals (including runs whose roll-ups
    /// [`purge`](Self::purge) deleted). `All` holds every run in memory:
    /// a service answers it a page at a time ([`rollup_page`](Self::rollup_page)).
    pub async fn rollup(
        &self,
        scope: UsageScope<'_>,
        pack: Option<&str>,
    ) -> Result<(BTreeMap<String, Rollup>, BTreeMap<String, Rollup>), MeterError> {
        // This process's deferred usage first: a reader sees its own.
        self.flush().await?;
        let mut by_run: BTreeMap<String, Rollup> = BTreeMap::new();
        let mut by_pack: BTreeMap<String, Rollup> = BTreeMap::new();
        let prefix = match scope {
            UsageScope::Run { tenant, run } => {
                if let Some(r) = self.run_rollup(tenant, run).await?
                    && let Some(total) = self.run_total(&r, pack, Some(&mut by_pack))
                {
                    by_run.insert(r.run_id, total);
                }
                return Ok((by_run, by_pack));
            }
            UsageScope::Tenant(t) => format!("{RUN_ROLLUPS}{}/", keys::part(t)),
            UsageScope::All => RUN_ROLLUPS.to_owned(),
        };
        let all = matches!(scope, UsageScope::All);
        self.for_each_page(&prefix, |page| {
            for (k, v) in page {
                let r = RunRollup::decode(&v).ok_or(MeterError::Corrupt(k))?;
                // `All` sums the packs from their own records, below.
                let packs = (!all).then_some(&mut by_pack);
                if let Some(total) = self.run_total(&r, pack, packs) {
                    by_run.insert(run_label(&r, all), total);
                }
            }
            Ok(())
        })
        .await?;
        if all {
            by_pack = self.pack_totals(pack).await?;
        }
        Ok((by_run, by_pack))
    }

    /// One page of [`rollup`](Self::rollup) over every tenant's runs
    /// (operators): up to `limit` (1 to [`MAX_ROLLUP_PAGE`]) runs of `pack`
    /// (or of any pack), keyed `<tenant>/<run>`, after the cursor `after`
    /// (a page's `next`), and the packs' all-time totals. Holds one page,
    /// however many runs the store holds: run ids are the tenants' to
    /// choose, so their number is too (decision 0052).
    pub async fn rollup_page(
        &self,
        pack: Option<&str>,
        after: Option<&str>,
        limit: usize,
    ) -> Result<RollupPage, MeterError> {
        // This process's deferred usage first: a reader sees its own.
        self.flush().await?;
        let limit = limit.clamp(1, MAX_ROLLUP_PAGE);
        let mut pages = Pages::new(RUN_ROLLUPS);
        if let Some(a) = after {
            pages.start = format!("{RUN_ROLLUPS}{a}\0");
        }
        let mut runs = BTreeMap::new();
        let mut next = None;
        'pages: while let Some(page) = pages.next(self).await? {
            for (k, v) in page {
                let r = RunRollup::decode(&v).ok_or_else(|| MeterError::Corrupt(k.clone()))?;
                if let Some(total) = self.run_total(&r, pack, None) {
                    runs.insert(run_label(&r, true), total);
                }
                if runs.len() == limit {
                    next = k.strip_prefix(RUN_ROLLUPS).map(str::to_owned);
                    break 'pages;
                }
            }
        }
        let packs = self.pack_totals(pack).await?;
        Ok(RollupPage { runs, packs, next })
    }

    /// A run's total over its packs (those named `pack`, if given), each
    /// pack's share also added to `by_pack`; `None` if no pack matched.
    fn run_total(
        &self,
        r: &RunRollup,
        pack: Option<&str>,
        mut by_pack: Option<&mut BTreeMap<String, Rollup>>,
    ) -> Option<Rollup> {
        let mut total: Option<Rollup> = None;
        for (label, roll) in &r.by_pack {
            if !pack_matches(pack, label) {
                continue;
            }
            let t = total.get_or_insert_with(|| Rollup {
                currency: self.prices.currency.clone(),
                ..Default::default()
            });
            add_rollup(t, roll);
            if let Some(bp) = by_pack.as_deref_mut() {
                add_rollup(bp.entry(label.clone()).or_default(), roll);
            }
        }
        total
    }

    /// The packs' all-time totals (of `pack`, if given), from their own
    /// records: a few per pack, read whole.
    async fn pack_totals(
        &self,
        pack: Option<&str>,
    ) -> Result<BTreeMap<String, Rollup>, MeterError> {
        let mut by_pack = BTreeMap::new();
        for (k, v) in self.scan_all("rollup/pack/").await? {
            let s = PackShard::decode(&v).ok_or(MeterError::Corrupt(k))?;
            let label = format!("{}@{}", s.pack, s.pack_version);
            if pack_matches(pack, &label) {
                add_rollup(by_pack.entry(label).or_default(), &s.rollup);
            }
        }
        Ok(by_pack)
    }

    /// Retention: deletes per-invocation usage records made before
    /// `older_than_ms`, the roll-ups of runs with no invocation recorded
    /// since then (their totals stay in the pack roll-ups, which are never
    /// purged), and then the ledgers of those runs, if they started
    /// before it (decision 0057: such a run invoked again starts afresh,
    /// its budget reserved again). Pages through the store; returns how
    /// many records were deleted.
    pub async fn purge(&self, older_than_ms: u64) -> Result<usize, MeterError> {
        // This process's deferred usage first: a reader sees its own.
        self.flush().await?;
        let records = self.purge_pages("usage/", |k, _| {
            // The last segment starts with the 13-digit time in ms.
            let at = k
                .rsplit('/')
                .next()
                .and_then(|seg| seg.get(..13))
                .and_then(|ms| ms.parse::<u64>().ok());
            Ok(at.is_some_and(|at| at < older_than_ms))
        });
        let records = records.await?;
        // Compare-and-delete: a run that recorded meanwhile keeps its
        // roll-up.
        let rollups = self.purge_pages("rollup/run/", |k, v| {
            let r = RunRollup::decode(v).ok_or_else(|| MeterError::Corrupt(k.to_owned()))?;
            Ok(r.last_at_ms < older_than_ms)
        });
        let rollups = rollups.await?;
        Ok(records + rollups + self.purge_idle_ledgers(older_than_ms).await?)
    }

    /// Retention of budgets (decision 0057): deletes the ledger of every
    /// run that started before `older_than_ms` and has no roll-up left,
    /// so nothing was recorded for it since then ([`purge`](Self::purge)
    /// has just deleted the roll-ups of runs idle since). Without it the
    /// ledger of every budgeted or timed run stayed for ever, and counted
    /// against its tenant's share of the store for ever.
    ///
    /// A run invoked again after this starts afresh: its budget is
    /// reserved again and its run clock restarts. A budget bounds a run's
    /// spending, and a caller can start a new run id any time, so this
    /// gives a caller nothing it did not have. Compare-and-delete: a
    /// ledger charged since it was read stays.
    pub(super) async fn purge_idle_ledgers(&self, older_than_ms: u64) -> Result<usize, MeterError> {
        const LEDGERS: &str = "ledger/";
        let mut pages = Pages::new(LEDGERS);
        let mut n = 0;
        while let Some(page) = pages.next(self).await? {
            let mut picked = Vec::new();
            for (k, v) in page {
                let ledger: Ledger =
                    serde_json::from_slice(&v).map_err(|_| MeterError::Corrupt(k.clone()))?;
                let Some(run) = k.strip_prefix(LEDGERS) else {
                    continue;
                };
                // A ledger's key and its run's roll-up's differ only in
                // their prefix.
                let rollup = format!("{RUN_ROLLUPS}{run}");
                if ledger.started_at_ms < older_than_ms && self.kv.get(&rollup).await?.is_none() {
                    picked.push((k, v));
                }
            }
            if !picked.is_empty() {
                n += self.kv.remove_unchanged(picked).await?.len();
            }
        }
        Ok(n)
    }
}

/// Where the runs' roll-ups are kept.
const RUN_ROLLUPS: &str = "rollup/run/";

/// Most runs in one page of [`Meter::rollup_page`].
pub const MAX_ROLLUP_PAGE: usize = 10_000;

/// One page of every tenant's runs' usage ([`Meter::rollup_page`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RollupPage {
    /// The page's runs, keyed `<tenant>/<run>`.
    pub runs: BTreeMap<String, Rollup>,
    /// Every pack's all-time totals, keyed `pack@version`.
    pub packs: BTreeMap<String, Rollup>,
    /// The cursor to pass as `after` when there may be more runs; `None`
    /// at the end.
    pub next: Option<String>,
}

/// Whether the roll-up label `pack@version` is of `pack` (any, if `None`).
fn pack_matches(pack: Option<&str>, label: &str) -> bool {
    pack.is_none_or(|p| label.rsplit_once('@').is_some_and(|(name, _)| name == p))
}

/// A run's key in a roll-up map: its id, or `<tenant>/<run>` across
/// tenants.
fn run_label(r: &RunRollup, across_tenants: bool) -> String {
    match across_tenants {
        true => format!("{}/{}", r.tenant_id, r.run_id),
        false => r.run_id.clone(),
    }
}

/// Successive pages of the pairs under a prefix, by key.
struct Pages {
    start: String,
    end: Option<String>,
    done: bool,
}

impl Pages {
    const PAGE: usize = 512;

    fn new(prefix: &str) -> Self {
        Pages {
            start: prefix.to_owned(),
            end: keys::prefix_end(prefix),
            done: false,
        }
    }

    /// The next page (`None`: there is no more).
    async fn next(&mut self, m: &Meter) -> Result<Option<Vec<(String, Vec<u8>)>>, MeterError> {
        if self.done {
            return Ok(None);
        }
        let page =
            m.kv.scan_range(&self.start, self.end.as_deref(), Self::PAGE)
                .await?;
        self.past(page.len(), page.last().map(|(k, _)| k.as_str()));
        Ok(Some(page))
    }

    /// The next page's keys ([`KvStore::scan_range_keys`]).
    ///
    /// [`KvStore::scan_range_keys`]: crate::store::KvStore::scan_range_keys
    async fn next_keys(&mut self, m: &Meter) -> Result<Option<Vec<String>>, MeterError> {
        if self.done {
            return Ok(None);
        }
        let page =
            m.kv.scan_range_keys(&self.start, self.end.as_deref(), Self::PAGE)
                .await?;
        self.past(page.len(), page.last().map(String::as_str));
        Ok(Some(page))
    }

    /// After a page of `len` keys, the last of them `last`.
    fn past(&mut self, len: usize, last: Option<&str>) {
        self.done = len < Self::PAGE;
        if let Some(last) = last {
            self.start = format!("{last}\0");
        }
    }
}
