//! The meter: persisted run ledgers and usage records, with roll-ups per
//! run and per pack.
//!
//! Everything persists in the same [`KvStore`] as effect claims. The math
//! lives in `wop_core::budget`.
//!
//! - `ledger/<runId>`: a run's budget and what it consumed, updated with
//!   compare-and-swap, so several executors sharing a store share a budget.
//! - `rollup/run/<run>`: the run's roll-up, per pack ([`RunRollup`]),
//!   updated with compare-and-swap by every [`Meter::record`]; exact.
//! - `rollup/pack/<pack@version>/<shard>`: the pack's all-time roll-up,
//!   split over [`PACK_SHARDS`] records (a recorder picks one) so that
//!   concurrent recorders rarely contend; exact (the sum of the shards).
//! - `usage/<run>/<ms>-<pid>-<seq>`: one invocation's [`Usage`], kept only
//!   for the first [`MeterOptions::usage_records_per_run`] invocations of a
//!   run and bounded in size (long identifiers cut, the per-host-call
//!   breakdown and per-tool counts capped; the stored JSON then carries
//!   `hostCallBreakdownDropped`). [`Meter::purge`] deletes them (and the
//!   roll-ups of runs idle) past a retention.
//!
//! `<run>` and `<pack@version>` in keys are escaped (`%` → `%25`, `/` →
//! `%2F`) and, past 96 bytes, cut and suffixed with a digest, so that a
//! prefix scan of one run never reaches another's records. Roll-ups are
//! computed from roll-up records only, never by reading usage records.

use crate::store::{KvStore, StoreError};
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::collections::BTreeMap;
use std::sync::Arc;
use wop_core::budget::*;
use wop_core::events::Event;
use wop_core::model::Usage;

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
}

/// Rounds of a ledger compare-and-swap before giving up with
/// [`MeterError::Contended`]. Every lost round means another executor's
/// update went in, so this only bounds pathological contention (sized for
/// a few hundred executors charging one run at once).
const MAX_CAS_ROUNDS: usize = 1024;

/// How many records a pack's roll-up is split over.
pub const PACK_SHARDS: u64 = 8;

/// Rounds of a roll-up compare-and-swap before giving up (each lost round
/// means another recorder's update went in).
const MAX_ROLLUP_ROUNDS: usize = 4096;

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
}

impl Default for MeterOptions {
    fn default() -> Self {
        Self {
            usage_records_per_run: 1000,
            breakdown_entries: 8,
            tool_ids: 32,
            identifier_bytes: 128,
        }
    }
}

/// A run's roll-up record (`rollup/run/<run>`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunRollup {
    /// The run id (in full).
    pub run_id: String,
    /// Per `pack@version`.
    pub by_pack: BTreeMap<String, Rollup>,
    /// Per-invocation usage records kept for this run.
    pub records_kept: u64,
    /// Last recorded invocation (ms since the Unix epoch).
    pub last_at_ms: u64,
}

impl RunRollup {
    /// The run's total over all packs.
    pub fn total(&self, currency: &str) -> Rollup {
        let mut t = Rollup {
            currency: currency.to_owned(),
            ..Default::default()
        };
        for r in self.by_pack.values() {
            add_rollup(&mut t, r);
        }
        t
    }

    /// Invocations recorded for this run.
    pub fn invocations(&self) -> u64 {
        self.by_pack.values().map(|r| r.invocations).sum()
    }
}

/// One shard of a pack's roll-up (`rollup/pack/<pack@version>/<shard>`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct PackShard {
    pack: String,
    pack_version: String,
    rollup: Rollup,
}

/// A stored usage record: the (bounded) usage plus what was cut.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct StoredUsage {
    #[serde(flatten)]
    usage: Usage,
    #[serde(default, skip_serializing_if = "is_zero")]
    host_call_breakdown_dropped: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl StoredUsage {
    /// JSON without the fields that hold their default (zero, empty):
    /// typically half the bytes of a small invocation's usage.
    fn encode(&self) -> Vec<u8> {
        let mut v = serde_json::to_value(self).unwrap_or_default();
        drop_defaults(&mut v);
        serde_json::to_vec(&v).unwrap_or_default()
    }

    /// Reads [`encode`](Self::encode)'s form (and full records of older
    /// versions): absent fields take their defaults.
    fn decode(bytes: &[u8]) -> Option<StoredUsage> {
        let stored: serde_json::Map<String, serde_json::Value> =
            serde_json::from_slice(bytes).ok()?;
        serde_json::from_value(with_defaults(
            serde_json::to_value(StoredUsage::default()).ok()?,
            stored,
        ))
        .ok()
    }
}

/// How a roll-up record is stored.
trait Record: Sized {
    fn encode(&self) -> Vec<u8>;
    fn decode(bytes: &[u8]) -> Option<Self>;
}

impl Record for PackShard {
    fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }
    fn decode(bytes: &[u8]) -> Option<Self> {
        serde_json::from_slice(bytes).ok()
    }
}

/// Removes the fields of `v` (an object) that hold their default.
fn drop_defaults(v: &mut serde_json::Value) {
    if let serde_json::Value::Object(m) = v {
        m.retain(|_, x| !is_default_json(x));
    }
}

/// `defaults` (an object) overlaid with the fields of `v`.
fn with_defaults(
    defaults: serde_json::Value,
    v: serde_json::Map<String, serde_json::Value>,
) -> serde_json::Value {
    let mut full = defaults;
    if let serde_json::Value::Object(base) = &mut full {
        base.extend(v);
    }
    full
}

impl Record for RunRollup {
    /// Compact: default-valued fields are left out, in the record and in
    /// each per-pack roll-up.
    fn encode(&self) -> Vec<u8> {
        let mut v = serde_json::to_value(self).unwrap_or_default();
        if let Some(serde_json::Value::Object(packs)) = v.get_mut("byPack") {
            for r in packs.values_mut() {
                drop_defaults(r);
            }
        }
        drop_defaults(&mut v);
        serde_json::to_vec(&v).unwrap_or_default()
    }

    fn decode(bytes: &[u8]) -> Option<Self> {
        let mut m: serde_json::Map<String, serde_json::Value> =
            serde_json::from_slice(bytes).ok()?;
        if let Some(serde_json::Value::Object(packs)) = m.get_mut("byPack") {
            let zero = serde_json::to_value(Rollup::default()).ok()?;
            for r in packs.values_mut() {
                let serde_json::Value::Object(fields) = std::mem::take(r) else {
                    return None;
                };
                *r = with_defaults(zero.clone(), fields);
            }
        }
        serde_json::from_value(with_defaults(
            serde_json::to_value(RunRollup::default()).ok()?,
            m,
        ))
        .ok()
    }
}

fn is_default_json(v: &serde_json::Value) -> bool {
    match v {
        serde_json::Value::Number(n) => n.as_f64() == Some(0.0),
        serde_json::Value::String(s) => s.is_empty(),
        serde_json::Value::Array(a) => a.is_empty(),
        serde_json::Value::Object(o) => o.is_empty(),
        serde_json::Value::Null => true,
        serde_json::Value::Bool(b) => !b,
    }
}

fn add_rollup(to: &mut Rollup, r: &Rollup) {
    to.invocations += r.invocations;
    to.fuel += r.fuel;
    to.wall_time_us += r.wall_time_us;
    to.tool_calls += r.tool_calls;
    to.effect_claims += r.effect_claims;
    to.egress_bytes += r.egress_bytes;
    to.log_bytes += r.log_bytes;
    to.cost += r.cost;
    if to.currency.is_empty() {
        to.currency = r.currency.clone();
    }
}

/// `s` cut to at most `max` bytes (on a char boundary), marked with `…`.
fn cut(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_owned();
    }
    let mut end = max.saturating_sub('…'.len_utf8());
    while end > 0 && !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

/// An identifier as a key segment: escaped, and past 96 bytes cut and
/// suffixed with a digest of the whole.
fn key_part(s: &str) -> String {
    let esc = s.replace('%', "%25").replace('/', "%2F");
    if esc.len() <= 96 {
        return esc;
    }
    let mut end = 64;
    while !esc.is_char_boundary(end) {
        end -= 1;
    }
    let digest = wop_core::jcs::sha256_hex(&serde_json::Value::String(s.to_owned()));
    format!("{}~{}", &esc[..end], &digest[..16])
}

fn pack_label(u: &Usage) -> String {
    format!("{}@{}", u.pack, u.pack_version)
}

/// The meter: ledgers and usage records in a [`KvStore`].
#[derive(Clone)]
pub struct Meter {
    kv: Arc<dyn KvStore>,
    prices: Prices,
    options: MeterOptions,
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

    fn ledger_key(run: &str) -> String {
        format!("ledger/{run}")
    }

    /// Reads a run's ledger.
    pub async fn ledger(&self, run: &str) -> Result<Option<Ledger>, MeterError> {
        let k = Self::ledger_key(run);
        match self.kv.get(&k).await? {
            Some(b) => serde_json::from_slice(&b)
                .map(Some)
                .map_err(|_| MeterError::Corrupt(k)),
            None => Ok(None),
        }
    }

    /// Applies `f` to the run's ledger with compare-and-swap; creates it
    /// (with `budget`, emitting `budget.reserved`) at the first call.
    async fn update<R>(
        &self,
        run: &str,
        budget: &RunBudget,
        mut f: impl FnMut(&mut Ledger, &mut Vec<Event>) -> R,
    ) -> Result<(Ledger, R, Vec<Event>), MeterError> {
        let k = Self::ledger_key(run);
        let mut cur = self.kv.get(&k).await?;
        for _ in 0..MAX_CAS_ROUNDS {
            let mut events = Vec::new();
            let mut ledger = match &cur {
                Some(b) => serde_json::from_slice::<Ledger>(b)
                    .map_err(|_| MeterError::Corrupt(k.clone()))?,
                None => {
                    if !budget.is_empty() {
                        events.push(budget_event(
                            BudgetEvent::Reserved,
                            json!({"runId": run, "budget": budget}),
                        ));
                    }
                    Ledger::new(run, *budget)
                }
            };
            let before = ledger.clone();
            let r = f(&mut ledger, &mut events);
            if cur.is_some() && ledger == before {
                return Ok((ledger, r, events));
            }
            let bytes = serde_json::to_vec(&ledger).unwrap_or_default();
            match self
                .kv
                .compare_and_swap(&k, cur.as_deref(), Some(bytes))
                .await?
            {
                Ok(()) => return Ok((ledger, r, events)),
                Err(actual) => {
                    // Retry from the value that beat us.
                    cur = actual;
                    tokio::task::yield_now().await;
                }
            }
        }
        Err(MeterError::Contended(run.to_owned()))
    }

    /// Opens the run's ledger at an invocation's start (creating it and
    /// reserving the budget the first time). Returns the ledger and events.
    ///
    /// A run with no budget and no run timeout needs no ledger: nothing is
    /// written for it (one durable write saved per new run).
    pub async fn open_run(
        &self,
        run: &str,
        budget: &RunBudget,
        needs_clock: bool,
    ) -> Result<(Ledger, Vec<Event>), MeterError> {
        if budget.is_empty() && !needs_clock {
            if let Some(l) = self.ledger(run).await? {
                return Ok((l, Vec::new()));
            }
            return Ok((Ledger::new(run, *budget), Vec::new()));
        }
        let (l, (), ev) = self.update(run, budget, |_, _| ()).await?;
        Ok((l, ev))
    }

    /// Charges one performed tool call *before* it is performed: refused if
    /// it would exceed the run's tool-call or cost budget.
    pub async fn charge_tool_call(
        &self,
        run: &str,
        node_id: &str,
        tool: &str,
    ) -> Result<(Vec<Event>, Result<(), Exhausted>), MeterError> {
        let price = self.prices.tool_call(tool);
        let (_, verdict, events) = self
            .update(run, &RunBudget::default(), |l, out| {
                let next_calls = l.consumed.tool_calls + 1;
                let next_cost = l.consumed.cost_usd + price;
                let over = if l.budget.max_tool_calls.is_some_and(|m| next_calls > m) {
                    Some((Dimension::ToolCalls, next_calls as f64))
                } else if l.budget.max_cost_usd.is_some_and(|m| next_cost > m) {
                    Some((Dimension::Cost, next_cost))
                } else {
                    None
                };
                if let Some((d, attempted)) = over {
                    l.exhaust(d, attempted, node_id, out);
                    return Err(Exhausted {
                        dimension: d,
                        limit: l.limit(d).unwrap_or(0.0),
                        attempted,
                    });
                }
                l.consumed.tool_calls = next_calls;
                l.consumed.cost_usd = next_cost;
                if !l.budget.is_empty() {
                    out.push(l.consumed_event());
                }
                l.cross_thresholds(out);
                Ok(())
            })
            .await?;
        Ok((events, verdict))
    }

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

    fn run_rollup_key(run: &str) -> String {
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

    /// Usage records, optionally of one run and/or one pack (name). Only
    /// the kept, bounded records (see [`MeterOptions`]); totals come from
    /// [`rollup`](Self::rollup).
    pub async fn usage(
        &self,
        run: Option<&str>,
        pack: Option<&str>,
    ) -> Result<Vec<Usage>, MeterError> {
        let prefix = match run {
            Some(r) => format!("usage/{}/", key_part(r)),
            None => "usage/".to_owned(),
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
    async fn for_each_page(
        &self,
        prefix: &str,
        mut f: impl FnMut(Vec<(String, Vec<u8>)>) -> Result<(), MeterError>,
    ) -> Result<(), MeterError> {
        const PAGE: usize = 512;
        let end = prefix_end(prefix);
        let mut start = prefix.to_owned();
        loop {
            let page = self.kv.scan_range(&start, end.as_deref(), PAGE).await?;
            let full = page.len() == PAGE;
            if let Some((last, _)) = page.last() {
                start = format!("{last}\0");
            }
            f(page)?;
            if !full {
                return Ok(());
            }
        }
    }

    /// A run's roll-up record, if it has one.
    pub async fn run_rollup(&self, run: &str) -> Result<Option<RunRollup>, MeterError> {
        let k = Self::run_rollup_key(run);
        match self.kv.get(&k).await? {
            Some(b) => RunRollup::decode(&b)
                .map(Some)
                .ok_or(MeterError::Corrupt(k)),
            None => Ok(None),
        }
    }

    /// Roll-ups per run and per `pack@version`, optionally of one run and/or
    /// one pack (name). Read from the roll-up records (exact), never from
    /// usage records. With `run`, the per-pack map is that run's; without,
    /// it is the packs' all-time totals (including runs whose roll-ups
    /// [`purge`](Self::purge) deleted).
    pub async fn rollup(
        &self,
        run: Option<&str>,
        pack: Option<&str>,
    ) -> Result<(BTreeMap<String, Rollup>, BTreeMap<String, Rollup>), MeterError> {
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
                by_run.insert(r.run_id.clone(), t);
            }
        };
        if let Some(run) = run {
            if let Some(r) = self.run_rollup(run).await? {
                add_run(r, Some(&mut by_pack));
            }
            return Ok((by_run, by_pack));
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
        let mut doomed = Vec::new();
        self.for_each_page("usage/", |page| {
            for (k, v) in page {
                // The last segment starts with the 13-digit time in ms.
                let at = k
                    .rsplit('/')
                    .next()
                    .and_then(|seg| seg.get(..13))
                    .and_then(|ms| ms.parse::<u64>().ok());
                if at.is_some_and(|at| at < older_than_ms) {
                    doomed.push((k, v));
                }
            }
            Ok(())
        })
        .await?;
        self.for_each_page("rollup/run/", |page| {
            for (k, v) in page {
                let r = RunRollup::decode(&v).ok_or_else(|| MeterError::Corrupt(k.clone()))?;
                if r.last_at_ms < older_than_ms {
                    doomed.push((k, v));
                }
            }
            Ok(())
        })
        .await?;
        let mut n = 0;
        for (k, v) in doomed {
            // Compare-and-delete: a run that recorded meanwhile keeps its
            // roll-up.
            if self.kv.compare_and_swap(&k, Some(&v), None).await?.is_ok() {
                n += 1;
            }
        }
        Ok(n)
    }
}

/// The first key after every key starting with `prefix` (`None`: no bound).
fn prefix_end(prefix: &str) -> Option<String> {
    let mut chars: Vec<char> = prefix.chars().collect();
    while let Some(c) = chars.pop() {
        let n = if c as u32 == 0xD7FF {
            0xE000
        } else {
            c as u32 + 1
        };
        if let Some(next) = char::from_u32(n) {
            chars.push(next);
            return Some(chars.into_iter().collect());
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{MemoryStore, SledStore};
    use wop_core::model::HostCallRecord;

    fn usage(run: &str, pack: &str, i: u64) -> Usage {
        Usage {
            pack: pack.into(),
            pack_version: "1.0.0".into(),
            type_id: "hello".into(),
            tenant_id: "tenant".into(),
            run_id: run.into(),
            node_id: format!("node-{i}"),
            attempt: 1,
            fuel_limit: 1_000_000,
            fuel_consumed: 1000 + i,
            wall_time_us: 20 + i,
            tool_calls: i % 3,
            effect_claims: i % 2,
            egress_bytes_in: 7,
            log_bytes: 11,
            cost: 0.25 * (i % 4) as f64,
            currency: "USD".into(),
            host_calls: [("log".to_owned(), 2)].into(),
            host_call_breakdown: (0..40)
                .map(|j| HostCallRecord {
                    interface: "log".into(),
                    target: Some("t".repeat(300)),
                    fuel_before: j,
                    wall_us: 1,
                })
                .collect(),
            ..Default::default()
        }
    }

    /// The roll-ups as the old meter computed them: over every record.
    fn reference(
        all: &[Usage],
        run: Option<&str>,
        pack: Option<&str>,
    ) -> (BTreeMap<String, Rollup>, BTreeMap<String, Rollup>) {
        let mut by_run: BTreeMap<String, Rollup> = BTreeMap::new();
        let mut by_pack: BTreeMap<String, Rollup> = BTreeMap::new();
        for u in all {
            if run.is_some_and(|r| r != u.run_id) || pack.is_some_and(|p| p != u.pack) {
                continue;
            }
            for (map, key) in [
                (&mut by_run, u.run_id.clone()),
                (&mut by_pack, pack_label(u)),
            ] {
                map.entry(key)
                    .or_insert_with(|| Rollup {
                        currency: "USD".into(),
                        ..Default::default()
                    })
                    .add(u);
            }
        }
        (by_run, by_pack)
    }

    async fn record_all(meter: &Meter, plan: &[(&str, &str, u64)]) -> Vec<Usage> {
        let mut all = Vec::new();
        for (run, pack, n) in plan {
            for i in 0..*n {
                let u = usage(run, pack, i);
                meter.record(&u, &u.node_id).await.unwrap();
                all.push(u);
            }
        }
        all
    }

    #[test]
    fn stored_usage_round_trips_compactly() {
        let mut u = usage("run", "alpha", 3);
        u.host_call_breakdown.truncate(2);
        let s = StoredUsage {
            usage: u.clone(),
            host_call_breakdown_dropped: 0,
        };
        let compact = s.encode();
        assert!(compact.len() < serde_json::to_vec(&u).unwrap().len());
        assert_eq!(StoredUsage::decode(&compact).unwrap().usage, u);
        // A record of the previous version (plain `Usage`) still reads.
        let old = serde_json::to_vec(&u).unwrap();
        assert_eq!(StoredUsage::decode(&old).unwrap().usage, u);
        let zero = StoredUsage::default();
        assert_eq!(zero.encode(), b"{}");
        assert_eq!(StoredUsage::decode(b"{}").unwrap().usage, Usage::default());
        assert!(StoredUsage::decode(b"[1]").is_none());
    }

    #[test]
    fn run_rollup_round_trips_compactly() {
        let mut r = RunRollup {
            run_id: "r".into(),
            records_kept: 1,
            last_at_ms: 5,
            ..Default::default()
        };
        let mut roll = Rollup {
            currency: "USD".into(),
            ..Default::default()
        };
        roll.add(&usage("r", "alpha", 1));
        r.by_pack.insert("alpha@1.0.0".into(), roll);
        r.by_pack.insert("zero@1".into(), Rollup::default());
        let bytes = r.encode();
        assert!(bytes.len() < serde_json::to_vec(&r).unwrap().len());
        assert_eq!(RunRollup::decode(&bytes).unwrap(), r);
        assert_eq!(
            RunRollup::decode(&serde_json::to_vec(&r).unwrap()).unwrap(),
            r
        );
        assert!(RunRollup::decode(b"{\"byPack\":{\"a\":1}}").is_none());
    }

    #[tokio::test]
    async fn rollups_exact_records_capped_bounded_and_purged() {
        let kv: Arc<dyn KvStore> = Arc::new(MemoryStore::new());
        let meter = Meter::with_options(
            kv.clone(),
            Prices::default(),
            MeterOptions {
                usage_records_per_run: 5,
                ..Default::default()
            },
        );
        let long_run = "r".repeat(400);
        let plan = [
            ("run/1", "alpha", 12),
            ("run", "beta", 3),
            ("run/1", "beta", 2),
            (long_run.as_str(), "alpha", 1),
        ];
        let all = record_all(&meter, &plan).await;
        // Roll-ups equal the old full computation, for every filter.
        for (run, pack) in [
            (None, None),
            (Some("run/1"), None),
            (Some("run"), None),
            (None, Some("alpha")),
            (None, Some("beta")),
            (Some("run/1"), Some("beta")),
            (Some(long_run.as_str()), None),
            (Some("nope"), None),
        ] {
            assert_eq!(
                meter.rollup(run, pack).await.unwrap(),
                reference(&all, run, pack),
                "rollup({run:?}, {pack:?})"
            );
        }
        // The cap: the first 5 invocations of a run are kept; one run's
        // prefix never reaches another's ("run" vs "run/1").
        assert_eq!(meter.usage(Some("run/1"), None).await.unwrap().len(), 5);
        assert_eq!(meter.usage(Some("run"), None).await.unwrap().len(), 3);
        assert_eq!(meter.usage(None, Some("beta")).await.unwrap().len(), 3);
        let r = meter.run_rollup("run/1").await.unwrap().unwrap();
        assert_eq!((r.invocations(), r.records_kept), (14, 5));
        // Bounded size: 40 breakdown entries of 300-byte targets and a
        // 400-byte run id are cut.
        let stored = kv.scan_prefix("usage/", usize::MAX).await.unwrap();
        let max = stored.iter().map(|(_, v)| v.len()).max().unwrap();
        assert!(max < 2000, "a stored usage record has {max} bytes");
        let kept = meter.usage(Some(long_run.as_str()), None).await.unwrap();
        assert_eq!(kept.len(), 1);
        assert_eq!(kept[0].host_call_breakdown.len(), 8);
        assert!(kept[0].run_id.len() <= 128 && kept[0].run_id.ends_with('…'));
        let raw: serde_json::Value = serde_json::from_slice(&stored[0].1).unwrap();
        assert_eq!(raw["hostCallBreakdownDropped"], 32);
        assert!(
            stored.iter().all(|(k, _)| k.len() < 200),
            "keys are bounded"
        );
        // Roll-ups never read usage records: deleting them changes nothing.
        let before = meter.rollup(None, None).await.unwrap();
        for (k, _) in &stored {
            kv.remove(k).await.unwrap();
        }
        assert_eq!(meter.rollup(None, None).await.unwrap(), before);
        // Retention.
        let all = record_all(&meter, &plan).await;
        assert_eq!(meter.purge(0).await.unwrap(), 0);
        let n = meter.purge(wop_core::time::now_ms() + 1).await.unwrap();
        // Round two kept only what the caps still allowed: run/1 was full,
        // "run" had 2 of 5 left, the long run 4.
        assert_eq!(n, 2 + 1 + 3, "usage records and the 3 idle runs' roll-ups");
        assert!(meter.usage(None, None).await.unwrap().is_empty());
        let (by_run, by_pack) = meter.rollup(None, None).await.unwrap();
        assert!(by_run.is_empty(), "idle runs' roll-ups are purged");
        // Pack totals are all-time: both rounds of records.
        let mut twice = all.clone();
        twice.extend(all);
        assert_eq!(by_pack, reference(&twice, None, None).1);
    }

    async fn concurrent_records_are_exact(kv: Arc<dyn KvStore>) {
        const TASKS: u64 = 32;
        let meter = Meter::new(kv, Prices::default());
        let barrier = Arc::new(tokio::sync::Barrier::new(TASKS as usize));
        let mut tasks = Vec::new();
        for i in 0..TASKS {
            let meter = meter.clone();
            let barrier = barrier.clone();
            tasks.push(tokio::spawn(async move {
                let u = usage("shared-run", "alpha", i);
                barrier.wait().await;
                meter.record(&u, &u.node_id).await.unwrap();
                u
            }));
        }
        let mut all = Vec::new();
        for t in tasks {
            all.push(t.await.unwrap());
        }
        let got = meter.rollup(None, None).await.unwrap();
        let want = reference(&all, None, None);
        assert_eq!(got.0["shared-run"].invocations, TASKS);
        assert_eq!(got.0["shared-run"].fuel, want.0["shared-run"].fuel);
        assert_eq!(got.1["alpha@1.0.0"].invocations, TASKS);
        assert_eq!(got.1["alpha@1.0.0"].fuel, want.1["alpha@1.0.0"].fuel);
        assert_eq!(
            meter.usage(Some("shared-run"), None).await.unwrap().len(),
            32
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn concurrent_records_are_exact_on_sled() {
        let dir = tempfile::tempdir().unwrap();
        let kv = Arc::new(SledStore::open(&dir.path().join("db")).unwrap());
        concurrent_records_are_exact(kv).await;
    }

    #[cfg(feature = "postgres")]
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn concurrent_records_are_exact_on_postgres() {
        let Some(url) = crate::store::conformance::postgres_test_url("meter_records") else {
            return;
        };
        let kv = Arc::new(crate::store::PostgresStore::connect(&url).await.unwrap());
        concurrent_records_are_exact(kv).await;
    }

    /// Charges `attempts` tool calls against run `run`; returns how many
    /// were allowed.
    async fn charge(meter: &Meter, run: &str, attempts: u64) -> u64 {
        let mut ok = 0;
        for _ in 0..attempts {
            let (_, verdict) = meter.charge_tool_call(run, "node", "t:x").await.unwrap();
            if verdict.is_ok() {
                ok += 1;
            }
        }
        ok
    }

    const BUDGET: u64 = 25;

    fn budget() -> RunBudget {
        RunBudget {
            max_tool_calls: Some(BUDGET),
            ..Default::default()
        }
    }

    /// The same budget math on the embedded store: 8 meters over one sled
    /// store, 32 tasks, 320 charges, exactly 25 allowed.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn budget_is_shared_by_meters_on_sled() {
        let dir = tempfile::tempdir().unwrap();
        let kv: Arc<dyn KvStore> = Arc::new(SledStore::open(&dir.path().join("db")).unwrap());
        let meters: Vec<Meter> = (0..8)
            .map(|_| Meter::new(kv.clone(), Prices::default()))
            .collect();
        meters[0].open_run("run-s", &budget(), false).await.unwrap();
        let mut tasks = Vec::new();
        for t in 0..32 {
            let meter = meters[t % 8].clone();
            tasks.push(tokio::spawn(
                async move { charge(&meter, "run-s", 10).await },
            ));
        }
        let mut allowed = 0;
        for t in tasks {
            allowed += t.await.unwrap();
        }
        assert_eq!(allowed, BUDGET);
    }

    /// Several executors (each its own `Meter` and connection pool) on one
    /// PostgreSQL store, in concurrent tasks, charge one run's budget of 25
    /// tool calls 320 times: exactly 25 succeed.
    #[cfg(feature = "postgres")]
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn budget_is_shared_by_meters_on_postgres() {
        let Some(url) = crate::store::conformance::postgres_test_url("budget_tasks") else {
            return;
        };
        let mut meters = Vec::new();
        for _ in 0..8 {
            let kv = Arc::new(crate::store::PostgresStore::connect(&url).await.unwrap());
            meters.push(Meter::new(kv, Prices::default()));
        }
        meters[0].open_run("run-b", &budget(), false).await.unwrap();
        let barrier = Arc::new(tokio::sync::Barrier::new(32));
        let mut tasks = Vec::new();
        for t in 0..32 {
            let meter = meters[t % 8].clone();
            let barrier = barrier.clone();
            tasks.push(tokio::spawn(async move {
                barrier.wait().await;
                charge(&meter, "run-b", 10).await
            }));
        }
        let mut allowed = 0;
        for t in tasks {
            allowed += t.await.unwrap();
        }
        assert_eq!(allowed, BUDGET);
        let ledger = meters[3].ledger("run-b").await.unwrap().unwrap();
        assert_eq!(ledger.consumed.tool_calls, BUDGET);
        assert_eq!(ledger.exhausted, Some(Dimension::ToolCalls));
    }

    /// The same across processes: this test binary re-runs itself as 4
    /// workers (the ignored test below), each with its own store, charging
    /// 15 times in 4 tasks; exactly 25 of the 240 charges succeed.
    #[cfg(feature = "postgres")]
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn budget_is_shared_by_processes_on_postgres() {
        let Some(url) = crate::store::conformance::postgres_test_url("budget_procs") else {
            return;
        };
        let kv = Arc::new(crate::store::PostgresStore::connect(&url).await.unwrap());
        let meter = Meter::new(kv, Prices::default());
        meter.open_run("run-p", &budget(), false).await.unwrap();
        let exe = std::env::current_exe().unwrap();
        let mut children = Vec::new();
        for _ in 0..4 {
            children.push(
                tokio::process::Command::new(&exe)
                    .args([
                        "--exact",
                        "meter::tests::budget_worker_process",
                        "--ignored",
                        "--nocapture",
                        "--test-threads=1",
                    ])
                    .env("WOP_BUDGET_WORKER_URL", &url)
                    .output(),
            );
        }
        let mut allowed = 0;
        for c in children {
            let out = c.await.unwrap();
            let stdout = String::from_utf8_lossy(&out.stdout);
            assert!(
                out.status.success(),
                "worker failed: {stdout}\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
            let n: u64 = stdout
                .lines()
                .find_map(|l| l.split("WORKER_ALLOWED ").nth(1))
                .unwrap_or_else(|| panic!("no count from worker: {stdout}"))
                .trim()
                .parse()
                .unwrap();
            allowed += n;
        }
        assert_eq!(allowed, BUDGET);
        let ledger = meter.ledger("run-p").await.unwrap().unwrap();
        assert_eq!(ledger.consumed.tool_calls, BUDGET);
    }

    /// The worker of `budget_is_shared_by_processes_on_postgres`; does
    /// nothing unless started by it.
    #[cfg(feature = "postgres")]
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    #[ignore = "a worker process started by budget_is_shared_by_processes_on_postgres"]
    async fn budget_worker_process() {
        let Ok(url) = std::env::var("WOP_BUDGET_WORKER_URL") else {
            return;
        };
        let kv = Arc::new(crate::store::PostgresStore::connect(&url).await.unwrap());
        let meter = Meter::new(kv, Prices::default());
        let mut tasks = Vec::new();
        for _ in 0..4 {
            let meter = meter.clone();
            tasks.push(tokio::spawn(
                async move { charge(&meter, "run-p", 15).await },
            ));
        }
        let mut allowed = 0;
        for t in tasks {
            allowed += t.await.unwrap();
        }
        println!("WORKER_ALLOWED {allowed}");
    }
}
