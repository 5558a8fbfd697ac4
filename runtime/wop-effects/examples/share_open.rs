//! What counting the tenants' shares costs when a store is opened
//! (decisions 0054, 0055): fills a sled store with `N` completed effect
//! records (results of `BYTES` bytes, eight tenants) and `USAGE` usage
//! records (850 bytes, as a hello's record and roll-up measured), reopens
//! it and times `TenantShare::open`, which reads every counted record.
//!
//! `cargo run --release -p wop-effects --example share_open -- 100000 512 0`
//! `cargo run --release -p wop-effects --example share_open -- 0 0 1000000`
// A benchmark: a failure should stop it loudly.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::{Duration, Instant};
use wop_effects::effects::{Begin, ClaimRequest, Keying};
use wop_effects::store::TenantShare;
use wop_effects::{EffectTimings, Effects, KvStore, SledStore};

const WRITERS: u64 = 32;

async fn fill(kv: Arc<dyn KvStore>, n: u64, bytes: usize) {
    let fx = Effects::new(kv, "share-open");
    let timings = EffectTimings {
        lease: Duration::from_secs(60),
        in_flight_wait: Duration::from_secs(1),
        poll: Duration::from_millis(5),
    };
    let mut tasks = Vec::new();
    for w in 0..WRITERS {
        let fx = fx.clone();
        tasks.push(tokio::spawn(async move {
            let result = serde_json::json!({ "blob": "x".repeat(bytes) });
            for i in (w..n).step_by(WRITERS as usize) {
                let req = ClaimRequest {
                    effect_id: format!("e-{i}"),
                    keying: Keying::ActivityRecipe,
                    tenant_id: format!("tenant-{}", i % 8),
                    run_id: format!("run-{}", i / 100),
                    node_id: "n".into(),
                    attempt: 1,
                    tool_id: "t:x".into(),
                    digest: "d".into(),
                    idempotent: false,
                };
                let deadline = Instant::now() + Duration::from_secs(10);
                match fx.begin(&req, timings, deadline).await {
                    Ok(Begin::Perform { claimed, .. }) => {
                        fx.complete(&claimed, Ok(result.clone())).await.unwrap();
                    }
                    other => panic!("{other:?}"),
                }
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
}

/// `n` usage records of eight tenants, written as the meter keys them.
async fn fill_usage(kv: Arc<dyn KvStore>, n: u64) {
    let mut tasks = Vec::new();
    for w in 0..WRITERS {
        let kv = kv.clone();
        tasks.push(tokio::spawn(async move {
            for i in (w..n).step_by(WRITERS as usize) {
                let key = format!("usage/tenant-{}/inv-{i}/1765000000000-1-{i}", i % 8);
                kv.put(&key, vec![b'u'; 790]).await.unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let mut args = std::env::args().skip(1);
    let n: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(100_000);
    let bytes: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(512);
    let usage: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(0);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let started = Instant::now();
    let sled: Arc<dyn KvStore> = Arc::new(SledStore::open(&path).unwrap());
    fill(sled.clone(), n, bytes).await;
    fill_usage(sled.clone(), usage).await;
    sled.put("meta/flushed", Vec::new()).await.unwrap();
    drop(sled);
    println!(
        "filled {n} records of {bytes}-byte results and {usage} usage records in {:.1?}",
        started.elapsed()
    );
    let n = n + usage;
    // A new process: open the store, then count.
    let kv: Arc<dyn KvStore> = Arc::new(SledStore::open(&path).unwrap());
    let started = Instant::now();
    let share = TenantShare::open(kv, u64::MAX).await.unwrap();
    let took = started.elapsed();
    let total = share.total();
    println!(
        "TenantShare::open: {took:.2?} for {n} records ({total} bytes counted): {:.0} records/s, {:.0} MB/s",
        n as f64 / took.as_secs_f64(),
        total as f64 / took.as_secs_f64() / 1e6
    );
}
