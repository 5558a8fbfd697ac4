//! Budget math: prices and cost, per-run budgets and bounds, the run
//! ledger and its events, and usage roll-ups. Pure: the store that
//! persists ledgers and usage records is `wop_effects::Meter`.
//!
//! Two kinds of loop count exist in OpenWOP. The protocol's run-level count
//! of orchestrator turns belongs to the workflow host. `maxLoopIterations`
//! here bounds the pack's *own* agent loop inside one node invocation: each
//! host tool call (tools, http, mcp) is one iteration, since WIT 0.1 calls
//! are synchronous and a round holds exactly one call.

use crate::model::Usage;
use crate::model::breach::BreachKind;
use crate::model::events::Event;
/// The run's budget and bounds are part of the request ([`crate::model`]).
pub use crate::model::{OnExhaustion, RunBounds, RunBudget};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};

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
    pub fn breach_kind(self) -> BreachKind {
        match self {
            Self::ToolCalls => BreachKind::BudgetToolCalls,
            Self::Fuel => BreachKind::BudgetFuel,
            Self::Cost => BreachKind::BudgetCost,
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
    pub fn new(run: &str, budget: RunBudget) -> Self {
        Self {
            run_id: run.to_owned(),
            started_at_ms: crate::time::now_ms(),
            budget,
            consumed: Consumed::default(),
            thresholds_crossed: BTreeSet::new(),
            exhausted: None,
            invocations: 0,
        }
    }

    /// The limit of a dimension, if the budget has one.
    pub fn limit(&self, d: Dimension) -> Option<f64> {
        match d {
            Dimension::ToolCalls => self.budget.max_tool_calls.map(|v| v as f64),
            Dimension::Fuel => self.budget.max_fuel.map(|v| v as f64),
            Dimension::Cost => self.budget.max_cost_usd,
        }
    }

    /// What the run consumed in a dimension.
    pub fn used(&self, d: Dimension) -> f64 {
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

    /// The `budget.consumed` event for the ledger's current state.
    pub fn consumed_event(&self) -> Event {
        budget_event(
            BudgetEvent::Consumed,
            json!({"runId": self.run_id, "consumed": self.consumed, "budget": self.budget}),
        )
    }

    /// Threshold events for dimensions newly past the threshold; marks them.
    pub fn cross_thresholds(&mut self, out: &mut Vec<Event>) {
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
    pub fn exhaust(&mut self, d: Dimension, attempted: f64, node_id: &str, out: &mut Vec<Event>) {
        let limit = self.limit(d).unwrap_or(0.0);
        if self.exhausted.is_none() {
            self.exhausted = Some(d);
            out.push(budget_event(BudgetEvent::Exhausted, json!({"runId": self.run_id, "dimension": d.as_str(), "consumed": self.used(d), "limit": limit})));
        }
        out.push(Event::CapBreached {
            kind: d.breach_kind(),
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

/// A roll-up of usage records. Absent fields read as zero (stores keep
/// roll-ups without their zero fields).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
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
    /// Adds one invocation's usage.
    pub fn add(&mut self, u: &Usage) {
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
