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
    /// [`purge`](Self::purge) deleted).
    pub async fn rollup(
        &self,
        scope: UsageScope<'_>,
        pack: Option<&str>,
    ) -> Result<(BTreeMap<String, Rollup>, BTreeMap<String, Rollup>), MeterError> {
        // This process's deferred usage first: a reader sees its own.
        self.flush().await?;
        let mut by_run: BTreeMap<String, Rollup> = BTreeMap::new();
        let mut by_pack: BTreeMap<String, Rollup> = BTreeMap::new();
        let currency = self.prices.currency.clone();
        let pack_matches = |label: &str| {
            pack.is_none_or(|p| label.rsplit_once('@').is_some_and(|(name, _)| name == p))
        };
        let mut add_run = |r: RunRollup, by_pack: Option<&mut BTreeMap<String, Rollup>>| {
            let mut total: Option<Rollup> = None;
            let mut by_pack = by_pack;
            for (label, roll) in &r.by_pack {
                if !pack_matches(label) {
                    continue;
                }
                add_rollup(
                    total.get_or_insert_with(|| Rollup {
                        currency: currency.clone(),
                        ..Default::default()
                    }),
                    roll,
                );
                if let Some(bp) = by_pack.as_deref_mut() {
                    add_rollup(bp.entry(label.clone()).or_default(), roll);
                }
            }
            if let Some(t) = total {
                let label = if matches!(scope, UsageScope::All) {
                    format!("{}/{}", r.tenant_id, r.run_id)
                } else {
                    r.run_id.clone()
                };
                by_run.insert(label, t);
            }
        };
        match scope {
            UsageScope::Run { tenant, run } => {
                if let Some(r) = self.run_rollup(tenant, run).await? {
                    add_run(r, Some(&mut by_pack));
                }
                return Ok((by_run, by_pack));
            }
            UsageScope::Tenant(t) => {
                let prefix = format!("rollup/run/{}/", keys::part(t));
                self.for_each_page(&prefix, |page| {
                    for (k, v) in page {
                        let r = RunRollup::decode(&v).ok_or(MeterError::Corrupt(k))?;
                        add_run(r, Some(&mut by_pack));
                    }
                    Ok(())
                })
                .await?;
                return Ok((by_run, by_pack));
            }
            UsageScope::All => {}
        }
        self.for_each_page("rollup/run/", |page| {
            for (k, v) in page {
                let r = RunRollup::decode(&v).ok_or(MeterError::Corrupt(k))?;
                add_run(r, None);
            }
            Ok(())
        })
        .await?;
        // A few records per pack: read them all, filter by name.
        for (k, v) in self.scan_all("rollup/pack/").await? {
            let s = PackShard::decode(&v).ok_or(MeterError::Corrupt(k))?;
            let label = format!("{}@{}", s.pack, s.pack_version);
            if pack_matches(&label) {
                add_rollup(by_pack.entry(label).or_default(), &s.rollup);
            }
        }
        Ok((by_run, by_pack))
    }

    /// Retention: deletes per-invocation usage records made before
    /// `older_than_ms`, and the roll-ups of runs with no invocation recorded
    /// since then (their totals stay in the pack roll-ups, which are never
    /// purged). Ledgers are not touched. Pages through the store; returns
    /// how many records were deleted.
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
        Ok(records + rollups.await?)
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
        self.done = page.len() < Self::PAGE;
        if let Some((last, _)) = page.last() {
            self.start = format!("{last}\0");
        }
        Ok(Some(page))
    }
}
