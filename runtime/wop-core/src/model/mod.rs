//! The shared vocabulary every room speaks: who asks ([`Principal`]),
//! where in a run ([`RunContext`]), what to run ([`InvokeRequest`]), with
//! what budget and bounds ([`bounds`]), how it ended ([`Outcome`],
//! [`report`]), what it cost ([`Usage`]), the events it emitted
//! ([`events`]) and what a `cap.breached` names ([`breach`]). Pure data.

pub mod bounds;
pub mod breach;
pub mod events;
pub mod report;
pub mod usage;

pub use bounds::{OnExhaustion, RunBounds, RunBudget};
pub use report::{InvocationReport, Outcome, OutcomeFields};
pub use usage::{HostCallRecord, Usage};

use serde::{Deserialize, Serialize};
use serde_json::Value;

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
    pub budget: Option<RunBudget>,
    /// The run's bounds. Default: the policy's `[runs]`.
    #[serde(default)]
    pub bounds: Option<RunBounds>,
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
