//! `POST /mcp`: a stateless MCP Streamable HTTP server with one tool per
//! loaded node type. Every request gets one `application/json` JSON-RPC
//! object, whatever the client's `Accept` (decision 0008); no session is
//! minted and an incoming `Mcp-Session-Id` is ignored.
//!
//! Revisions: `initialize` naming 2024-11-05, 2025-03-26, 2025-06-18 or
//! 2025-11-25 is echoed (anything else is answered with 2025-11-25).
//! 2026-07-28 is served statelessly: `server/discover`, the protocol
//! version in `params._meta` (it must equal the `MCP-Protocol-Version`
//! header: `-32020`; an unknown revision: `-32022`), results carrying
//! `resultType`.
//!
//! A `tools/call` refused for an invocation slot keeps the invoke API's
//! status (`429` for the tenant's share, `503` for a full executor) and
//! `Retry-After`, with a JSON-RPC error body (`-32001`, `data.error`;
//! decision 0050). A body refused before it is parsed (`413`, `415`,
//! `408`) keeps its status, with a JSON-RPC error body (`-32600`,
//! `id: null`, `data.error`; decision 0051). Only a missing or wrong
//! token is answered with the service's own `401` body.

use crate::api::{ApiCode, ApiError, JsonBodyError, authenticate, read_json};
use crate::invoke::{self, Ctx, Run, Shape};
use crate::state::{AppState, NodeInfo};
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use rmcp::model::{DiscoverResult, Implementation, ProtocolVersion, ServerCapabilities};
use serde_json::{Map, Value, json};
use wop_runtime::Principal;
use wop_runtime::tools::SafetyTier;

// Revisions, header and `_meta` names and JSON-RPC codes: defined once,
// shared with the MCP client (`wop_core::mcp_protocol`).
/// The revision preferred for new clients.
pub use wop_runtime::mcp_protocol::PREFERRED_REVISION as PREFERRED;
/// Revisions served, oldest first.
pub use wop_runtime::mcp_protocol::SERVED_REVISIONS as REVISIONS;
use wop_runtime::mcp_protocol::jsonrpc::{
    HEADER_MISMATCH, INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND, PARSE_ERROR, REFUSED,
    UNSUPPORTED_VERSION,
};
use wop_runtime::mcp_protocol::{
    FIRST_STATELESS as STATELESS, HEADER_METHOD, HEADER_PROTOCOL_VERSION as HEADER_VERSION,
    LATEST_INITIALIZE, META_ATTEMPT, META_IDEMPOTENCY_KEY as META_IDEMPOTENCY,
    META_NODE_ID as META_NODE, META_PROTOCOL_VERSION as META_VERSION, META_RUN_ID as META_RUN,
};

/// How long a client may reuse a `tools/list` result (2026-07-28 `ttlMs`).
const TOOLS_TTL_MS: u64 = 60_000;

fn json_response(status: StatusCode, body: &Value) -> Response {
    let mut r = (status, axum::Json(body)).into_response();
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

fn rpc_error(
    status: StatusCode,
    id: Value,
    code: i64,
    message: &str,
    data: Option<Value>,
) -> Response {
    let mut err = json!({"code": code, "message": message});
    if let Some(d) = data {
        err["data"] = d;
    }
    json_response(status, &json!({"jsonrpc": "2.0", "id": id, "error": err}))
}

/// `GET`/`DELETE /mcp` (and anything but POST): `405` + `Allow: POST`.
pub(crate) async fn not_allowed() -> Response {
    let mut r = ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        ApiCode::MethodNotAllowed,
        "this MCP server is stateless: only POST is served",
    )
    .into_response();
    r.headers_mut()
        .insert(header::ALLOW, HeaderValue::from_static("POST"));
    r
}

/// What one request negotiated.
struct Req<'a> {
    id: Value,
    method: &'a str,
    params: &'a Map<String, Value>,
    /// 2026-07-28 per-request protocol fields.
    modern: bool,
}

/// `POST /mcp`.
pub(crate) async fn post(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let principal = match authenticate(&state, &headers) {
        Ok(p) => p,
        Err(e) => return e.into_response(),
    };
    let msg = match read_json(&state, &headers, body).await {
        Ok(v) => v,
        // Every refusal of the body is a JSON-RPC error with `id: null`
        // (its id was not read), keeping its status: not JSON is `-32700`;
        // too deep, and refused before it was parsed (413, 415, 408:
        // decision 0051) are `-32600`. So an MCP client shows why.
        Err(e) => {
            let rpc = match e {
                JsonBodyError::Parse(_) => PARSE_ERROR,
                JsonBodyError::Http(_) | JsonBodyError::Depth(_) => INVALID_REQUEST,
            };
            return e.into_api().into_rpc_response(Value::Null, rpc);
        }
    };
    let Value::Object(obj) = &msg else {
        return rpc_error(
            StatusCode::BAD_REQUEST,
            Value::Null,
            INVALID_REQUEST,
            "expected one JSON-RPC request object (batches are not supported)",
            None,
        );
    };
    let id = obj.get("id").cloned().unwrap_or(Value::Null);
    if obj.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return rpc_error(
            StatusCode::BAD_REQUEST,
            id,
            INVALID_REQUEST,
            "jsonrpc must be \"2.0\"",
            None,
        );
    }
    let Some(method) = obj.get("method").and_then(Value::as_str) else {
        // A response or error from the client: nothing to answer.
        return StatusCode::ACCEPTED.into_response();
    };
    if id.is_null() {
        // A notification (`notifications/initialized`, ...): accepted.
        return StatusCode::ACCEPTED.into_response();
    }
    let empty = Map::new();
    let params = match obj.get("params") {
        None | Some(Value::Null) => &empty,
        Some(Value::Object(p)) => p,
        Some(_) => {
            return rpc_error(
                StatusCode::OK,
                id,
                INVALID_PARAMS,
                "params must be an object",
                None,
            );
        }
    };
    let modern = match negotiate(&headers, method, params) {
        Ok(m) => m,
        Err((code, message, data)) => {
            return rpc_error(StatusCode::BAD_REQUEST, id, code, &message, data);
        }
    };
    let req = Req {
        id,
        method,
        params,
        modern,
    };
    dispatch(&state, &principal, req).await
}

type Refusal = (i64, String, Option<Value>);

fn unsupported(requested: &str) -> Refusal {
    (
        UNSUPPORTED_VERSION,
        "Unsupported protocol version".into(),
        Some(json!({"requested": requested, "supported": REVISIONS})),
    )
}

/// Checks the per-request protocol fields; `Ok(true)` for a 2026-07-28
/// request.
fn negotiate(
    headers: &HeaderMap,
    method: &str,
    params: &Map<String, Value>,
) -> Result<bool, Refusal> {
    let header_version = headers.get(HEADER_VERSION).and_then(|v| v.to_str().ok());
    if let Some(h) = headers.get(HEADER_METHOD).and_then(|v| v.to_str().ok())
        && h != method
    {
        return Err((
            HEADER_MISMATCH,
            format!("Mcp-Method header ({h}) does not match the request method ({method})"),
            None,
        ));
    }
    if method == "initialize" {
        return Ok(false);
    }
    let meta_version = params
        .get("_meta")
        .and_then(|m| m.get(META_VERSION))
        .and_then(Value::as_str);
    match (meta_version, header_version) {
        (Some(m), None) => Err((
            HEADER_MISMATCH,
            format!("request _meta protocolVersion ({m}) requires the MCP-Protocol-Version header"),
            None,
        )),
        (Some(m), Some(h)) if m != h => Err((
            HEADER_MISMATCH,
            format!(
                "MCP-Protocol-Version header ({h}) does not match request _meta protocolVersion ({m})"
            ),
            None,
        )),
        (Some(m), Some(_)) => {
            if !REVISIONS.contains(&m) {
                return Err(unsupported(m));
            }
            Ok(m >= STATELESS)
        }
        (None, Some(h)) => {
            if !REVISIONS.contains(&h) {
                return Err(unsupported(h));
            }
            if h >= STATELESS && method != "server/discover" {
                return Err((
                    INVALID_PARAMS,
                    "Invalid params: request requires protocolVersion in request _meta".into(),
                    None,
                ));
            }
            Ok(h >= STATELESS)
        }
        // No header: 2025-03-26 (a `server/discover` is answered anyway).
        (None, None) => Ok(method == "server/discover"),
    }
}

fn ok(req: &Req<'_>, mut result: Value) -> Response {
    if req.modern
        && let Value::Object(m) = &mut result
    {
        m.insert("resultType".into(), json!("complete"));
    }
    json_response(
        StatusCode::OK,
        &json!({"jsonrpc": "2.0", "id": req.id, "result": result}),
    )
}

fn server_info() -> Value {
    json!({"name": "wop-serve", "title": "wop executor", "version": env!("CARGO_PKG_VERSION")})
}

fn discover() -> Value {
    let versions = REVISIONS
        .iter()
        .map(|v| {
            ProtocolVersion::KNOWN_VERSIONS
                .iter()
                .find(|k| k.as_str() == *v)
                .cloned()
        })
        .collect::<Option<Vec<_>>>()
        .unwrap_or_default();
    let caps: ServerCapabilities =
        serde_json::from_value(json!({"tools": {"listChanged": false}})).unwrap_or_default();
    let mut r = DiscoverResult::new(versions, caps);
    r.set_server_info(Implementation::new("wop-serve", env!("CARGO_PKG_VERSION")));
    serde_json::to_value(r).unwrap_or_else(|_| {
        json!({"resultType": "complete", "supportedVersions": REVISIONS,
               "capabilities": {"tools": {}}, "ttlMs": 0, "cacheScope": "private",
               "_meta": {"io.modelcontextprotocol/serverInfo": server_info()}})
    })
}

/// MCP tool annotations from the operator's tier (hints only).
fn annotations(tier: SafetyTier) -> Value {
    match tier {
        SafetyTier::Pure => {
            json!({"readOnlyHint": true, "destructiveHint": false, "idempotentHint": true, "openWorldHint": false})
        }
        SafetyTier::Read => {
            json!({"readOnlyHint": true, "destructiveHint": false, "openWorldHint": true})
        }
        SafetyTier::Write => {
            json!({"readOnlyHint": false, "destructiveHint": true, "openWorldHint": true})
        }
        SafetyTier::Exec => {
            json!({"readOnlyHint": false, "destructiveHint": true, "openWorldHint": true})
        }
    }
}

fn tool_json(type_id: &str, n: &NodeInfo) -> Value {
    let mut t = json!({
        "name": type_id,
        "inputSchema": n.input_schema,
        "_meta": {"dev.openwop/pack": n.pack},
    });
    if let Some(title) = &n.title {
        t["title"] = json!(title);
    }
    if let Some(d) = &n.description {
        t["description"] = json!(d);
    }
    if let Some(tier) = n.tier {
        t["annotations"] = annotations(tier);
    }
    t
}

async fn dispatch(state: &AppState, principal: &Principal, req: Req<'_>) -> Response {
    match req.method {
        "initialize" => {
            let asked = req
                .params
                .get("protocolVersion")
                .and_then(Value::as_str)
                .unwrap_or("2025-03-26");
            let version = if REVISIONS.contains(&asked) && asked < STATELESS {
                asked
            } else {
                LATEST_INITIALIZE
            };
            ok(
                &req,
                json!({
                    "protocolVersion": version,
                    "capabilities": {"tools": {"listChanged": false}},
                    "serverInfo": server_info(),
                    "instructions": "Each tool runs one OpenWOP node type in a fresh WebAssembly sandbox. Put an idempotency key in params._meta[\"dev.openwop/idempotencyKey\"] to run an invocation at most once.",
                }),
            )
        }
        "server/discover" => ok(&req, discover()),
        "ping" => ok(&req, json!({})),
        "tools/list" => {
            // Sorted by name: `nodes` is a BTreeMap keyed by typeId.
            let tools: Vec<Value> = state
                .nodes
                .iter()
                .filter(|(_, n)| n.allows(principal))
                .map(|(id, n)| tool_json(id, n))
                .collect();
            let mut result = json!({"tools": tools});
            if req.modern {
                // 2026-07-28 cacheable result: the catalog depends on the
                // caller (tenant, scopes), so it is private to it; packs are
                // fixed after start, so a minute is safe.
                result["ttlMs"] = json!(TOOLS_TTL_MS);
                result["cacheScope"] = json!("private");
            }
            ok(&req, result)
        }
        "tools/call" => call(state, principal, &req).await,
        m => {
            let status = if req.modern {
                StatusCode::NOT_FOUND
            } else {
                StatusCode::OK
            };
            rpc_error(
                status,
                req.id.clone(),
                METHOD_NOT_FOUND,
                &format!("Method not found: {m}"),
                None,
            )
        }
    }
}

fn tool_error(code: &str, message: &str, details: Option<Value>) -> Value {
    let err =
        json!({"code": code, "message": message, "details": details.unwrap_or_else(|| json!({}))});
    json!({
        "content": [{"type": "text", "text": err.to_string()}],
        "structuredContent": err,
        "isError": true,
    })
}

/// The MCP result of an invocation response (see [`invoke::response`]).
fn tool_result(resp: &Value) -> Value {
    let mut r = match resp.get("outcome").and_then(Value::as_str) {
        Some("completed") => {
            let output = resp.get("output").cloned().unwrap_or(Value::Null);
            let mut r = json!({
                "content": [{"type": "text", "text": output.to_string()}],
                "isError": false,
            });
            if output.is_object() {
                r["structuredContent"] = output;
            }
            r
        }
        Some("suspended") => {
            let s = json!({"outcome": "suspended", "interrupt": resp.get("interrupt")});
            json!({"content": [{"type": "text", "text": s.to_string()}], "structuredContent": s, "isError": false})
        }
        _ => {
            let e = resp.get("error").cloned().unwrap_or(Value::Null);
            tool_error(
                e.get("code")
                    .and_then(Value::as_str)
                    .unwrap_or("internal_error"),
                e.get("message").and_then(Value::as_str).unwrap_or(""),
                e.get("details").cloned(),
            )
        }
    };
    r["_meta"] = json!({"dev.openwop/invocationId": resp.get("invocationId")});
    r
}

async fn call(state: &AppState, principal: &Principal, req: &Req<'_>) -> Response {
    let Some(name) = req.params.get("name").and_then(Value::as_str) else {
        return rpc_error(
            StatusCode::OK,
            req.id.clone(),
            INVALID_PARAMS,
            "params.name (the tool) is required",
            None,
        );
    };
    if state.node_for(name, principal).is_none() {
        return rpc_error(
            StatusCode::OK,
            req.id.clone(),
            INVALID_PARAMS,
            &format!("Unknown tool: {name}"),
            None,
        );
    }
    let arguments = match req.params.get("arguments") {
        None | Some(Value::Null) => json!({}),
        Some(a @ Value::Object(_)) => a.clone(),
        Some(_) => {
            return ok(
                req,
                tool_error("validation_error", "arguments must be a JSON object", None),
            );
        }
    };
    let meta = req.params.get("_meta").and_then(Value::as_object);
    let get = |k: &str| meta.and_then(|m| m.get(k));
    let key = match get(META_IDEMPOTENCY) {
        None | Some(Value::Null) => None,
        Some(Value::String(k)) if !k.is_empty() && k.len() <= 256 => Some(k.clone()),
        Some(_) => {
            return ok(
                req,
                tool_error(
                    "validation_error",
                    "_meta dev.openwop/idempotencyKey must be a string of 1 to 256 characters",
                    None,
                ),
            );
        }
    };
    let ctx = match meta_ctx(get(META_RUN), get(META_NODE), get(META_ATTEMPT)) {
        Ok(c) => c,
        Err(message) => return ok(req, tool_error("validation_error", &message, None)),
    };
    let permit = match state.admit(&principal.tenant) {
        Ok(slot) => slot,
        Err(r) => {
            let retry = state.cfg.retry_after_secs;
            // A JSON-RPC error, so an MCP client shows why (decision 0050).
            return ApiError::no_slot(r, &principal.tenant, retry)
                .into_rpc_response(req.id.clone(), REFUSED);
        }
    };
    let run = Run {
        type_id: name.to_owned(),
        inputs: arguments.clone(),
        config: json!({}),
        ctx,
        budget: None,
        bounds: None,
        principal: principal.clone(),
        key,
        // The protocol's MCP `_meta` names no trigger payload.
        trigger_data: None,
        // The digest covers what the caller asked for.
        request: json!({"name": name, "arguments": arguments}),
        traceparent: get("traceparent")
            .and_then(Value::as_str)
            .map(str::to_owned),
    };
    match invoke::run(state.clone(), run, permit, None, Shape::Tree).await {
        Ok((reply, _replayed)) => ok(req, tool_result(&reply.into_tree())),
        Err(e) => {
            let (code, message, details) = e.parts();
            ok(req, tool_error(code.as_str(), &message, details))
        }
    }
}

/// Where in a run the caller says it is, from `_meta`: validated exactly
/// as the invoke API validates `nodeContext` (a value of the wrong type is
/// refused, not ignored).
fn meta_ctx(
    run: Option<&Value>,
    node: Option<&Value>,
    attempt: Option<&Value>,
) -> Result<Ctx, String> {
    let text = |v: Option<&Value>, key: &str| match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(format!("_meta {key} must be a string")),
    };
    let attempt = match attempt {
        None | Some(Value::Null) => None,
        Some(v) => Some(
            v.as_u64()
                .and_then(|a| u32::try_from(a).ok())
                .ok_or_else(|| format!("_meta {META_ATTEMPT} must be an integer from 1"))?,
        ),
    };
    let ctx = Ctx {
        run_id: text(run, META_RUN)?,
        node_id: text(node, META_NODE)?,
        attempt,
    };
    invoke::check_ctx(&ctx, |f| format!("_meta dev.openwop/{f}"))?;
    Ok(ctx)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meta_ids_are_checked_like_node_context() {
        let ok = meta_ctx(Some(&json!("wf/run-1")), Some(&json!("n")), Some(&json!(2))).unwrap();
        assert_eq!(ok.run_id.as_deref(), Some("wf/run-1"));
        for (run, node, attempt, says) in [
            (
                json!("x".repeat(257)),
                json!("n"),
                json!(1),
                "runId must be 1 to 256",
            ),
            (
                json!("a\u{7}b"),
                json!("n"),
                json!(1),
                "without control characters",
            ),
            (json!(""), json!("n"), json!(1), "runId must be 1 to 256"),
            (json!("r"), json!(42), json!(1), "must be a string"),
            (json!("r"), json!("n"), json!(0), "attempt starts at 1"),
            (json!("r"), json!("n"), json!(-1), "integer from 1"),
            (json!("r"), json!("n"), json!("1"), "integer from 1"),
        ] {
            let e = meta_ctx(Some(&run), Some(&node), Some(&attempt)).unwrap_err();
            assert!(e.contains(says), "{run} {node} {attempt}: {e}");
        }
        assert!(meta_ctx(None, None, None).is_ok());
    }

    fn h(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut m = HeaderMap::new();
        for (k, v) in pairs {
            m.insert(*k, HeaderValue::from_static(v));
        }
        m
    }

    #[test]
    fn negotiation_table() {
        let meta = |v: &str| {
            let mut p = Map::new();
            p.insert("_meta".into(), json!({META_VERSION: v}));
            p
        };
        let none = Map::new();
        assert_eq!(negotiate(&h(&[]), "tools/call", &none), Ok(false));
        assert_eq!(negotiate(&h(&[]), "server/discover", &none), Ok(true));
        assert_eq!(
            negotiate(
                &h(&[(HEADER_VERSION, "2026-07-28")]),
                "tools/list",
                &meta("2026-07-28")
            ),
            Ok(true)
        );
        assert_eq!(
            negotiate(&h(&[(HEADER_VERSION, "2025-06-18")]), "tools/list", &none),
            Ok(false)
        );
        let code = |r: Result<bool, Refusal>| r.err().map(|e| e.0);
        assert_eq!(
            code(negotiate(
                &h(&[(HEADER_VERSION, "2025-11-25")]),
                "tools/list",
                &meta("2026-07-28")
            )),
            Some(HEADER_MISMATCH)
        );
        assert_eq!(
            code(negotiate(&h(&[]), "tools/list", &meta("2026-07-28"))),
            Some(HEADER_MISMATCH)
        );
        assert_eq!(
            code(negotiate(
                &h(&[(HEADER_VERSION, "2099-01-01")]),
                "tools/list",
                &meta("2099-01-01")
            )),
            Some(UNSUPPORTED_VERSION)
        );
        assert_eq!(
            code(negotiate(
                &h(&[(HEADER_VERSION, "2099-01-01")]),
                "tools/list",
                &none
            )),
            Some(UNSUPPORTED_VERSION)
        );
        assert_eq!(
            code(negotiate(
                &h(&[(HEADER_METHOD, "tools/list")]),
                "tools/call",
                &none
            )),
            Some(HEADER_MISMATCH)
        );
        assert_eq!(
            negotiate(&h(&[(HEADER_VERSION, "2099-01-01")]), "initialize", &none),
            Ok(false)
        );
    }

    #[test]
    fn discover_names_every_revision() {
        let d = discover();
        assert_eq!(d["supportedVersions"], json!(REVISIONS));
        assert_eq!(d["resultType"], "complete");
        assert!(d["capabilities"]["tools"].is_object());
    }
}
