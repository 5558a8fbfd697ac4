//! One running stdio MCP server: a child process, a bounded reader that
//! routes responses by id, a writer task and a bounded stderr ring.

use std::collections::HashMap;
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::Value;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, Command};
use tokio::sync::{mpsc, oneshot};

use crate::config::McpServerConfig;
use crate::error::{McpError, McpFailure};
use crate::lines::{LineEvent, LineSplitter};
use crate::protocol::{self, Incoming};
use crate::ring::ByteRing;

/// Bytes of stderr kept per server for `lastError`.
pub(crate) const STDERR_RING_BYTES: usize = 4 * 1024;
const READ_CHUNK: usize = 64 * 1024;
const WRITE_QUEUE: usize = 64;

type Reply = oneshot::Sender<Result<Value, McpError>>;

/// Outstanding requests; `None` once the connection is dead.
struct Pending {
    map: Option<HashMap<u64, Reply>>,
    dead_reason: Option<String>,
}

/// A live stdio connection. Dropping it kills the child.
pub(crate) struct StdioConn {
    pending: Arc<Mutex<Pending>>,
    writer: mpsc::Sender<Vec<u8>>,
    next_id: AtomicU64,
    child: Mutex<Option<Child>>,
    stderr: Arc<ByteRing>,
}

impl StdioConn {
    /// Spawns the configured command with a cleared environment.
    pub(crate) fn spawn(cfg: &McpServerConfig) -> Result<Arc<Self>, McpError> {
        let command = cfg.command.as_deref().unwrap_or_default();
        let mut cmd = Command::new(command);
        cmd.args(&cfg.args)
            .env_clear()
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        if !cfg.env.contains_key("PATH")
            && let Some(path) = std::env::var_os("PATH")
        {
            cmd.env("PATH", path);
        }
        cmd.envs(&cfg.env);
        if let Some(cwd) = &cfg.cwd {
            cmd.current_dir(cwd);
        }
        let mut child = cmd
            .spawn()
            .map_err(|e| McpError::unavailable(format!("cannot start MCP server: {e}")))?;
        let (Some(stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(McpError::unavailable("MCP server pipes unavailable"));
        };
        let ring = Arc::new(ByteRing::new(STDERR_RING_BYTES));
        tokio::spawn(drain_stderr(stderr, ring.clone()));

        let (tx, rx) = mpsc::channel::<Vec<u8>>(WRITE_QUEUE);
        let pending = Arc::new(Mutex::new(Pending {
            map: Some(HashMap::new()),
            dead_reason: None,
        }));
        tokio::spawn(write_loop(stdin, rx, pending.clone()));
        let max = usize::try_from(cfg.max_result_bytes).unwrap_or(usize::MAX);
        tokio::spawn(read_loop(
            stdout,
            max,
            cfg.max_result_bytes,
            pending.clone(),
            tx.clone(),
        ));
        Ok(Arc::new(StdioConn {
            pending,
            writer: tx,
            next_id: AtomicU64::new(1),
            child: Mutex::new(Some(child)),
            stderr: ring,
        }))
    }

    /// Why the connection died, if it did.
    pub(crate) fn dead_reason(&self) -> Option<String> {
        let p = self.pending.lock().ok()?;
        if p.map.is_some() {
            return None;
        }
        Some(
            p.dead_reason
                .clone()
                .unwrap_or_else(|| "connection closed".into()),
        )
    }

    /// The retained stderr tail.
    pub(crate) fn stderr_tail(&self) -> String {
        self.stderr.text()
    }

    /// The child's exit status text, if it has exited.
    pub(crate) fn exit_status(&self) -> Option<String> {
        let mut guard = self.child.lock().ok()?;
        let child = guard.as_mut()?;
        match child.try_wait() {
            Ok(Some(status)) => Some(status.to_string()),
            _ => None,
        }
    }

    /// Kills the child and fails everything in flight.
    pub(crate) fn kill(&self, reason: &str) {
        fail_all(&self.pending, reason, None);
        if let Ok(mut guard) = self.child.lock()
            && let Some(child) = guard.as_mut()
        {
            let _ = child.start_kill();
        }
    }

    /// Sends a request and waits for its response (the caller bounds time).
    /// A dead connection, or a writer that no longer takes lines, fails
    /// before sending; once the line is queued to the child it may have
    /// been read.
    pub(crate) async fn request(&self, method: &str, params: &Value) -> Result<Value, McpFailure> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        {
            let mut p = self.pending.lock().map_err(|_| {
                McpFailure::not_sent(McpError::unavailable("connection state poisoned"))
            })?;
            let reason = p.dead_reason.clone();
            match p.map.as_mut() {
                Some(map) => {
                    map.insert(id, tx);
                }
                None => {
                    return Err(McpFailure::not_sent(McpError::unavailable(
                        reason.unwrap_or_else(|| "connection closed".into()),
                    )));
                }
            }
        }
        let guard = PendingGuard {
            pending: &self.pending,
            id,
        };
        let mut line = protocol::request_bytes(id, method, params);
        line.push(b'\n');
        if self.writer.send(line).await.is_err() {
            return Err(McpFailure::not_sent(McpError::unavailable(
                "MCP server stdin closed",
            )));
        }
        let out = match rx.await {
            Ok(r) => r,
            Err(_) => Err(McpError::unavailable("connection closed")),
        };
        drop(guard);
        out.map_err(McpFailure::sent)
    }

    /// Sends a notification.
    pub(crate) async fn notify(
        &self,
        method: &str,
        params: Option<&Value>,
    ) -> Result<(), McpError> {
        let mut line = protocol::notification_bytes(method, params);
        line.push(b'\n');
        self.writer
            .send(line)
            .await
            .map_err(|_| McpError::unavailable("MCP server stdin closed"))
    }
}

impl Drop for StdioConn {
    fn drop(&mut self) {
        self.kill("connection dropped");
    }
}

/// Removes a request's slot when its caller gives up (timeout, cancel).
struct PendingGuard<'a> {
    pending: &'a Mutex<Pending>,
    id: u64,
}

impl Drop for PendingGuard<'_> {
    fn drop(&mut self) {
        if let Ok(mut p) = self.pending.lock()
            && let Some(map) = p.map.as_mut()
        {
            map.remove(&self.id);
        }
    }
}

/// Fails all outstanding requests and marks the connection dead.
fn fail_all(pending: &Mutex<Pending>, reason: &str, err: Option<McpError>) {
    let Ok(mut p) = pending.lock() else {
        return;
    };
    if p.dead_reason.is_none() {
        p.dead_reason = Some(reason.to_owned());
    }
    if let Some(map) = p.map.take() {
        for (_, reply) in map {
            let e = err
                .clone()
                .unwrap_or_else(|| McpError::unavailable(reason.to_owned()));
            let _ = reply.send(Err(e));
        }
    }
}

fn complete(pending: &Mutex<Pending>, id: u64, outcome: Result<Value, McpError>) -> bool {
    let reply = match pending.lock() {
        Ok(mut p) => p.map.as_mut().and_then(|m| m.remove(&id)),
        Err(_) => None,
    };
    match reply {
        Some(r) => {
            let _ = r.send(outcome);
            true
        }
        None => false,
    }
}

/// Fails outstanding requests with `err` but keeps the connection usable.
fn fail_outstanding(pending: &Mutex<Pending>, err: &McpError) {
    let replies: Vec<Reply> = match pending.lock() {
        Ok(mut p) => match p.map.as_mut() {
            Some(m) => m.drain().map(|(_, r)| r).collect(),
            None => Vec::new(),
        },
        Err(_) => Vec::new(),
    };
    for r in replies {
        let _ = r.send(Err(err.clone()));
    }
}

async fn write_loop(
    mut stdin: tokio::process::ChildStdin,
    mut rx: mpsc::Receiver<Vec<u8>>,
    pending: Arc<Mutex<Pending>>,
) {
    while let Some(line) = rx.recv().await {
        let ok = stdin.write_all(&line).await.is_ok() && stdin.flush().await.is_ok();
        if !ok {
            fail_all(&pending, "MCP server stdin closed", None);
            return;
        }
    }
}

async fn read_loop(
    mut stdout: impl AsyncRead + Unpin,
    max: usize,
    limit: u64,
    pending: Arc<Mutex<Pending>>,
    writer: mpsc::Sender<Vec<u8>>,
) {
    let mut splitter = LineSplitter::new(max);
    let mut chunk = vec![0u8; READ_CHUNK];
    let mut events = Vec::new();
    loop {
        let n = match stdout.read(&mut chunk).await {
            Ok(0) => {
                fail_all(&pending, "MCP server exited", None);
                return;
            }
            Ok(n) => n,
            Err(e) => {
                fail_all(&pending, &format!("MCP server stdout error: {e}"), None);
                return;
            }
        };
        splitter.feed(&chunk[..n], &mut events);
        for ev in events.drain(..) {
            if !handle_event(ev, limit, &pending, &writer) {
                return;
            }
        }
        if splitter.discarding() > discard_budget(limit) {
            // A line that will not end: stop reading (the child's next write
            // fails on the closed pipe) rather than spin on it forever.
            fail_all(&pending, "MCP server output line never ended", None);
            return;
        }
    }
}

/// How much of one oversized line is skipped to resynchronise before the
/// connection is given up.
fn discard_budget(limit: u64) -> u64 {
    limit.saturating_mul(8).max(16 * 1024 * 1024)
}

/// Handles one line event; `false` ends the connection.
fn handle_event(
    ev: LineEvent,
    limit: u64,
    pending: &Mutex<Pending>,
    writer: &mpsc::Sender<Vec<u8>>,
) -> bool {
    match ev {
        LineEvent::Line(line) => {
            if line.iter().all(u8::is_ascii_whitespace) {
                return true;
            }
            let msg = match protocol::parse_message(&line) {
                Ok(m) => m,
                Err(e) => {
                    // The same refusal as over HTTP; the stream cannot be
                    // trusted after it, so the connection ends.
                    fail_all(pending, &e.to_string(), Some(e));
                    return false;
                }
            };
            match protocol::classify(msg) {
                Incoming::Response { id, outcome } => {
                    let delivered = id.as_u64().is_some_and(|n| complete(pending, n, outcome));
                    if !delivered {
                        tracing::debug!("MCP response with unknown id ignored");
                    }
                }
                Incoming::Request { id, method } => answer_server_request(writer, id, &method),
                Incoming::Notification => {}
                Incoming::Invalid => {
                    tracing::debug!("MCP server sent a non-JSON-RPC message; ignored");
                }
            }
            true
        }
        LineEvent::Overflow { head, observed } => {
            let err = McpError::TooLarge { limit, observed };
            match protocol::sniff_id(&head) {
                Some(id) if complete(pending, id, Err(err.clone())) => {}
                _ => fail_outstanding(pending, &err),
            }
            true
        }
        LineEvent::OverflowEnd { .. } => true,
    }
}

/// Answers a server-to-client request: `ping` succeeds, anything else is
/// "method not found" (this client offers no capabilities).
fn answer_server_request(writer: &mpsc::Sender<Vec<u8>>, id: Value, method: &str) {
    let msg = if method == "ping" {
        serde_json::json!({"jsonrpc": "2.0", "id": id, "result": {}})
    } else {
        serde_json::json!({"jsonrpc": "2.0", "id": id,
            "error": {"code": -32601, "message": "method not supported by client"}})
    };
    let mut line = serde_json::to_vec(&msg).unwrap_or_default();
    line.push(b'\n');
    // Never block the reader on a server that does not read its stdin.
    let _ = writer.try_send(line);
}

async fn drain_stderr(mut stderr: impl AsyncRead + Unpin, ring: Arc<ByteRing>) {
    let mut buf = vec![0u8; 8 * 1024];
    loop {
        match stderr.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => ring.push(&buf[..n]),
        }
    }
}
