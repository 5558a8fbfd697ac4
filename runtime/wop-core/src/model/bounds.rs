//! What a run may spend and how long it may take: the budget and bounds a
//! request carries ([`crate::model::InvokeRequest`]) or the policy's
//! `[runs]` gives. The math that spends them is [`crate::budget`].

use serde::{Deserialize, Serialize};

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
