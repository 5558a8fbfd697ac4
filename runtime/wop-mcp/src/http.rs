//! One Streamable HTTP session: POSTs JSON-RPC, reads JSON or SSE answers
//! with bounded memory, and takes only the response whose id matches.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use serde_json::Value;

use crate::config::McpServerConfig;
use crate::error::{McpError, McpFailure};
use crate::protocol::{self, Incoming};
use crate::sse::{SseItem, SseParser};

use wop_core::mcp_protocol::{
    HEADER_METHOD as METHOD_HEADER, HEADER_NAME as NAME_HEADER,
    HEADER_PROTOCOL_VERSION as VERSION_HEADER, HEADER_SESSION_ID as SESSION_HEADER,
};

/// Cap on an error body we read for diagnostics.
const ERROR_BODY_MAX: u64 = 64 * 1024;

/// Builds the pooled client for one server (rustls, no proxy, no redirects).
pub(crate) fn build_client(cfg: &McpServerConfig) -> Result<reqwest::Client, String> {
    let mut headers = HeaderMap::new();
    for (k, v) in &cfg.headers {
        let name = HeaderName::from_bytes(k.as_bytes()).map_err(|e| format!("headers: {e}"))?;
        let mut value = HeaderValue::from_str(v).map_err(|e| format!("headers.{k}: {e}"))?;
        value.set_sensitive(true);
        headers.insert(name, value);
    }
    reqwest::Client::builder()
        .use_rustls_tls()
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(Duration::from_millis(cfg.timeout_ms))
        .pool_idle_timeout(Duration::from_secs(60))
        .default_headers(headers)
        .build()
        .map_err(|e| format!("url: cannot build HTTP client: {e}"))
}

/// One negotiated (or negotiating) HTTP session.
pub(crate) struct HttpConn {
    client: reqwest::Client,
    url: String,
    max: u64,
    next_id: AtomicU64,
    session_id: Mutex<Option<String>>,
    protocol: Mutex<Option<String>>,
    dead: AtomicBool,
}

impl HttpConn {
    /// A new session over the shared pooled `client`.
    pub(crate) fn new(client: reqwest::Client, cfg: &McpServerConfig) -> Self {
        HttpConn {
            client,
            url: cfg.url.clone().unwrap_or_default(),
            max: cfg.max_result_bytes,
            next_id: AtomicU64::new(1),
            session_id: Mutex::new(None),
            protocol: Mutex::new(None),
            dead: AtomicBool::new(false),
        }
    }

    /// Records the negotiated revision (sent as `MCP-Protocol-Version`).
    pub(crate) fn set_protocol(&self, rev: &str) {
        if let Ok(mut p) = self.protocol.lock() {
            *p = Some(rev.to_owned());
        }
    }

    /// Forgets the revision and session id (before a legacy `initialize`).
    pub(crate) fn clear_protocol(&self) {
        if let Ok(mut p) = self.protocol.lock() {
            *p = None;
        }
        if let Ok(mut s) = self.session_id.lock() {
            *s = None;
        }
    }

    /// Whether the server dropped this session (HTTP 404 on a session).
    pub(crate) fn is_dead(&self) -> bool {
        self.dead.load(Ordering::Relaxed)
    }

    fn headers_for(&self, method: &str, params: Option<&Value>) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        h.insert(
            ACCEPT,
            HeaderValue::from_static("application/json, text/event-stream"),
        );
        let sid = self.session_id.lock().ok().and_then(|s| s.clone());
        if let Some(v) = sid.and_then(|s| HeaderValue::from_str(&s).ok()) {
            h.insert(SESSION_HEADER, v);
        }
        let rev = self.protocol.lock().ok().and_then(|p| p.clone());
        if let Some(rev) = rev {
            if rev.as_str() >= protocol::REV_2026_07_28 {
                // SEP-2243 standard headers.
                if let Ok(v) = HeaderValue::from_str(method) {
                    h.insert(METHOD_HEADER, v);
                }
                if let Some(name) = mcp_name(method, params)
                    && let Ok(v) = HeaderValue::from_str(&name)
                {
                    h.insert(NAME_HEADER, v);
                }
            }
            if let Ok(v) = HeaderValue::from_str(&rev) {
                h.insert(VERSION_HEADER, v);
            }
        }
        h
    }

    /// Sends a request and returns the result of the response with its id
    /// (the caller bounds time by dropping this future). A connection that
    /// could not be opened is a failure before sending; anything later may
    /// have reached the server.
    pub(crate) async fn request(
        &self,
        method: &str,
        params: &Value,
        extra: &HeaderMap,
    ) -> Result<Value, McpFailure> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let body = protocol::request_bytes(id, method, params);
        let mut headers = self.headers_for(method, Some(params));
        for (name, value) in extra {
            headers.insert(name.clone(), value.clone());
        }
        let resp = self
            .client
            .post(&self.url)
            .headers(headers)
            .body(body)
            .send()
            .await
            .map_err(|e| {
                let err = McpError::unavailable(transport_reason(&e));
                if e.is_connect() {
                    McpFailure::not_sent(err)
                } else {
                    McpFailure::sent(err)
                }
            })?;
        let status = resp.status();
        if let Some(sid) = resp
            .headers()
            .get(SESSION_HEADER)
            .and_then(|v| v.to_str().ok())
            && let Ok(mut s) = self.session_id.lock()
            && s.is_none()
        {
            *s = Some(sid.to_owned());
        }
        if status.as_u16() == 404 && self.had_session() {
            self.dead.store(true, Ordering::Relaxed);
            return Err(McpFailure::sent(McpError::unavailable(
                "MCP session expired (HTTP 404)",
            )));
        }
        if !status.is_success() {
            return Err(McpFailure::sent(self.status_error(resp, id).await));
        }
        let ctype = resp
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_ascii_lowercase();
        if ctype.starts_with("text/event-stream") {
            self.read_sse(resp, id).await
        } else if ctype.starts_with("application/json") {
            let bytes = read_bounded(resp, self.max)
                .await
                .map_err(McpFailure::sent)?;
            let msg = protocol::parse_message(&bytes).map_err(McpFailure::sent)?;
            pick_response(msg, id)
                .unwrap_or_else(|| Err(McpError::unavailable("MCP response id mismatch")))
                .map_err(McpFailure::sent)
        } else {
            Err(McpFailure::sent(McpError::unavailable(format!(
                "MCP server answered HTTP {} with content type {:?}",
                status.as_u16(),
                ctype.chars().take(64).collect::<String>()
            ))))
        }
    }

    /// Sends a notification (202 expected; the body is ignored).
    pub(crate) async fn notify(
        &self,
        method: &str,
        params: Option<&Value>,
    ) -> Result<(), McpError> {
        let body = protocol::notification_bytes(method, params);
        let resp = self
            .client
            .post(&self.url)
            .headers(self.headers_for(method, params))
            .body(body)
            .send()
            .await
            .map_err(|e| McpError::unavailable(transport_reason(&e)))?;
        if resp.status().is_success() {
            Ok(())
        } else {
            Err(McpError::unavailable(format!(
                "MCP notification refused: HTTP {}",
                resp.status().as_u16()
            )))
        }
    }

    fn had_session(&self) -> bool {
        self.session_id.lock().map(|s| s.is_some()).unwrap_or(false)
    }

    async fn status_error(&self, resp: reqwest::Response, id: u64) -> McpError {
        let status = resp.status().as_u16();
        if status == 429 || !(400..500).contains(&status) {
            // Rate limited, server failure, or a redirect (never followed).
            return McpError::unavailable(format!("MCP server answered HTTP {status}"));
        }
        // A 4xx may carry a JSON-RPC error for our request.
        if let Ok(bytes) = read_bounded(resp, ERROR_BODY_MAX).await
            && let Ok(msg) = protocol::parse_message(&bytes)
        {
            if let Some(Err(e)) = pick_response(msg.clone(), id) {
                return e;
            }
            if let Some(err) = msg.get("error")
                && err.is_object()
            {
                return protocol::rpc_error(err);
            }
        }
        McpError::Rpc {
            code: -32600,
            message: format!("MCP server answered HTTP {status}"),
            data: Some(serde_json::json!({"httpStatus": status})),
        }
    }

    async fn read_sse(&self, mut resp: reqwest::Response, id: u64) -> Result<Value, McpFailure> {
        let max = usize::try_from(self.max).unwrap_or(usize::MAX);
        let mut parser = SseParser::new(max);
        let mut items = Vec::new();
        loop {
            let chunk = resp
                .chunk()
                .await
                .map_err(|e| McpFailure::sent(McpError::unavailable(transport_reason(&e))))?;
            let Some(chunk) = chunk else {
                return Err(McpFailure::sent(McpError::unavailable(
                    "MCP event stream ended without a response",
                )));
            };
            parser.feed(&chunk, &mut items);
            for item in items.drain(..) {
                match item {
                    SseItem::TooLarge { observed } => {
                        return Err(McpFailure::sent(McpError::TooLarge {
                            limit: self.max,
                            observed,
                        }));
                    }
                    // Priming events (SEP-1699) carry an id and empty data.
                    SseItem::Data(data) if data.iter().all(u8::is_ascii_whitespace) => {}
                    SseItem::Data(data) => {
                        // Notifications, server requests, other ids: skipped.
                        let msg = protocol::parse_message(&data).map_err(McpFailure::sent)?;
                        if let Some(outcome) = pick_response(msg, id) {
                            return outcome.map_err(McpFailure::sent);
                        }
                    }
                }
            }
        }
    }
}

/// The outcome of the response to `id` within `msg` (object or batch).
fn pick_response(msg: Value, id: u64) -> Option<Result<Value, McpError>> {
    match msg {
        Value::Array(items) => items.into_iter().find_map(|m| pick_response(m, id)),
        other => match protocol::classify(other) {
            Incoming::Response { id: rid, outcome } if protocol::id_matches(&rid, id) => {
                Some(outcome)
            }
            _ => None,
        },
    }
}

/// Reads a body, refusing more than `max` bytes without buffering them.
async fn read_bounded(mut resp: reqwest::Response, max: u64) -> Result<Vec<u8>, McpError> {
    if let Some(len) = resp.content_length()
        && len > max
    {
        return Err(McpError::TooLarge {
            limit: max,
            observed: len,
        });
    }
    let mut body = Vec::new();
    while let Some(chunk) = resp
        .chunk()
        .await
        .map_err(|e| McpError::unavailable(transport_reason(&e)))?
    {
        let observed = body.len() as u64 + chunk.len() as u64;
        if observed > max {
            return Err(McpError::TooLarge {
                limit: max,
                observed,
            });
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// The `Mcp-Name` header value (SEP-2243) when plain ASCII, else none.
fn mcp_name(method: &str, params: Option<&Value>) -> Option<String> {
    let key = match method {
        "tools/call" | "prompts/get" => "name",
        "resources/read" | "resources/subscribe" | "resources/unsubscribe" => "uri",
        _ => return None,
    };
    let v = params?.get(key)?.as_str()?;
    let plain = !v.is_empty()
        && v.bytes().all(|b| (0x21..0x7f).contains(&b) || b == b' ')
        && !v.starts_with(' ')
        && !v.ends_with(' ')
        && !v.starts_with("=?base64?");
    plain.then(|| v.to_owned())
}

/// A transport error's reason without the URL (which may carry secrets).
fn transport_reason(e: &reqwest::Error) -> String {
    let kind = if e.is_connect() {
        "connect failed"
    } else if e.is_timeout() {
        "timed out"
    } else if e.is_body() || e.is_decode() {
        "response body failed"
    } else if e.is_request() {
        "request failed"
    } else {
        "transport error"
    };
    format!("MCP HTTP {kind}")
}
