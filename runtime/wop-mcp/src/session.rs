//! A negotiated session over either transport, and the revision handshake.
//!
//! Order: `server/discover` offering 2026-07-28 (stateless revision); on a
//! clear legacy signal (a JSON-RPC error other than "unsupported version",
//! an HTTP 4xx) fall back to `initialize` offering 2025-11-25. Silence is
//! not a verdict: after the probe window `initialize` is sent as well and
//! the discovery answer is still awaited, until the call's own deadline —
//! a server that starts slowly answers both in order (a 2026-07-28 answer
//! to `server/discover` wins), a legacy server that ignores
//! `server/discover` answers `initialize`. The revision the server answers
//! is checked against [`SUPPORTED_REVISIONS`](crate::SUPPORTED_REVISIONS):
//! rmcp does not check it, so we do. A transport failure never triggers
//! the fallback (no silent downgrade on a flaky link).

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value, json};
use tokio::time::{Instant, timeout_at};

use crate::error::{McpError, McpFailure};
use crate::http::HttpConn;
use crate::protocol::{self, REV_2025_11_25, REV_2026_07_28};
use crate::stdio::StdioConn;

/// Longest wait for a `server/discover` answer alone; after it `initialize`
/// is sent too, and both answers are awaited until the deadline.
const DISCOVER_PROBE_MAX: Duration = Duration::from_secs(3);

/// The byte channel of a session.
pub(crate) enum Wire {
    /// A child process.
    Stdio(Arc<StdioConn>),
    /// A Streamable HTTP endpoint.
    Http(Arc<HttpConn>),
}

/// Headers added to one request: credentials the host attaches (HTTP only).
pub type ExtraHeaders = reqwest::header::HeaderMap;

impl Wire {
    async fn request(&self, method: &str, params: &Value) -> Result<Value, McpFailure> {
        self.request_with(method, params, &ExtraHeaders::new())
            .await
    }

    async fn request_with(
        &self,
        method: &str,
        params: &Value,
        extra: &ExtraHeaders,
    ) -> Result<Value, McpFailure> {
        match self {
            Wire::Stdio(_) if !extra.is_empty() => {
                Err(McpFailure::not_sent(McpError::unavailable(
                    "a credential can be attached only to an MCP server over HTTP",
                )))
            }
            Wire::Stdio(c) => c.request(method, params).await,
            Wire::Http(c) => c.request(method, params, extra).await,
        }
    }

    /// A handshake request: whether it was sent does not matter (the
    /// caller's request was not, whatever happens here).
    async fn handshake(&self, method: &str, params: &Value) -> Result<Value, McpError> {
        self.request(method, params).await.map_err(|f| f.error)
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
        extra: &ExtraHeaders,
    ) -> Result<Value, McpFailure> {
        let params = protocol::with_meta(base, caller_meta, self.modern_meta.as_ref());
        self.wire.request_with(method, &params, extra).await
    }

    /// Negotiates a revision over `wire`, finishing by `deadline`.
    pub(crate) async fn negotiate(wire: Wire, deadline: Instant) -> Result<Self, McpError> {
        let modern = protocol::modern_meta();
        if let Wire::Http(c) = &wire {
            c.set_protocol(REV_2026_07_28);
        }
        let left = deadline.saturating_duration_since(Instant::now());
        let probe_end = Instant::now() + (left / 2).min(DISCOVER_PROBE_MAX);
        let params = protocol::initialize_params(REV_2025_11_25);
        let verdict = {
            let discover_params = json!({"_meta": modern});
            let discover = wire.handshake("server/discover", &discover_params);
            tokio::pin!(discover);
            match timeout_at(probe_end, &mut discover).await {
                Ok(answer) => match judge_discover(answer)? {
                    Discovered::Modern => Verdict::Modern,
                    Discovered::Legacy => {
                        if let Some(reason) = wire.dead_reason() {
                            return Err(McpError::unavailable(reason));
                        }
                        legacy_wire(&wire);
                        let answer = timeout_at(deadline, wire.handshake("initialize", &params))
                            .await
                            .map_err(|_| handshake_timed_out())?;
                        Verdict::Legacy(answer?)
                    }
                },
                Err(_) => {
                    // Silence: a slow start or a server that ignores the
                    // probe. Ask the legacy way as well; keep listening.
                    legacy_wire(&wire);
                    let initialize = wire.handshake("initialize", &params);
                    race(&mut discover, initialize, deadline).await?
                }
            }
        };
        if let Some(reason) = wire.dead_reason() {
            return Err(McpError::unavailable(reason));
        }
        match verdict {
            Verdict::Modern => {
                if let Wire::Http(c) = &wire {
                    c.clear_protocol();
                    c.set_protocol(REV_2026_07_28);
                }
                Ok(Session {
                    wire,
                    version: REV_2026_07_28.to_owned(),
                    modern_meta: Some(modern),
                })
            }
            Verdict::Legacy(result) => {
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
                    .map_err(|_| handshake_timed_out())??;
                Ok(Session {
                    wire,
                    version: offered,
                    modern_meta: None,
                })
            }
        }
    }
}

/// Before a legacy `initialize`: an HTTP session forgets the revision and
/// any session id.
fn legacy_wire(wire: &Wire) {
    if let Wire::Http(c) = wire {
        c.clear_protocol();
    }
}

fn handshake_timed_out() -> McpError {
    McpError::unavailable("MCP handshake timed out")
}

/// How the handshake ended.
enum Verdict {
    /// `server/discover` offered 2026-07-28.
    Modern,
    /// `initialize` answered with this result.
    Legacy(Value),
}

/// What a `server/discover` answer says.
enum Discovered {
    /// 2026-07-28 is offered.
    Modern,
    /// A legacy server: use `initialize`.
    Legacy,
}

/// Judges a `server/discover` answer; `Err` for a transport failure or
/// only unsupported revisions.
fn judge_discover(answer: Result<Value, McpError>) -> Result<Discovered, McpError> {
    match answer {
        Ok(result) => {
            let offered = string_list(result.get("supportedVersions"));
            if offered.iter().any(|v| v == REV_2026_07_28) {
                return Ok(Discovered::Modern);
            }
            if !offered.iter().any(|v| protocol::is_supported(v)) {
                return Err(unsupported(offered.join(",")));
            }
            Ok(Discovered::Legacy)
        }
        Err(McpError::Rpc { code, data, .. }) if code == protocol::CODE_UNSUPPORTED_VERSION => {
            let offered = string_list(data.as_ref().and_then(|d| d.get("supported")));
            if !offered.is_empty() && !offered.iter().any(|v| protocol::is_supported(v)) {
                return Err(unsupported(offered.join(",")));
            }
            Ok(Discovered::Legacy)
        }
        Err(McpError::Rpc { .. }) => Ok(Discovered::Legacy),
        Err(other) => Err(other),
    }
}

/// After a silent probe: `server/discover` (still pending) and `initialize`
/// race until `deadline`. A 2026-07-28 discovery answer wins; a legacy
/// signal leaves `initialize` to decide; an `initialize` error leaves the
/// discovery answer to decide; a success of `initialize` decides.
async fn race(
    discover: &mut (impl Future<Output = Result<Value, McpError>> + Unpin),
    initialize: impl Future<Output = Result<Value, McpError>>,
    deadline: Instant,
) -> Result<Verdict, McpError> {
    tokio::pin!(initialize);
    let mut discover_open = true;
    let mut init_error: Option<McpError> = None;
    loop {
        if !discover_open && let Some(e) = init_error.take() {
            return Err(e);
        }
        tokio::select! {
            answer = &mut *discover, if discover_open => {
                discover_open = false;
                if let Discovered::Modern = judge_discover(answer)? {
                    return Ok(Verdict::Modern);
                }
            }
            answer = &mut initialize, if init_error.is_none() => match answer {
                Ok(result) => return Ok(Verdict::Legacy(result)),
                Err(e @ McpError::Rpc { .. }) if discover_open => init_error = Some(e),
                Err(e) => return Err(e),
            },
            _ = tokio::time::sleep_until(deadline) => return Err(handshake_timed_out()),
        }
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
