//! Several `wop-serve` processes on one PostgreSQL database (issue 13):
//! each effect fires once however many processes are asked for it at the
//! same time, a budget is shared, and a process killed between claim and
//! completion leaves an orphaned claim that the others handle.
//!
//! Needs `WOP_TEST_POSTGRES_URL` (`export WOP_TEST_POSTGRES_URL="$(bash
//! .ci/postgres.sh start)"`); `WOP_POSTGRES_TESTS=skip` skips.

use super::*;
use serde_json::json;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::AsyncWriteExt;
use wop_effects::store::conformance::postgres_test_url;
use wop_testkit::{ChildGuard, Mode, Server as Counting, spawn_serve};

/// A `wop-serve` child process, SIGKILLed on drop.
struct Proc {
    _child: ChildGuard,
    addr: SocketAddr,
}

fn spawn(policy: &str, packs: &std::path::Path, store: &str, dir: &std::path::Path) -> Proc {
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let path = dir.join(format!("policy-{n}.toml"));
    std::fs::write(&path, policy).unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_wop-serve"));
    cmd.arg("--policy")
        .arg(&path)
        .arg("--packs")
        .arg(packs)
        .args([
            "--listen",
            "127.0.0.1:0",
            "--store",
            store,
            "--anonymous-loopback",
        ])
        .stderr(Stdio::null());
    let (child, addr, _) = spawn_serve(&mut cmd).expect("wop-serve did not start");
    Proc {
        _child: child,
        addr,
    }
}

fn policy(tools: &str) -> String {
    format!(
        "{tools}\n[packs.tool-call]\ncapabilities = [\"log\", \"tools\"]\ntools = [\"crm:*\"]\n\n[limits]\nwallClockMs = 3000\n[effects]\nleaseMs = 4000\n"
    )
}

fn tool(id: &str, url: &str, extra: &str) -> String {
    format!(
        "[[tools]]\nid = \"{id}\"\nurl = \"{url}\"\nsafetyTier = \"write\"\ntimeoutMs = 60000\n{extra}\n"
    )
}

fn call(run: &str, node: &str, tool: &str) -> Value {
    json!({
        "typeId": "wop.samples.tool-call",
        "inputs": {"tool": tool, "arguments": {"run": run}},
        "nodeContext": {"runId": run, "nodeId": node, "attempt": 1}
    })
}

const JSON: [(&str, &str); 1] = [("Content-Type", "application/json")];

/// Invokes until the answer is final: a 503 (saturated) or an
/// `idempotency_in_flight` (another process holds the claim) is retried.
async fn invoke_final(addr: SocketAddr, body: &Value) -> Value {
    let bytes = body.to_string();
    let mut conn = Conn::open(addr).await;
    for _ in 0..2_000 {
        let r = conn
            .send("POST", "/host/wop/invocations", &JSON, bytes.as_bytes())
            .await;
        if r.status == 503 {
            tokio::time::sleep(Duration::from_millis(20)).await;
            conn = Conn::open(addr).await;
            continue;
        }
        assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
        let v = r.json();
        if v["error"]["code"] == "idempotency_in_flight" {
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        }
        return v;
    }
    panic!("no final answer for {body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_processes_on_one_database_fire_each_effect_once() {
    let Some(url) = postgres_test_url("serve_cluster") else {
        return;
    };
    const EFFECTS: usize = 1_000;
    const PROCS: usize = 4;
    let server = Counting::start_detached(Mode::Ok);
    let tmp = tempfile::tempdir().unwrap();
    let packs = packs(&["tool-call"]);
    let p = policy(&tool("crm:create", &server.url("/create"), ""));
    let procs: Vec<Proc> = (0..PROCS)
        .map(|_| spawn(&p, packs.path(), &url, tmp.path()))
        .collect();
    let addrs: Arc<Vec<SocketAddr>> = Arc::new(procs.iter().map(|p| p.addr).collect());

    // Every effect is requested from all four processes at once; 8
    // effects (32 requests) in flight at a time.
    let gate = Arc::new(tokio::sync::Semaphore::new(8));
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..EFFECTS {
        let (gate, addrs) = (gate.clone(), addrs.clone());
        tasks.spawn(async move {
            let _permit = gate.acquire_owned().await.unwrap();
            let body = call(&format!("c-{i}"), "n1", "crm:create");
            let mut each = tokio::task::JoinSet::new();
            for &a in addrs.iter() {
                let body = body.clone();
                each.spawn(async move { invoke_final(a, &body).await });
            }
            let outs: Vec<Value> = each.join_all().await;
            for o in &outs {
                assert_eq!(o["outcome"], "completed", "c-{i}: {o}");
                // The same recorded result everywhere (one request's `n`).
                assert_eq!(o["output"], outs[0]["output"], "c-{i}");
            }
        });
    }
    while let Some(r) = tasks.join_next().await {
        r.unwrap();
    }
    assert_eq!(server.count(), EFFECTS, "one request per effect");
    assert_eq!(server.distinct_keys().len(), EFFECTS);

    // Every effect's record is complete, seen from any process.
    for i in 0..EFFECTS {
        let a = addrs[i % PROCS];
        let r = req(a, "GET", &format!("/runs/c-{i}/effects"), &[], b"").await;
        assert_eq!(r.status, 200);
        let v = r.json();
        let list = v["effects"].as_array().unwrap();
        assert_eq!(list.len(), 1, "c-{i}: {v}");
        assert_eq!(list[0]["state"], "completed", "c-{i}: {v}");
    }

    // A budget of N tool calls across the four processes lets exactly N
    // through (40 distinct calls, each to one process).
    const N: u64 = 10;
    let before = server.count();
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..40 {
        let a = addrs[i % PROCS];
        let mut body = call("budget-run", &format!("n{i}"), "crm:create");
        body["budget"] = json!({"maxToolCalls": N});
        tasks.spawn(async move { invoke_final(a, &body).await });
    }
    let outs = tasks.join_all().await;
    let done = outs.iter().filter(|o| o["outcome"] == "completed").count();
    assert_eq!(done as u64, N, "{outs:?}");
    assert_eq!((server.count() - before) as u64, N);
    for o in outs.iter().filter(|o| o["outcome"] != "completed") {
        assert_eq!(o["error"]["code"], "budget_exhausted", "{o}");
    }
    drop(procs);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_process_killed_between_claim_and_completion() {
    let Some(url) = postgres_test_url("serve_kill9") else {
        return;
    };
    // Process A's tools hang (the call is sent, never answered); process
    // B's point at a server that answers. Same tool ids, so the same
    // effect ids.
    let hang = Counting::start_detached(Mode::Hang);
    let ok = Counting::start_detached(Mode::Ok);
    let idem = "replayPolicy = \"idempotent\"";
    let tools = |base: &Counting| {
        tool("crm:charge", &base.url("/charge"), "") + &tool("crm:sync", &base.url("/sync"), idem)
    };
    let tmp = tempfile::tempdir().unwrap();
    let packs = packs(&["tool-call"]);
    let a = spawn(&policy(&tools(&hang)), packs.path(), &url, tmp.path());
    let b = spawn(&policy(&tools(&ok)), packs.path(), &url, tmp.path());

    let charge = call("k-charge", "n1", "crm:charge");
    let sync = call("k-sync", "n1", "crm:sync");
    // Sent to A; the connections are held open and never read (A dies).
    let mut held = Vec::new();
    for body in [&charge, &sync] {
        let b = body.to_string();
        let mut s = TcpStream::connect(a.addr).await.unwrap();
        let head = format!(
            "POST /host/wop/invocations HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{b}",
            b.len()
        );
        s.write_all(head.as_bytes()).await.unwrap();
        held.push(s);
    }
    // Both claims are durable before their requests are sent.
    let started = Instant::now();
    while hang.count() < 2 {
        assert!(started.elapsed() < Duration::from_secs(60), "A never sent");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    drop(a); // SIGKILL between claim and completion
    tokio::time::sleep(Duration::from_millis(4100)).await; // past the lease

    // The non-idempotent charge is not re-fired: its outcome is unknown.
    let v = invoke_final(b.addr, &charge).await;
    assert_eq!(v["error"]["code"], "effect_outcome_unknown", "{v}");
    assert!(ok.requests().iter().all(|s| !s.line.contains("/charge")));
    let r = req(b.addr, "GET", "/runs/k-charge/effects", &[], b"").await;
    assert_eq!(r.json()["effects"][0]["state"], "escaped");

    // The idempotent sync is re-sent, with the same key, and completes.
    let v = invoke_final(b.addr, &sync).await;
    assert_eq!(v["outcome"], "completed", "{v}");
    let key = |s: &Counting, path: &str| {
        s.requests()
            .iter()
            .find(|r| r.line.contains(path))
            .map(|r| r.headers["idempotency-key"].clone())
            .unwrap()
    };
    assert_eq!(
        key(&ok, "/sync"),
        key(&hang, "/sync"),
        "re-sent with the same key"
    );
    let r = req(b.addr, "GET", "/runs/k-sync/effects", &[], b"").await;
    assert_eq!(r.json()["effects"][0]["state"], "completed");
}
