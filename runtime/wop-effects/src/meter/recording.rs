//! Recording a finished invocation: ledger, roll-ups and kept usage records.

use super::stored::{PackShard, Record, RunRollup, StoredUsage, cut, key_part, pack_label};
use super::{Meter, MeterError, PACK_SHARDS};
use std::collections::BTreeMap;
use wop_core::budget::*;
use wop_core::events::Event;
use wop_core::model::Usage;

/// Rounds of a roll-up compare-and-swap before giving up (each lost round
/// means another recorder's update went in).
const MAX_ROLLUP_ROUNDS: usize = 4096;

impl Meter {
    /// Records a finished invocation: when the run has a budget, adds its
    /// fuel and cost to the run's ledger; adds it to the run's and the
    /// pack's roll-ups; and keeps its (bounded) usage record if the run is
    /// under its cap. Returns the budget events.
    pub async fn record(&self, usage: &Usage, node_id: &str) -> Result<Vec<Event>, MeterError> {
        let has_budget = self
            .ledger(&usage.run_id)
            .await?
            .is_some_and(|l| !l.budget.is_empty());
        let mut events = Vec::new();
        if has_budget {
            let (_, (), ev) = self
                .update(&usage.run_id, &RunBudget::default(), |l, out| {
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
        static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let seq = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let now = wop_core::time::now_ms();
        let label = pack_label(usage);
        let cap = self.options.usage_records_per_run;
        // The run's roll-up; decides whether this invocation's record is kept.
        let run_key = Self::run_rollup_key(&usage.run_id);
        let run = self
            .cas_update::<RunRollup>(&run_key, |r| {
                let mut r = r.unwrap_or_else(|| RunRollup {
                    run_id: usage.run_id.clone(),
                    ..Default::default()
                });
                self.entry(r.by_pack.entry(label.clone())).add(usage);
                if r.records_kept < cap {
                    r.records_kept += 1;
                }
                r.last_at_ms = r.last_at_ms.max(now);
                r
            })
            .await?;
        let keep = run.invocations() <= cap;
        // One shard of the pack's roll-up.
        let shard = (u64::from(std::process::id()) + seq) % PACK_SHARDS;
        let pack_key = format!("rollup/pack/{}/{shard}", key_part(&label));
        self.cas_update::<PackShard>(&pack_key, |p| {
            let mut p = p.unwrap_or_else(|| PackShard {
                pack: usage.pack.clone(),
                pack_version: usage.pack_version.clone(),
                rollup: Rollup {
                    currency: self.prices.currency.clone(),
                    ..Default::default()
                },
            });
            p.rollup.add(usage);
            p
        })
        .await?;
        if keep {
            let key = format!(
                "usage/{}/{now:013}-{}-{seq}",
                key_part(&usage.run_id),
                std::process::id(),
            );
            let stored = self.bounded(usage);
            self.kv.put(&key, stored.encode()).await?;
        }
        Ok(events)
    }

    fn entry<'a>(
        &self,
        e: std::collections::btree_map::Entry<'a, String, Rollup>,
    ) -> &'a mut Rollup {
        e.or_insert_with(|| Rollup {
            currency: self.prices.currency.clone(),
            ..Default::default()
        })
    }

    pub(super) fn run_rollup_key(run: &str) -> String {
        format!("rollup/run/{}", key_part(run))
    }

    /// The copy of `u` that is stored: identifiers cut, breakdown and
    /// per-tool counts capped.
    fn bounded(&self, u: &Usage) -> StoredUsage {
        let o = &self.options;
        let id = |s: &str| cut(s, o.identifier_bytes);
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
            *s = id(s);
        }
        v.host_calls = u.host_calls.iter().map(|(k, n)| (id(k), *n)).collect();
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
        let dropped = u
            .host_call_breakdown
            .len()
            .saturating_sub(o.breakdown_entries);
        v.host_call_breakdown.truncate(o.breakdown_entries);
        for r in &mut v.host_call_breakdown {
            r.interface = id(&r.interface);
            r.target = r
                .target
                .as_deref()
                .map(|t| cut(t, o.identifier_bytes.min(64)));
        }
        StoredUsage {
            usage: v,
            host_call_breakdown_dropped: dropped as u64,
        }
    }

    /// Read-modify-write of one JSON record with compare-and-swap.
    async fn cas_update<T: Record>(
        &self,
        key: &str,
        mut f: impl FnMut(Option<T>) -> T,
    ) -> Result<T, MeterError> {
        let mut cur = self.kv.get(key).await?;
        for _ in 0..MAX_ROLLUP_ROUNDS {
            let old = match &cur {
                Some(b) => Some(T::decode(b).ok_or_else(|| MeterError::Corrupt(key.to_owned()))?),
                None => None,
            };
            let next = f(old);
            let bytes = next.encode();
            match self
                .kv
                .compare_and_swap(key, cur.as_deref(), Some(bytes))
                .await?
            {
                Ok(()) => return Ok(next),
                Err(actual) => {
                    cur = actual;
                    tokio::task::yield_now().await;
                }
            }
        }
        Err(MeterError::Contended(key.to_owned()))
    }
}
