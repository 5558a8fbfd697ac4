//! The gate's own costs, without a pack:
//!
//! - `authz`: one authorization decision (allowed path, and denied for
//!   missing scopes);
//! - `claims`: one fresh effect claim (`Effects::begin`), in the in-memory
//!   store and durably in sled with group commit off and on, from 1 and 16
//!   concurrent claimers (time per claim; claims/s = 1 / time).
//!
//! Run: `cargo bench -p fuel-benches --bench gate`, then
//! `cargo run --release -p fuel-benches --bin report`. The `gate` binary
//! (`cargo run --release -p fuel-benches --bin gate`) adds allocation
//! counts per decision.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod common;

use criterion::{Criterion, criterion_group, criterion_main};
use fuel_benches::gate::{AuthzCase, claims};
use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;
use wop_runtime::store::{KvStore, MemoryStore, SledOptions, SledStore};

fn authz(c: &mut Criterion) {
    let case = AuthzCase::new();
    let mut g = c.benchmark_group("authz");
    g.bench_function("allowed", |b| {
        b.iter(|| assert!(black_box(&case).allowed()))
    });
    g.bench_function("denied-scopes", |b| {
        b.iter(|| assert!(black_box(&case).denied()))
    });
    g.finish();
}

fn durable_claims(c: &mut Criterion) {
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let sled = |name: &str, group_commit: bool| -> Arc<dyn KvStore> {
        Arc::new(
            SledStore::open_with(
                &dir.path().join(name),
                SledOptions {
                    group_commit,
                    ..SledOptions::default()
                },
            )
            .unwrap(),
        )
    };
    let stores: Vec<(&str, Arc<dyn KvStore>)> = vec![
        ("memory", Arc::new(MemoryStore::new())),
        ("sled-gc-off", sled("off", false)),
        ("sled-gc-on", sled("on", true)),
    ];
    let mut g = c.benchmark_group("claims");
    for conc in [1usize, 16] {
        for (name, store) in &stores {
            g.bench_function(format!("{name}-c{conc}"), |b| {
                b.iter_custom(|iters| {
                    let total = usize::try_from(iters).unwrap().max(conc);
                    let t: Duration = tokio.block_on(claims(store.clone(), conc, total)).unwrap();
                    t.mul_f64(iters as f64 / total as f64)
                })
            });
        }
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = common::config();
    targets = authz, durable_claims
}
criterion_main!(benches);
