//! What the HTTP invoke API adds to an invocation: `hello` through
//! `POST /host/wop/invocations` on a real `wop serve` (release binary next
//! to this one, in-memory store, anonymous loopback) next to the same
//! invocation through the library (`Runtime::invoke`, in-memory store),
//! in the same run. p50/p99 at one client (one keep-alive connection, a
//! minimal HTTP/1.1 client with `TCP_NODELAY`, so the client's own cost is
//! small), and throughput at 8 clients against 8 library tasks.
//!
//! Run: `cargo build --release -p wop-cli -p fuel-benches --bins &&
//! target/release/serve_latency [N]`
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::net::SocketAddr;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

/// One keep-alive connection to the server.
struct Conn {
    s: TcpStream,
    buf: Vec<u8>,
    request: Vec<u8>,
}

impl Conn {
    async fn open(addr: SocketAddr, body: &str) -> Conn {
        let request = format!(
            "POST /host/wop/invocations HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        Conn::raw(addr, request.into_bytes()).await
    }

    /// A connection that sends `request` (a whole HTTP/1.1 request).
    async fn raw(addr: SocketAddr, request: Vec<u8>) -> Conn {
        let s = TcpStream::connect(addr).await.unwrap();
        s.set_nodelay(true).unwrap();
        Conn {
            s,
            buf: Vec::with_capacity(8192),
            request,
        }
    }

    /// One request; returns the status code once the whole body is read.
    async fn invoke(&mut self) -> u16 {
        self.s.write_all(&self.request).await.unwrap();
        self.buf.clear();
        let mut chunk = [0u8; 8192];
        loop {
            let n = self.s.read(&mut chunk).await.unwrap();
            assert!(n > 0, "the server closed the connection");
            self.buf.extend_from_slice(&chunk[..n]);
            let Some(end) = find(&self.buf, b"\r\n\r\n") else {
                continue;
            };
            let head = std::str::from_utf8(&self.buf[..end]).unwrap();
            let len: usize = head
                .lines()
                .find_map(|l| {
                    let (k, v) = l.split_once(':')?;
                    k.eq_ignore_ascii_case("content-length")
                        .then(|| v.trim().parse().ok())?
                })
                .expect("a Content-Length");
            if self.buf.len() >= end + 4 + len {
                return head[9..12].parse().unwrap();
            }
        }
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn wop_binary() -> std::path::PathBuf {
    let exe = std::env::current_exe().unwrap();
    let wop = exe.parent().unwrap().join("wop");
    assert!(
        wop.is_file(),
        "{} is missing: cargo build --release -p wop-cli",
        wop.display()
    );
    wop
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    // On a worker, as the server's handlers run: `block_on` on the main
    // thread measured the library path 1.7× slower at one client.
    tokio::spawn(measure()).await.unwrap();
}

async fn measure() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(3000);
    let packs = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(
        wop_test_packs::pack_dir("hello"),
        packs.path().join("hello"),
    )
    .unwrap();
    let mut cmd = std::process::Command::new(wop_binary());
    cmd.arg("serve")
        .arg("--packs")
        .arg(packs.path())
        .args(["--listen", "127.0.0.1:0", "--memory-store"])
        .args(["--anonymous-loopback", "--max-in-flight", "64"])
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let (_child, addr, _out) = wop_testkit::spawn_serve(&mut cmd).unwrap();
    // One run on both sides (the library's default run id), so both pay
    // for the same usage record and roll-ups.
    let mut req =
        wop_runtime::InvokeRequest::new("wop.samples.hello", serde_json::json!({"name": "Ada"}));
    req.context.run_id = "bench".to_owned();
    let body = r#"{"typeId":"wop.samples.hello","inputs":{"name":"Ada"},"nodeContext":{"runId":"bench","nodeId":"n"}}"#;

    let rt = wop_runtime::Runtime::new(&wop_runtime::RuntimeConfig::new()).unwrap();
    rt.load_pack(&wop_test_packs::pack_dir("hello"))
        .await
        .unwrap();

    // One client: interleaved, so machine noise hits both alike.
    let mut conn = Conn::open(addr, body).await;
    for _ in 0..300 {
        assert_eq!(conn.invoke().await, 200);
        assert!(rt.invoke(req.clone()).await.outcome.is_ok());
    }
    let (mut http, mut lib) = (Vec::with_capacity(n), Vec::with_capacity(n));
    for _ in 0..n {
        let t = Instant::now();
        let status = conn.invoke().await;
        http.push(t.elapsed());
        assert_eq!(status, 200);
        let t = Instant::now();
        let r = rt.invoke(req.clone()).await;
        lib.push(t.elapsed());
        assert!(r.outcome.is_ok());
    }
    let h = fuel_benches::stats(http);
    let l = fuel_benches::stats(lib);

    // The floor of any request on this machine: `GET /healthz` (no body
    // to parse, no invocation) over the same kind of connection.
    let get = b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n".to_vec();
    let mut probe = Conn::raw(addr, get).await;
    let mut floor = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        let status = probe.invoke().await;
        floor.push(t.elapsed());
        assert_eq!(status, 200);
    }
    let f = fuel_benches::stats(floor);

    // Eight clients for two seconds each way.
    const CLIENTS: usize = 8;
    let window = Duration::from_secs(2);
    let mut tasks = Vec::new();
    for _ in 0..CLIENTS {
        let mut c = Conn::open(addr, body).await;
        tasks.push(tokio::spawn(async move {
            let end = Instant::now() + window;
            let mut done = 0u64;
            while Instant::now() < end {
                assert_eq!(c.invoke().await, 200);
                done += 1;
            }
            done
        }));
    }
    let mut http_done = 0;
    for t in tasks {
        http_done += t.await.unwrap();
    }
    let mut tasks = Vec::new();
    for _ in 0..CLIENTS {
        let (rt, req) = (rt.clone(), req.clone());
        tasks.push(tokio::spawn(async move {
            let end = Instant::now() + window;
            let mut done = 0u64;
            while Instant::now() < end {
                assert!(rt.invoke(req.clone()).await.outcome.is_ok());
                done += 1;
            }
            done
        }));
    }
    let mut lib_done = 0;
    for t in tasks {
        lib_done += t.await.unwrap();
    }
    let per_s = |done: u64| done as f64 / window.as_secs_f64();

    println!("hello, {n} sequential invocations each way at one client; {CLIENTS} clients for 2 s");
    println!("| path | p50 | p99 | inv/s at 1 client | inv/s at {CLIENTS} clients |");
    println!("|---|---|---|---|---|");
    println!(
        "| library (`Runtime::invoke`) | {:.1} µs | {:.1} µs | {:.0} | {:.0} |",
        l.p50_us,
        l.p99_us,
        l.per_sec,
        per_s(lib_done)
    );
    println!(
        "| HTTP (`POST /host/wop/invocations`, keep-alive) | {:.1} µs | {:.1} µs | {:.0} | {:.0} |",
        h.p50_us,
        h.p99_us,
        h.per_sec,
        per_s(http_done)
    );
    println!(
        "| floor: `GET /healthz` on the same server (no invocation) | {:.1} µs | {:.1} µs | {:.0} | — |",
        f.p50_us, f.p99_us, f.per_sec
    );
    println!(
        "| HTTP − library (p50) / HTTP ÷ library (throughput) | {:.1} µs | {:.1} µs | {:.2}× | {:.2}× |",
        h.p50_us - l.p50_us,
        h.p99_us - l.p99_us,
        h.per_sec / l.per_sec,
        per_s(http_done) / per_s(lib_done)
    );
}
