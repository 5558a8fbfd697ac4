//! End-to-end tests: real sockets, real packs, raw HTTP clients sending
//! exactly the headers named.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod abuse;
mod backpressure;
mod cluster;
mod console;
mod credentials;
mod full_disk;
mod guard;
mod idempotency;
mod idle;
mod invoke;
mod listings;
mod mcp;
mod memory_store;
mod metrics;
mod packs_dir;
mod process;
mod python;
mod rmcp_client;
mod stream;
mod tenant_share;
mod tenants;
mod traces;

use serde_json::Value;
use std::net::SocketAddr;
use std::path::PathBuf;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use wop_serve::{ServeConfig, ServeOptions, Server, token_sha256};

pub const TOKEN: &str = "test-token-acme";
pub const OTHER_TOKEN: &str = "test-token-globex";

/// A `serve.toml` with two tokens (acme with payments.write, globex with none).
pub fn serve_toml(extra: &str) -> String {
    format!(
        r#"{extra}
[[tokens]]
sha256 = "{}"
principal = "host-acme"
tenant = "acme"
scopes = ["payments.write", "wop.operator"]

[[tokens]]
sha256 = "{}"
principal = "host-globex"
tenant = "globex"
"#,
        token_sha256(TOKEN),
        token_sha256(OTHER_TOKEN)
    )
}

/// The real `wop-serve` binary as a child process: `pack_names` loaded,
/// `cfg` as its serve.toml, in-memory store, anonymous on loopback; its
/// stdout kept open (the last value) so it never sees a closed pipe.
pub struct ChildServe {
    pub child: wop_testkit::ChildGuard,
    pub addr: SocketAddr,
    _out: std::io::BufReader<std::process::ChildStdout>,
    _dirs: [tempfile::TempDir; 2],
}

impl ChildServe {
    pub fn spawn(cfg: &str, pack_names: &[&str]) -> ChildServe {
        let packs = packs(pack_names);
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("serve.toml");
        std::fs::write(&file, cfg).unwrap();
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_wop-serve"));
        cmd.args(["--packs", packs.path().to_str().unwrap()])
            .args(["--config", file.to_str().unwrap()])
            .args([
                "--listen",
                "127.0.0.1:0",
                "--memory-store",
                "--anonymous-loopback",
            ])
            .stderr(std::process::Stdio::null());
        let (child, addr, out) = wop_testkit::spawn_serve(&mut cmd).unwrap();
        ChildServe {
            child,
            addr,
            _out: out,
            _dirs: [packs, dir],
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.0.id()
    }
}

/// Resident set of `pid`, in KiB (`/proc/<pid>/status`).
pub fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// A packs directory holding (symlinks to) the named built packs.
pub fn packs(names: &[&str]) -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    for n in names {
        std::os::unix::fs::symlink(wop_test_packs::pack_dir(n), d.path().join(n)).unwrap();
    }
    d
}

pub struct Running {
    pub addr: SocketAddr,
    pub refused: Vec<Value>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<Result<(), wop_serve::ServeError>>>,
    _packs: tempfile::TempDir,
}

impl Running {
    pub async fn stop(mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.task.take() {
            t.await.unwrap().unwrap();
        }
    }
}

/// Starts a server on an ephemeral loopback port (in-memory store).
pub async fn start(policy: &str, cfg: &str, pack_names: &[&str]) -> Running {
    start_on(policy, cfg, pack_names, wop_serve::StoreChoice::Memory).await
}

/// Starts a server on an ephemeral loopback port with `store`.
pub async fn start_on(
    policy: &str,
    cfg: &str,
    pack_names: &[&str],
    store: wop_serve::StoreChoice,
) -> Running {
    let dir = packs(pack_names);
    let mut opts = ServeOptions::new("127.0.0.1:0".parse().unwrap());
    opts.policy(wop_runtime::Policy::from_toml(policy).unwrap())
        .packs_dir(dir.path())
        .store(store)
        .config(ServeConfig::from_toml(cfg).unwrap());
    let server = Server::bind(opts).await.unwrap();
    let addr = server.local_addr().unwrap();
    let refused = server.refused().to_vec();
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(server.run(async move {
        let _ = rx.await;
    }));
    Running {
        addr,
        refused,
        stop: Some(tx),
        task: Some(task),
        _packs: dir,
    }
}

/// One HTTP response.
#[derive(Debug)]
pub struct Resp {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Resp {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&self.body)))
    }
}

/// A raw HTTP/1.1 client on one keep-alive connection.
pub struct Conn {
    stream: TcpStream,
    buf: Vec<u8>,
}

impl Conn {
    pub async fn open(addr: SocketAddr) -> Conn {
        let stream = TcpStream::connect(addr).await.unwrap();
        stream.set_nodelay(true).unwrap();
        Conn {
            stream,
            buf: Vec::new(),
        }
    }

    /// Sends a request with exactly `headers` (plus `Host: localhost`
    /// unless `headers` names a Host, and, with a body, Content-Length) and
    /// reads the response.
    pub async fn send(
        &mut self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> Resp {
        let mut req = format!("{method} {path} HTTP/1.1\r\n");
        if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
            req.push_str("Host: localhost\r\n");
        }
        for (k, v) in headers {
            req.push_str(&format!("{k}: {v}\r\n"));
        }
        if !body.is_empty() || method == "POST" {
            req.push_str(&format!("Content-Length: {}\r\n", body.len()));
        }
        req.push_str("\r\n");
        let mut bytes = req.into_bytes();
        bytes.extend_from_slice(body);
        self.stream.write_all(&bytes).await.unwrap();
        self.read_response().await
    }

    async fn fill(&mut self) -> bool {
        let mut chunk = [0u8; 16384];
        let n = self.stream.read(&mut chunk).await.unwrap_or(0);
        self.buf.extend_from_slice(&chunk[..n]);
        n > 0
    }

    async fn read_response(&mut self) -> Resp {
        let head_end = loop {
            if let Some(p) = self.buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break p;
            }
            assert!(
                self.fill().await,
                "connection closed before a response head"
            );
        };
        let head = String::from_utf8_lossy(&self.buf[..head_end]).to_string();
        self.buf.drain(..head_end + 4);
        let mut lines = head.split("\r\n");
        let status: u16 = lines
            .next()
            .unwrap()
            .split(' ')
            .nth(1)
            .unwrap()
            .parse()
            .unwrap();
        let headers: Vec<(String, String)> = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
            .collect();
        let get = |n: &str| headers.iter().find(|(k, _)| k == n).map(|(_, v)| v.clone());
        let body = if let Some(len) = get("content-length") {
            let len: usize = len.parse().unwrap();
            while self.buf.len() < len {
                assert!(self.fill().await, "connection closed mid-body");
            }
            self.buf.drain(..len).collect()
        } else if get("transfer-encoding").is_some_and(|t| t.contains("chunked")) {
            let mut body = Vec::new();
            loop {
                let line_end = loop {
                    if let Some(p) = self.buf.windows(2).position(|w| w == b"\r\n") {
                        break p;
                    }
                    assert!(self.fill().await, "closed mid-chunk");
                };
                let size = usize::from_str_radix(
                    String::from_utf8_lossy(&self.buf[..line_end])
                        .split(';')
                        .next()
                        .unwrap()
                        .trim(),
                    16,
                )
                .unwrap();
                self.buf.drain(..line_end + 2);
                while self.buf.len() < size + 2 {
                    assert!(self.fill().await, "closed mid-chunk");
                }
                body.extend(self.buf.drain(..size));
                self.buf.drain(..2);
                if size == 0 {
                    break;
                }
            }
            body
        } else if status == 204 || status == 304 || (100..200).contains(&status) {
            Vec::new()
        } else {
            while self.fill().await {}
            std::mem::take(&mut self.buf)
        };
        Resp {
            status,
            headers,
            body,
        }
    }
}

/// One request on a fresh connection.
pub async fn req(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Resp {
    Conn::open(addr)
        .await
        .send(method, path, headers, body)
        .await
}

pub fn bearer(token: &str) -> String {
    format!("Bearer {token}")
}

/// `GET path` with `token` as the bearer and no other header.
pub async fn get(addr: SocketAddr, token: &str, path: &str) -> Resp {
    req(addr, "GET", path, &[("Authorization", &bearer(token))], b"").await
}

/// Polls `/healthz` until it counts `n` invocations in flight and returns
/// that answer; panics after about 3 s (a guard against hanging, not a
/// timing assertion).
pub async fn until_in_flight(addr: SocketAddr, n: u64) -> Value {
    let mut health = Value::Null;
    for _ in 0..300 {
        health = req(addr, "GET", "/healthz", &[], b"").await.json();
        if health["inFlight"] == n {
            return health;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    panic!("never {n} invocations in flight: {health}");
}

/// The value of an unlabelled metric in an OpenMetrics text.
pub fn metric(text: &str, name: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .and_then(|v| v.trim().parse().ok())
}

/// The value of an unlabelled metric of the server's `/metrics`, read
/// with [`TOKEN`].
pub async fn metric_of(addr: SocketAddr, name: &str) -> Option<u64> {
    let r = get(addr, TOKEN, "/metrics").await;
    assert_eq!(r.status, 200);
    metric(&String::from_utf8_lossy(&r.body), name)
}

/// POST JSON with a token (Content-Type + Authorization only).
pub async fn post_json(addr: SocketAddr, path: &str, token: &str, body: &Value) -> Resp {
    let auth = bearer(token);
    req(
        addr,
        "POST",
        path,
        &[
            ("Content-Type", "application/json"),
            ("Authorization", &auth),
        ],
        body.to_string().as_bytes(),
    )
    .await
}

/// `POST /host/wop/invocations` with an `Idempotency-Key`, as `token`'s
/// principal (`None`: the anonymous loopback one).
pub async fn keyed_as(addr: SocketAddr, token: Option<&str>, key: &str, body: &Value) -> Resp {
    let auth = token.map(bearer);
    let mut headers = vec![
        ("Content-Type", "application/json"),
        ("Idempotency-Key", key),
    ];
    if let Some(a) = &auth {
        headers.push(("Authorization", a.as_str()));
    }
    let b = body.to_string();
    req(
        addr,
        "POST",
        "/host/wop/invocations",
        &headers,
        b.as_bytes(),
    )
    .await
}

/// The path of the built packs (for the binary test).
pub fn pack_path(name: &str) -> PathBuf {
    wop_test_packs::pack_dir(name)
}

/// The `(event, data)` frames of a `text/event-stream` body.
pub fn sse_frames(body: &[u8]) -> Vec<(String, Value)> {
    let text = String::from_utf8_lossy(body);
    text.split("\n\n")
        .filter_map(|f| {
            let event = f.lines().find_map(|l| l.strip_prefix("event: "))?;
            let data = f.lines().find_map(|l| l.strip_prefix("data: "))?;
            Some((event.to_owned(), serde_json::from_str(data).ok()?))
        })
        .collect()
}

/// A `wop-serve` process (`bin`) with `policy` and `serve.toml` text `cfg`
/// written under `dir`, the packs in `packs`, on `store`, anonymous on
/// loopback too; killed when the guard drops.
pub fn spawn_process(
    bin: &str,
    policy: &str,
    cfg: &str,
    packs: &std::path::Path,
    store: &str,
    dir: &std::path::Path,
) -> (wop_testkit::ChildGuard, SocketAddr) {
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let (pp, cp) = (
        dir.join(format!("policy-{n}.toml")),
        dir.join(format!("serve-{n}.toml")),
    );
    std::fs::write(&pp, policy).unwrap();
    std::fs::write(&cp, cfg).unwrap();
    let mut cmd = std::process::Command::new(bin);
    cmd.arg("--policy")
        .arg(&pp)
        .arg("--config")
        .arg(&cp)
        .arg("--packs")
        .arg(packs)
        .args(["--listen", "127.0.0.1:0", "--store", store])
        .arg("--anonymous-loopback")
        .stderr(std::process::Stdio::null());
    let (child, addr, _) = wop_testkit::spawn_serve(&mut cmd).expect("wop-serve did not start");
    (child, addr)
}
