//! What one invocation consumed ([`Usage`]), attributed to its pack, node
//! and run, with one record per host call.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

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
