//! The OpenWOP read routes: discovery (`/.well-known/openwop` and the
//! capability document it serves), the tool catalog, a run's effects,
//! usage, health and `/metrics`.

use crate::api::{ApiError, authenticate, operator};
use crate::state::AppState;
use crate::wire::{decode_run_id, rfc3339};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};
use wop_runtime::mcp_protocol::{PREFERRED_REVISION, SERVED_REVISIONS};
use wop_runtime::metering::UsageScope;

/// The `OpenWOP-Version` header value.
pub const OPENWOP_VERSION: &str = "1.0";

fn versioned(mut r: Response) -> Response {
    r.headers_mut()
        .insert("openwop-version", HeaderValue::from_static(OPENWOP_VERSION));
    r
}

/// `GET /.well-known/openwop`: the capability document, with its ETag
/// (`304` when `If-None-Match` names it).
pub(crate) async fn well_known(State(state): State<AppState>, headers: HeaderMap) -> Response {
    let etag = HeaderValue::from_str(&state.etag).unwrap_or(HeaderValue::from_static("\"0\""));
    let matches = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.split(',').any(|t| {
                let t = t.trim();
                t == "*" || t.trim_start_matches("W/") == state.etag
            })
        });
    let mut r = if matches {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        (StatusCode::OK, axum::Json(state.capability_doc.clone())).into_response()
    };
    r.headers_mut().insert(header::ETAG, etag);
    r.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    versioned(r)
}

/// `GET /healthz`: counts of packs, node types, connections and
/// invocations; no authentication. `503` once the effect store has
/// failed (only a restart helps).
pub(crate) async fn healthz(State(state): State<AppState>) -> Response {
    let (healthy, body) = state.health();
    let status = match healthy {
        true => StatusCode::OK,
        false => StatusCode::SERVICE_UNAVAILABLE,
    };
    (status, axum::Json(body)).into_response()
}

/// `GET /metrics`: the operator's view (scope `wop.operator`).
pub(crate) async fn metrics(State(state): State<AppState>, headers: HeaderMap) -> Response {
    let p = match authenticate(&state, &headers) {
        Ok(p) => p,
        Err(e) => return e.into_response(),
    };
    if let Err(e) = operator(&p, "metrics need") {
        return e.into_response();
    }
    let mut r = (StatusCode::OK, state.metrics_text()).into_response();
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/openmetrics-text; version=1.0.0; charset=utf-8"),
    );
    r
}

/// `GET /tools`: the tool catalog as the caller may see it.
pub(crate) async fn tools(State(state): State<AppState>, headers: HeaderMap) -> Response {
    let p = match authenticate(&state, &headers) {
        Ok(p) => p,
        Err(e) => return e.into_response(),
    };
    let tools = state.rt.catalog(&p, &p.tenant);
    versioned((StatusCode::OK, axum::Json(json!({"tools": tools}))).into_response())
}

/// `GET /tools/{toolId}`: one tool's description (`404` alike for an
/// unknown and an unauthorized id).
pub(crate) async fn tool(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(tool_id): Path<String>,
) -> Response {
    let p = match authenticate(&state, &headers) {
        Ok(p) => p,
        Err(e) => return e.into_response(),
    };
    match state.rt.gate().describe(&p, &p.tenant, &tool_id) {
        Ok(d) => versioned((StatusCode::OK, axum::Json(d)).into_response()),
        // Unknown and unauthorized give the same body.
        Err(_) => ApiError::not_found("toolId", &tool_id).into_response(),
    }
}

/// A listing slot, for a read of the store a caller can repeat at will
/// (a run's effects, usage): each read is bounded per request, and the
/// slots bound how many run at once, in all and per tenant (`503`/`429`
/// with `Retry-After` past them), apart from the invocation slots.
fn listing_slot(state: &AppState, tenant: &str) -> Result<crate::slots::Slot, ApiError> {
    state
        .listings
        .admit(tenant)
        .map_err(|r| ApiError::no_listing_slot(r, tenant, state.cfg.retry_after_secs))
}

/// `?limit=&after=` of `/runs/{runId}/effects`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct EffectsQuery {
    limit: Option<usize>,
    after: Option<String>,
}

/// Effects in one page of `/runs/{runId}/effects` unless `?limit=` says.
pub(crate) const EFFECTS_PAGE: usize = 100;

/// Longest `?after=` (an effect id, as a page's `next` gives it).
const MAX_AFTER_BYTES: usize = 256;

/// `GET /runs/{runId}/effects?limit=&after=`: the caller's tenant's
/// effects of a run, never their payloads, a page at a time (decision
/// 0052): up to `limit` (default [`EFFECTS_PAGE`], at most
/// [`MAX_PAGE`](wop_runtime::effects::MAX_PAGE); fewer once the page has
/// read [`PAGE_READ_BYTES`](wop_runtime::effects::PAGE_READ_BYTES) of
/// records), with `next` to pass as `after` while there may be more.
pub(crate) async fn effects(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(raw): Path<String>,
    q: Result<Query<EffectsQuery>, axum::extract::rejection::QueryRejection>,
) -> Response {
    let p = match authenticate(&state, &headers) {
        Ok(p) => p,
        Err(e) => return e.into_response(),
    };
    let max = wop_runtime::effects::MAX_PAGE;
    let Ok(Query(q)) = q else {
        return ApiError::validation(format!(
            "query parameters: limit (1 to {max}), after (a page's next)"
        ))
        .into_response();
    };
    let limit = q.limit.unwrap_or(EFFECTS_PAGE);
    if !(1..=max).contains(&limit) {
        return ApiError::validation(format!("limit must be between 1 and {max}"))
            .details(json!({"limit": limit, "maxLimit": max}))
            .into_response();
    }
    if q.after.as_ref().is_some_and(|a| a.len() > MAX_AFTER_BYTES) {
        return ApiError::validation(format!(
            "after is longer than {MAX_AFTER_BYTES} bytes: pass a page's next"
        ))
        .into_response();
    }
    let run_id = decode_run_id(&raw);
    let _slot = match listing_slot(&state, &p.tenant) {
        Ok(slot) => slot,
        Err(refused) => return refused.into_response(),
    };
    // The caller's tenant's run of that id; another tenant's is another
    // run. The listing checks each record's tenant again.
    let page = state
        .rt
        .effects_page(&p.tenant, &run_id, q.after.as_deref(), limit)
        .await;
    let page = match page {
        Ok(page) => page,
        Err(e) => return ApiError::internal(format!("effect store: {e}")).into_response(),
    };
    let effects: Vec<Value> = page
        .effects
        .into_iter()
        .map(|s| {
            json!({
                "effectId": format!("{}/{}", p.tenant, s.effect_id),
                "nodeId": s.node_id,
                "attempt": s.attempt,
                "keying": s.keying,
                "providerKey": s.tool_id,
                "state": s.state,
                "at": rfc3339(s.at),
            })
        })
        .collect();
    let body = json!({"runId": run_id, "effects": effects, "next": page.next});
    versioned((StatusCode::OK, axum::Json(body)).into_response())
}

/// `?run=&pack=&limit=&after=` of `/host/wop/usage`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct UsageQuery {
    run: Option<String>,
    pack: Option<String>,
    limit: Option<usize>,
    after: Option<String>,
}

/// Runs in one page of `/host/wop/usage` (operators) unless `?limit=` says.
pub(crate) const USAGE_PAGE: usize = 1000;

/// `GET /host/wop/usage`: usage of one run (`?run=`), or across runs for
/// an operator a page at a time (`?limit=&after=`, with `next`; decision
/// 0052); `?pack=` narrows it.
pub(crate) async fn usage(
    State(state): State<AppState>,
    headers: HeaderMap,
    q: Result<Query<UsageQuery>, axum::extract::rejection::QueryRejection>,
) -> Response {
    let p = match authenticate(&state, &headers) {
        Ok(p) => p,
        Err(e) => return e.into_response(),
    };
    let Ok(Query(q)) = q else {
        return ApiError::validation("query parameters: run, pack, limit, after").into_response();
    };
    if q.run.is_none() {
        if let Err(e) = operator(&p, "usage across runs (without ?run=) needs") {
            return e.into_response();
        }
    } else if q.limit.is_some() || q.after.is_some() {
        return ApiError::validation("limit and after page the runs of a query without run")
            .into_response();
    }
    // Refusals that say what is wrong with the request come first; then a
    // listing slot.
    let _slot = match listing_slot(&state, &p.tenant) {
        Ok(slot) => slot,
        Err(refused) => return refused.into_response(),
    };
    let Some(run) = &q.run else {
        return usage_page(&state, q).await;
    };
    // The caller's tenant's run of that id (another tenant's run of the
    // same id is another run, invisible here).
    let scope = UsageScope::Run {
        tenant: &p.tenant,
        run,
    };
    match state.rt.usage_rollup(scope, q.pack.as_deref()).await {
        Ok((runs, _)) if runs.is_empty() => ApiError::not_found("run", run).into_response(),
        Ok((runs, packs)) => versioned(
            (
                StatusCode::OK,
                axum::Json(json!({"run": q.run, "pack": q.pack, "runs": runs, "packs": packs})),
            )
                .into_response(),
        ),
        Err(e) => ApiError::internal(format!("usage: {e}")).into_response(),
    }
}

/// One page of every tenant's runs (an operator's `/host/wop/usage`).
async fn usage_page(state: &AppState, q: UsageQuery) -> Response {
    let max = wop_runtime::metering::MAX_ROLLUP_PAGE;
    let limit = q.limit.unwrap_or(USAGE_PAGE);
    if !(1..=max).contains(&limit) {
        return ApiError::validation(format!("limit must be between 1 and {max}"))
            .details(json!({"limit": limit, "maxLimit": max}))
            .into_response();
    }
    if q.after
        .as_ref()
        .is_some_and(|a| a.len() > 2 * MAX_AFTER_BYTES)
    {
        return ApiError::validation("after is too long: pass a page's next").into_response();
    }
    let page = state
        .rt
        .usage_rollup_page(q.pack.as_deref(), q.after.as_deref(), limit);
    match page.await {
        Ok(page) => versioned(
            (
                StatusCode::OK,
                axum::Json(json!({"run": null, "pack": q.pack, "runs": page.runs,
                                  "packs": page.packs, "next": page.next})),
            )
                .into_response(),
        ),
        Err(e) => ApiError::internal(format!("usage: {e}")).into_response(),
    }
}

/// The capability document: the runtime's plus the server's families.
pub(crate) fn capability_doc(rt: &wop_runtime::Runtime, refreshed_at: &str) -> Value {
    let mut doc = serde_json::to_value(rt.capabilities()).unwrap_or_else(|_| json!({}));
    let family = |v: &mut Value| {
        if let Value::Object(m) = v {
            // Presence is the claim.
            m.remove("supported");
            m.insert("status".into(), json!("experimental"));
            m.insert("since".into(), json!("2026-11-30"));
            m.insert("until".into(), json!("2027-11-30"));
            m.insert("witness".into(), json!("runtime/wop-serve/tests"));
        }
    };
    if let Some(Value::Object(rts)) = doc.get_mut("nodePackRuntimes") {
        for (_, v) in rts.iter_mut() {
            family(v);
        }
    }
    if let Some(s) = doc.get_mut("sandbox") {
        family(s);
    }
    let mut mcp = json!({
        "revisions": SERVED_REVISIONS,
        "preferredVersion": PREFERRED_REVISION,
        "minimumRevision": SERVED_REVISIONS[0],
        "refreshedAt": refreshed_at,
        "serverMount": {"path": "/mcp", "transports": ["streamable-http"], "stateless": true},
        "client": true,
    });
    family(&mut mcp);
    let mut catalog =
        json!({"path": "/tools", "sources": ["node-pack", "connector", "host-extension"]});
    family(&mut catalog);
    let mut idem = json!({
        "mcpMetaKey": "dev.openwop/idempotencyKey",
        "header": "Idempotency-Key",
        "effectsPath": "/runs/{runId}/effects",
        "retentionDays": rt.policy().effects.retention_days.unwrap_or(14).max(14),
    });
    family(&mut idem);
    if let Value::Object(m) = &mut doc {
        m.insert("openwopVersion".into(), json!(OPENWOP_VERSION));
        m.insert(
            "implementation".into(),
            json!({"name": "wop", "version": env!("CARGO_PKG_VERSION")}),
        );
        m.insert("mcp".into(), mcp);
        m.insert("toolCatalog".into(), catalog);
        m.insert("idempotency".into(), idem);
    }
    doc
}
