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
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

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
            let store = wop_runtime::store::SledStore::open(tmp.path()).unwrap();
            cfg.effect_store(Arc::new(store));
        }
        let rt = wop_runtime::Runtime::new(&cfg).unwrap();
        rt.load_pack(&wop_test_packs::pack_dir("hello"))
            .await
            .unwrap();
        rt
    });
    let req = wop_runtime::InvokeRequest::new("wop.samples.hello", inputs.clone());
    println!("| concurrency | wop inv/s | × c=1 |");
    println!("|---|---|---|");
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
        println!("| {c} | {w:.0} | {:.2}× |", w / wop1);
    }
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
