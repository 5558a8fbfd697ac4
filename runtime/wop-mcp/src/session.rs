//! A negotiated session over either transport, and the revision handshake.
//!
//! Order: `server/discover` offering 2026-07-28 (stateless revision); on a
//! clear legacy signal (a JSON-RPC error other than "unsupported version",
//! an HTTP 4xx, or silence within the probe window) fall back to
//! `initialize` offering 2025-11-25. The revision the server answers is
//! checked against [`SUPPORTED_REVISIONS`](crate::SUPPORTED_REVISIONS): rmcp
//! does not check it, so we do. A transport failure never triggers the
//! fallback (no silent downgrade on a flaky link).

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value, json};
use tokio::time::{Instant, timeout_at};

use crate::error::McpError;
use crate::http::HttpConn;
use crate::protocol::{self, REV_2025_11_25, REV_2026_07_28};
use crate::stdio::StdioConn;

/// Longest wait for a `server/discover` answer before assuming a legacy server.
const DISCOVER_PROBE_MAX: Duration = Duration::from_secs(3);

/// The byte channel of a session.
pub(crate) enum Wire {
    /// A child process.
    Stdio(Arc<StdioConn>),
    /// A Streamable HTTP endpoint.
    Http(Arc<HttpConn>),
}

impl Wire {
    async fn request(&self, method: &str, params: &Value) -> Result<Value, McpError> {
        match self {
            Wire::Stdio(c) => c.request(method, params).await,
            Wire::Http(c) => c.request(method, params).await,
        }
    }

    async fn notify(&self, method: &str, params: Option<&Value>) -> Result<(), McpError> {
        match self {
            Wire::Stdio(c) => c.notify(method, params).await,
            Wire::Http(c) => c.notify(method, params).await,
        }
    }

    /// Why the channel is no longer usable, if it is not.
    pub(crate) fn dead_reason(&self) -> Option<String> {
        match self {
            Wire::Stdio(c) => c.dead_reason(),
            Wire::Http(c) => c.is_dead().then(|| "MCP session expired".to_owned()),
        }
    }
}

/// A negotiated session.
pub(crate) struct Session {
    pub(crate) wire: Wire,
    /// The negotiated revision.
    pub(crate) version: String,
    /// 2026-07-28: the client context carried in every request's `_meta`.
    modern_meta: Option<Map<String, Value>>,
}

impl Session {
    /// Sends `method` with `base` params and the caller's `_meta`.
    pub(crate) async fn request(
        &self,
        method: &str,
        base: Map<String, Value>,
        caller_meta: Map<String, Value>,
    ) -> Result<Value, McpError> {
        let params = protocol::with_meta(base, caller_meta, self.modern_meta.as_ref());
        self.wire.request(method, &params).await
    }

    /// Negotiates a revision over `wire`, finishing by `deadline`.
    pub(crate) async fn negotiate(wire: Wire, deadline: Instant) -> Result<Self, McpError> {
        let timed_out = || McpError::unavailable("MCP handshake timed out");
        let modern = protocol::modern_meta();
        if let Wire::Http(c) = &wire {
            c.set_protocol(REV_2026_07_28);
        }
        let left = deadline.saturating_duration_since(Instant::now());
        let probe_end = Instant::now() + (left / 2).min(DISCOVER_PROBE_MAX);
        let discover = json!({"_meta": modern});
        match timeout_at(probe_end, wire.request("server/discover", &discover)).await {
            Ok(Ok(result)) => {
                let offered = string_list(result.get("supportedVersions"));
                if offered.iter().any(|v| v == REV_2026_07_28) {
                    return Ok(Session {
                        wire,
                        version: REV_2026_07_28.to_owned(),
                        modern_meta: Some(modern),
                    });
                }
                if !offered.iter().any(|v| protocol::is_supported(v)) {
                    return Err(unsupported(offered.join(",")));
                }
            }
            Ok(Err(McpError::Rpc { code, data, .. }))
                if code == protocol::CODE_UNSUPPORTED_VERSION =>
            {
                let offered = string_list(data.as_ref().and_then(|d| d.get("supported")));
                if !offered.is_empty() && !offered.iter().any(|v| protocol::is_supported(v)) {
                    return Err(unsupported(offered.join(",")));
                }
            }
            Ok(Err(McpError::Rpc { .. })) => {}
            Ok(Err(other)) => return Err(other),
            Err(_) if Instant::now() >= deadline => return Err(timed_out()),
            Err(_) => {}
        }
        if let Some(reason) = wire.dead_reason() {
            return Err(McpError::unavailable(reason));
        }
        // Legacy: initialize.
        if let Wire::Http(c) = &wire {
            c.clear_protocol();
        }
        let params = protocol::initialize_params(REV_2025_11_25);
        let result = timeout_at(deadline, wire.request("initialize", &params))
            .await
            .map_err(|_| timed_out())??;
        let offered = result
            .get("protocolVersion")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        if !protocol::is_supported(&offered) || !protocol::has_initialize(&offered) {
            return Err(unsupported(offered));
        }
        if let Wire::Http(c) = &wire {
            c.set_protocol(&offered);
        }
        timeout_at(deadline, wire.notify("notifications/initialized", None))
            .await
            .map_err(|_| timed_out())??;
        Ok(Session {
            wire,
            version: offered,
            modern_meta: None,
        })
    }
}

fn unsupported(offered: String) -> McpError {
    McpError::VersionUnsupported {
        offered: offered.chars().take(128).collect(),
        supported: protocol::supported_list(),
    }
}

fn string_list(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .take(32)
                .map(|s| s.chars().take(64).collect())
                .collect()
        })
        .unwrap_or_default()
}
