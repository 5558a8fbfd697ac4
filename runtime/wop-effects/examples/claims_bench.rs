//! Claims per second on sled and PostgreSQL, at several concurrencies, in
//! one run.
//!
//! ```text
//! export WOP_TEST_POSTGRES_URL="$(bash .ci/postgres.sh start)"
//! CARGO_TARGET_DIR=/work/target-pg cargo run --release -p wop-effects \
//!     --example claims_bench -- [seconds-per-point, default 5]
//! ```
//!
//! A claim is `Effects::begin` on a fresh effect id: the run-index write
//! and the durable insert-if-absent (`KvStore::put_then_insert`: one
//! statement on PostgreSQL), i.e. what the gate does before every
//! performed tool call. `claim+complete` also records the outcome (one
//! more durable compare-and-swap). Each point runs for a fixed time with
//! `c` tasks claiming in a loop; the store is fresh per backend.
//!
//! `sled+share` and `memory+share` are those stores counted per tenant
//! (`TenantShare`, what `wop serve` runs with several tenants; decisions
//! 0054, 0055), with a share no claim reaches: the cost of the counting.
//!
//! `postgres-3rt` is the same PostgreSQL store behind a wrapper that makes
//! the first write of a claim the way it was before `put_then_insert`
//! (index put, read, insert-if-absent: three round trips), so the ratio of
//! the two rows is measured in one run. Without `WOP_TEST_POSTGRES_URL`
//! only sled is measured.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use wop_effects::effects::{Begin, ClaimRequest, Keying};
use wop_effects::store::TenantShare;
use wop_effects::store::tap::{Tap, Tapped};
use wop_effects::{EffectTimings, Effects, KvStore};

/// The claim's first write as it was before `put_then_insert`: index put,
/// read, insert-if-absent, each its own round trip.
struct ThreeRoundTrips;

#[async_trait::async_trait]
impl Tap for ThreeRoundTrips {
    fn three_round_trip_claims(&self) -> bool {
        true
    }
}

async fn point(kv: Arc<dyn KvStore>, c: usize, secs: f64, complete: bool, tag: &str) -> f64 {
    let effects = Effects::new(kv, format!("bench-{tag}"));
    let done = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let until = start + Duration::from_secs_f64(secs);
    let mut tasks = Vec::new();
    for t in 0..c {
        let effects = effects.clone();
        let done = done.clone();
        let tag = tag.to_owned();
        tasks.push(tokio::spawn(async move {
            let timings = EffectTimings {
                lease: Duration::from_secs(60),
                in_flight_wait: Duration::from_secs(1),
                poll: Duration::from_millis(5),
            };
            let mut i = 0u64;
            while Instant::now() < until {
                let req = ClaimRequest {
                    effect_id: format!("{tag}-{c}-{t}-{i}"),
                    keying: Keying::ActivityRecipe,
                    tenant_id: "bench".into(),
                    run_id: format!("run-{tag}-{c}-{t}"),
                    node_id: "n".into(),
                    attempt: 1,
                    tool_id: "t:x".into(),
                    digest: "d".into(),
                    idempotent: false,
                };
                i += 1;
                match effects
                    .begin(&req, timings, Instant::now() + Duration::from_secs(10))
                    .await
                    .unwrap()
                {
                    Begin::Perform { claimed, .. } => {
                        if complete {
                            assert!(
                                effects
                                    .complete(&claimed, Ok(serde_json::json!({"ok": true})))
                                    .await
                                    .unwrap()
                            );
                        }
                    }
                    other => panic!("fresh claim not performed: {other:?}"),
                }
                done.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    done.load(Ordering::Relaxed) as f64 / start.elapsed().as_secs_f64()
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let secs: f64 = std::env::args()
        .nth(1)
        .map(|s| s.parse().expect("seconds per point"))
        .unwrap_or(5.0);
    let dir = tempfile::tempdir().unwrap();
    let sled = |name: &str| -> Arc<dyn KvStore> {
        Arc::new(wop_effects::SledStore::open(&dir.path().join(name)).unwrap())
    };
    let shared = |kv: Arc<dyn KvStore>| async move {
        let share = TenantShare::open(kv, u64::MAX).await.unwrap();
        Arc::new(share) as Arc<dyn KvStore>
    };
    let memory = || Arc::new(wop_effects::MemoryStore::new()) as Arc<dyn KvStore>;
    let mut backends: Vec<(&str, Arc<dyn KvStore>)> = vec![
        ("sled", sled("db")),
        ("sled+share", shared(sled("db-share")).await),
        ("memory", memory()),
        ("memory+share", shared(memory()).await),
    ];
    match std::env::var("WOP_TEST_POSTGRES_URL") {
        Ok(url) if !url.is_empty() => {
            let sep = if url.contains('?') { '&' } else { '?' };
            let url = format!(
                "{url}{sep}wop_schema=bench_{}_{}&wop_pool=64",
                std::process::id(),
                wop_effects::effects::now_ms()
            );
            let pg = wop_effects::store::open(&url).unwrap();
            backends.push(("postgres", pg.clone()));
            backends.push(("postgres-3rt", Tapped::new(pg, ThreeRoundTrips)));
        }
        _ => eprintln!("WOP_TEST_POSTGRES_URL unset: sled only"),
    }
    println!(
        "{:<12} {:>4} {:>12} {:>20}",
        "backend", "c", "claims/s", "claim+complete/s"
    );
    for (name, kv) in &backends {
        for c in [1usize, 16, 64] {
            let claims = point(kv.clone(), c, secs, false, &format!("{name}a")).await;
            let full = point(kv.clone(), c, secs, true, &format!("{name}b")).await;
            println!("{name:<12} {c:>4} {claims:>12.0} {full:>20.0}");
        }
    }
}
