//! Metering: prices and cost, per-run budgets and bounds, and persisted
//! usage records with roll-ups per run and per pack.
//!
//! Everything persists in the same [`KvStore`] as effect claims:
//! `ledger/<runId>` holds a run's budget and what it consumed (updated with
//! compare-and-swap, so several executors sharing a store share a budget);
//! `usage/<runId>/<seq>` holds one invocation's [`Usage`].
//!
//! Two kinds of loop count exist in OpenWOP. The protocol's run-level count
//! of orchestrator turns belongs to the workflow host. `maxLoopIterations`
//! here bounds the pack's *own* agent loop inside one node invocation: each
//! host tool call (tools, http, mcp) is one iteration, since WIT 0.1 calls
//! are synchronous and a round holds exactly one call.

use crate::events::Event;
use crate::invoke::Usage;
use crate::store::{KvStore, StoreError};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// An operator price table (`[prices]`). All prices are in `currency`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Prices {
    /// The currency every price is stated in (default "USD").
    #[serde(default = "usd")]
    pub currency: String,
    /// Per million units of fuel.
    #[serde(default)]
    pub per_million_fuel: f64,
    /// Per GiB-second of peak linear memory held for the invocation's wall time.
    #[serde(default)]
    pub per_gib_second: f64,
    /// Per performed tool call (any tool).
    #[serde(default)]
    pub per_tool_call: f64,
    /// Per performed call of a specific tool, added to `perToolCall`.
    #[serde(default)]
    pub per_tool: BTreeMap<String, f64>,
    /// Per MiB of egress (in + out).
    #[serde(default)]
    pub per_mib_egress: f64,
    /// Per invocation.
    #[serde(default)]
    pub per_invocation: f64,
}

fn usd() -> String {
    "USD".to_owned()
}

impl Default for Prices {
    fn default() -> Self {
        Self {
            currency: usd(),
            per_million_fuel: 0.0,
            per_gib_second: 0.0,
            per_tool_call: 0.0,
            per_tool: BTreeMap::new(),
            per_mib_egress: 0.0,
            per_invocation: 0.0,
        }
    }
}

impl Prices {
    /// Rejects negative or non-finite prices.
    pub fn validate(&self) -> Result<(), String> {
        let all = [
            ("perMillionFuel", self.per_million_fuel),
            ("perGibSecond", self.per_gib_second),
            ("perToolCall", self.per_tool_call),
            ("perMibEgress", self.per_mib_egress),
            ("perInvocation", self.per_invocation),
        ];
        for (k, v) in all
            .into_iter()
            .chain(self.per_tool.iter().map(|(k, v)| (k.as_str(), *v)))
        {
            if !v.is_finite() || v < 0.0 {
                return Err(format!(
                    "prices.{k} = {v} must be a finite, non-negative number"
                ));
            }
        }
        Ok(())
    }

    /// The price of one performed call of `tool`.
    pub fn tool_call(&self, tool: &str) -> f64 {
        self.per_tool_call + self.per_tool.get(tool).copied().unwrap_or(0.0)
    }

    /// The cost of an invocation *excluding* its tool calls (those are
    /// charged as they happen): fuel, memory-time, egress, the invocation.
    pub fn invocation_cost(&self, u: &Usage) -> f64 {
        let gib_seconds =
            (u.peak_memory_bytes as f64 / (1u64 << 30) as f64) * (u.wall_time_us as f64 / 1e6);
        let egress_mib = (u.egress_bytes_in + u.egress_bytes_out) as f64 / (1u64 << 20) as f64;
        self.per_million_fuel * u.fuel_consumed as f64 / 1e6
            + self.per_gib_second * gib_seconds
            + self.per_mib_egress * egress_mib
            + self.per_invocation
    }
}

/// What happens when a budget is exhausted. Only `fail` is supported.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OnExhaustion {
    /// Refuse the call or invocation with `budget_exhausted`.
    #[default]
    Fail,
    /// Not supported by this runtime; rejected with a clear error.
    Interrupt,
}

/// A run's budget (from the workflow host per run, or the policy default).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RunBudget {
    /// Performed tool calls across the run.
    pub max_tool_calls: Option<u64>,
    /// Fuel across the run.
    pub max_fuel: Option<u64>,
    /// Cost across the run, in the price table's currency.
    pub max_cost_usd: Option<f64>,
    /// `budget.threshold-crossed` fires once per dimension past this
    /// percentage (default 80).
    pub threshold_percent: Option<u8>,
    /// Only `fail`.
    #[serde(default)]
    pub on_exhaustion: OnExhaustion,
}

impl RunBudget {
    /// Rejects what this runtime cannot honour.
    pub fn validate(&self) -> Result<(), String> {
        if self.on_exhaustion == OnExhaustion::Interrupt {
            return Err(
                "onExhaustion = \"interrupt\" is not supported by wop; use \"fail\"".to_owned(),
            );
        }
        if self.threshold_percent.is_some_and(|p| p == 0 || p > 100) {
            return Err("thresholdPercent must be between 1 and 100".to_owned());
        }
        if self.max_cost_usd.is_some_and(|c| !c.is_finite() || c < 0.0) {
            return Err("maxCostUsd must be a finite, non-negative number".to_owned());
        }
        Ok(())
    }

    /// Whether the budget limits nothing.
    pub fn is_empty(&self) -> bool {
        self.max_tool_calls.is_none() && self.max_fuel.is_none() && self.max_cost_usd.is_none()
    }
}

/// Bounds on a run and on a pack's own loop.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RunBounds {
    /// Host tool calls (tools, http, mcp) per node invocation.
    pub max_loop_iterations: Option<u32>,
    /// Wall clock across the run's invocations, from its first invocation.
    pub run_timeout_ms: Option<u64>,
}

/// A budget dimension.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Dimension {
    /// Performed tool calls.
    ToolCalls,
    /// Fuel.
    Fuel,
    /// Cost.
    Cost,
}

impl Dimension {
    /// `details.dimension` and the `cap.breached` kind suffix.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ToolCalls => "tool-calls",
            Self::Fuel => "fuel",
            Self::Cost => "cost",
        }
    }

    /// The `cap.breached` kind: `budget-tool-calls`, `budget-fuel`, `budget-cost`.
    pub fn cap_kind(self) -> &'static str {
        match self {
            Self::ToolCalls => "budget-tool-calls",
            Self::Fuel => "budget-fuel",
            Self::Cost => "budget-cost",
        }
    }
}

/// What a run consumed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Consumed {
    /// Performed tool calls.
    pub tool_calls: u64,
    /// Fuel.
    pub fuel: u64,
    /// Cost.
    pub cost_usd: f64,
}

/// The persisted state of one run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Ledger {
    /// The run.
    pub run_id: String,
    /// First invocation (ms since epoch): the run clock starts here.
    pub started_at_ms: u64,
    /// The budget fixed at the run's first invocation.
    pub budget: RunBudget,
    /// Consumption so far.
    pub consumed: Consumed,
    /// Dimensions whose threshold event was emitted.
    pub thresholds_crossed: BTreeSet<Dimension>,
    /// The dimension that ran out, if any.
    pub exhausted: Option<Dimension>,
    /// Invocations recorded.
    pub invocations: u64,
}

impl Ledger {
    /// A fresh ledger for a run starting now.
    fn new(run: &str, budget: RunBudget) -> Self {
        Self {
            run_id: run.to_owned(),
            started_at_ms: crate::effects::now_ms(),
            budget,
            consumed: Consumed::default(),
            thresholds_crossed: BTreeSet::new(),
            exhausted: None,
            invocations: 0,
        }
    }

    fn limit(&self, d: Dimension) -> Option<f64> {
        match d {
            Dimension::ToolCalls => self.budget.max_tool_calls.map(|v| v as f64),
            Dimension::Fuel => self.budget.max_fuel.map(|v| v as f64),
            Dimension::Cost => self.budget.max_cost_usd,
        }
    }

    fn used(&self, d: Dimension) -> f64 {
        match d {
            Dimension::ToolCalls => self.consumed.tool_calls as f64,
            Dimension::Fuel => self.consumed.fuel as f64,
            Dimension::Cost => self.consumed.cost_usd,
        }
    }

    /// The limit of a dimension, if the budget has one.
    pub fn limit_of(&self, d: Dimension) -> Option<f64> {
        self.limit(d)
    }

    /// What the run consumed in a dimension.
    pub fn used_of(&self, d: Dimension) -> f64 {
        self.used(d)
    }

    /// Fuel left in the budget, if it has a fuel dimension.
    pub fn fuel_left(&self) -> Option<u64> {
        self.budget
            .max_fuel
            .map(|m| m.saturating_sub(self.consumed.fuel))
    }

    fn consumed_event(&self) -> Event {
        budget_event(
            BudgetEvent::Consumed,
            json!({"runId": self.run_id, "consumed": self.consumed, "budget": self.budget}),
        )
    }

    /// Threshold events for dimensions newly past the threshold; marks them.
    fn cross_thresholds(&mut self, out: &mut Vec<Event>) {
        let pct = f64::from(self.budget.threshold_percent.unwrap_or(80)) / 100.0;
        for d in [Dimension::ToolCalls, Dimension::Fuel, Dimension::Cost] {
            if let Some(limit) = self.limit(d)
                && !self.thresholds_crossed.contains(&d)
                && self.used(d) >= limit * pct
            {
                self.thresholds_crossed.insert(d);
                out.push(budget_event(
                    BudgetEvent::ThresholdCrossed,
                    json!({
                        "runId": self.run_id, "dimension": d.as_str(),
                        "thresholdPercent": self.budget.threshold_percent.unwrap_or(80),
                        "consumed": self.used(d), "limit": limit,
                    }),
                ));
            }
        }
    }

    /// Marks a dimension exhausted; returns the events (exhausted once).
    fn exhaust(&mut self, d: Dimension, attempted: f64, node_id: &str, out: &mut Vec<Event>) {
        let limit = self.limit(d).unwrap_or(0.0);
        if self.exhausted.is_none() {
            self.exhausted = Some(d);
            out.push(budget_event(BudgetEvent::Exhausted, json!({"runId": self.run_id, "dimension": d.as_str(), "consumed": self.used(d), "limit": limit})));
        }
        out.push(Event::CapBreached {
            kind: d.cap_kind().to_owned(),
            limit: limit.ceil() as u64,
            observed: attempted.ceil() as u64,
            node_id: node_id.to_owned(),
        });
    }
}

/// Which budget event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum BudgetEvent {
    /// `budget.reserved`.
    #[serde(rename = "budget.reserved")]
    Reserved,
    /// `budget.consumed`.
    #[serde(rename = "budget.consumed")]
    Consumed,
    /// `budget.threshold-crossed`.
    #[serde(rename = "budget.threshold-crossed")]
    ThresholdCrossed,
    /// `budget.exhausted`.
    #[serde(rename = "budget.exhausted")]
    Exhausted,
}

impl BudgetEvent {
    /// The protocol event name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Reserved => "budget.reserved",
            Self::Consumed => "budget.consumed",
            Self::ThresholdCrossed => "budget.threshold-crossed",
            Self::Exhausted => "budget.exhausted",
        }
    }
}

/// Refused: a budget dimension would be exceeded.
#[derive(Debug, Clone, PartialEq)]
pub struct Exhausted {
    /// Which dimension.
    pub dimension: Dimension,
    /// Its limit.
    pub limit: f64,
    /// What the refused action would have brought it to.
    pub attempted: f64,
}

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

/// A roll-up of usage records.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Rollup {
    /// Invocations counted.
    pub invocations: u64,
    /// Σ fuel.
    pub fuel: u64,
    /// Σ wall time (µs).
    pub wall_time_us: u64,
    /// Σ performed tool calls.
    pub tool_calls: u64,
    /// Σ effect claims.
    pub effect_claims: u64,
    /// Σ egress bytes (in + out).
    pub egress_bytes: u64,
    /// Σ log bytes.
    pub log_bytes: u64,
    /// Σ cost.
    pub cost: f64,
    /// The currency of `cost`.
    pub currency: String,
}

impl Rollup {
    fn add(&mut self, u: &Usage) {
        self.invocations += 1;
        self.fuel += u.fuel_consumed;
        self.wall_time_us += u.wall_time_us;
        self.tool_calls += u.tool_calls;
        self.effect_claims += u.effect_claims;
        self.egress_bytes += u.egress_bytes_in + u.egress_bytes_out;
        self.log_bytes += u.log_bytes;
        self.cost += u.cost;
    }
}

const MAX_CAS_ROUNDS: usize = 64;

/// The meter: ledgers and usage records in a [`KvStore`].
#[derive(Clone)]
pub struct Meter {
    kv: Arc<dyn KvStore>,
    prices: Prices,
}

impl Meter {
    /// A meter on `kv` with `prices`.
    pub fn new(kv: Arc<dyn KvStore>, prices: Prices) -> Self {
        Self { kv, prices }
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
        for _ in 0..MAX_CAS_ROUNDS {
            let cur = self.kv.get(&k).await?;
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
            if self
                .kv
                .compare_and_swap(&k, cur.as_deref(), Some(bytes))
                .await?
                .is_ok()
            {
                return Ok((ledger, r, events));
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

    /// Records a finished invocation: persists its usage and, when the run
    /// has a budget, adds its fuel and cost to the run's ledger. Returns the
    /// budget events.
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
        let key = format!(
            "usage/{}/{:013}-{}-{}-{}-{}",
            usage.run_id,
            crate::effects::now_ms(),
            usage.node_id,
            usage.attempt,
            std::process::id(),
            SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        );
        self.kv
            .put(&key, serde_json::to_vec(usage).unwrap_or_default())
            .await?;
        Ok(events)
    }

    /// Usage records, optionally of one run and/or one pack.
    pub async fn usage(
        &self,
        run: Option<&str>,
        pack: Option<&str>,
    ) -> Result<Vec<Usage>, MeterError> {
        let prefix = match run {
            Some(r) => format!("usage/{r}/"),
            None => "usage/".to_owned(),
        };
        let mut out = Vec::new();
        for (k, v) in self.kv.scan_prefix(&prefix, usize::MAX).await? {
            let u: Usage = serde_json::from_slice(&v).map_err(|_| MeterError::Corrupt(k))?;
            if pack.is_none_or(|p| u.pack == p) {
                out.push(u);
            }
        }
        Ok(out)
    }

    /// Roll-ups per run and per pack over the selected records.
    pub async fn rollup(
        &self,
        run: Option<&str>,
        pack: Option<&str>,
    ) -> Result<(BTreeMap<String, Rollup>, BTreeMap<String, Rollup>), MeterError> {
        let mut by_run: BTreeMap<String, Rollup> = BTreeMap::new();
        let mut by_pack: BTreeMap<String, Rollup> = BTreeMap::new();
        for u in self.usage(run, pack).await? {
            for (map, key) in [
                (&mut by_run, u.run_id.clone()),
                (&mut by_pack, format!("{}@{}", u.pack, u.pack_version)),
            ] {
                map.entry(key)
                    .or_insert_with(|| Rollup {
                        currency: self.prices.currency.clone(),
                        ..Default::default()
                    })
                    .add(&u);
            }
        }
        Ok((by_run, by_pack))
    }
}

impl Prices {
    /// The tool-call part of an invocation's cost (charged as calls happen).
    pub fn tool_call_total(&self, u: &Usage) -> f64 {
        u.tool_calls_by_id
            .iter()
            .map(|(id, n)| self.tool_call(id) * *n as f64)
            .sum()
    }
}

/// Builds a budget event from its JSON payload (an object).
pub fn budget_event(kind: BudgetEvent, data: Value) -> Event {
    let data = match data {
        Value::Object(m) => m,
        _ => serde_json::Map::new(),
    };
    match kind {
        BudgetEvent::Reserved => Event::BudgetReserved { data },
        BudgetEvent::Consumed => Event::BudgetConsumed { data },
        BudgetEvent::ThresholdCrossed => Event::BudgetThresholdCrossed { data },
        BudgetEvent::Exhausted => Event::BudgetExhausted { data },
    }
}
