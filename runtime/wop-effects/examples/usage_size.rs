//! Bytes of sled per recorded invocation: the previous layout (every
//! invocation's full `Usage` JSON under `usage/<run>/…`) against the meter's
//! (roll-ups + capped, bounded, compact records).
//!
//! ```text
//! CARGO_TARGET_DIR=/work/target-pg cargo run --release -p wop-effects \
//!     --example usage_size -- [invocations, default 20000]
//! ```
//!
//! The usage is shaped like a `hello` invocation (two `log` host calls in
//! the breakdown, a UUID run id). Two shapes of load: all invocations in one
//! run, and one run per invocation. "files" is the sum of the store's file
//! lengths after the last write (sled's log: it grows with every write,
//! live or overwritten, until its segment cleaner runs); "live" is the
//! bytes of the keys and values present. `/inv` divides by the invocations.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use wop_core::budget::Prices;
use wop_core::model::{HostCallRecord, Usage};
use wop_effects::{KvStore, Meter, SledStore};

fn hello(run: &str, i: u64) -> Usage {
    Usage {
        pack: "hello".into(),
        pack_version: "0.1.0".into(),
        type_id: "hello.greet".into(),
        tenant_id: "default".into(),
        run_id: run.into(),
        node_id: format!("greet-{i}"),
        attempt: 1,
        fuel_limit: 100_000_000,
        fuel_consumed: 48_213,
        wall_time_us: 310,
        instantiate_time_us: 42,
        peak_memory_bytes: 1_114_112,
        memory_limit_bytes: 67_108_864,
        host_calls: [("log".to_owned(), 2)].into(),
        log_bytes: 24,
        output_bytes: 27,
        cost: 0.000_001,
        currency: "USD".into(),
        host_call_breakdown: (0..2)
            .map(|j| HostCallRecord {
                interface: "log".into(),
                target: None,
                fuel_before: 10_000 + j,
                wall_us: 3,
            })
            .collect(),
        fuel_after_last_call: 28_211,
        ..Default::default()
    }
}

fn dir_bytes(p: &std::path::Path) -> u64 {
    let mut n = 0;
    for e in std::fs::read_dir(p).unwrap() {
        let e = e.unwrap();
        let m = e.metadata().unwrap();
        n += if m.is_dir() {
            dir_bytes(&e.path())
        } else {
            m.len()
        };
    }
    n
}

fn run_id(shape: &str, i: u64) -> String {
    match shape {
        "one-run" => "6f1c2a9e-3b7d-4c55-9a0e-1d2f3a4b5c6d".to_owned(),
        _ => format!("6f1c2a9e-3b7d-4c55-9a0e-{i:012}"),
    }
}

async fn measure(layout: &str, shape: &str, n: u64) -> u64 {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let kv: Arc<dyn KvStore> = Arc::new(SledStore::open(&path).unwrap());
    let meter = Meter::new(kv.clone(), Prices::default());
    const TASKS: u64 = 32;
    let mut tasks = Vec::new();
    for t in 0..TASKS {
        let (kv, meter, layout, shape) = (
            kv.clone(),
            meter.clone(),
            layout.to_owned(),
            shape.to_owned(),
        );
        tasks.push(tokio::spawn(async move {
            let mut i = t;
            while i < n {
                let u = hello(&run_id(&shape, i), i);
                if layout == "old" {
                    let key = format!(
                        "usage/{}/{:013}-{}-{}-{}-{}",
                        u.run_id,
                        1_764_000_000_000u64 + i,
                        u.node_id,
                        u.attempt,
                        4242,
                        i
                    );
                    kv.put(&key, serde_json::to_vec(&u).unwrap()).await.unwrap();
                } else {
                    meter.record(&u, &u.node_id).await.unwrap();
                }
                i += TASKS;
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let usage = kv.scan_prefix("usage/", usize::MAX).await.unwrap();
    let roll = kv.scan_prefix("rollup/", usize::MAX).await.unwrap();
    let (records, rollups) = (usage.len(), roll.len());
    let live: usize = usage
        .iter()
        .chain(&roll)
        .map(|(k, v)| k.len() + v.len())
        .sum();
    drop(meter);
    drop(kv);
    let bytes = dir_bytes(&path);
    println!(
        "{layout:<4} {shape:<8} {n:>7} inv  {records:>7} usage records {rollups:>7} roll-up records  \
         {:>9.1} MB files {:>6.0} B/inv; live keys+values {:>5.0} B/inv",
        bytes as f64 / 1e6,
        bytes as f64 / n as f64,
        live as f64 / n as f64
    );
    bytes
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let n: u64 = std::env::args()
        .nth(1)
        .map(|s| s.parse().expect("invocations"))
        .unwrap_or(20_000);
    let u = hello("6f1c2a9e-3b7d-4c55-9a0e-1d2f3a4b5c6d", 1);
    println!(
        "one hello usage as JSON: {} bytes (previous record value)",
        serde_json::to_vec(&u).unwrap().len()
    );
    for shape in ["one-run", "run-each"] {
        for layout in ["old", "new"] {
            measure(layout, shape, n).await;
        }
    }
}
