//! Events the runtime emits, with the protocol's exact names, and the
//! [`EventSink`] trait hosts implement to receive them.

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
        /// `wasm-memory`, `wasm-fuel`, `wasm-execution-time`, ...
        kind: String,
        /// The limit in force.
        limit: u64,
        /// What was observed (attempted size, consumed fuel, elapsed ms).
        observed: u64,
        /// The node that breached it.
        node_id: String,
    },
}

impl Event {
    /// The protocol event name (`log.appended`, `cap.breached`, ...).
    pub fn name(&self) -> &'static str {
        match self {
            Self::LogAppended { .. } => "log.appended",
            Self::CapBreached { .. } => "cap.breached",
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
