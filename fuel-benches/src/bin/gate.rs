//! Gate measurements: authorization decision latency (p50/p95 and heap
//! allocations per decision) and durable claim throughput on sled with and
//! without group commit.
//!
//! Run: `cargo run --release -p fuel-benches --bin gate`
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs, unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use wop_runtime::effects::{Begin, ClaimRequest, EffectTimings, Effects, Keying};
use wop_runtime::gate::authz;
use wop_runtime::store::{KvStore, SledOptions, SledStore};
use wop_runtime::tools::{
    RegisteredTool, SafetyTier, ToolAuth, ToolCall, ToolDescriptor, ToolFailure, ToolProvider,
    ToolSource,
};

/// Counts allocations so a decision's allocation count is measured, not guessed.
struct Counting;
static ALLOCS: AtomicU64 = AtomicU64::new(0);
// SAFETY: forwards to the system allocator; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(p, l) }
    }
}
#[global_allocator]
static GLOBAL: Counting = Counting;

struct Nop;
#[async_trait::async_trait]
impl ToolProvider for Nop {
    async fn call(&self, _: ToolCall) -> Result<serde_json::Value, ToolFailure> {
        Ok(serde_json::Value::Null)
    }
}

fn authz_bench() {
    let mut d = ToolDescriptor::new("crm:update", ToolSource::HostExtension, SafetyTier::Write);
    d.auth = Some(ToolAuth {
        scopes: vec!["crm.write".into(), "crm.read".into()],
        credential_ref: false,
    });
    let tool = RegisteredTool {
        descriptor: d,
        tenants: Some(vec!["acme".into(), "globex".into()]),
        rate: None,
        timeout: Duration::from_secs(1),
        provider: Arc::new(Nop),
    };
    let declared: Vec<String> = vec!["crm:read".into(), "crm:update".into(), "mail:*".into()];
    let granted: Vec<String> = vec!["crm:*".into()];
    let scopes: Vec<String> = vec!["crm.read".into(), "crm.write".into(), "mail.send".into()];
    let n = 200_000;
    let mut samples = Vec::with_capacity(n);
    let before = ALLOCS.load(Ordering::Relaxed);
    for _ in 0..n {
        let t = Instant::now();
        let r = authz::authorize(
            &declared,
            &granted,
            Some(&tool),
            "crm:update",
            "acme",
            &scopes,
        );
        samples.push(t.elapsed());
        assert!(r.is_ok());
    }
    let allocs = ALLOCS.load(Ordering::Relaxed) - before;
    samples.sort();
    let ns = |q: f64| samples[((n as f64 - 1.0) * q) as usize].as_nanos();
    println!("## Authorization decision (allowed path, {n} decisions)");
    println!(
        "- p50 {} ns, p95 {} ns, p99 {} ns",
        ns(0.5),
        ns(0.95),
        ns(0.99)
    );
    println!(
        "- heap allocations per decision: {:.2}",
        allocs as f64 / n as f64
    );
    let before = ALLOCS.load(Ordering::Relaxed);
    for _ in 0..n {
        let r = authz::authorize(&declared, &granted, Some(&tool), "crm:update", "acme", &[]);
        assert!(r.is_err());
    }
    println!(
        "- denied path (missing scopes): {:.2} allocations per decision (the error lists the scopes)",
        (ALLOCS.load(Ordering::Relaxed) - before) as f64 / n as f64
    );
}

async fn claims(store: Arc<dyn KvStore>, concurrency: usize, per_task: usize) -> f64 {
    let effects = Effects::new(store, "bench");
    let t = EffectTimings {
        lease: Duration::from_secs(30),
        in_flight_wait: Duration::from_millis(0),
        poll: Duration::from_millis(1),
    };
    let start = Instant::now();
    let mut tasks = Vec::new();
    for c in 0..concurrency {
        let effects = effects.clone();
        tasks.push(tokio::spawn(async move {
            for i in 0..per_task {
                let req = ClaimRequest {
                    effect_id: format!("e-{c}-{i}"),
                    keying: Keying::ActivityRecipe,
                    tenant_id: "t".into(),
                    run_id: format!("run-{c}"),
                    node_id: "n".into(),
                    attempt: 1,
                    tool_id: "crm:update".into(),
                    digest: "d".into(),
                    idempotent: false,
                };
                let deadline = Instant::now() + Duration::from_secs(60);
                let b = effects.begin(&req, t, deadline).await.unwrap();
                assert!(matches!(b, Begin::Perform { .. }));
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    (concurrency * per_task) as f64 / start.elapsed().as_secs_f64()
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    authz_bench();
    println!(
        "\n## Durable claims on sled (claim = index put + CAS insert, each flushed before returning)"
    );
    println!("| concurrent claimers | group commit off | group commit on | ratio |");
    println!("|---|---|---|---|");
    for conc in [1usize, 16, 64] {
        let per = 2000 / conc.max(1);
        let mut res = Vec::new();
        for gc in [false, true] {
            let dir = tempfile::tempdir().unwrap();
            let s = SledStore::open_with(dir.path(), SledOptions { group_commit: gc }).unwrap();
            res.push(claims(Arc::new(s), conc, per.max(20)).await);
        }
        println!(
            "| {conc} | {:.0} claims/s | {:.0} claims/s | {:.2}× |",
            res[0],
            res[1],
            res[1] / res[0]
        );
    }
}
