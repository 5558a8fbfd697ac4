use super::*;
use crate::store::{KvStore, MemoryStore};
use crate::{MeterOptions, UsageScope};
use std::sync::Arc;
use wop_core::budget::{Prices, RunBudget};

fn usage(run: &str, i: u64) -> Usage {
    Usage {
        pack: "p".into(),
        pack_version: "1.0.0".into(),
        type_id: "hello".into(),
        tenant_id: "tenant".into(),
        run_id: run.into(),
        node_id: format!("node-{i}"),
        fuel_consumed: 100 + i,
        ..Default::default()
    }
}

fn meter(kv: &Arc<MemoryStore>, commit: UsageCommit) -> Meter {
    let options = MeterOptions {
        usage_commit: commit,
        ..Default::default()
    };
    Meter::with_options(kv.clone(), Prices::default(), options)
}

/// An hour: a window that never ends within a test.
const LONG: Duration = Duration::from_secs(3600);

async fn stored_records(kv: &MemoryStore) -> usize {
    kv.scan_prefix("usage/", 10_000).await.unwrap().len()
}

/// Deferred: the record is queued, not written, when `record` returns;
/// this process's reads write it first and see it.
#[tokio::test]
async fn a_deferred_record_is_written_by_the_first_read() {
    let kv = Arc::new(MemoryStore::new());
    let m = meter(
        &kv,
        UsageCommit::Deferred {
            window: LONG,
            max_records: 1000,
        },
    );
    let u = usage("r1", 1);
    assert!(m.record(&u, &u.node_id).await.unwrap().is_empty());
    assert_eq!(stored_records(&kv).await, 0, "queued, not yet written");
    let run_key = crate::keys::run_rollup("tenant", "r1");
    assert!(kv.get(&run_key).await.unwrap().is_none());
    let read = m.usage(UsageScope::All, None).await.unwrap();
    assert_eq!(read.len(), 1);
    assert_eq!(read[0].fuel_consumed, 101);
    assert_eq!(stored_records(&kv).await, 1);
    let roll = m.run_rollup("tenant", "r1").await.unwrap().unwrap();
    assert_eq!(roll.invocations(), 1);
}

/// A meter whose queue holds 3 records, holding 2 (of run `r1`).
async fn one_record_from_full() -> (Arc<MemoryStore>, Meter) {
    let kv = Arc::new(MemoryStore::new());
    let m = meter(
        &kv,
        UsageCommit::Deferred {
            window: LONG,
            max_records: 3,
        },
    );
    for i in 0..2 {
        let u = usage("r1", i);
        m.record(&u, &u.node_id).await.unwrap();
    }
    (kv, m)
}

/// The recorder that fills the queue writes it before it returns.
#[tokio::test]
async fn the_recorder_that_fills_the_queue_writes_it() {
    let (kv, m) = one_record_from_full().await;
    assert_eq!(stored_records(&kv).await, 0);
    let u = usage("r1", 2);
    m.record(&u, &u.node_id).await.unwrap();
    assert_eq!(stored_records(&kv).await, 3);
}

/// A recorder that fills the queue and then stops waiting (its request
/// was cancelled) does not abandon the batch it took: the write runs in a
/// task of its own and completes.
#[tokio::test]
async fn a_recorder_that_stops_waiting_leaves_no_batch_half_written() {
    let (kv, m) = one_record_from_full().await;
    let u = usage("r1", 2);
    // Polled once, then dropped.
    let mut recording = Box::pin(m.record(&u, &u.node_id));
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    assert!(
        recording.as_mut().poll(&mut cx).is_pending(),
        "the recorder waits for its flush"
    );
    drop(recording);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while stored_records(&kv).await < 3 && std::time::Instant::now() < deadline {
        tokio::task::yield_now().await;
    }
    assert_eq!(stored_records(&kv).await, 3);
    let roll = kv
        .get(&crate::keys::run_rollup("tenant", "r1"))
        .await
        .unwrap();
    assert!(roll.is_some(), "the run's roll-up was written too");
}

/// The window's flush runs by itself (no read, no drain).
#[tokio::test]
async fn the_window_writes_the_queue_by_itself() {
    let kv = Arc::new(MemoryStore::new());
    let m = meter(
        &kv,
        UsageCommit::Deferred {
            window: Duration::from_millis(1),
            max_records: 1000,
        },
    );
    let u = usage("r1", 1);
    m.record(&u, &u.node_id).await.unwrap();
    // Liveness, not speed: give the timer up to a minute.
    for _ in 0..60_000 {
        if stored_records(&kv).await == 1 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    panic!("the window's flush never wrote the record");
}

/// Drain: `flush` writes what is queued; a dropped meter that was not
/// flushed loses only its queue (the documented window).
#[tokio::test]
async fn flush_at_drain_writes_the_queue() {
    let kv = Arc::new(MemoryStore::new());
    let m = meter(
        &kv,
        UsageCommit::Deferred {
            window: LONG,
            max_records: 1000,
        },
    );
    for i in 0..5 {
        let u = usage(&format!("r{i}"), i);
        m.record(&u, &u.node_id).await.unwrap();
    }
    assert_eq!(stored_records(&kv).await, 0);
    m.flush().await.unwrap();
    assert_eq!(stored_records(&kv).await, 5);
    m.flush().await.unwrap();
    assert_eq!(stored_records(&kv).await, 5, "nothing written twice");
}

/// A run with a budget is recorded before `record` returns, deferred or
/// not: its ledger and its records are exact at once.
#[tokio::test]
async fn a_budgeted_run_is_never_deferred() {
    let kv = Arc::new(MemoryStore::new());
    let m = meter(
        &kv,
        UsageCommit::Deferred {
            window: LONG,
            max_records: 1000,
        },
    );
    let budget = RunBudget {
        max_fuel: Some(1_000_000),
        ..Default::default()
    };
    m.open_run("tenant", "b1", &budget, false).await.unwrap();
    let u = usage("b1", 1);
    let events = m.record_with(&u, &u.node_id, Some(true)).await.unwrap();
    assert!(!events.is_empty(), "the ledger's budget.consumed");
    assert_eq!(stored_records(&kv).await, 1, "written before return");
    let ledger = m.ledger("tenant", "b1").await.unwrap().unwrap();
    assert_eq!(ledger.consumed.fuel, 101);
}

/// Durable (the default) writes before `record` returns.
#[tokio::test]
async fn durable_writes_before_return() {
    let kv = Arc::new(MemoryStore::new());
    let m = meter(&kv, UsageCommit::Durable);
    let u = usage("r1", 1);
    m.record(&u, &u.node_id).await.unwrap();
    assert_eq!(stored_records(&kv).await, 1);
}

/// The queue keeps only the stored part of the host-call breakdown, and
/// the stored record still says how many entries were cut.
#[tokio::test]
async fn a_queued_record_keeps_the_stored_breakdown_and_its_dropped_count() {
    use super::super::stored::StoredUsage;
    let kv = Arc::new(MemoryStore::new());
    let m = meter(
        &kv,
        UsageCommit::Deferred {
            window: LONG,
            max_records: 1000,
        },
    );
    let mut u = usage("r1", 1);
    u.host_call_breakdown = (0..40)
        .map(|j| wop_core::model::HostCallRecord {
            interface: "log".into(),
            target: None,
            fuel_before: j,
            wall_us: 1,
        })
        .collect();
    m.record(&u, &u.node_id).await.unwrap();
    {
        let q = m.queue.lock();
        assert_eq!(q[0].usage.host_call_breakdown.len(), 8);
        assert_eq!(q[0].dropped, 32);
    }
    m.flush().await.unwrap();
    let stored = kv.scan_prefix("usage/", 10).await.unwrap();
    let s = StoredUsage::decode(&stored[0].1).unwrap();
    assert_eq!(s.usage.host_call_breakdown.len(), 8);
    assert_eq!(s.host_call_breakdown_dropped, 32);
}

/// A store that refuses every batch is logged once, then at most once per
/// ten seconds with the failures in between counted.
#[test]
fn failing_flushes_are_logged_once_per_ten_seconds_with_a_count() {
    let mut f = Failures::default();
    let t0 = std::time::Instant::now();
    let at = |ms: u64| t0 + Duration::from_millis(ms);
    assert_eq!(f.failed(at(0)), Some(0));
    // 100 windows a second for ten seconds: not logged.
    for i in 1..1000 {
        assert_eq!(f.failed(at(i * 10)), None, "{i}");
    }
    assert_eq!(f.failed(at(10_000)), Some(999));
    assert_eq!(f.failed(at(10_001)), None);
    assert_eq!(f.failed(at(60_000)), Some(1));
}
