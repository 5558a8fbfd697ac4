//! Throughput and latency of `wop.samples.hello` through the executor
//! service, next to the library path, in one process and one run.
//!
//! ```sh
//! cargo run --release -p wop-serve --example serve_bench            # 3 s per cell
//! WOP_BENCH_SECS=10 cargo run --release -p wop-serve --example serve_bench
//! # a subset (e.g. for a profiler): paths library,invoke,mcp; concurrencies
//! WOP_BENCH_PATHS=invoke WOP_BENCH_CONCURRENCY=8 cargo run --release -p wop-serve --example serve_bench
//! ```
//!
//! The server listens on loopback (memory store, anonymous loopback, the
//! `hello` test pack). Each client holds one HTTP/1.1 keep-alive connection
//! and sends raw requests back to back (no client library in the
//! measurement). Paths:
//! - `invoke`: `POST /host/wop/invocations` `{typeId, inputs}`;
//! - `mcp`: `POST /mcp` `tools/call` (minimal client headers);
//! - `library`: `Runtime::invoke` on a separate `Runtime` built with the
//!   same policy, store kind and pack (the same work minus HTTP, JSON and
//!   the service's auth/capacity checks);
//! - `healthz`: `GET /healthz`, no body and no invocation: the floor of
//!   any request's round trip on this machine, so what the invoke API
//!   itself adds is `invoke` − `healthz` − `library`.
//!
//! Clients and server share the machine's cores (one tokio runtime, workers
//! = cores unless `TOKIO_WORKER_THREADS` says otherwise), as a host and
//! `wop serve` on the same box would. `CPU µs/call` is the whole process's
//! CPU time (server, clients, runtime) per call, from `/proc/self/stat`: it
//! moves less with other load on a shared machine than throughput does. This is a benchmark, not a
//! test: it asserts nothing about timing; it fails only if a call is not
//! answered `200` with the greeting.

use anyhow::{Context as _, Result, bail, ensure};
use serde_json::json;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;
use wop_runtime::{InvokeRequest, Policy, Principal, RunContext, Runtime, RuntimeConfig};
use wop_serve::{ServeConfig, ServeOptions, Server};

const TYPE_ID: &str = "wop.samples.hello";
const CONCURRENCY: &str = "1,8,64";
const PATHS: &str = "library,invoke,mcp,healthz";
const GREETING: &[u8] = b"Hello, bench!";

/// One measured cell.
struct Cell {
    calls: usize,
    secs: f64,
    /// Sorted latencies, µs.
    lat: Vec<u32>,
    /// Process CPU time (all threads: server, clients, runtime) while
    /// measuring, seconds; `None` without `/proc`.
    cpu: Option<f64>,
}

impl Cell {
    fn rate(&self) -> f64 {
        self.calls as f64 / self.secs
    }
    /// Process CPU µs per call: robust to other load on the machine
    /// (throughput is not); cores / this = the CPU-bound ceiling.
    fn cpu_us(&self) -> String {
        match self.cpu {
            Some(c) if self.calls > 0 => format!("{:.0}", c * 1e6 / self.calls as f64),
            _ => "—".to_owned(),
        }
    }
    fn pct(&self, p: usize) -> f64 {
        if self.lat.is_empty() {
            return f64::NAN;
        }
        let i = (self.lat.len() * p / 100).min(self.lat.len() - 1);
        f64::from(self.lat[i])
    }
}

/// This process's user + system CPU time in seconds (`/proc/self/stat`,
/// clock ticks at the usual 100 Hz).
fn process_cpu() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the parenthesized command name; utime and stime are the
    // 14th and 15th fields overall.
    let rest = stat.get(stat.rfind(')')? + 2..)?;
    let mut f = rest.split(' ').skip(11);
    let utime: f64 = f.next()?.parse().ok()?;
    let stime: f64 = f.next()?.parse().ok()?;
    Some((utime + stime) / 100.0)
}

/// A raw HTTP/1.1 keep-alive client that sends one fixed request.
struct Client {
    stream: TcpStream,
    buf: Vec<u8>,
    request: Arc<[u8]>,
    /// The answer must carry the greeting (an invocation), not just `200`.
    greeting: bool,
}

impl Client {
    async fn open(addr: SocketAddr, request: Arc<[u8]>, greeting: bool) -> Result<Client> {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        Ok(Client {
            stream,
            buf: Vec::with_capacity(8192),
            request,
            greeting,
        })
    }

    /// Sends the request and checks the answer is `200` (with the greeting
    /// for an invocation).
    async fn call(&mut self) -> Result<()> {
        self.stream.write_all(&self.request).await?;
        let mut chunk = [0u8; 8192];
        let head_end = loop {
            if let Some(p) = self.buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break p + 4;
            }
            let n = self.stream.read(&mut chunk).await?;
            ensure!(n > 0, "connection closed before a response head");
            self.buf.extend_from_slice(&chunk[..n]);
        };
        let head = std::str::from_utf8(&self.buf[..head_end])?;
        ensure!(head.starts_with("HTTP/1.1 200"), "not 200: {head}");
        let len: usize = head
            .lines()
            .find_map(|l| {
                let (k, v) = l.split_once(':')?;
                k.eq_ignore_ascii_case("content-length")
                    .then(|| v.trim().parse().ok())?
            })
            .context("no content-length")?;
        while self.buf.len() < head_end + len {
            let n = self.stream.read(&mut chunk).await?;
            ensure!(n > 0, "connection closed mid-body");
            self.buf.extend_from_slice(&chunk[..n]);
        }
        let body = &self.buf[head_end..head_end + len];
        ensure!(
            !self.greeting
                || (body.windows(GREETING.len()).any(|w| w == GREETING)
                    && !body.windows(14).any(|w| w == b"\"isError\":true")),
            "unexpected body: {}",
            String::from_utf8_lossy(body)
        );
        self.buf.drain(..head_end + len);
        Ok(())
    }
}

fn http_request(path: &str, body: &str) -> Arc<[u8]> {
    format!(
        "POST {path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nAccept: */*\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
    .into()
}

/// Runs `clients` loops of `op` for `warmup`, then for `secs`, and merges
/// their latencies.
async fn measure<F, Fut, S>(
    clients: Vec<S>,
    warmup: Duration,
    secs: Duration,
    op: F,
) -> Result<Cell>
where
    S: Send + 'static,
    F: Fn(S) -> Fut + Send + Sync + Copy + 'static,
    Fut: std::future::Future<Output = (S, Result<()>)> + Send,
{
    let start = Instant::now();
    let measure_from = start + warmup;
    let end = measure_from + secs;
    let mut tasks = Vec::new();
    for mut state in clients {
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::with_capacity(1 << 16);
            loop {
                let t = Instant::now();
                if t >= end {
                    break;
                }
                let (s, r) = op(state).await;
                state = s;
                r?;
                if t >= measure_from {
                    let us = t.elapsed().as_micros();
                    lat.push(u32::try_from(us).unwrap_or(u32::MAX));
                }
            }
            Ok::<_, anyhow::Error>(lat)
        }));
    }
    // Sampled on its own thread: client loops that never yield must not
    // delay the sample.
    let sampler = std::thread::spawn(move || {
        std::thread::sleep(measure_from.saturating_duration_since(Instant::now()));
        process_cpu()
    });
    let mut lat = Vec::new();
    for t in tasks {
        lat.extend(t.await??);
    }
    let cpu0 = sampler.join().ok().flatten();
    let cpu = cpu0.zip(process_cpu()).map(|(a, b)| b - a);
    lat.sort_unstable();
    Ok(Cell {
        calls: lat.len(),
        secs: secs.as_secs_f64(),
        lat,
        cpu,
    })
}

async fn http_cell(
    addr: SocketAddr,
    request: &Arc<[u8]>,
    greeting: bool,
    n: usize,
    warmup: Duration,
    secs: Duration,
) -> Result<Cell> {
    let mut clients = Vec::new();
    for _ in 0..n {
        clients.push(Client::open(addr, request.clone(), greeting).await?);
    }
    measure(clients, warmup, secs, |mut c: Client| async move {
        let r = c.call().await;
        (c, r)
    })
    .await
}

async fn library_cell(
    rt: &Arc<Runtime>,
    n: usize,
    warmup: Duration,
    secs: Duration,
) -> Result<Cell> {
    let clients: Vec<(Arc<Runtime>, u64)> = (0..n as u64).map(|i| (rt.clone(), i << 40)).collect();
    measure(
        clients,
        warmup,
        secs,
        |(rt, seq): (Arc<Runtime>, u64)| async move {
            // As the service does without a key: a fresh run per invocation.
            let mut req = InvokeRequest::new(TYPE_ID, json!({"name": "bench"}));
            req.context = RunContext {
                run_id: format!("inv-{seq}"),
                node_id: TYPE_ID.to_owned(),
                tenant_id: "anon:local".to_owned(),
                attempt: 1,
            };
            req.principal = Principal {
                id: "anonymous".to_owned(),
                tenant: "anon:local".to_owned(),
                scopes: Vec::new(),
            };
            let report = rt.invoke(req).await;
            let r = match report.outcome {
                Ok(wop_runtime::Outcome::Completed { output })
                    if output["greeting"] == "Hello, bench!" =>
                {
                    Ok(())
                }
                other => Err(anyhow::anyhow!("library invoke: {other:?}")),
            };
            ((rt, seq + 1), r)
        },
    )
    .await
}

fn main() -> Result<()> {
    let secs: u64 = std::env::var("WOP_BENCH_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3);
    let concurrency = std::env::var("WOP_BENCH_CONCURRENCY")
        .unwrap_or_else(|_| CONCURRENCY.to_owned())
        .split(',')
        .map(|n| n.trim().parse::<usize>())
        .collect::<Result<Vec<_>, _>>()
        .context("WOP_BENCH_CONCURRENCY: comma-separated client counts")?;
    let paths = std::env::var("WOP_BENCH_PATHS").unwrap_or_else(|_| PATHS.to_owned());
    let paths: Vec<String> = paths.split(',').map(|p| p.trim().to_owned()).collect();
    for p in &paths {
        ensure!(
            PATHS.split(',').any(|k| k == p),
            "WOP_BENCH_PATHS: unknown path `{p}` (known: {PATHS})"
        );
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    rt.block_on(run(Duration::from_secs(secs), &concurrency, &paths))
}

async fn run(secs: Duration, concurrency: &[usize], paths: &[String]) -> Result<()> {
    let warmup = Duration::from_millis(500);
    let packs = tempfile::tempdir()?;
    std::os::unix::fs::symlink(
        wop_test_packs::pack_dir("hello"),
        packs.path().join("hello"),
    )?;

    // The service.
    let cfg = ServeConfig::from_toml(
        "anonymousLoopback = true\nmaxInFlight = 256\nmaxConnections = 1024",
    )
    .map_err(anyhow::Error::msg)?;
    let mut opts = ServeOptions::new("127.0.0.1:0".parse()?);
    opts.memory_store().packs_dir(packs.path()).config(cfg);
    let server = Server::bind(opts).await?;
    ensure!(
        server.node_types() == [TYPE_ID],
        "hello not loaded: {:?}",
        server.refused()
    );
    let addr = server.local_addr()?;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(server.run(async move {
        let _ = stopped.await;
    }));

    // The library path: its own runtime, same pack, same kind of store.
    let mut rc = RuntimeConfig::new();
    rc.policy(Policy::default())
        .effect_store(Arc::new(wop_runtime::store::MemoryStore::new()));
    let lib = Arc::new(Runtime::new(&rc)?);
    lib.load_pack(&wop_test_packs::pack_dir("hello")).await?;

    let invoke = http_request(
        "/host/wop/invocations",
        &json!({"typeId": TYPE_ID, "inputs": {"name": "bench"}}).to_string(),
    );
    let mcp = http_request(
        "/mcp",
        &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": TYPE_ID, "arguments": {"name": "bench"}}})
        .to_string(),
    );

    let healthz: Arc<[u8]> = b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n"[..].into();

    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    println!(
        "wop-serve bench: `{TYPE_ID}`, {cores} cores, {} s per cell after {} ms warm-up, one keep-alive connection per client",
        secs.as_secs(),
        warmup.as_millis()
    );
    println!();
    println!(
        "| concurrency | path | invocations/s | p50 µs | p99 µs | CPU µs/call | HTTP/library (inv/s) |"
    );
    println!("|---:|---|---:|---:|---:|---:|---:|");
    let mut best_http = (0.0_f64, "", 0);
    let want = |p: &str| paths.iter().any(|k| k == p);
    for &n in concurrency {
        let libc = match want("library") {
            true => Some(library_cell(&lib, n, warmup, secs).await?),
            false => None,
        };
        if let Some(c) = &libc {
            println!(
                "| {n} | library `Runtime::invoke` | {:.0} | {:.0} | {:.0} | {} | 1 |",
                c.rate(),
                c.pct(50),
                c.pct(99),
                c.cpu_us()
            );
        }
        for (key, name, request, greeting) in [
            ("invoke", "`POST /host/wop/invocations`", &invoke, true),
            ("mcp", "`POST /mcp` tools/call", &mcp, true),
            (
                "healthz",
                "floor: `GET /healthz` (no invocation)",
                &healthz,
                false,
            ),
        ] {
            if !want(key) {
                continue;
            }
            let c = http_cell(addr, request, greeting, n, warmup, secs).await?;
            let ratio = libc
                .as_ref()
                .map_or_else(|| "—".to_owned(), |l| format!("{:.2}", c.rate() / l.rate()));
            println!(
                "| {n} | {name} | {:.0} | {:.0} | {:.0} | {} | {ratio} |",
                c.rate(),
                c.pct(50),
                c.pct(99),
                c.cpu_us()
            );
            if greeting && c.rate() > best_http.0 {
                best_http = (c.rate(), key, n);
            }
        }
    }
    println!();
    let (rate, name, n) = best_http;
    println!(
        "goal ≥ 10,000 hello invocations/s over HTTP: best {rate:.0}/s ({name}, concurrency {n}) — {}",
        if rate >= 10_000.0 { "met" } else { "not met" }
    );

    let _ = stop.send(());
    match task.await? {
        Ok(()) => Ok(()),
        Err(e) => bail!("server: {e}"),
    }
}
