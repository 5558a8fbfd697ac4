//! Events the runtime emits, with the protocol's exact names, and the
//! [`EventSink`] trait hosts implement to receive them.

use crate::model::breach::BreachKind;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::sync::Mutex;

/// Log severity (protocol `log.appended.level`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogLevel {
    /// Debug detail (also where `trace` maps).
    Debug,
    /// Informational.
    Info,
    /// Something unexpected that did not fail the node.
    Warn,
    /// An error the pack reported.
    Error,
}

/// Where a log line came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogStream {
    /// The `log` interface.
    Log,
    /// Captured WASI stdout.
    Stdout,
    /// Captured WASI stderr.
    Stderr,
    /// The runtime itself (for example a truncation notice).
    Runtime,
}

/// One event. Serialized with `type` holding the protocol event name.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type")]
pub enum Event {
    /// `log.appended`: a line from the pack (log interface or captured output).
    #[serde(rename = "log.appended", rename_all = "camelCase")]
    LogAppended {
        /// Severity.
        level: LogLevel,
        /// The line (truncated past the cap, with a marker).
        message: String,
        /// Structured fields (a JSON object), if the pack gave any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        fields: Option<Value>,
        /// Which stream produced it.
        stream: LogStream,
    },
    /// `cap.breached`: a limit stopped the node.
    #[serde(rename = "cap.breached", rename_all = "camelCase")]
    CapBreached {
        /// What was breached: `wasm-memory`, `wasm-fuel`, ...
        kind: BreachKind,
        /// The limit in force.
        limit: u64,
        /// What was observed (attempted size, consumed fuel, elapsed ms).
        observed: u64,
        /// The node that breached it.
        node_id: String,
    },
    /// `budget.reserved`: the run's budget was fixed (its first invocation).
    #[serde(rename = "budget.reserved")]
    BudgetReserved {
        /// `runId`, `budget`.
        #[serde(flatten)]
        data: serde_json::Map<String, Value>,
    },
    /// `budget.consumed`: what the run has consumed so far.
    #[serde(rename = "budget.consumed")]
    BudgetConsumed {
        /// `runId`, `consumed`, `budget`.
        #[serde(flatten)]
        data: serde_json::Map<String, Value>,
    },
    /// `budget.threshold-crossed`: once per dimension.
    #[serde(rename = "budget.threshold-crossed")]
    BudgetThresholdCrossed {
        /// `runId`, `dimension`, `thresholdPercent`, `consumed`, `limit`.
        #[serde(flatten)]
        data: serde_json::Map<String, Value>,
    },
    /// `budget.exhausted`: a dimension ran out.
    #[serde(rename = "budget.exhausted")]
    BudgetExhausted {
        /// `runId`, `dimension`, `consumed`, `limit`.
        #[serde(flatten)]
        data: serde_json::Map<String, Value>,
    },
    /// `agent.tool-called`: a host call entered the gate.
    #[serde(rename = "agent.tool-called", rename_all = "camelCase")]
    ToolCalled {
        /// The agent (principal) on whose behalf the call is made.
        agent_id: String,
        /// The tool id.
        tool_name: String,
        /// Unique per call; pairs with `agent.tool-returned`.
        call_id: String,
        /// SHA-256 of the JCS form of the arguments, secrets redacted.
        args_hash: String,
        /// Principal id (`core.system` for non-agent calls).
        principal: String,
        /// How the call arrived.
        transport: Transport,
    },
    /// `agent.tool-returned`: how the call ended.
    #[serde(rename = "agent.tool-returned", rename_all = "camelCase")]
    ToolReturned {
        /// The agent (principal).
        agent_id: String,
        /// The tool id.
        tool_name: String,
        /// Pairs with `agent.tool-called`.
        call_id: String,
        /// ok | error | forbidden | rate_limited.
        status: ToolStatus,
        /// Time spent performing the call; absent if it was never invoked
        /// (denied, rate limited, replayed).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        duration_ms: Option<u64>,
        /// The result (bounded preview), when ok.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        outcome: Option<Value>,
        /// The error, when not ok.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<Value>,
        /// The result came from the effect record; the tool was not called again.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        replayed: bool,
        /// The effect identity, for effectful calls.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        effect_id: Option<String>,
        /// Tool results are untrusted data, never instructions.
        untrusted: bool,
    },
    /// `egress.decided` (RFC 0079): safe-fetch allowed or refused a
    /// destination (the first request and every redirect hop), or a
    /// credential was attached, refused or left off. Content-free: never a
    /// credential value, a path, a query or a body.
    #[serde(rename = "egress.decided", rename_all = "camelCase")]
    EgressDecided {
        /// `allowed`, `denied` or `downgraded` (sent without the credential).
        decision: String,
        /// `host[:port]` only: never userinfo, path or query.
        destination: String,
        /// The protocol's closed vocabulary: `ok`, `out-of-audience`,
        /// `expired`, `ssrf-blocked`, `provenance-unevaluable`,
        /// `policy-denied`.
        reason: String,
        /// The credential considered, if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        credential_id: Option<String>,
        /// Our finer cause (`not-allowed`, `scheme`, `redirect`, `dns`, ...),
        /// the same as the error's `details.reason`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cause: Option<String>,
    },
}

/// Outcome class of a tool call (protocol `agent.tool-returned.status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolStatus {
    /// The tool returned a result (or a recorded result was replayed).
    Ok,
    /// The call failed (including `not_found` and effect conflicts).
    Error,
    /// Authorization denied; never performed.
    Forbidden,
    /// Rate limited; never performed.
    RateLimited,
}

/// How a tool call reached the host (protocol `transport`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Transport {
    /// `tools.call` from a pack.
    Native,
    /// `http.safe-fetch`.
    Http,
    /// The MCP client.
    Mcp,
}

impl Event {
    /// The protocol event name (`log.appended`, `cap.breached`, ...).
    pub fn name(&self) -> &'static str {
        match self {
            Self::LogAppended { .. } => "log.appended",
            Self::CapBreached { .. } => "cap.breached",
            Self::BudgetReserved { .. } => "budget.reserved",
            Self::BudgetConsumed { .. } => "budget.consumed",
            Self::BudgetThresholdCrossed { .. } => "budget.threshold-crossed",
            Self::BudgetExhausted { .. } => "budget.exhausted",
            Self::ToolCalled { .. } => "agent.tool-called",
            Self::ToolReturned { .. } => "agent.tool-returned",
            Self::EgressDecided { .. } => "egress.decided",
        }
    }
}

/// Receives every event of every invocation, in order per invocation.
///
/// Implementations must be cheap and must not block: they are called on the
/// invocation's task after it finishes. The runtime also returns the events
/// in the invocation report, so a sink is optional.
pub trait EventSink: Send + Sync {
    /// Called once per event, with the run and node it belongs to.
    fn emit(&self, run_id: &str, node_id: &str, event: &Event);
}

/// An [`EventSink`] that keeps everything in memory (tests, the CLI).
#[derive(Debug, Default)]
pub struct MemorySink {
    events: Mutex<Vec<(String, String, Event)>>,
}

impl MemorySink {
    /// All events received so far, as `(run_id, node_id, event)`.
    pub fn events(&self) -> Vec<(String, String, Event)> {
        match self.events.lock() {
            Ok(g) => g.clone(),
            Err(p) => p.into_inner().clone(),
        }
    }
}

impl EventSink for MemorySink {
    fn emit(&self, run_id: &str, node_id: &str, event: &Event) {
        let mut g = match self.events.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        g.push((run_id.to_owned(), node_id.to_owned(), event.clone()));
    }
}
