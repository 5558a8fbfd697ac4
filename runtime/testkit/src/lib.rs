//! Dev-only helpers for tests: a real HTTP/1.1 server on loopback that
//! counts requests and records their `Idempotency-Key` headers.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

pub mod abi_v1;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// How the server answers.
#[derive(Debug, Clone)]
pub enum Mode {
    /// 200 with `{"ok":true,"n":<request number>,"echo":<body>}`.
    Ok,
    /// Read the request, then never answer (a provider that hangs).
    Hang,
    /// As `Ok`, after this many milliseconds (a slow provider).
    Slow(u64),
    /// Answer with this status and body.
    Status(u16, String),
    /// Write these bytes verbatim as the whole response, then close
    /// (redirects, 101, bodies without a length, ...).
    Raw(String),
    /// As `Raw`, for bytes that are not text (a compressed body).
    RawBytes(Vec<u8>),
    /// 200 with `{"line": <request line>, "headers": {<every request
    /// header>}}`: an endpoint that reflects what it was sent.
    EchoHeaders,
}

/// One received request.
#[derive(Debug, Clone)]
pub struct Seen {
    /// Method and path.
    pub line: String,
    /// Lower-cased header names → values.
    pub headers: BTreeMap<String, String>,
    /// Body.
    pub body: String,
}

/// A counting server. Dropping it does not stop it; it lives for the test.
#[derive(Clone)]
pub struct Server {
    /// Where it listens (127.0.0.1:port).
    pub addr: SocketAddr,
    seen: Arc<Mutex<Vec<Seen>>>,
    connections: Arc<Mutex<u64>>,
}

impl Server {
    /// Starts a server on 127.0.0.1 on the current tokio runtime.
    pub async fn start(mode: Mode) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        Self::serve(listener, mode)
    }

    /// Starts a server on its own thread with its own runtime (for tests
    /// that run runtimes on several threads or in child processes).
    pub fn start_detached(mode: Mode) -> Server {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let s = Server::start(mode).await;
                tx.send(s).unwrap();
                std::future::pending::<()>().await;
            });
        });
        rx.recv().unwrap()
    }

    fn serve(listener: TcpListener, mode: Mode) -> Server {
        let addr = listener.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let connections = Arc::new(Mutex::new(0));
        let (s2, c2) = (seen.clone(), connections.clone());
        tokio::spawn(async move {
            loop {
                let Ok((mut sock, _)) = listener.accept().await else {
                    return;
                };
                *c2.lock().unwrap() += 1;
                let (seen, mode) = (s2.clone(), mode.clone());
                tokio::spawn(async move {
                    let Some(req) = read_request(&mut sock).await else {
                        return;
                    };
                    let n = {
                        let mut g = seen.lock().unwrap();
                        g.push(req.clone());
                        g.len()
                    };
                    if let Mode::Slow(ms) = mode {
                        tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
                    }
                    let (status, body) = match mode {
                        Mode::Ok | Mode::Slow(_) => {
                            let echo: serde_json::Value =
                                serde_json::from_str(&req.body).unwrap_or(serde_json::Value::Null);
                            (
                                200,
                                serde_json::json!({"ok": true, "n": n, "echo": echo}).to_string(),
                            )
                        }
                        Mode::Hang => {
                            std::future::pending::<()>().await;
                            return;
                        }
                        Mode::Status(s, b) => (s, b),
                        Mode::EchoHeaders => (
                            200,
                            serde_json::json!({"line": req.line, "headers": req.headers})
                                .to_string(),
                        ),
                        Mode::Raw(raw) => {
                            let _ = sock.write_all(raw.as_bytes()).await;
                            let _ = sock.shutdown().await;
                            return;
                        }
                        Mode::RawBytes(raw) => {
                            let _ = sock.write_all(&raw).await;
                            let _ = sock.shutdown().await;
                            return;
                        }
                    };
                    let resp = format!(
                        "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = sock.write_all(resp.as_bytes()).await;
                    let _ = sock.shutdown().await;
                });
            }
        });
        Server {
            addr,
            seen,
            connections,
        }
    }

    /// `http://127.0.0.1:<port><path>`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Requests received so far.
    pub fn requests(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    /// Number of requests received.
    pub fn count(&self) -> usize {
        self.seen.lock().unwrap().len()
    }

    /// Number of TCP connections accepted (a request may never complete).
    pub fn connections(&self) -> u64 {
        *self.connections.lock().unwrap()
    }

    /// The distinct `Idempotency-Key` values received.
    pub fn distinct_keys(&self) -> Vec<String> {
        let mut k: Vec<String> = self
            .requests()
            .iter()
            .filter_map(|r| r.headers.get("idempotency-key").cloned())
            .collect();
        k.sort();
        k.dedup();
        k
    }
}

async fn read_request(sock: &mut tokio::net::TcpStream) -> Option<Seen> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        let n = sock.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        if buf.len() > 1 << 20 {
            return None;
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
    let mut lines = head.split("\r\n");
    let line = lines.next()?.to_owned();
    let mut headers = BTreeMap::new();
    for l in lines {
        if let Some((k, v)) = l.split_once(':') {
            headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_owned());
        }
    }
    let len: usize = headers
        .get("content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let mut body = buf[head_end..].to_vec();
    while body.len() < len {
        let n = sock.read(&mut chunk).await.ok()?;
        if n == 0 {
            break;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    Some(Seen {
        line,
        headers,
        body: String::from_utf8_lossy(&body).to_string(),
    })
}

/// A child process killed (and reaped) on drop.
pub struct ChildGuard(pub std::process::Child);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts the PyPI `mcp` Streamable HTTP test server
/// (`runtime/wop-mcp/tests/python/http_server.py`, venv made by
/// `bash runtime/wop-mcp/tests/setup.sh`) on a free loopback port and waits
/// until it listens. Returns the guard and the port; the endpoint is
/// `http://127.0.0.1:<port>/mcp`.
pub fn start_python_mcp_http() -> (ChildGuard, u16) {
    let dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../wop-mcp/tests/python");
    let (python, script) = (dir.join(".venv/bin/python"), dir.join("http_server.py"));
    for p in [&python, &script] {
        assert!(
            p.exists(),
            "missing MCP test server {}; install with: bash runtime/wop-mcp/tests/setup.sh",
            p.display()
        );
    }
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = std::process::Command::new(python)
        .arg(script)
        .arg(port.to_string())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut g = ChildGuard(child);
    let end = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while std::time::Instant::now() < end {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return (g, port);
        }
        if let Ok(Some(s)) = g.0.try_wait() {
            panic!("python MCP server exited early: {s}");
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    panic!("python MCP server did not listen within 30 s");
}

/// Spawns the executor service (`wop serve …` or `wop-serve …`, given
/// `--listen 127.0.0.1:0` by the caller) with stdout piped, and reads its
/// first line, `wop-serve listening on http://<addr>`. Returns the child
/// (killed on drop), the address, and the rest of its stdout (after a
/// SIGTERM it prints `wop-serve stopped`). Stderr is left as `cmd` set it.
pub fn spawn_serve(
    cmd: &mut std::process::Command,
) -> std::io::Result<(
    ChildGuard,
    SocketAddr,
    std::io::BufReader<std::process::ChildStdout>,
)> {
    use std::io::BufRead as _;
    let mut child = ChildGuard(cmd.stdout(std::process::Stdio::piped()).spawn()?);
    let stdout = child
        .0
        .stdout
        .take()
        .ok_or_else(|| std::io::Error::other("the child's stdout is not piped"))?;
    let mut out = std::io::BufReader::new(stdout);
    let mut line = String::new();
    out.read_line(&mut line)?;
    let addr = line
        .trim()
        .strip_prefix("wop-serve listening on http://")
        .and_then(|a| a.parse().ok())
        .ok_or_else(|| {
            std::io::Error::other(format!(
                "expected `wop-serve listening on http://<addr>`, got {line:?}"
            ))
        })?;
    Ok((child, addr, out))
}
