#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::*;
use crate::{Effects, MemoryStore, Meter, SledStore, UsageScope};
use serde_json::json;
use std::sync::Arc;
use wop_core::budget::{Ledger, Prices, RunBudget};

fn effect(id: &str, tenant: &str, run: &str) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "effectId": id, "tenantId": tenant, "runId": run, "nodeId": "n", "attempt": 1,
        "toolId": "crm:update", "keying": "activity-recipe", "state": "completed",
        "requestDigest": "d", "sends": 1, "createdAtMs": 1, "updatedAtMs": 1
    }))
    .unwrap()
}

fn ledger(run: &str) -> Vec<u8> {
    serde_json::to_vec(&Ledger::new(run, RunBudget::default())).unwrap()
}

/// A store as version 1 wrote it, upgraded; then upgraded again.
pub(crate) async fn upgrade_case(kv: Arc<dyn KvStore>) {
    let put = |k: &'static str, v: Vec<u8>| {
        let kv = kv.clone();
        async move { kv.put(k, v).await.unwrap() }
    };
    // wf/r1: acme's alone. shared: acme and globex both used it. ghost:
    // no trace of its tenant.
    put("effect/E1", effect("E1", "acme", "wf/r1")).await;
    put("run/wf/r1/E1", Vec::new()).await;
    put("effect/E2", effect("E2", "globex", "shared")).await;
    put("run/shared/E2", Vec::new()).await;
    put("effect/E3", effect("E3", "acme", "shared")).await;
    put("run/shared/E3", Vec::new()).await;
    put(
        "usage/wf%2Fr1/0000000000001-1-1",
        serde_json::to_vec(&json!({"tenantId": "acme", "runId": "wf/r1", "pack": "p"})).unwrap(),
    )
    .await;
    put("ledger/wf/r1", ledger("wf/r1")).await;
    put("ledger/shared", ledger("shared")).await;
    put("ledger/ghost", ledger("ghost")).await;
    put(
        "rollup/run/wf%2Fr1",
        serde_json::to_vec(&json!({"runId": "wf/r1", "recordsKept": 1})).unwrap(),
    )
    .await;
    // Already in the new layout (written before the marker existed).
    put("ledger/acme/r2", ledger("r2")).await;

    let up = upgrade(&*kv).await.unwrap().expect("an upgrade ran");
    assert_eq!(
        up,
        Upgrade {
            effect_index: 3,
            usage_records: 1,
            ledgers: 1,
            run_rollups: 1,
            dropped: 2,
        }
    );
    assert_eq!(version(&*kv).await.unwrap(), Some(VERSION));
    assert_eq!(upgrade(&*kv).await.unwrap(), None, "idempotent");

    let meter = Meter::new(kv.clone(), Prices::default());
    assert!(meter.ledger("acme", "wf/r1").await.unwrap().is_some());
    assert!(
        meter.ledger("acme", "r2").await.unwrap().is_some(),
        "new key kept"
    );
    for run in ["shared", "ghost"] {
        for t in ["acme", "globex", ""] {
            assert!(meter.ledger(t, run).await.unwrap().is_none(), "{t}/{run}");
        }
    }
    let usage = meter
        .usage(
            UsageScope::Run {
                tenant: "acme",
                run: "wf/r1",
            },
            None,
        )
        .await
        .unwrap();
    assert_eq!(usage.len(), 1);
    let r = meter.run_rollup("acme", "wf/r1").await.unwrap().unwrap();
    assert_eq!((r.tenant_id.as_str(), r.records_kept), ("acme", 1));
    let fx = Effects::new(kv.clone(), "x");
    let ids = |l: Vec<crate::EffectSummary>| l.into_iter().map(|e| e.effect_id).collect::<Vec<_>>();
    assert_eq!(ids(fx.list_run("acme", "wf/r1").await.unwrap()), ["E1"]);
    assert_eq!(ids(fx.list_run("acme", "shared").await.unwrap()), ["E3"]);
    assert_eq!(ids(fx.list_run("globex", "shared").await.unwrap()), ["E2"]);
    // Nothing of the old layout is left.
    for old in [
        "ledger/wf/r1",
        "ledger/shared",
        "run/shared/E2",
        "rollup/run/wf%2Fr1",
    ] {
        assert!(kv.get(old).await.unwrap().is_none(), "{old}");
    }
}

#[tokio::test]
async fn upgrade_memory() {
    upgrade_case(Arc::new(MemoryStore::new())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upgrade_sled() {
    let d = tempfile::tempdir().unwrap();
    upgrade_case(Arc::new(SledStore::open(&d.path().join("db")).unwrap())).await;
}

#[tokio::test]
async fn a_newer_layout_is_refused() {
    let kv = MemoryStore::new();
    kv.put(MARKER, br#"{"version": 3}"#.to_vec()).await.unwrap();
    let e = upgrade(&kv).await.unwrap_err();
    assert!(e.to_string().contains("newer"), "{e}");
}

#[tokio::test]
async fn an_empty_store_is_marked_at_once() {
    let kv = MemoryStore::new();
    assert_eq!(upgrade(&kv).await.unwrap(), Some(Upgrade::default()));
    assert_eq!(version(&kv).await.unwrap(), Some(VERSION));
}

#[cfg(feature = "postgres")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upgrade_postgres() {
    let Some(url) = crate::store::conformance::postgres_test_url("keyspace_upgrade") else {
        return;
    };
    // `connect` upgrades an empty store at once; the old layout is written
    // after, as a version 1 executor would have, and the marker removed.
    let store: Arc<dyn KvStore> = Arc::new(crate::PostgresStore::connect(&url).await.unwrap());
    assert_eq!(version(&*store).await.unwrap(), Some(VERSION));
    store.remove(MARKER).await.unwrap();
    upgrade_case(store).await;
}
