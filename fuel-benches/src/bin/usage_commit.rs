//! What committing usage off the invocation's path saves (issue 35,
//! `UsageCommit`): the hello pack through the library, on the memory
//! store and on sled (the CLI's default), with usage durable before the
//! report and deferred (10 ms / 1,000 records), interleaved in one run.
//!
//! ```text
//! cargo run --release -p fuel-benches --bin usage_commit -- [invocations, default 2000]
//! ```
//!
//! Every invocation is of a run without a budget (the only runs whose
//! usage may be deferred). After the timed loop each runtime is drained
//! (`flush_usage`) and the invocations in its roll-ups counted: the bench
//! fails if one is missing.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Instant;
use wop_runtime::metering::{UsageCommit, UsageScope};
use wop_runtime::{InvokeRequest, Runtime, RuntimeConfig};

async fn runtime(store: Option<&std::path::Path>, commit: UsageCommit) -> Runtime {
    let mut cfg = RuntimeConfig::new();
    if let Some(dir) = store {
        cfg.effect_store(Arc::new(wop_runtime::store::SledStore::open(dir).unwrap()));
    }
    cfg.usage_commit(commit);
    let rt = Runtime::new(&cfg).unwrap();
    rt.load_pack(&wop_test_packs::pack_dir("hello"))
        .await
        .unwrap();
    rt
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(2000);
    let dir = tempfile::tempdir().unwrap();
    let rows = [
        ("memory store, usage durable", None, UsageCommit::Durable),
        ("memory store, usage deferred", None, UsageCommit::DEFERRED),
        (
            "sled store, usage durable",
            Some(dir.path().join("durable")),
            UsageCommit::Durable,
        ),
        (
            "sled store, usage deferred",
            Some(dir.path().join("deferred")),
            UsageCommit::DEFERRED,
        ),
    ];
    let mut rts = Vec::new();
    for (name, store, commit) in &rows {
        rts.push((*name, runtime(store.as_deref(), *commit).await, Vec::new()));
    }
    let req = InvokeRequest::new("wop.samples.hello", serde_json::json!({"name": "Ada"}));
    for (_, rt, _) in &rts {
        for _ in 0..200 {
            assert!(rt.invoke(req.clone()).await.outcome.is_ok());
        }
    }
    // Interleaved so machine noise hits all alike.
    for _ in 0..n {
        for (_, rt, samples) in &mut rts {
            let t = Instant::now();
            let r = rt.invoke(req.clone()).await;
            samples.push(t.elapsed());
            assert!(r.outcome.is_ok());
        }
    }
    println!("hello, {n} invocations each, runs without a budget");
    println!("| path | p50 | p99 | calls/s | invocations in the roll-ups after drain |");
    println!("|---|---|---|---|---|");
    let mut p50 = Vec::new();
    for (name, rt, samples) in rts {
        rt.flush_usage().await.unwrap();
        // Every invocation counted in the roll-ups (the records of one
        // run are capped at 1,000; the roll-ups are exact).
        let (by_run, _) = rt.usage_rollup(UsageScope::All, None).await.unwrap();
        let kept: u64 = by_run.values().map(|r| r.invocations).sum();
        assert_eq!(
            kept,
            (n + 200) as u64,
            "{name}: every invocation's usage stored"
        );
        let s = fuel_benches::stats(samples);
        println!(
            "| {name} | {:.1} µs | {:.1} µs | {:.0} | {kept} |",
            s.p50_us, s.p99_us, s.per_sec
        );
        p50.push(s.p50_us);
    }
    println!(
        "| ratio deferred / durable, memory | {:.2}× | | | |",
        p50[1] / p50[0]
    );
    println!(
        "| ratio deferred / durable, sled | {:.2}× | | | |",
        p50[3] / p50[2]
    );
    println!(
        "| ratio sled deferred / memory durable | {:.2}× | | | |",
        p50[3] / p50[0]
    );
}
