//! Two tenants using identical run ids, node ids, attempts and
//! idempotency keys at the same moment share nothing (issue 19, item 1):
//! no event, budget, run clock, usage record, effect or replay crosses.

use super::*;
use serde_json::json;
use wop_testkit::{Mode, Server as Upstream};

fn policy(upstream: &Upstream) -> String {
    // Fuel for longer than the run clock below: the spinning pack burns
    // the default 10^10 units in about 200 ms when nothing slows it.
    format!(
        r#"[limits]
fuel = 1000000000000000

[packs.tool-call]
capabilities = ["tools"]
tools = ["crm:*"]

[[tools]]
id = "crm:read"
url = "{}"
safetyTier = "read"

[[tools]]
id = "crm:write"
url = "{}"
safetyTier = "write"
"#,
        upstream.url("/read"),
        upstream.url("/write")
    )
}

/// The same place in "the same" run, as both tenants name it.
fn ctx(run: &str) -> Value {
    json!({"runId": run, "nodeId": "n", "attempt": 1})
}

async fn invoke(addr: SocketAddr, token: &str, body: Value, extra: &[(&str, &str)]) -> Resp {
    let auth = bearer(token);
    let mut headers = vec![
        ("Content-Type", "application/json"),
        ("Authorization", auth.as_str()),
    ];
    headers.extend_from_slice(extra);
    req(
        addr,
        "POST",
        "/host/wop/invocations",
        &headers,
        body.to_string().as_bytes(),
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_tenants_with_identical_ids_share_nothing() {
    let upstream = Upstream::start(Mode::Ok).await;
    let dir = tempfile::tempdir().unwrap();
    let store = wop_serve::StoreChoice::Spec(dir.path().join("effects").display().to_string());
    let s = start_on(
        &policy(&upstream),
        &serve_toml(""),
        &["tool-call", "kernels", "spin", "hello"],
        store,
    )
    .await;
    let tenants = [(TOKEN, "acme", 30u64), (OTHER_TOKEN, "globex", 70u64)];

    // Live streams, both tenants at once, five rounds: each stream carries
    // exactly its own invocation's events (30 vs 70 log lines).
    for _ in 0..5 {
        let streams = tenants.map(|(token, tenant, n)| {
            let addr = s.addr;
            tokio::spawn(async move {
                let body = json!({"typeId": "wop.testing.kernels",
                                  "inputs": {"kernel": "noop-log", "n": n},
                                  "nodeContext": ctx("shared")});
                let r = invoke(addr, token, body, &[("Accept", "text/event-stream")]).await;
                assert_eq!(r.status, 200);
                let frames = sse_frames(&r.body);
                let logs = frames.iter().filter(|(e, _)| e == "log.appended").count();
                let (last, outcome) = frames.last().unwrap();
                assert_eq!(last, "outcome");
                assert_eq!(outcome["usage"]["tenantId"], tenant);
                assert_eq!(
                    logs as u64, n,
                    "{tenant}'s stream holds its own events only"
                );
                assert_eq!(
                    frames.len() - 1,
                    outcome["events"].as_array().unwrap().len(),
                    "each of its events once"
                );
            })
        });
        for t in streams {
            t.await.unwrap();
        }
    }

    // Budgets: acme opens run `budget` with one tool call; globex's run of
    // the same id is its own and has five.
    let call = |budget: u64| {
        json!({"typeId": "wop.samples.tool-call",
               "inputs": {"tool": "crm:read", "repeat": 3},
               "nodeContext": ctx("budget"), "budget": {"maxToolCalls": budget}})
    };
    let a = invoke(s.addr, TOKEN, call(1), &[]).await.json();
    assert_eq!(a["error"]["code"], "budget_exhausted", "{a}");
    let g = invoke(s.addr, OTHER_TOKEN, call(5), &[]).await.json();
    assert_eq!(g["outcome"], "completed", "globex's budget is its own: {g}");

    // Run clocks: acme's run `clock` times out; globex's run of the same id
    // started when globex first used it.
    let spin = json!({"typeId": "wop.testing.spin", "inputs": {},
                      "nodeContext": ctx("clock"), "bounds": {"runTimeoutMs": 300}});
    let a = invoke(s.addr, TOKEN, spin, &[]).await.json();
    assert_eq!(a["error"]["code"], "run_timeout", "{a}");
    let hello = json!({"typeId": "wop.samples.hello", "inputs": {"name": "G"},
                       "nodeContext": ctx("clock"), "bounds": {"runTimeoutMs": 60000}});
    let g = invoke(s.addr, OTHER_TOKEN, hello, &[]).await.json();
    assert_eq!(g["outcome"], "completed", "{g}");

    // Usage: each reads its own run `shared` (5 invocations each).
    for (token, tenant, _) in tenants {
        let u = get(s.addr, token, "/host/wop/usage?run=shared").await;
        assert_eq!(
            u.status,
            200,
            "{tenant}: {}",
            String::from_utf8_lossy(&u.body)
        );
        assert_eq!(u.json()["runs"]["shared"]["invocations"], 5, "{tenant}");
    }

    // Effects: acme writes once, globex twice, in run `fx`.
    for (token, n) in [(TOKEN, 1), (OTHER_TOKEN, 2)] {
        let body = json!({"typeId": "wop.samples.tool-call",
                          "inputs": {"tool": "crm:write", "repeat": n},
                          "nodeContext": ctx("fx")});
        assert_eq!(
            invoke(s.addr, token, body, &[]).await.json()["outcome"],
            "completed"
        );
    }
    for (token, tenant, n) in [(TOKEN, "acme", 1), (OTHER_TOKEN, "globex", 2)] {
        let l = get(s.addr, token, "/runs/fx/effects").await.json();
        let list = l["effects"].as_array().unwrap();
        assert_eq!(list.len(), n, "{tenant}: {l}");
        assert!(list.iter().all(|e| {
            e["effectId"]
                .as_str()
                .unwrap()
                .starts_with(&format!("{tenant}/"))
        }));
    }

    // Idempotency: one key, both tenants at once, different requests:
    // neither replays nor refuses the other's.
    let named = |name: &str| {
        json!({"typeId": "wop.samples.hello", "inputs": {"name": name},
               "nodeContext": ctx("idem")})
    };
    let key = [("Idempotency-Key", "same-key")];
    let (a, g) = tokio::join!(
        invoke(s.addr, TOKEN, named("Acme"), &key),
        invoke(s.addr, OTHER_TOKEN, named("Globex"), &key),
    );
    for (r, name) in [(&a, "Acme"), (&g, "Globex")] {
        assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
        assert!(r.json()["output"].to_string().contains(name));
        assert!(r.header("idempotent-replayed").is_none());
    }
    let again = invoke(s.addr, TOKEN, named("Acme"), &key).await;
    assert_eq!(again.header("idempotent-replayed"), Some("true"));
    assert!(again.json()["output"].to_string().contains("Acme"));
    s.stop().await;
}

/// The same across processes on one PostgreSQL: acme calls one process,
/// globex another, both under run `shared` at once. Each tenant's budget
/// holds on its own across processes, each reads its own usage and
/// effects, and neither replays the other's answer for the same key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_tenants_on_a_postgres_cluster_share_nothing() {
    let Some(url) = wop_effects::store::conformance::postgres_test_url("serve_tenants_cluster")
    else {
        return;
    };
    let upstream = Upstream::start_detached(Mode::Ok);
    let dir = tempfile::tempdir().unwrap();
    let packs = packs(&["tool-call", "hello"]);
    let (p, cfg) = (policy(&upstream), serve_toml(""));
    let bin = env!("CARGO_BIN_EXE_wop-serve");
    let procs: Vec<_> = (0..2)
        .map(|_| spawn_process(bin, &p, &cfg, packs.path(), &url, dir.path()))
        .collect();
    // acme: budget 2 tool calls; globex: 6. Eight writes each, on both
    // processes, all at once, in each tenant's run `shared`.
    let mut tasks = tokio::task::JoinSet::new();
    for (token, budget) in [(TOKEN, 2), (OTHER_TOKEN, 6)] {
        for i in 0..8 {
            let addr = procs[i % 2].1;
            tasks.spawn(async move {
                let body = json!({"typeId": "wop.samples.tool-call",
                                  "inputs": {"tool": "crm:write", "arguments": {"i": i}},
                                  "nodeContext": {"runId": "shared", "nodeId": format!("n{i}"), "attempt": 1},
                                  "budget": {"maxToolCalls": budget}});
                let v = invoke(addr, token, body, &[]).await.json();
                (token, v["outcome"] == "completed")
            });
        }
    }
    let mut done = std::collections::BTreeMap::new();
    for (token, ok) in tasks.join_all().await {
        *done.entry(token).or_insert(0) += u64::from(ok);
    }
    assert_eq!(done[TOKEN], 2, "acme's budget");
    assert_eq!(done[OTHER_TOKEN], 6, "globex's budget");
    assert_eq!(upstream.count(), 8);
    for (token, tenant, n) in [(TOKEN, "acme", 2u64), (OTHER_TOKEN, "globex", 6)] {
        for (_, addr) in &procs {
            // Its own performed calls only, seen from either process. (How
            // many of its invocations ran before its budget was spent, and
            // so were recorded, depends on timing: those after are refused
            // at admission.)
            let u = get(*addr, token, "/host/wop/usage?run=shared").await.json();
            assert_eq!(u["runs"]["shared"]["toolCalls"], n, "{tenant}: {u}");
            let l = get(*addr, token, "/runs/shared/effects").await.json();
            let list = l["effects"].as_array().unwrap();
            let completed = list.iter().filter(|e| e["state"] == "completed").count();
            assert_eq!(completed, n as usize, "{tenant}: {l}");
            assert!(list.iter().all(|e| {
                e["effectId"]
                    .as_str()
                    .unwrap()
                    .starts_with(&format!("{tenant}/"))
            }));
        }
    }
    // One key, one run id, both tenants, two processes (a fresh run:
    // acme's `shared` has spent its budget).
    let hello = |name: &str| {
        json!({"typeId": "wop.samples.hello", "inputs": {"name": name},
               "nodeContext": {"runId": "idem", "nodeId": "greet", "attempt": 1}})
    };
    let key = [("Idempotency-Key", "k")];
    let (a, g) = tokio::join!(
        invoke(procs[0].1, TOKEN, hello("Acme"), &key),
        invoke(procs[1].1, OTHER_TOKEN, hello("Globex"), &key),
    );
    assert!(a.json()["output"].to_string().contains("Acme"));
    assert!(g.json()["output"].to_string().contains("Globex"));
    let a2 = invoke(procs[1].1, TOKEN, hello("Acme"), &key).await;
    assert_eq!(a2.header("idempotent-replayed"), Some("true"));
    assert!(a2.json()["output"].to_string().contains("Acme"));
}
