//! The policy's own sections: `[metering]`, `[runs]` (a run's default
//! budget and bounds), `[[tools]]` and `[effects]`. The sections of other
//! rooms (`[limits]`, `[egress]`, `[prices]`, `[trust]`, `[secrets]`,
//! `[mcp]`) are defined in those rooms.

use serde::{Deserialize, Serialize};

/// `[metering]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MeteringSection {
    /// Record the per-host-call breakdown (fuel before each call, wall time
    /// inside it). Default true; costs ≈ 190 ns per host call (decision 0005).
    pub host_call_breakdown: Option<bool>,
}

/// `[runs]`: the default budget and bounds of a run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RunsSection {
    /// See [`crate::model::RunBudget::max_tool_calls`].
    pub max_tool_calls: Option<u64>,
    /// See [`crate::model::RunBudget::max_fuel`].
    pub max_fuel: Option<u64>,
    /// See [`crate::model::RunBudget::max_cost_usd`].
    pub max_cost_usd: Option<f64>,
    /// See [`crate::model::RunBudget::threshold_percent`].
    pub threshold_percent: Option<u8>,
    /// Only `fail` is supported.
    #[serde(default)]
    pub on_exhaustion: crate::model::OnExhaustion,
    /// See [`crate::model::RunBounds::max_loop_iterations`].
    pub max_loop_iterations: Option<u32>,
    /// See [`crate::model::RunBounds::run_timeout_ms`].
    pub run_timeout_ms: Option<u64>,
}

impl RunsSection {
    /// The default budget.
    pub fn budget(&self) -> crate::model::RunBudget {
        crate::model::RunBudget {
            max_tool_calls: self.max_tool_calls,
            max_fuel: self.max_fuel,
            max_cost_usd: self.max_cost_usd,
            threshold_percent: self.threshold_percent,
            on_exhaustion: self.on_exhaustion,
        }
    }

    /// The default bounds.
    pub fn bounds(&self) -> crate::model::RunBounds {
        crate::model::RunBounds {
            max_loop_iterations: self.max_loop_iterations,
            run_timeout_ms: self.run_timeout_ms,
        }
    }
}

/// One `[[tools]]` entry: exactly one of `url` (an operator HTTP tool) or
/// `packType` (a node of a loaded pack).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ToolSpec {
    /// `<scope>:<id>`.
    pub id: String,
    /// Operator endpoint (HTTP tool). Loopback/private allowed: operator-trusted.
    pub url: Option<String>,
    /// HTTP method (default POST).
    pub method: Option<String>,
    /// Node type of a loaded pack (node-pack tool).
    pub pack_type: Option<String>,
    /// Safety tier.
    pub safety_tier: crate::tools::SafetyTier,
    /// Replay policy (default: `idempotent` for HTTP tools is NOT assumed;
    /// unset means the tier decides whether calls are effects).
    pub replay_policy: Option<crate::tools::ReplayPolicy>,
    /// Scopes the principal must hold.
    #[serde(default)]
    pub scopes: Vec<String>,
    /// Tenants that may see the tool (default: all).
    pub tenants: Option<Vec<String>>,
    /// Per-call timeout in ms (default 10 000; clamped to the caller's
    /// remaining wall clock).
    pub timeout_ms: Option<u64>,
    /// Rate limit per (principal, tool).
    pub rate_limit: Option<crate::ratelimit::RateSpec>,
    /// Catalog title.
    pub title: Option<String>,
    /// Catalog description.
    pub description: Option<String>,
    /// JSON Schema of the arguments.
    pub input_schema: Option<serde_json::Value>,
}

/// How much longer than the wall-clock ceiling an effect claim's lease
/// must be (what an invocation spends around its sandbox: admission,
/// recording).
pub const LEASE_MARGIN_MS: u64 = 1_000;

/// `[effects]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EffectsSection {
    /// Claim lease in ms (default: the wall-clock ceiling + 5 s). Must be
    /// at least the wall-clock ceiling + [`LEASE_MARGIN_MS`]: a claim must
    /// outlive the longest call it guards (every call, and a whole node
    /// invocation claimed by `wop serve`, ends by the wall clock), or a
    /// call still running would be taken over as abandoned.
    pub lease_ms: Option<u64>,
    /// How long a duplicate waits for an in-flight claim before
    /// `idempotency_in_flight` (default 2000 ms).
    pub in_flight_wait_ms: Option<u64>,
    /// Days completed/released records are kept (default and minimum 14).
    pub retention_days: Option<u64>,
    /// Largest tool result recorded and returned, in bytes (default 1 MiB).
    pub max_result_bytes: Option<u64>,
    /// Most effectful calls (claimed or replayed) one invocation may make,
    /// so one invocation can grow the effect store by at most this many
    /// records of at most `maxResultBytes` each (default 64; 0 refuses
    /// every effectful call).
    pub max_records_per_invocation: Option<u32>,
    /// Most result bytes one invocation's effect records may hold, all
    /// records together (the recorded result or error of each effectful
    /// call, claimed or replayed alike). An effectful call is refused
    /// before it is sent when the bytes recorded so far plus one result of
    /// up to `maxResultBytes` would pass it. Default
    /// [`DEFAULT_MAX_RECORD_BYTES_PER_INVOCATION`] (4 MiB), or 4 ×
    /// `maxResultBytes` if that is larger (room for four whole results);
    /// must be at least `maxResultBytes`.
    pub max_record_bytes_per_invocation: Option<u64>,
    /// Maximum nesting of node-pack tools (default 3).
    pub max_tool_depth: Option<u32>,
    /// Where effects, budgets and usage live when `--store` is not given: a
    /// sled directory or a `postgres://` URL, or `env:NAME` to read either
    /// from the environment variable `NAME` (keeps a database password out
    /// of the policy file).
    pub store: Option<String>,
}

/// The default of `effects.maxResultBytes`: 1 MiB.
pub const DEFAULT_MAX_RESULT_BYTES: u64 = 1 << 20;

/// The default of `effects.maxRecordBytesPerInvocation`: 4 MiB.
pub const DEFAULT_MAX_RECORD_BYTES_PER_INVOCATION: u64 = 4 << 20;

impl EffectsSection {
    /// `maxResultBytes`, or its default.
    pub fn max_result_bytes(&self) -> u64 {
        self.max_result_bytes.unwrap_or(DEFAULT_MAX_RESULT_BYTES)
    }

    /// `maxRecordBytesPerInvocation`, or its default: 4 MiB, or 4 ×
    /// `maxResultBytes` if that is larger (four whole results fit).
    pub fn max_record_bytes_per_invocation(&self) -> u64 {
        self.max_record_bytes_per_invocation.unwrap_or_else(|| {
            DEFAULT_MAX_RECORD_BYTES_PER_INVOCATION.max(self.max_result_bytes().saturating_mul(4))
        })
    }

    /// The store `store` names, with `env:NAME` read from the environment;
    /// `None` when unset. The error names the missing variable.
    pub fn store_spec(&self) -> Result<Option<String>, String> {
        let Some(raw) = self.store.as_deref() else {
            return Ok(None);
        };
        let spec = match raw.strip_prefix("env:") {
            Some(name) => std::env::var(name).map_err(|_| {
                format!("[effects] store = \"env:{name}\" but the environment variable {name} is not set")
            })?,
            None => raw.to_owned(),
        };
        if spec.trim().is_empty() {
            return Err(
                "[effects] store is empty: give a directory or a postgres:// URL".to_owned(),
            );
        }
        Ok(Some(spec))
    }
}
