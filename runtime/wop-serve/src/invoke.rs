//! Running one node invocation for the MCP mount (`mcp.rs`) and the
//! invoke API (`invocations.rs`), in named steps: [`prepare`] the
//! runtime's request (and, under an idempotency key, its claim), claim
//! the key (`idem::claim`: run, or answer the recorded response),
//! [`perform`] (the runtime runs the node; the operator's views observe
//! the report), settle the claim (`idem::Held::settle`), answer in the
//! [`Shape`] the caller wants.

use crate::detach::DetachOnDrop;
use crate::idem::{self, Claimed, IdemError};
use crate::slots::Slot;
use crate::sse::SseSink;
use crate::state::AppState;
use serde::Serialize;
use serde_json::{Value, json};
use std::sync::Arc;
use wop_runtime::budget::{RunBounds, RunBudget};
use wop_runtime::effects::ClaimRequest;
use wop_runtime::{
    Event, InvocationReport, InvokeRequest, OutcomeFields, Principal, RunContext, Usage,
};

/// Where in a run, as far as the caller said.
#[derive(Debug, Default, Clone)]
pub(crate) struct Ctx {
    pub run_id: Option<String>,
    pub node_id: Option<String>,
    pub attempt: Option<u32>,
}

/// One invocation to run.
pub(crate) struct Run {
    pub type_id: String,
    pub inputs: Value,
    pub config: Value,
    pub ctx: Ctx,
    pub budget: Option<RunBudget>,
    pub bounds: Option<RunBounds>,
    pub principal: Principal,
    pub key: Option<String>,
    /// The run's trigger payload (`ctx.triggerData`).
    pub trigger_data: Option<Value>,
    /// What the idempotency digest covers.
    pub request: Value,
    /// The caller's W3C `traceparent` (a `traceparent` header, or MCP
    /// `params._meta.traceparent`); a malformed one is ignored.
    pub traceparent: Option<String>,
}

/// The checks every way in (the invoke API's `nodeContext`, the MCP
/// mount's `_meta`) applies to where in a run the caller says it is.
/// `field` names the fields as the caller wrote them (`nodeContext.runId`,
/// `_meta dev.openwop/runId`).
pub(crate) fn check_ctx(ctx: &Ctx, field: impl Fn(&str) -> String) -> Result<(), String> {
    for (name, v) in [("runId", &ctx.run_id), ("nodeId", &ctx.node_id)] {
        if let Some(v) = v
            && !id_ok(v)
        {
            return Err(format!(
                "{} must be 1 to 256 characters without control characters",
                field(name)
            ));
        }
    }
    if ctx.attempt == Some(0) {
        return Err(format!("{} starts at 1", field("attempt")));
    }
    Ok(())
}

fn id_ok(s: &str) -> bool {
    !s.is_empty() && s.len() <= 256 && !s.chars().any(char::is_control)
}

/// `{invocationId, outcome, output|error|interrupt, events, usage}`,
/// serialized straight from the report: no JSON tree is built unless a
/// caller needs one ([`response`]).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Wire<'a> {
    invocation_id: &'a str,
    #[serde(flatten)]
    outcome: OutcomeFields<'a>,
    events: &'a [Event],
    usage: &'a Usage,
}

impl<'a> Wire<'a> {
    fn of(invocation_id: &'a str, report: &'a InvocationReport) -> Self {
        Wire {
            invocation_id,
            outcome: OutcomeFields(&report.outcome),
            events: &report.events,
            usage: &report.usage,
        }
    }
}

/// What is answered if a report cannot be serialized. Everything in a
/// report is JSON already, so this is defence, not an expected path: the
/// caller still gets a failure it can read instead of a broken body.
fn unserializable(invocation_id: &str, e: &serde_json::Error) -> Value {
    json!({"invocationId": invocation_id, "outcome": "failed", "error": {"code": "internal_error",
          "message": format!("the report could not be serialized: {e}")},
          "events": [], "usage": {}})
}

/// The response as a JSON tree, for callers that store it (idempotency),
/// wrap it (the MCP mount) or add to it (event streams).
pub(crate) fn response(invocation_id: &str, report: &InvocationReport) -> Value {
    serde_json::to_value(Wire::of(invocation_id, report))
        .unwrap_or_else(|e| unserializable(invocation_id, &e))
}

/// The response as bytes, for a caller that only sends it.
fn response_bytes(invocation_id: &str, report: &InvocationReport) -> Vec<u8> {
    serde_json::to_vec(&Wire::of(invocation_id, report)).unwrap_or_else(|e| {
        serde_json::to_vec(&unserializable(invocation_id, &e)).unwrap_or_default()
    })
}

/// What the caller wants the response as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shape {
    /// A JSON tree, to wrap or add to (the MCP mount, event streams).
    Tree,
    /// Bytes, only to send (the invoke API's JSON answer); an invocation
    /// under an idempotency key still answers a tree (its record is one).
    Bytes,
}

/// A response body: a JSON tree ([`response`]), or bytes when the caller
/// asked for them and nothing needs the tree ([`response_bytes`]).
pub(crate) enum Reply {
    Tree(Value),
    Bytes(Vec<u8>),
}

impl Reply {
    /// The reply in `shape`.
    fn of(invocation_id: &str, report: &InvocationReport, shape: Shape) -> Self {
        match shape {
            Shape::Tree => Reply::Tree(response(invocation_id, report)),
            Shape::Bytes => Reply::Bytes(response_bytes(invocation_id, report)),
        }
    }

    /// The tree. Bytes are only made where no tree is wanted; this keeps
    /// the conversion total rather than trusting that.
    pub(crate) fn into_tree(self) -> Value {
        match self {
            Reply::Tree(v) => v,
            Reply::Bytes(b) => serde_json::from_slice(&b).unwrap_or(Value::Null),
        }
    }
}

/// Runs the invocation on the caller's task, holding `permit` until it
/// ends, and answers in `shape` with whether the answer is a replay. A
/// client that goes away does not cancel it half-way: the rest of it then
/// runs on a task of its own ([`DetachOnDrop`]). With `stream`, events are
/// forwarded as SSE frames while the node runs.
pub(crate) async fn run(
    state: AppState,
    run: Run,
    permit: Slot,
    stream: Option<SseSink>,
    shape: Shape,
) -> Result<(Reply, bool), IdemError> {
    let work = DetachOnDrop::new(async move {
        let _permit = permit;
        let invocation_id = crate::ids::invocation_id();
        let (req, claim) = prepare(run, &invocation_id);
        let held = match claim {
            None => {
                idem::within_share(&state, &req.context.tenant_id)?;
                None
            }
            Some(claim) => match idem::claim(&state, &claim).await? {
                Claimed::Replay(recorded) => return Ok((Reply::Tree(recorded), true)),
                Claimed::Held(held) => Some(held),
            },
        };
        let report = perform(&state, req, stream, &invocation_id).await;
        let Some(held) = held else {
            return Ok((Reply::of(&invocation_id, &report, shape), false));
        };
        let recorded = response(&invocation_id, &report);
        // A failed node is not recorded: a retry runs it again (its own
        // tool calls are still guarded by the gate's effects).
        held.settle(&recorded, report.outcome.is_ok()).await;
        Ok((Reply::Tree(recorded), false))
    });
    match work.await {
        Ok(r) => r,
        Err(e) => Err(IdemError::Store(format!("the invocation task failed: {e}"))),
    }
}

/// The runtime's request for `run`, and with an idempotency key the claim
/// on it.
fn prepare(run: Run, invocation_id: &str) -> (InvokeRequest, Option<ClaimRequest>) {
    let tenant = run.principal.tenant.clone();
    let effect_id = run
        .key
        .as_deref()
        .map(|k| idem::effect_id(&tenant, &run.type_id, k));
    let context = RunContext {
        // With a key and no run id, the run id derives from the key so
        // that the node's own tool calls (activity recipe) dedupe across
        // retries too.
        run_id: run.ctx.run_id.unwrap_or_else(|| match &effect_id {
            Some(e) => format!("idem-{}", e.chars().take(22).collect::<String>()),
            None => format!("inv-{invocation_id}"),
        }),
        node_id: run.ctx.node_id.unwrap_or_else(|| run.type_id.clone()),
        tenant_id: tenant,
        attempt: run.ctx.attempt.unwrap_or(1),
    };
    let claim = effect_id.map(|e| idem::claim_request(e, &context, &run.type_id, &run.request));
    let mut req = InvokeRequest::new(run.type_id, run.inputs);
    req.config = run.config;
    req.trigger_data = run.trigger_data;
    req.context = context;
    req.principal = run.principal;
    req.budget = run.budget;
    req.bounds = run.bounds;
    req.traceparent = run.traceparent;
    (req, claim)
}

/// The runtime runs the node (forwarding only this invocation's events to
/// `stream`); the operator's views observe the report.
async fn perform(
    state: &AppState,
    req: InvokeRequest,
    stream: Option<SseSink>,
    invocation_id: &str,
) -> InvocationReport {
    let (type_id, tenant) = (req.type_id.clone(), req.context.tenant_id.clone());
    let report = match stream {
        None => state.rt.invoke(req).await,
        Some(sink) => state.rt.invoke_streaming(req, Arc::new(sink)).await,
    };
    state
        .observers
        .observe(invocation_id, &type_id, &tenant, &report);
    report
}

#[cfg(test)]
mod tests {
    use super::*;
    use wop_runtime::error::ErrorCode;
    use wop_runtime::{LogLevel, LogStream, NodeError, Outcome};

    fn report(outcome: Result<Outcome, NodeError>) -> InvocationReport {
        InvocationReport {
            outcome,
            events: vec![Event::LogAppended {
                level: LogLevel::Info,
                message: "greeting \"quoted\" \u{2603}".into(),
                fields: Some(json!({"name": "Ada"})),
                stream: LogStream::Log,
            }],
            usage: Usage {
                pack: "hello".into(),
                fuel_consumed: 15_893,
                ..Usage::default()
            },
        }
    }

    /// The shape the invoke API has always answered: the report's outcome
    /// fields beside `invocationId`, `events` and `usage`.
    fn expected(r: &InvocationReport) -> Value {
        let mut v = serde_json::to_value(OutcomeFields(&r.outcome)).unwrap_or_default();
        v["invocationId"] = json!("inv-1");
        v["events"] = serde_json::to_value(&r.events).unwrap_or_default();
        v["usage"] = serde_json::to_value(&r.usage).unwrap_or_default();
        v
    }

    #[test]
    fn bytes_and_tree_are_the_same_response_for_every_outcome() {
        let failed = NodeError::runtime(
            ErrorCode::SandboxTimeout,
            "the node ran out of fuel",
            serde_json::Map::new(),
        );
        for outcome in [
            Ok(Outcome::Completed {
                output: json!({"greeting": "Hello, Ada!"}),
            }),
            Ok(Outcome::Suspended {
                interrupt: json!({"kind": "approval"}),
            }),
            Err(failed),
        ] {
            let r = report(outcome);
            let tree = response("inv-1", &r);
            let bytes: Value = serde_json::from_slice(&response_bytes("inv-1", &r))
                .unwrap_or_else(|e| json!({"unparsable": e.to_string()}));
            assert_eq!(tree, expected(&r));
            assert_eq!(bytes, tree);
            assert!(tree["outcome"].is_string(), "{tree}");
        }
    }
}
