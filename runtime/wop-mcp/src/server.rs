//! One configured server: lazily connects, records the negotiated revision,
//! and restarts (stdio) / reconnects (HTTP) with bounded exponential backoff.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Map, Value, json};
use tokio::time::{Instant, sleep_until, timeout_at};

use crate::config::{McpServerConfig, McpTransportKind};
use crate::error::{McpError, McpFailure};
use crate::http::{self, HttpConn};
use crate::session::{Session, Wire};
use crate::stdio::StdioConn;

/// First restart delay after a failure.
pub(crate) const BACKOFF_BASE: Duration = Duration::from_millis(200);
/// Longest restart delay.
pub(crate) const BACKOFF_MAX: Duration = Duration::from_secs(30);
/// A connection that lived this long resets the failure streak.
const HEALTHY_AFTER: Duration = Duration::from_secs(60);
const LAST_ERROR_MAX: usize = 4 * 1024;

#[derive(Default)]
struct Info {
    version: Option<String>,
    restarts: u64,
    failures: u32,
    next_attempt: Option<Instant>,
    last_error: Option<String>,
    connected_once: bool,
}

struct Live {
    session: Arc<Session>,
    since: Instant,
}

/// One server id's supervisor.
pub(crate) struct Server {
    id: String,
    cfg: McpServerConfig,
    client: Option<reqwest::Client>,
    live: tokio::sync::Mutex<Option<Live>>,
    info: Mutex<Info>,
}

impl Server {
    /// A supervisor; builds the pooled HTTP client for HTTP servers.
    pub(crate) fn new(id: String, cfg: McpServerConfig) -> Result<Self, String> {
        let client = match cfg.transport {
            McpTransportKind::StreamableHttp => {
                Some(http::build_client(&cfg).map_err(|m| format!("mcp.servers.{id}.{m}"))?)
            }
            McpTransportKind::Stdio => None,
        };
        Ok(Server {
            id,
            cfg,
            client,
            live: tokio::sync::Mutex::new(None),
            info: Mutex::new(Info::default()),
        })
    }

    pub(crate) fn config(&self) -> &McpServerConfig {
        &self.cfg
    }

    pub(crate) fn deadline(&self) -> Instant {
        Instant::now() + Duration::from_millis(self.cfg.timeout_ms)
    }

    /// The recorded negotiated revision.
    pub(crate) fn protocol_version(&self) -> Option<String> {
        self.info.lock().ok().and_then(|i| i.version.clone())
    }

    /// Sends one request, connecting first if needed; all within the
    /// server's timeout and, if given, by `by` (whichever comes first).
    /// The failure says whether the request may have reached the server:
    /// nothing before the session is up (connect, handshake, waiting for a
    /// restart) sends it.
    pub(crate) async fn request(
        &self,
        method: &str,
        base: Map<String, Value>,
        meta: Map<String, Value>,
        by: Option<Instant>,
        extra: &crate::session::ExtraHeaders,
    ) -> Result<Value, McpFailure> {
        let started = Instant::now();
        let deadline = match by {
            Some(b) => b.min(self.deadline()),
            None => self.deadline(),
        };
        let session = self.session(deadline).await.map_err(McpFailure::not_sent)?;
        let first = self
            .bounded(
                started,
                deadline,
                session.request(method, base.clone(), meta.clone(), extra),
            )
            .await;
        // An HTTP session the server forgot (404) was not processed there:
        // start a new session and send once more, within the same deadline.
        let expired = matches!(
            &first,
            Err(McpFailure {
                error: McpError::Unavailable { .. },
                ..
            })
        ) && matches!(&session.wire, Wire::Http(c) if c.is_dead());
        if !expired {
            return first;
        }
        let session = self.session(deadline).await.map_err(McpFailure::not_sent)?;
        self.bounded(
            started,
            deadline,
            session.request(method, base, meta, extra),
        )
        .await
    }

    /// `fut` (a request on a live session) until `deadline`; running out
    /// of time once it was started may leave it sent.
    async fn bounded(
        &self,
        started: Instant,
        deadline: Instant,
        fut: impl Future<Output = Result<Value, McpFailure>>,
    ) -> Result<Value, McpFailure> {
        match timeout_at(deadline, fut).await {
            Ok(r) => r,
            Err(_) => Err(McpFailure::sent(McpError::unavailable(format!(
                "MCP call timed out after {} ms",
                started.elapsed().as_millis()
            )))),
        }
    }

    /// The live session, (re)starting it if needed. Every failure here is
    /// before any caller's request was sent; a handshake the server
    /// answered with an error is `upstream_unavailable` like one it never
    /// answered ([`McpError::handshake`]).
    async fn session(&self, deadline: Instant) -> Result<Arc<Session>, McpError> {
        let mut live = timeout_at(deadline, self.live.lock())
            .await
            .map_err(|_| McpError::unavailable("timed out waiting for MCP server start"))?;
        if let Some(l) = live.as_ref() {
            match l.session.wire.dead_reason() {
                None => return Ok(l.session.clone()),
                Some(reason) => {
                    let lived = l.since.elapsed();
                    let detail = death_detail(&l.session.wire, &reason);
                    *live = None;
                    self.note_failure(detail, lived >= HEALTHY_AFTER);
                }
            }
        }
        let next = self.info.lock().ok().and_then(|i| i.next_attempt);
        if let Some(at) = next
            && at > Instant::now()
        {
            if at >= deadline {
                return Err(McpError::unavailable(format!(
                    "MCP server restarting; next attempt in {} ms",
                    at.saturating_duration_since(Instant::now()).as_millis()
                )));
            }
            sleep_until(at).await;
        }
        if let Ok(mut i) = self.info.lock() {
            if i.connected_once {
                i.restarts += 1;
            }
            i.connected_once = true;
        }
        let outcome = match timeout_at(deadline, self.connect(deadline)).await {
            Ok(r) => r,
            Err(_) => {
                let e = McpError::unavailable("MCP handshake timed out");
                Err((e.clone(), e.to_string()))
            }
        };
        match outcome {
            Ok(session) => {
                let session = Arc::new(session);
                self.record_version(&session.version);
                *live = Some(Live {
                    session: session.clone(),
                    since: Instant::now(),
                });
                Ok(session)
            }
            Err((e, detail)) => {
                self.note_failure(detail, false);
                Err(e.handshake())
            }
        }
    }

    /// Connects and negotiates; the error comes with a detail for `lastError`
    /// (exit status and stderr tail, which never go into the error itself).
    async fn connect(&self, deadline: Instant) -> Result<Session, (McpError, String)> {
        let wire = match &self.client {
            None => {
                let c = StdioConn::spawn(&self.cfg).map_err(|e| (e.clone(), e.to_string()))?;
                Wire::Stdio(c)
            }
            Some(client) => Wire::Http(Arc::new(HttpConn::new(client.clone(), &self.cfg))),
        };
        let stdio = match &wire {
            Wire::Stdio(c) => Some(c.clone()),
            Wire::Http(_) => None,
        };
        match Session::negotiate(wire, deadline).await {
            Ok(s) => Ok(s),
            Err(e) => {
                let detail = match stdio {
                    Some(c) => {
                        let d = death_detail(&Wire::Stdio(c.clone()), &e.to_string());
                        c.kill("handshake failed");
                        d
                    }
                    None => e.to_string(),
                };
                Err((e, detail))
            }
        }
    }

    fn record_version(&self, version: &str) {
        if let Ok(mut i) = self.info.lock() {
            if let Some(prev) = &i.version
                && prev != version
            {
                tracing::warn!(
                    server = %self.id,
                    previous = %prev,
                    negotiated = %version,
                    "MCP server changed protocol revision on reconnect"
                );
            }
            i.version = Some(version.to_owned());
        }
    }

    fn note_failure(&self, detail: String, reset: bool) {
        if let Ok(mut i) = self.info.lock() {
            i.failures = if reset {
                1
            } else {
                i.failures.saturating_add(1)
            };
            i.next_attempt = Some(Instant::now() + backoff(i.failures));
            i.last_error = Some(trim(detail));
        }
    }

    /// What is known of this server without touching it: never starts,
    /// connects or pings it, never waits for a lock (for a metrics scrape).
    pub(crate) fn status(&self) -> ServerStatus {
        let state = match self.live.try_lock() {
            // Held only while a session is being made: a start or restart.
            Err(_) => ServerState::Starting,
            Ok(live) => match live.as_ref().map(|l| l.session.wire.dead_reason()) {
                Some(None) => ServerState::Ready,
                Some(Some(_)) => ServerState::Down,
                None => ServerState::Idle,
            },
        };
        let (restarts, failures) = match self.info.lock() {
            Ok(i) => (i.restarts, i.failures),
            Err(_) => (0, 0),
        };
        let state = match state {
            // Never connected since its last failure: down, not idle.
            ServerState::Idle if failures > 0 => ServerState::Down,
            s => s,
        };
        ServerStatus {
            state,
            restarts,
            failures,
        }
    }

    /// The host's health document for this server (may start it and ping).
    pub(crate) async fn health(&self) -> Value {
        let transport = self.cfg.transport.as_str();
        let starting = self.live.try_lock().is_err();
        let state = if starting {
            "starting"
        } else {
            let deadline = self.deadline();
            match self.session(deadline).await {
                Ok(session) => {
                    match timeout_at(
                        deadline,
                        session.request("ping", Map::new(), Map::new(), &Default::default()),
                    )
                    .await
                    {
                        Ok(Ok(_))
                        | Ok(Err(McpFailure {
                            error: McpError::Rpc { .. },
                            ..
                        })) => "ready",
                        Ok(Err(f)) => {
                            self.set_last_error(f.error.to_string());
                            "down"
                        }
                        Err(_) => {
                            self.set_last_error("ping timed out".into());
                            "down"
                        }
                    }
                }
                Err(_) => "down",
            }
        };
        let info = self.info.lock().ok();
        let (version, restarts, last_error) = match info.as_deref() {
            Some(i) => (i.version.clone(), i.restarts, i.last_error.clone()),
            None => (None, 0, None),
        };
        let mut doc = json!({
            "serverId": self.id,
            "transport": transport,
            "protocolVersion": version,
            "state": state,
            "restarts": restarts,
        });
        if let (Some(e), Some(obj)) = (last_error, doc.as_object_mut()) {
            obj.insert("lastError".into(), Value::String(e));
        }
        doc
    }

    fn set_last_error(&self, e: String) {
        if let Ok(mut i) = self.info.lock() {
            i.last_error = Some(trim(e));
        }
    }

    /// Stops the server (stdio: kills the child).
    pub(crate) async fn shutdown(&self) {
        let mut live = self.live.lock().await;
        if let Some(l) = live.take()
            && let Wire::Stdio(c) = &l.session.wire
        {
            c.kill("hub shut down");
        }
    }
}

/// `reason`, plus exit status and stderr tail for a child.
fn death_detail(wire: &Wire, reason: &str) -> String {
    match wire {
        Wire::Stdio(c) => {
            let mut s = reason.to_owned();
            if let Some(status) = c.exit_status() {
                s.push_str(&format!(" ({status})"));
            }
            let tail = c.stderr_tail();
            if !tail.is_empty() {
                s.push_str("; stderr: ");
                s.push_str(&tail);
            }
            s
        }
        Wire::Http(_) => reason.to_owned(),
    }
}

/// Restart delay after `failures` consecutive failures.
pub(crate) fn backoff(failures: u32) -> Duration {
    let exp = failures.saturating_sub(1).min(16);
    BACKOFF_BASE.saturating_mul(1u32 << exp).min(BACKOFF_MAX)
}

fn trim(mut s: String) -> String {
    if s.len() > LAST_ERROR_MAX {
        let mut cut = s.len() - LAST_ERROR_MAX;
        while !s.is_char_boundary(cut) {
            cut += 1;
        }
        s.drain(..cut);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_is_bounded() {
        assert_eq!(backoff(1), BACKOFF_BASE);
        assert_eq!(backoff(2), BACKOFF_BASE * 2);
        assert_eq!(backoff(100), BACKOFF_MAX);
    }

    #[test]
    fn trims_from_the_front() {
        let s = "é".repeat(LAST_ERROR_MAX);
        assert!(trim(s).len() <= LAST_ERROR_MAX);
    }
}

/// The state of one configured MCP server as last seen (its `status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerState {
    /// Not started yet (servers start on first use).
    Idle,
    /// Being started or restarted right now.
    Starting,
    /// Connected, its session alive.
    Ready,
    /// Its session died or its last start failed; restarted on next use.
    Down,
}

impl ServerState {
    /// `idle`, `starting`, `ready` or `down`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Idle => "idle",
            Self::Starting => "starting",
            Self::Ready => "ready",
            Self::Down => "down",
        }
    }
}

/// A passive snapshot of one MCP server: state and counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerStatus {
    /// Its state.
    pub state: ServerState,
    /// Restarts (stdio) or new sessions after the first (HTTP).
    pub restarts: u64,
    /// Failures in its current streak (what sets the restart backoff).
    pub failures: u32,
}
