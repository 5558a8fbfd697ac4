//! Running one node invocation for the MCP mount and the invoke API
//! (`POST /host/wop/invocations`): idempotency, capacity, the response
//! shape, and event streaming.

use crate::api::{ApiError, authenticate, read_json};
use crate::detach::DetachOnDrop;
use crate::idem::{self, IdemError};
use crate::sse::{self, SseSink, frame};
use crate::state::AppState;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::sync::Arc;
use tokio::sync::OwnedSemaphorePermit;
use wop_runtime::budget::{RunBounds, RunBudget};
use wop_runtime::error::ErrorCode;
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

/// A response body: a JSON tree ([`response`]), or bytes when the caller
/// asked for them and nothing needs the tree ([`response_bytes`]).
pub(crate) enum Reply {
    Tree(Value),
    Bytes(Vec<u8>),
}

impl Reply {
    /// The tree. Bytes are only made where no tree is wanted; this keeps
    /// the conversion total rather than trusting that.
    fn into_tree(self) -> Value {
        match self {
            Reply::Tree(v) => v,
            Reply::Bytes(b) => serde_json::from_slice(&b).unwrap_or(Value::Null),
        }
    }
}

/// Runs the invocation on the caller's task, holding `permit` until it
/// ends. A client that goes away does not cancel it half-way: the rest of
/// it then runs on a task of its own ([`DetachOnDrop`]). With `stream`,
/// events are forwarded as SSE frames while the node runs.
pub(crate) async fn run(
    state: AppState,
    run: Run,
    permit: OwnedSemaphorePermit,
    stream: Option<SseSink>,
) -> Result<(Value, bool), IdemError> {
    let (reply, replayed) = run_as(state, run, permit, stream, false).await?;
    Ok((reply.into_tree(), replayed))
}

/// [`run`], answering with bytes when `bytes` and no idempotency record
/// needs the tree.
async fn run_as(
    state: AppState,
    run: Run,
    permit: OwnedSemaphorePermit,
    stream: Option<SseSink>,
    bytes: bool,
) -> Result<(Reply, bool), IdemError> {
    let work = DetachOnDrop::new(async move {
        let _permit = permit;
        execute(state, run, stream, bytes).await
    });
    match work.await {
        Ok(r) => r,
        Err(e) => Err(IdemError::Store(format!("the invocation task failed: {e}"))),
    }
}

async fn execute(
    state: AppState,
    run: Run,
    stream: Option<SseSink>,
    bytes: bool,
) -> Result<(Reply, bool), IdemError> {
    let invocation_id = uuid::Uuid::new_v4().to_string();
    let tenant = run.principal.tenant.clone();
    let effect = run
        .key
        .as_deref()
        .map(|k| idem::effect_id(&tenant, &run.type_id, k));
    // With a key and no run id, the run id derives from the key so that
    // the node's own tool calls (activity recipe) dedupe across retries too.
    let run_id = run.ctx.run_id.clone().unwrap_or_else(|| match &effect {
        Some(e) => format!("idem-{}", e.chars().take(22).collect::<String>()),
        None => format!("inv-{invocation_id}"),
    });
    let node_id = run
        .ctx
        .node_id
        .clone()
        .unwrap_or_else(|| run.type_id.clone());
    let attempt = run.ctx.attempt.unwrap_or(1);
    let mut req = InvokeRequest::new(run.type_id.clone(), run.inputs);
    req.config = run.config;
    req.trigger_data = run.trigger_data;
    req.context = RunContext {
        run_id: run_id.clone(),
        node_id: node_id.clone(),
        tenant_id: tenant.clone(),
        attempt,
    };
    req.principal = run.principal.clone();
    req.budget = run.budget;
    req.bounds = run.bounds;
    req.traceparent = run.traceparent;
    let (claim_run, claim_node) = (run_id.clone(), node_id.clone());
    let (type_id, tenant_label) = (run.type_id.clone(), tenant.clone());
    let st = state.clone();
    let keyed = run.key.is_some();
    let perform = move || async move {
        // Only this invocation's events reach this caller's stream.
        let report = match stream {
            None => st.rt.invoke(req).await,
            Some(sink) => st.rt.invoke_streaming(req, Arc::new(sink)).await,
        };
        st.observers
            .observe(&invocation_id, &type_id, &tenant_label, &report);
        // A failed node is not recorded: a retry runs it again (its own
        // tool calls are still guarded by the gate's effects).
        let record = report.outcome.is_ok();
        let reply = if bytes && !keyed {
            Reply::Bytes(response_bytes(&invocation_id, &report))
        } else {
            Reply::Tree(response(&invocation_id, &report))
        };
        (reply, record)
    };
    match &run.key {
        Some(k) => idem::once(
            &state,
            &tenant,
            &run.type_id,
            k,
            &run.request,
            &claim_run,
            &claim_node,
            attempt,
            || async move {
                let (reply, record) = perform().await;
                (reply.into_tree(), record)
            },
        )
        .await
        .map(|(v, replayed)| (Reply::Tree(v), replayed)),
        None => Ok((perform().await.0, false)),
    }
}

/// The invoke API's body.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct InvokeBody {
    type_id: String,
    inputs: Value,
    #[serde(default)]
    config: Option<Value>,
    #[serde(default)]
    node_context: Option<NodeCtx>,
    #[serde(default)]
    budget: Option<RunBudget>,
    #[serde(default)]
    bounds: Option<RunBounds>,
    /// The run's trigger payload (`ctx.triggerData`).
    #[serde(default)]
    trigger_data: Option<Value>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct NodeCtx {
    #[serde(default)]
    run_id: Option<String>,
    #[serde(default)]
    node_id: Option<String>,
    #[serde(default)]
    tenant_id: Option<String>,
    #[serde(default)]
    attempt: Option<u32>,
}

fn wants_stream(headers: &HeaderMap) -> bool {
    headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|a| a.to_ascii_lowercase().contains("text/event-stream"))
}

fn idem_error(e: &IdemError) -> ApiError {
    let (code, message, details) = e.parts();
    let status = match e {
        IdemError::Store(_) => StatusCode::INTERNAL_SERVER_ERROR,
        _ => StatusCode::CONFLICT,
    };
    let mut err = ApiError::new(status, code, message);
    err.details = details;
    if let IdemError::InFlight(_, secs) = e {
        err.retry_after = Some(*secs);
    }
    err
}

fn id_ok(s: &str) -> bool {
    !s.is_empty() && s.len() <= 256 && !s.chars().any(char::is_control)
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

/// `POST /host/wop/invocations`.
pub(crate) async fn post(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    match post_inner(state, headers, body).await {
        Ok(r) => r,
        Err(e) => e.into_response(),
    }
}

async fn post_inner(state: AppState, headers: HeaderMap, body: Body) -> Result<Response, ApiError> {
    let principal = authenticate(&state, &headers)?;
    let mut raw = read_json(&state, &headers, body)
        .await
        .map_err(|e| e.into_api())?;
    // The whole request is kept only when an idempotency key needs its
    // digest; otherwise it is moved into the invocation, not copied.
    let parsed = if headers.contains_key("idempotency-key") {
        InvokeBody::deserialize(&raw)
    } else {
        InvokeBody::deserialize(std::mem::take(&mut raw))
    };
    let b = parsed.map_err(|e| ApiError::validation(format!("invalid invocation: {e}")))?;
    let ctx = b.node_context.unwrap_or(NodeCtx {
        run_id: None,
        node_id: None,
        tenant_id: None,
        attempt: None,
    });
    if let Some(t) = &ctx.tenant_id
        && t != &principal.tenant
    {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            ErrorCode::Forbidden,
            "nodeContext.tenantId is not the caller's tenant",
        )
        .details(json!({"scope": "tenant"})));
    }
    let where_ = Ctx {
        run_id: ctx.run_id,
        node_id: ctx.node_id,
        attempt: ctx.attempt,
    };
    check_ctx(&where_, |f| format!("nodeContext.{f}")).map_err(ApiError::validation)?;
    if state.node_for(&b.type_id, &principal).is_none() {
        return Err(ApiError::not_found("typeId", &b.type_id));
    }
    let key = match headers.get("idempotency-key") {
        None => None,
        Some(v) => match v.to_str() {
            Ok(k) if !k.is_empty() && k.len() <= 256 => Some(k.to_owned()),
            _ => {
                return Err(ApiError::validation(
                    "Idempotency-Key must be 1 to 256 visible ASCII characters",
                ));
            }
        },
    };
    let permit = state
        .admit()
        .ok_or_else(|| ApiError::busy(state.cfg.retry_after_secs))?;
    let run = Run {
        type_id: b.type_id,
        inputs: b.inputs,
        config: b.config.unwrap_or_else(|| json!({})),
        ctx: where_,
        budget: b.budget,
        bounds: b.bounds,
        principal,
        key,
        trigger_data: b.trigger_data,
        request: raw,
        traceparent: headers
            .get("traceparent")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned),
    };
    if wants_stream(&headers) {
        let (sink, body) = sse::channel(state.cfg.sse_queue_bytes);
        tokio::spawn(async move {
            match self::run(state, run, permit, Some(sink.clone())).await {
                Ok((resp, replayed)) => {
                    if replayed && let Some(Value::Array(events)) = resp.get("events") {
                        for e in events {
                            let name = e.get("type").and_then(Value::as_str).unwrap_or("event");
                            sink.push(frame(name, e), false);
                        }
                    }
                    let mut resp = resp;
                    resp["replayed"] = json!(replayed);
                    sink.push(frame("outcome", &resp), true);
                }
                Err(e) => {
                    let (code, message, details) = e.parts();
                    sink.push(
                        frame(
                            "error",
                            &json!({"error": code, "message": message, "details": details}),
                        ),
                        true,
                    );
                }
            }
        });
        let mut r = Response::new(body);
        r.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/event-stream"),
        );
        r.headers_mut()
            .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
        return Ok(r);
    }
    let (reply, replayed) = run_as(state, run, permit, None, true)
        .await
        .map_err(|e| idem_error(&e))?;
    let mut r = match reply {
        Reply::Tree(v) => (StatusCode::OK, axum::Json(v)).into_response(),
        Reply::Bytes(b) => (
            StatusCode::OK,
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            )],
            b,
        )
            .into_response(),
    };
    if replayed {
        r.headers_mut()
            .insert("idempotent-replayed", HeaderValue::from_static("true"));
    }
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;
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
