//! Clock and random are replayable per (run, node, attempt).

use super::*;
use serde_json::json;
use wop_runtime::{Outcome, RunContext};

async fn observe(rt: &Runtime, run: &str, node: &str, attempt: u32) -> Value {
    let mut req = InvokeRequest::new("wop.testing.replay", json!({}));
    req.context = RunContext {
        run_id: run.to_owned(),
        node_id: node.to_owned(),
        tenant_id: "t".to_owned(),
        attempt,
    };
    match rt.invoke(req).await.outcome {
        Ok(Outcome::Completed { output }) => output,
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn same_attempt_sees_the_same_values_another_attempt_does_not() {
    let rt = runtime("");
    load(&rt, "replay").await;
    let a = observe(&rt, "run-1", "n1", 1).await;
    let b = observe(&rt, "run-1", "n1", 1).await;
    let c = observe(&rt, "run-1", "n1", 2).await;
    let d = observe(&rt, "run-2", "n1", 1).await;
    assert_eq!(a, b, "a re-execution sees identical clock and random");
    for key in ["nowMs", "random", "wasiRandom", "systemTimeMs"] {
        assert!(!a[key].is_null(), "{key} missing in {a}");
        assert_ne!(a[key], c[key], "{key}: another attempt differs");
        assert_ne!(a[key], d[key], "{key}: another run differs");
    }
    assert!(
        a["nowMs2"].as_u64() > a["nowMs"].as_u64(),
        "time moves forward"
    );
    assert_ne!(a["random"], a["wasiRandom"], "independent streams");
}

/// WASI is built at once when a directory is granted and on the pack's
/// first WASI call otherwise: both give the same clock and randomness.
#[tokio::test]
async fn wasi_built_at_first_use_is_the_wasi_built_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let granted = runtime(&format!(
        "[packs.replay.filesystem]\npath = {:?}\nreadOnly = true\n",
        dir.path()
    ));
    let lazy = runtime("");
    load(&granted, "replay").await;
    load(&lazy, "replay").await;
    let a = observe(&granted, "run-1", "n1", 1).await;
    let b = observe(&lazy, "run-1", "n1", 1).await;
    assert_eq!(a, b, "the same (run, node, attempt) sees the same WASI");
}
