//! Shared HTTP plumbing: the error body `{error, message, details?}`,
//! bounded body reading (size, time, content type, JSON depth), who the
//! caller is (a bearer token or the anonymous loopback principal) and the
//! operator scope check.

use crate::slots::Refused;
use crate::state::AppState;
use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use http_body_util::BodyExt as _;
use serde_json::{Value, json};
use std::time::Duration;
use wop_runtime::Principal;
use wop_runtime::error::ErrorCode;

/// The `error` of a service answer: a protocol code, or one of the HTTP
/// layer's own for a request that never reached a node (its method, size,
/// arrival time or media type, or the service's capacity).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ApiCode {
    /// A protocol error code (`forbidden`, `not_found`, …).
    Protocol(ErrorCode),
    /// `method_not_allowed` (405).
    MethodNotAllowed,
    /// `payload_too_large` (413).
    PayloadTooLarge,
    /// `request_timeout` (408).
    RequestTimeout,
    /// `unsupported_media_type` (415).
    UnsupportedMediaType,
    /// `service_unavailable` (503: at capacity or draining).
    ServiceUnavailable,
}

impl ApiCode {
    /// The code as it is written in the body.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Protocol(c) => c.as_str(),
            Self::MethodNotAllowed => "method_not_allowed",
            Self::PayloadTooLarge => "payload_too_large",
            Self::RequestTimeout => "request_timeout",
            Self::UnsupportedMediaType => "unsupported_media_type",
            Self::ServiceUnavailable => "service_unavailable",
        }
    }
}

impl From<ErrorCode> for ApiCode {
    fn from(c: ErrorCode) -> Self {
        Self::Protocol(c)
    }
}

impl serde::Serialize for ApiCode {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// An HTTP error with a registered code.
#[derive(Debug)]
pub(crate) struct ApiError {
    pub status: StatusCode,
    pub code: ApiCode,
    pub message: String,
    pub details: Option<Value>,
    pub retry_after: Option<u64>,
    /// Answer with `Connection: close` (the connection cannot be reused:
    /// part of the request was left unread).
    pub close: bool,
}

impl ApiError {
    pub(crate) fn new(
        status: StatusCode,
        code: impl Into<ApiCode>,
        message: impl Into<String>,
    ) -> Self {
        Self {
            status,
            code: code.into(),
            message: message.into(),
            details: None,
            retry_after: None,
            close: false,
        }
    }

    /// Marks the answer as the connection's last.
    pub(crate) fn closing(mut self) -> Self {
        self.close = true;
        self
    }

    pub(crate) fn details(mut self, d: Value) -> Self {
        self.details = Some(d);
        self
    }

    pub(crate) fn validation(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, ErrorCode::ValidationError, message)
    }

    /// The same body for an unknown and an unauthorized id.
    pub(crate) fn not_found(what: &str, id: &str) -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            ErrorCode::NotFound,
            format!("no {what} `{id}`"),
        )
        .details(json!({ what: id }))
    }

    pub(crate) fn busy(retry_after: u64) -> Self {
        let mut e = Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            ApiCode::ServiceUnavailable,
            "the executor is at capacity; retry later",
        );
        e.retry_after = Some(retry_after);
        e
    }

    /// Why `tenant`'s invocation got no slot, as an answer: `503` (all
    /// taken) or `429` (its share taken).
    pub(crate) fn no_slot(refused: Refused, tenant: &str, retry_after: u64) -> Self {
        match refused {
            Refused::Full => Self::busy(retry_after),
            Refused::Tenant(cap) => Self::tenant_busy(tenant, cap, retry_after),
        }
    }

    /// Why `tenant`'s listing got no listing slot: `503` (all
    /// [`LISTINGS`](crate::slots::LISTINGS) taken) or `429` (its share).
    pub(crate) fn no_listing_slot(refused: Refused, tenant: &str, retry_after: u64) -> Self {
        let (status, code, message) = match refused {
            Refused::Full => (
                StatusCode::SERVICE_UNAVAILABLE,
                ApiCode::ServiceUnavailable,
                format!(
                    "the executor is reading {} listings, as many as it reads at once; retry \
                     later",
                    crate::slots::LISTINGS
                ),
            ),
            Refused::Tenant(cap) => (
                StatusCode::TOO_MANY_REQUESTS,
                ErrorCode::RateLimited.into(),
                format!(
                    "tenant `{tenant}` has {cap} listings being read, as many as one tenant may \
                     at once; retry when one has finished"
                ),
            ),
        };
        let mut e = Self::new(status, code, message);
        e.details = Some(
            json!({"tenant": tenant, "maxListingsPerTenant": crate::slots::LISTINGS_PER_TENANT}),
        );
        e.retry_after = Some(retry_after);
        e
    }

    /// `429 rate_limited`: `tenant` holds `cap` invocation slots, its
    /// share (`maxInFlightPerTenant`).
    pub(crate) fn tenant_busy(tenant: &str, cap: usize, retry_after: u64) -> Self {
        let mut e = Self::new(
            StatusCode::TOO_MANY_REQUESTS,
            ErrorCode::RateLimited,
            format!(
                "tenant `{tenant}` has {cap} invocations running, its share of this executor \
                 (maxInFlightPerTenant); retry when one has finished"
            ),
        );
        e.details = Some(serde_json::json!({"tenant": tenant, "maxInFlightPerTenant": cap}));
        e.retry_after = Some(retry_after);
        e
    }

    pub(crate) fn internal(message: impl Into<String>) -> Self {
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            ErrorCode::InternalError,
            message,
        )
    }
}

impl ApiError {
    /// The same answer for the MCP mount: this status and these headers
    /// (`Retry-After` included), the body a JSON-RPC error object answering
    /// request `id` with `rpc_code`; `data` holds `error` (the code as the
    /// other routes write it), `details` and `retryAfterSecs`. An MCP
    /// client shows a JSON-RPC error's message at any status, and nothing
    /// else: the official Python SDK reports a non-2xx answer without one
    /// as "Server returned an error response".
    pub(crate) fn into_rpc_response(self, id: Value, rpc_code: i64) -> Response {
        let mut data = json!({"error": self.code});
        if let Some(d) = &self.details {
            data["details"] = d.clone();
        }
        if let Some(s) = self.retry_after {
            data["retryAfterSecs"] = json!(s);
        }
        let body = json!({
            "jsonrpc": "2.0",
            "id": id,
            "error": {"code": rpc_code, "message": self.message, "data": data},
        });
        self.respond(body)
    }

    /// `body` with this answer's status and headers.
    fn respond(self, body: Value) -> Response {
        let mut resp = (self.status, axum::Json(body)).into_response();
        if let Some(s) = self.retry_after {
            resp.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(s));
        }
        if self.close {
            resp.headers_mut()
                .insert(header::CONNECTION, HeaderValue::from_static("close"));
        }
        if self.status == StatusCode::UNAUTHORIZED {
            resp.headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        resp
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut body = json!({"error": self.code, "message": &self.message});
        if let Some(d) = &self.details {
            body["details"] = d.clone();
        }
        self.respond(body)
    }
}

/// Whether the request's content type is JSON (`application/json`, any
/// parameters, or `application/*+json`).
fn is_json(headers: &HeaderMap) -> bool {
    let Some(ct) = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
    else {
        return false;
    };
    let mime = ct
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    mime == "application/json" || (mime.starts_with("application/") && mime.ends_with("+json"))
}

/// Most bytes of a refused (too large) body read and discarded before the
/// answer, so the client sees the `413` instead of a reset: closing a
/// socket with unread data makes the kernel send RST, which can destroy
/// the answer in flight. A body declared larger than this is answered at
/// once (its sender may see a reset).
const DRAIN_BYTES: usize = 8 << 20;

/// Reads the body within the size and time limits, as raw bytes. A body
/// over the cap is `413` (with `Connection: close`), after reading and
/// discarding what is left of it up to [`DRAIN_BYTES`] within the same
/// time limit.
pub(crate) async fn read_body(
    state: &AppState,
    headers: &HeaderMap,
    body: Body,
) -> Result<bytes::Bytes, ApiError> {
    let cap = state.cfg.max_body_bytes;
    let too_large = || {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            ApiCode::PayloadTooLarge,
            format!("the request body exceeds {cap} bytes"),
        )
        .details(json!({"limitBytes": cap}))
        .closing()
    };
    let deadline = tokio::time::Instant::now() + Duration::from_millis(state.cfg.body_timeout_ms);
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let mut body = body;
    if let Some(len) = declared
        && len > cap as u64
    {
        if len <= DRAIN_BYTES as u64 {
            drain(&mut body, DRAIN_BYTES, deadline).await;
        }
        return Err(too_large());
    }
    let mut buf = bytes::BytesMut::new();
    loop {
        let frame = match tokio::time::timeout_at(deadline, body.frame()).await {
            Err(_) => {
                return Err(ApiError::new(
                    StatusCode::REQUEST_TIMEOUT,
                    ApiCode::RequestTimeout,
                    "the request body did not arrive in time",
                )
                .closing());
            }
            Ok(None) => return Ok(buf.freeze()),
            Ok(Some(Err(e))) => {
                return Err(ApiError::validation(format!(
                    "the request body could not be read: {e}"
                )));
            }
            Ok(Some(Ok(f))) => f,
        };
        let Ok(data) = frame.into_data() else {
            continue; // trailers
        };
        if buf.len() + data.len() > cap {
            drain(
                &mut body,
                DRAIN_BYTES.saturating_sub(buf.len() + data.len()),
                deadline,
            )
            .await;
            return Err(too_large());
        }
        buf.extend_from_slice(&data);
    }
}

/// Reads and discards up to `limit` more bytes of `body` until `deadline`.
async fn drain(body: &mut Body, limit: usize, deadline: tokio::time::Instant) {
    let mut left = limit;
    while left > 0 {
        match tokio::time::timeout_at(deadline, body.frame()).await {
            Ok(Some(Ok(f))) => {
                if let Ok(d) = f.into_data() {
                    left = left.saturating_sub(d.len());
                }
            }
            _ => return,
        }
    }
}

/// The nesting depth of a JSON text (brackets outside strings); stops
/// counting past `cap`.
pub(crate) fn json_depth(bytes: &[u8], cap: usize) -> usize {
    let (mut depth, mut max, mut in_str, mut esc) = (0usize, 0usize, false, false);
    for &b in bytes {
        if in_str {
            if esc {
                esc = false;
            } else if b == b'\\' {
                esc = true;
            } else if b == b'"' {
                in_str = false;
            }
            continue;
        }
        match b {
            b'"' => in_str = true,
            b'[' | b'{' => {
                depth += 1;
                if depth > max {
                    max = depth;
                    if max > cap {
                        return max;
                    }
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    max
}

/// What went wrong turning a body into JSON (the MCP mount maps these to
/// JSON-RPC errors, the REST routes to `ApiError`).
pub(crate) enum JsonBodyError {
    /// Transport-level: size, time, content type.
    Http(ApiError),
    /// Too deep.
    Depth(ApiError),
    /// Not JSON.
    Parse(ApiError),
}

impl JsonBodyError {
    pub(crate) fn into_api(self) -> ApiError {
        match self {
            JsonBodyError::Http(e) | JsonBodyError::Depth(e) | JsonBodyError::Parse(e) => e,
        }
    }
}

/// Content type, size, time, depth, then parse.
pub(crate) async fn read_json(
    state: &AppState,
    headers: &HeaderMap,
    body: Body,
) -> Result<Value, JsonBodyError> {
    if !is_json(headers) {
        return Err(JsonBodyError::Http(
            ApiError::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                ApiCode::UnsupportedMediaType,
                "the request body must be application/json",
            )
            .details(json!({
                "contentType": headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()),
            })),
        ));
    }
    let bytes = read_body(state, headers, body)
        .await
        .map_err(JsonBodyError::Http)?;
    let cap = state.cfg.max_json_depth;
    if json_depth(&bytes, cap) > cap {
        return Err(JsonBodyError::Depth(
            ApiError::validation(format!("the JSON body nests deeper than {cap} levels"))
                .details(json!({"maxDepth": cap})),
        ));
    }
    serde_json::from_slice(&bytes).map_err(|e| {
        JsonBodyError::Parse(
            ApiError::validation(format!("the body is not valid JSON: {e}"))
                .details(json!({"line": e.line(), "column": e.column()})),
        )
    })
}

/// The caller's principal: a configured bearer token, or the anonymous
/// loopback principal when enabled and no `Authorization` was sent.
pub(crate) fn authenticate(state: &AppState, headers: &HeaderMap) -> Result<Principal, ApiError> {
    let Some(auth) = headers.get(header::AUTHORIZATION) else {
        if state.cfg.anonymous_loopback {
            return Ok(Principal {
                id: "anonymous".into(),
                tenant: crate::state::ANON_TENANT.into(),
                scopes: state.cfg.anonymous_scopes.clone(),
            });
        }
        return Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            ErrorCode::Forbidden,
            "a bearer token is required",
        )
        .details(json!({"reason": "missing-token"})));
    };
    let invalid = || {
        ApiError::new(
            StatusCode::UNAUTHORIZED,
            ErrorCode::Forbidden,
            "the bearer token is not valid",
        )
        .details(json!({"reason": "invalid-token"}))
    };
    let token = auth
        .to_str()
        .ok()
        .and_then(|v| {
            let (scheme, rest) = v.split_once(' ')?;
            scheme.eq_ignore_ascii_case("bearer").then(|| rest.trim())
        })
        .filter(|t| !t.is_empty())
        .ok_or_else(invalid)?;
    state
        .tokens
        .get(&crate::config::token_sha256(token))
        .cloned()
        .ok_or_else(invalid)
}

/// The scope of operators: usage across tenants (no `run`), `/metrics`.
pub const OPERATOR_SCOPE: &str = "wop.operator";

/// `403` unless `p` holds [`OPERATOR_SCOPE`]; `what` starts the message
/// ("metrics need").
pub(crate) fn operator(p: &Principal, what: &str) -> Result<(), ApiError> {
    if p.scopes.iter().any(|s| s == OPERATOR_SCOPE) {
        return Ok(());
    }
    Err(ApiError::new(
        StatusCode::FORBIDDEN,
        ErrorCode::Forbidden,
        format!("{what} the `{OPERATOR_SCOPE}` scope"),
    )
    .details(json!({"scope": OPERATOR_SCOPE})))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn depth_ignores_strings() {
        assert_eq!(json_depth(br#"{"a":[1,{"b":"[[[["}]}"#, 100), 3);
        assert_eq!(json_depth(br#""\"[""#, 100), 0);
        assert_eq!(json_depth(&[b'['; 1000], 10), 11);
    }
}
