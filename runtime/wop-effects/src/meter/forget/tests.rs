use super::super::tests::usage;
use super::super::{MeterOptions, UsageCommit, UsageScope};
use super::*;
use crate::store::{KvStore, MemoryStore};
use std::sync::Arc;
use wop_core::budget::{Prices, RunBudget};

fn bounded(kv: &Arc<MemoryStore>, entries: u64, usage_commit: UsageCommit) -> Meter {
    let options = MeterOptions {
        usage_records_per_run: 5,
        usage_entries: Some(entries),
        usage_commit,
        ..Default::default()
    };
    let kv: Arc<dyn KvStore> = kv.clone();
    Meter::with_options(kv, Prices::default(), options)
}

/// Usage records and run roll-ups in the store.
async fn entries(kv: &MemoryStore) -> usize {
    let records = kv.scan_prefix("usage/", usize::MAX).await.unwrap().len();
    records
        + kv.scan_prefix("rollup/run/", usize::MAX)
            .await
            .unwrap()
            .len()
}

async fn record(m: &Meter, run: &str, i: u64) {
    record_as(m, "tenant", run, i).await;
}

async fn record_as(m: &Meter, tenant: &str, run: &str, i: u64) {
    let mut u = usage(run, "alpha", i);
    u.tenant_id = tenant.into();
    m.record(&u, &u.node_id).await.unwrap();
}

/// A tenant's usage records and run roll-ups in the store.
async fn tenant_entries(kv: &MemoryStore, tenant: &str) -> usize {
    let (usage, rollup) = (format!("usage/{tenant}/"), format!("rollup/run/{tenant}/"));
    let records = kv.scan_prefix(&usage, usize::MAX).await.unwrap().len();
    records + kv.scan_prefix(&rollup, usize::MAX).await.unwrap().len()
}

/// The usage records a tenant's run has in the store.
async fn kept(m: &Meter, tenant: &str, run: &str) -> usize {
    let scope = UsageScope::Run { tenant, run };
    m.usage(scope, None).await.unwrap().len()
}

/// 100 new runs of 2 invocations each (400 entries unbounded) keep at
/// most the bound's 40, on both commits; the newest run is whole, the
/// oldest forgotten, and the pack's all-time roll-up counts all 200.
#[tokio::test]
async fn the_store_keeps_at_most_its_bound_of_usage() {
    for commit in [UsageCommit::Durable, UsageCommit::DEFERRED] {
        let kv = Arc::new(MemoryStore::new());
        let m = bounded(&kv, 40, commit);
        for r in 0..100 {
            for i in 0..2 {
                record(&m, &format!("run-{r}"), i).await;
            }
        }
        m.flush().await.unwrap();
        let n = entries(&kv).await;
        assert!((34..=40).contains(&n), "{commit:?}: {n} entries");
        let last = m.run_rollup("tenant", "run-99").await.unwrap().unwrap();
        assert_eq!((last.invocations(), last.records_kept), (2, 2));
        let scope = UsageScope::Run {
            tenant: "tenant",
            run: "run-99",
        };
        assert_eq!(m.usage(scope, None).await.unwrap().len(), 2);
        assert!(m.run_rollup("tenant", "run-0").await.unwrap().is_none());
        let (_, by_pack) = m.rollup(UsageScope::All, None).await.unwrap();
        assert_eq!(by_pack["alpha@1.0.0"].invocations, 200, "{commit:?}");
    }
}

/// The run forgotten is the one recorded least recently, not the oldest:
/// a run recorded again stays.
#[tokio::test]
async fn a_run_recorded_again_outlives_older_ones() {
    let kv = Arc::new(MemoryStore::new());
    // 12 entries: six runs of one invocation each (a roll-up and a record).
    let m = bounded(&kv, 12, UsageCommit::Durable);
    for r in ["a", "b", "c", "d", "e", "f"] {
        record(&m, r, 0).await;
    }
    assert_eq!(entries(&kv).await, 12);
    record(&m, "a", 1).await;
    let a = m.run_rollup("tenant", "a").await.unwrap().unwrap();
    assert_eq!(a.invocations(), 2, "a was recorded last: kept whole");
    assert!(m.run_rollup("tenant", "b").await.unwrap().is_none());
    assert!(m.run_rollup("tenant", "c").await.unwrap().is_some());
    assert_eq!(entries(&kv).await, 11);
}

/// Forgetting a run's usage never touches its ledger: the budget of a
/// run whose roll-up was forgotten is still exact.
#[tokio::test]
async fn a_forgotten_runs_ledger_stays() {
    let kv = Arc::new(MemoryStore::new());
    let m = bounded(&kv, 12, UsageCommit::DEFERRED);
    let budget = RunBudget {
        max_fuel: Some(1_000_000),
        ..Default::default()
    };
    m.open_run("tenant", "budgeted", &budget, false)
        .await
        .unwrap();
    let u = usage("budgeted", "alpha", 0);
    m.record_with(&u, &u.node_id, Some(true)).await.unwrap();
    for r in 0..20 {
        record(&m, &format!("other-{r}"), 0).await;
    }
    m.flush().await.unwrap();
    assert!(m.run_rollup("tenant", "budgeted").await.unwrap().is_none());
    let ledger = m.ledger("tenant", "budgeted").await.unwrap().unwrap();
    assert_eq!(ledger.consumed.fuel, u.fuel_consumed);
    assert_eq!(ledger.invocations, 1);
}

/// The recency queue stays bounded however often one run is recorded.
#[test]
fn the_recency_queue_drops_stale_entries() {
    let mut runs = Runs::default();
    for i in 0..10_000 {
        runs.note(["x", "y"][i % 2], 1);
    }
    assert!(runs.queued <= 2 * 2 + 1025, "{}", runs.queued);
    let queued: usize = runs.tenants.values().map(|t| t.order.len()).sum();
    assert_eq!(runs.queued, queued);
    assert_eq!(runs.entries, 2 + 10_000);
    // y was recorded last: x goes first, and alone suffices.
    assert_eq!(runs.over(5_001, "y"), vec![Arc::<str>::from("x")]);
    assert_eq!(runs.entries, 5_001);
}

/// A store whose deletes lag (they succeed and take effect later) cannot
/// keep forgetting a run going: it pages past what it read once.
#[tokio::test]
async fn forgetting_a_run_ends_on_a_store_whose_deletes_lag() {
    use super::super::counting_store::Counting;
    use std::sync::atomic::Ordering;
    let kv = Arc::new(Counting::default());
    let options = MeterOptions {
        usage_records_per_run: 5,
        usage_entries: Some(6),
        ..Default::default()
    };
    let store: Arc<dyn KvStore> = kv.clone();
    let m = Meter::with_options(store, Prices::default(), options);
    for i in 0..3 {
        record(&m, "first", i).await;
    }
    kv.tap.ignore_removes.store(true, Ordering::Relaxed);
    // The second run's second invocation brings the store to 7 entries.
    let second = async {
        record(&m, "second", 0).await;
        record(&m, "second", 1).await;
    };
    tokio::time::timeout(std::time::Duration::from_secs(60), second)
        .await
        .expect("forgetting the first run ended");
    // Its 3 records and its roll-up, each deleted once.
    assert_eq!(kv.tap.removes.load(Ordering::Relaxed), 4);
}

/// A tenant flooding the store with new runs forgets its own runs, not a
/// quiet tenant's older ones (max-min fair shares, decision 0045). With
/// the least recently recorded run forgotten across tenants, the quiet
/// tenant's three runs went first.
#[tokio::test]
async fn a_flooding_tenant_forgets_its_own_runs_first() {
    for commit in [UsageCommit::Durable, UsageCommit::DEFERRED] {
        let kv = Arc::new(MemoryStore::new());
        let m = bounded(&kv, 40, commit);
        for r in 0..3 {
            record_as(&m, "quiet", &format!("q-{r}"), 0).await;
        }
        for r in 0..100 {
            for i in 0..2 {
                record_as(&m, "noisy", &format!("n-{r}"), i).await;
            }
        }
        m.flush().await.unwrap();
        let n = entries(&kv).await;
        assert!((34..=40).contains(&n), "{commit:?}: {n} entries");
        for r in 0..3 {
            assert_eq!(kept(&m, "quiet", &format!("q-{r}")).await, 1, "{commit:?}");
        }
        assert_eq!(kept(&m, "noisy", "n-99").await, 2, "{commit:?}");
        assert_eq!(kept(&m, "noisy", "n-0").await, 0, "{commit:?}");
    }
}

/// Tenants flooding alike share the bound about equally, and a third
/// that stops loses its runs to neither while it holds less than they do.
#[tokio::test]
async fn tenants_flooding_alike_share_the_bound() {
    let kv = Arc::new(MemoryStore::new());
    let m = bounded(&kv, 60, UsageCommit::Durable);
    for r in 0..4 {
        record_as(&m, "c", &format!("c-{r}"), 0).await;
    }
    for r in 0..200 {
        record_as(&m, "a", &format!("a-{r}"), 0).await;
        record_as(&m, "b", &format!("b-{r}"), 0).await;
    }
    let (a, b, c) = (
        tenant_entries(&kv, "a").await,
        tenant_entries(&kv, "b").await,
        tenant_entries(&kv, "c").await,
    );
    assert_eq!(c, 8, "c kept its four runs");
    assert!(a.abs_diff(b) <= 2 && a + b + c <= 60, "a {a}, b {b}, c {c}");
    assert!(a >= 24 && b >= 24, "a {a}, b {b}");
}

/// The run being recorded stays even when its tenant holds the most:
/// another tenant's run goes instead.
#[tokio::test]
async fn the_run_being_recorded_stays_when_its_tenant_is_largest() {
    let kv = Arc::new(MemoryStore::new());
    // The floor: one full run (5 records and its roll-up).
    let m = bounded(&kv, 1, UsageCommit::Durable);
    record_as(&m, "other", "old", 0).await;
    for i in 0..5 {
        record_as(&m, "big", "one", i).await;
    }
    assert_eq!(kept(&m, "big", "one").await, 5);
    assert_eq!(kept(&m, "other", "old").await, 0);
    assert_eq!(entries(&kv).await, 6);
}
