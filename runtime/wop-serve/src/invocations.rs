//! `POST /host/wop/invocations`, the invoke API: a JSON body names the
//! node type, its inputs and where in a run it is; `Idempotency-Key` runs
//! it at most once; `Accept: text/event-stream` streams its events. The
//! answer is the invocation's response (`invoke::response`), or an error
//! body.

use crate::api::{ApiError, authenticate, read_json};
use crate::idem::IdemError;
use crate::invoke::{self, Ctx, Reply, Run, Shape, check_ctx};
use crate::slots::Slot;
use crate::sse::{self, frame};
use crate::state::AppState;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};
use wop_runtime::budget::{RunBounds, RunBudget};
use wop_runtime::error::ErrorCode;

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

/// `nodeContext`: where in a run the caller says it is.
#[derive(Debug, Default, Deserialize)]
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

/// `POST /host/wop/invocations`: read the request, take an invocation
/// slot, run it, answer (a JSON body, or an event stream).
pub(crate) async fn post(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let run = match read(&state, &headers, body).await {
        Ok(run) => run,
        Err(e) => return e.into_response(),
    };
    let permit = match state.admit(&run.principal.tenant) {
        Ok(slot) => slot,
        Err(r) => {
            let retry = state.cfg.retry_after_secs;
            return ApiError::no_slot(r, &run.principal.tenant, retry).into_response();
        }
    };
    if wants_stream(&headers) {
        // Refused before the stream's `200`, so the status says why
        // (`invoke::run` asks again, for every route).
        if run.key.is_none()
            && let Err(e) = crate::idem::within_share(&state, &run.principal.tenant)
        {
            return refusal(&e).into_response();
        }
        return stream(state, run, permit);
    }
    match invoke::run(state, run, permit, None, Shape::Bytes).await {
        Ok((reply, replayed)) => answer(reply, replayed),
        Err(e) => refusal(&e).into_response(),
    }
}

/// The invocation the request asks for, checked in this order: the
/// caller, the body, `nodeContext`, the node type, `Idempotency-Key`.
async fn read(state: &AppState, headers: &HeaderMap, body: Body) -> Result<Run, ApiError> {
    let principal = authenticate(state, headers)?;
    let mut raw = read_json(state, headers, body)
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
    let ctx = b.node_context.unwrap_or_default();
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
    Ok(Run {
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
    })
}

/// Whether the caller asked for an event stream.
fn wants_stream(headers: &HeaderMap) -> bool {
    headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|a| a.to_ascii_lowercase().contains("text/event-stream"))
}

/// The JSON answer: `200` with the response, `Idempotent-Replayed: true`
/// on a replay.
fn answer(reply: Reply, replayed: bool) -> Response {
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
    r
}

/// Why an invocation did not run: `409` (mismatch, or in flight with
/// `Retry-After`), `507` (the effect store is full, or the tenant holds
/// its share of it) or `500` (the effect store failed).
fn refusal(e: &IdemError) -> ApiError {
    let (code, message, details) = e.parts();
    let status = match e {
        IdemError::Store(_) => StatusCode::INTERNAL_SERVER_ERROR,
        IdemError::Full(..) | IdemError::OverShare(..) => StatusCode::INSUFFICIENT_STORAGE,
        _ => StatusCode::CONFLICT,
    };
    let mut err = ApiError::new(status, code, message);
    err.details = details;
    if let IdemError::InFlight(_, secs) = e {
        err.retry_after = Some(*secs);
    }
    err
}

/// The event-stream answer: the invocation runs on a task of its own and
/// its events become frames as they arrive (a replay's recorded events
/// at once), then one `outcome` frame with `replayed`, or one `error`
/// frame.
fn stream(state: AppState, run: Run, permit: Slot) -> Response {
    let (sink, body) = sse::channel(state.cfg.sse_queue_bytes);
    tokio::spawn(async move {
        match invoke::run(state, run, permit, Some(sink.clone()), Shape::Tree).await {
            Ok((reply, replayed)) => {
                let mut resp = reply.into_tree();
                if replayed && let Some(Value::Array(events)) = resp.get("events") {
                    for e in events {
                        let name = e.get("type").and_then(Value::as_str).unwrap_or("event");
                        sink.push(frame(name, e), false);
                    }
                }
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
    r
}
