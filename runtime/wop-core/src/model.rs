//! The shared vocabulary: who asks ([`Principal`]), where in a run
//! ([`RunContext`]), what to run ([`InvokeRequest`]), how it ended
//! ([`Outcome`]), what it cost ([`Usage`]) and everything together
//! ([`InvocationReport`]). Pure data.

use crate::error::NodeError;
use crate::events::Event;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

/// Who is asking: the principal on whose behalf the node runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Principal {
    /// Principal id; non-agent calls use `core.system`.
    pub id: String,
    /// The principal's tenant.
    pub tenant: String,
    /// Granted scopes.
    #[serde(default)]
    pub scopes: Vec<String>,
}

impl Default for Principal {
    fn default() -> Self {
        Self {
            id: "core.system".to_owned(),
            tenant: "default".to_owned(),
            scopes: Vec::new(),
        }
    }
}

/// Where in a run this invocation is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunContext {
    /// The workflow run.
    pub run_id: String,
    /// The node within the run.
    pub node_id: String,
    /// The tenant the run belongs to.
    pub tenant_id: String,
    /// Attempt number, starting at 1.
    pub attempt: u32,
}

impl Default for RunContext {
    fn default() -> Self {
        Self {
            run_id: "run-local".to_owned(),
            node_id: "node-1".to_owned(),
            tenant_id: "default".to_owned(),
            attempt: 1,
        }
    }
}

/// One node invocation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InvokeRequest {
    /// The node type to run (must be registered by a loaded pack).
    pub type_id: String,
    /// The node's inputs.
    pub inputs: Value,
    /// The node's static configuration (`{}` if none).
    #[serde(default = "empty_object")]
    pub config: Value,
    /// The resume value after a `suspended` outcome.
    #[serde(default)]
    pub resume: Option<Value>,
    /// The run's trigger payload (the protocol's `ctx.triggerData`): what
    /// started the run, captured once at its start, so every invocation
    /// and replay of the run passes the same value. A JavaScript pack reads
    /// it as `ctx.triggerData`; other packs may ask for it as the host
    /// service `run.triggerData`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trigger_data: Option<Value>,
    /// Run, node, tenant, attempt.
    #[serde(default)]
    pub context: RunContext,
    /// On whose behalf.
    #[serde(default)]
    pub principal: Principal,
    /// The run's budget (fixed at the run's first invocation; later values
    /// are ignored). Default: the policy's `[runs]`.
    #[serde(default)]
    pub budget: Option<crate::budget::RunBudget>,
    /// The run's bounds. Default: the policy's `[runs]`.
    #[serde(default)]
    pub bounds: Option<crate::budget::RunBounds>,
    /// The caller's W3C `traceparent`: the invocation's span is its child
    /// (a malformed value is ignored).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traceparent: Option<String>,
}

fn empty_object() -> Value {
    Value::Object(Default::default())
}

impl InvokeRequest {
    /// A request with default context and principal.
    pub fn new(type_id: impl Into<String>, inputs: Value) -> Self {
        Self {
            type_id: type_id.into(),
            inputs,
            config: empty_object(),
            resume: None,
            trigger_data: None,
            context: RunContext::default(),
            principal: Principal::default(),
            budget: None,
            bounds: None,
            traceparent: None,
        }
    }
}

/// How a node finished when it did not fail.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "lowercase")]
pub enum Outcome {
    /// Finished with an output.
    Completed {
        /// The node's output.
        output: Value,
    },
    /// Waiting for outside input.
    Suspended {
        /// What the node waits for.
        interrupt: Value,
    },
}

/// What one invocation consumed, attributed to its pack, node and run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    /// Pack name.
    pub pack: String,
    /// Pack version.
    pub pack_version: String,
    /// Node type.
    pub type_id: String,
    /// Tenant.
    pub tenant_id: String,
    /// Run.
    pub run_id: String,
    /// Node.
    pub node_id: String,
    /// Attempt.
    pub attempt: u32,
    /// Fuel granted.
    pub fuel_limit: u64,
    /// Fuel consumed (deterministic for the same pack and inputs).
    pub fuel_consumed: u64,
    /// Wall time of the whole invocation, in microseconds.
    pub wall_time_us: u64,
    /// Time to instantiate, in microseconds.
    pub instantiate_time_us: u64,
    /// Peak linear memory (all memories), in bytes.
    pub peak_memory_bytes: u64,
    /// Memory cap, in bytes.
    pub memory_limit_bytes: u64,
    /// Most elements any one table reached (`limits.tableElements` caps it).
    #[serde(default)]
    pub peak_table_elements: u64,
    /// Host calls per interface.
    pub host_calls: BTreeMap<String, u64>,
    /// Log bytes kept.
    pub log_bytes: u64,
    /// Log bytes dropped past the cap.
    pub log_bytes_dropped: u64,
    /// Size of the output JSON, in bytes.
    pub output_bytes: u64,
    /// Tool calls performed (not refused, not replayed), all transports.
    pub tool_calls: u64,
    /// Performed tool calls by tool id.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tool_calls_by_id: BTreeMap<String, u64>,
    /// Effect claims won (the effect was performed under our claim).
    pub effect_claims: u64,
    /// Egress bytes received (safe-fetch response bodies).
    pub egress_bytes_in: u64,
    /// Egress bytes sent (safe-fetch request bodies).
    pub egress_bytes_out: u64,
    /// Host tool-call rounds of the pack's own loop (tools, http, mcp).
    pub loop_iterations: u64,
    /// Cost of this invocation (tool calls + fuel + memory + egress +
    /// invocation), in `currency`.
    pub cost: f64,
    /// The price table's currency.
    pub currency: String,
    /// One record per host call of the `openwop` interfaces, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub host_call_breakdown: Vec<HostCallRecord>,
    /// Fuel the pack spent after its last recorded host call (so that
    /// Σ `fuelBefore` + this = `fuelConsumed`).
    pub fuel_after_last_call: u64,
}

/// One host call in the usage breakdown.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HostCallRecord {
    /// The interface (`log`, `tools`, `http`, ...).
    pub interface: String,
    /// The tool or destination, for gate calls.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// Fuel the pack spent since the previous recorded host call (or the
    /// start): the computation that led to this call.
    pub fuel_before: u64,
    /// Wall time inside the host call, in microseconds.
    pub wall_us: u64,
}

/// Everything an invocation produced.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InvocationReport {
    /// The outcome, or why the node failed.
    #[serde(serialize_with = "ser_outcome")]
    pub outcome: Result<Outcome, NodeError>,
    /// Events in order (`log.appended`, `cap.breached`, ...).
    pub events: Vec<Event>,
    /// What it consumed.
    pub usage: Usage,
}

/// The fields an invocation's outcome gives an object: `outcome` and then
/// `output`, `interrupt` or `error`, exactly as in [`InvocationReport`].
/// For responses that flatten them beside fields of their own
/// (`#[serde(flatten)]`) instead of nesting the report.
#[derive(Debug, Clone, Copy)]
pub struct OutcomeFields<'a>(pub &'a Result<Outcome, NodeError>);

impl Serialize for OutcomeFields<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        ser_outcome(self.0, s)
    }
}

fn ser_outcome<S: serde::Serializer>(
    o: &Result<Outcome, NodeError>,
    s: S,
) -> Result<S::Ok, S::Error> {
    #[derive(Serialize)]
    #[serde(tag = "outcome", rename_all = "lowercase")]
    enum Failed<'a> {
        Failed { error: &'a NodeError },
    }
    match o {
        Ok(ok) => ok.serialize(s),
        Err(error) => Failed::Failed { error }.serialize(s),
    }
}
