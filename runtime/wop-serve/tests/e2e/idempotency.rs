//! Idempotency that always answers (issue 19, item 4): a duplicate while
//! the first runs gets `409 idempotency_in_flight` with `Retry-After`
//! (never `500`), on sled and across four processes on PostgreSQL; an
//! invocation cut by a drain, or whose executor was killed, runs again on
//! retry with its write tool called once.

use super::*;
use serde_json::json;
use std::process::Command;
use std::time::{Duration, Instant};
use wop_effects::store::conformance::postgres_test_url;
use wop_testkit::{Mode, Server as Upstream};

fn tool(id: &str, url: &str, tier: &str) -> String {
    format!("[[tools]]\nid = \"{id}\"\nurl = \"{url}\"\nsafetyTier = \"{tier}\"\n")
}

fn policy(tools: &str, extra: &str) -> String {
    format!(
        "{tools}\n[packs.tool-call]\ncapabilities = [\"tools\"]\ntools = [\"crm:*\"]\n\n{extra}"
    )
}

/// `tool-call` writing through `crm:write`, with `key`.
async fn keyed(addr: SocketAddr, key: &str, body: &Value) -> Resp {
    keyed_as(addr, None, key, body).await
}

fn write_call() -> Value {
    json!({"typeId": "wop.samples.tool-call", "inputs": {"tool": "crm:write", "arguments": {"x": 1}}})
}

fn assert_in_flight(r: &Resp) {
    assert_eq!(r.status, 409, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.json()["error"], "idempotency_in_flight");
    let secs: u64 = r.header("retry-after").unwrap().parse().unwrap();
    assert!(secs >= 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_duplicate_while_the_first_runs_is_409_with_retry_after_on_sled() {
    // Longer than the default inFlightWaitMs (2 s), which used to outlast
    // the claim loop's 64 polls and answer 500.
    let slow = Upstream::start(Mode::Slow(3000)).await;
    let dir = tempfile::tempdir().unwrap();
    let store = wop_serve::StoreChoice::Spec(dir.path().join("fx").display().to_string());
    let p = policy(&tool("crm:write", &slow.url("/w"), "write"), "");
    let s = start_on(&p, "anonymousLoopback = true", &["tool-call"], store).await;
    let addr = s.addr;
    let first = tokio::spawn(async move { keyed(addr, "order-1", &write_call()).await });
    let started = Instant::now();
    while slow.count() == 0 {
        assert!(started.elapsed() < Duration::from_secs(30), "never sent");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // The tool takes longer than inFlightWaitMs: an answer, not a 500.
    assert_in_flight(&keyed(addr, "order-1", &write_call()).await);
    let first = first.await.unwrap();
    assert_eq!(first.status, 200);
    assert_eq!(first.json()["outcome"], "completed");
    let again = keyed(addr, "order-1", &write_call()).await;
    assert_eq!(again.header("idempotent-replayed"), Some("true"));
    assert_eq!(slow.count(), 1, "performed once");
    s.stop().await;
}

use super::spawn_process as spawn;

const SERVE: &str = env!("CARGO_BIN_EXE_wop-serve");

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_processes_on_postgres_answer_a_live_duplicate_with_409() {
    let Some(url) = postgres_test_url("serve_in_flight") else {
        return;
    };
    let slow = Upstream::start_detached(Mode::Slow(3000));
    let dir = tempfile::tempdir().unwrap();
    let packs = packs(&["tool-call"]);
    let p = policy(&tool("crm:write", &slow.url("/w"), "write"), "");
    let procs: Vec<_> = (0..4)
        .map(|_| spawn(SERVE, &p, "", packs.path(), &url, dir.path()))
        .collect();
    let answers = futures_like_join(
        procs
            .iter()
            .map(|(_, a)| {
                let a = *a;
                tokio::spawn(async move { keyed(a, "pay-7", &write_call()).await })
            })
            .collect(),
    )
    .await;
    let ran: Vec<&Resp> = answers.iter().filter(|r| r.status == 200).collect();
    assert_eq!(ran.len(), 1, "exactly one runs it");
    assert_eq!(ran[0].json()["outcome"], "completed");
    for r in answers.iter().filter(|r| r.status != 200) {
        assert_in_flight(r);
    }
    for (_, a) in &procs {
        let r = keyed(*a, "pay-7", &write_call()).await;
        assert_eq!(r.header("idempotent-replayed"), Some("true"));
    }
    assert_eq!(slow.count(), 1, "one request to the tool");
}

async fn futures_like_join(tasks: Vec<tokio::task::JoinHandle<Resp>>) -> Vec<Resp> {
    let mut out = Vec::new();
    for t in tasks {
        out.push(t.await.unwrap());
    }
    out
}

/// A keyed node that writes (fast) and then reads (slow): the write is
/// recorded, the node still runs when its process stops.
fn write_then_read() -> Value {
    json!({"typeId": "wop.samples.tool-call",
           "inputs": {"tool": "crm:write", "arguments": {"x": 1}, "then": {"tool": "crm:read"}}})
}

/// Starts a process, sends `write_then_read` with a key, waits until the
/// slow read is in progress, stops the process with `signal`, then retries
/// the key on a second process (same sled store, fast read) until it
/// completes. Returns the write tool's request count.
async fn cut_and_retry(signal: &str, extra_policy: &str) -> usize {
    let write = Upstream::start_detached(Mode::Ok);
    let hang = Upstream::start_detached(Mode::Hang);
    let fast = Upstream::start_detached(Mode::Ok);
    let dir = tempfile::tempdir().unwrap();
    let packs = packs(&["tool-call"]);
    let store = dir.path().join("fx").display().to_string();
    let tools = |read: &Upstream| {
        tool("crm:write", &write.url("/w"), "write") + &tool("crm:read", &read.url("/r"), "read")
    };
    let cfg = "drainTimeoutMs = 300\n";
    let (first, addr) = spawn(
        SERVE,
        &policy(&tools(&hang), extra_policy),
        cfg,
        packs.path(),
        &store,
        dir.path(),
    );
    let pending = tokio::spawn(async move { keyed(addr, "cut-1", &write_then_read()).await });
    let started = Instant::now();
    while hang.count() == 0 {
        assert!(started.elapsed() < Duration::from_secs(30), "never read");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(write.count(), 1);
    let pid = first.0.id().to_string();
    assert!(
        Command::new("kill")
            .args([signal, &pid])
            .status()
            .unwrap()
            .success()
    );
    let mut first = first;
    let end = Instant::now() + Duration::from_secs(30);
    while first.0.try_wait().unwrap().is_none() {
        assert!(Instant::now() < end, "did not exit");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    pending.abort();
    let (_second, addr) = spawn(
        SERVE,
        &policy(&tools(&fast), extra_policy),
        cfg,
        packs.path(),
        &store,
        dir.path(),
    );
    let end = Instant::now() + Duration::from_secs(60);
    loop {
        let r = keyed(addr, "cut-1", &write_then_read()).await;
        if r.status == 409 {
            // Only while a killed executor's lease runs; never a 500.
            assert_in_flight(&r);
            assert!(Instant::now() < end, "still in flight after 60 s");
            tokio::time::sleep(Duration::from_millis(200)).await;
            continue;
        }
        assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
        assert_eq!(r.json()["outcome"], "completed", "{}", r.json());
        break;
    }
    assert_eq!(fast.count(), 1, "the read ran again");
    write.count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invocation_a_drain_cut_runs_again_on_retry_with_its_write_once() {
    assert_eq!(cut_and_retry("-TERM", "").await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invocation_whose_executor_was_killed_runs_again_on_retry_with_its_write_once() {
    let short = "[limits]\nwallClockMs = 2000\n[effects]\nleaseMs = 3000\n";
    assert_eq!(cut_and_retry("-KILL", short).await, 1);
}
