//! Invocations per second of `hello` through one shared `Runtime` at
//! concurrency 1, 2, 8 and 64 on a 2-worker tokio runtime, and the scaling
//! of each concurrency over concurrency 1.
//!
//! (A first version also drove bare wasmtime (pooling) the same way; run
//! against the pre-refactor runtime, that process grew to 12 GB RSS and
//! 100 % system time within minutes and was killed — which of the two
//! paths grew was not established. The bare column was removed; the
//! per-call ratio against bare lives in `latency`. Watch RSS when running.)
//!
//! Run: `cargo run --release -p fuel-benches --bin throughput [-- SECONDS_PER_POINT]`
//!
//! `WOP_BENCH_STORE=sled` puts effects and usage on a sled store in a temp
//! dir (the CLI's default) instead of the in-memory store.
//!
//! The same concurrencies then drive a real `wop serve` (built next to
//! this binary, on the same kind of store: `--memory-store`, or a sled
//! directory) over HTTP keep-alive (connections pooled by reqwest, as many
//! as calls in flight), and the table gives its rate as a fraction of the
//! library's at the same concurrency. The HTTP clients run in this
//! process, on the same two cores as the service: the service's rate
//! includes their cost. Build `wop` first: `cargo build --release -p
//! wop-cli --bin wop`.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

/// The allocator `wop serve` runs on (decision 0040), so that library and
/// service figures compare like for like.
#[global_allocator]
static ALLOCATOR: wop_serve::allocator::Allocator = wop_serve::allocator::Allocator;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

const CONCURRENCY: [usize; 4] = [1, 2, 8, 64];

fn main() {
    let secs: f64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(3.0);
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let inputs = serde_json::json!({"name": "Ada"});
    let tmp = tempfile::tempdir().unwrap();
    let rt = tokio.block_on(async {
        let mut cfg = wop_runtime::RuntimeConfig::new();
        if std::env::var("WOP_BENCH_STORE").as_deref() == Ok("sled") {
            let store =
                wop_runtime::store::SledStore::open(&tmp.path().join("library-store")).unwrap();
            cfg.effect_store(Arc::new(store));
        }
        let rt = wop_runtime::Runtime::new(&cfg).unwrap();
        rt.load_pack(&wop_test_packs::pack_dir("hello"))
            .await
            .unwrap();
        rt
    });
    let req = wop_runtime::InvokeRequest::new("wop.samples.hello", inputs.clone());
    let (_serve, base) = start_serve(tmp.path());
    let body = serde_json::json!({"typeId": "wop.samples.hello", "inputs": inputs}).to_string();
    println!("| concurrency | library inv/s | × c=1 | wop serve inv/s (HTTP) | serve / library |");
    println!("|---|---|---|---|---|");
    let mut wop1 = 0.0;
    for c in CONCURRENCY {
        let (rt, req) = (rt.clone(), req.clone());
        let w = rate(&tokio, c, secs, move || {
            let (rt, req) = (rt.clone(), req.clone());
            async move {
                assert!(rt.invoke(req).await.outcome.is_ok());
            }
        });
        if c == 1 {
            wop1 = w;
        }
        let (base, body) = (base.clone(), body.clone());
        let s = rate(&tokio, c, secs, move || {
            // Keep-alive connections, pooled by reqwest per worker thread.
            thread_local! {
                static CLIENT: reqwest::Client = reqwest::Client::new();
            }
            let http = CLIENT.with(Clone::clone);
            let (url, body) = (format!("{base}/host/wop/invocations"), body.clone());
            async move {
                let r = http
                    .post(url)
                    .header("content-type", "application/json")
                    .body(body)
                    .send()
                    .await
                    .unwrap();
                assert!(r.status().is_success());
                let v: serde_json::Value = r.json().await.unwrap();
                assert_eq!(v["outcome"], "completed", "{v}");
            }
        });
        println!(
            "| {c} | {w:.0} | {:.2}× | {s:.0} | {:.2}× |",
            w / wop1,
            s / w
        );
    }
}

/// What [`start_serve`] started: the process (stopped when dropped) and
/// its stdout (kept open while it runs).
type Serve = (
    wop_testkit::ChildGuard,
    std::io::BufReader<std::process::ChildStdout>,
);

/// A real `wop serve` with the `hello` pack, on the store the library
/// uses; returns it and its base URL.
fn start_serve(tmp: &std::path::Path) -> (Serve, String) {
    let packs = tmp.join("packs");
    std::fs::create_dir_all(&packs).unwrap();
    std::os::unix::fs::symlink(wop_test_packs::pack_dir("hello"), packs.join("hello")).unwrap();
    let wop = fuel_benches::wop_next_to_exe().unwrap();
    let mut cmd = std::process::Command::new(wop);
    cmd.arg("serve").arg("--packs").arg(&packs);
    if std::env::var("WOP_BENCH_STORE").as_deref() == Ok("sled") {
        cmd.arg("--store").arg(tmp.join("serve-store"));
    } else {
        cmd.arg("--memory-store");
    }
    cmd.args(["--listen", "127.0.0.1:0", "--anonymous-loopback"])
        .args(["--max-in-flight", "256"])
        .stdin(std::process::Stdio::null());
    let (child, addr, stdout) = wop_testkit::spawn_serve(&mut cmd).unwrap();
    ((child, stdout), format!("http://{addr}"))
}

/// Runs `c` tasks calling `once` in a loop for `secs` seconds (after a
/// warm-up); returns completed calls per second.
fn rate<F, Fut>(tokio: &tokio::runtime::Runtime, c: usize, secs: f64, once: F) -> f64
where
    F: Fn() -> Fut + Send + Sync + Clone + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    tokio.block_on(async {
        let stop = Arc::new(AtomicBool::new(false));
        let done = Arc::new(AtomicU64::new(0));
        let mut tasks = Vec::new();
        for _ in 0..c {
            let (stop, done, once) = (stop.clone(), done.clone(), once.clone());
            tasks.push(tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    once().await;
                    done.fetch_add(1, Ordering::Relaxed);
                }
            }));
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
        let (n0, t0) = (done.load(Ordering::Relaxed), Instant::now());
        tokio::time::sleep(Duration::from_secs_f64(secs)).await;
        let (n1, t1) = (done.load(Ordering::Relaxed), Instant::now());
        stop.store(true, Ordering::Relaxed);
        for t in tasks {
            t.await.unwrap();
        }
        (n1 - n0) as f64 / (t1 - t0).as_secs_f64()
    })
}
