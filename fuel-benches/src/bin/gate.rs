//! Gate measurements: authorization decision latency (p50/p95 and heap
//! allocations per decision) and durable claim throughput on sled with and
//! without group commit.
//!
//! Run: `cargo run --release -p fuel-benches --bin gate`
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs, unsafe_code)]

use fuel_benches::gate::{AuthzCase, claims};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;
use wop_runtime::store::{SledOptions, SledStore};

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

fn authz_bench() {
    let case = AuthzCase::new();
    let n = 200_000;
    let mut samples = Vec::with_capacity(n);
    let before = ALLOCS.load(Ordering::Relaxed);
    for _ in 0..n {
        let t = Instant::now();
        let ok = case.allowed();
        samples.push(t.elapsed());
        assert!(ok);
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
        assert!(case.denied());
    }
    println!(
        "- denied path (missing scopes): {:.2} allocations per decision (the error lists the scopes)",
        (ALLOCS.load(Ordering::Relaxed) - before) as f64 / n as f64
    );
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
            let s = SledStore::open_with(
                dir.path(),
                SledOptions {
                    group_commit: gc,
                    ..SledOptions::default()
                },
            )
            .unwrap();
            let total = conc * per.max(20);
            let elapsed = claims(Arc::new(s), conc, total).await.unwrap();
            res.push(total as f64 / elapsed.as_secs_f64());
        }
        println!(
            "| {conc} | {:.0} claims/s | {:.0} claims/s | {:.2}× |",
            res[0],
            res[1],
            res[1] / res[0]
        );
    }
}
