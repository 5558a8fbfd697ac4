//! The gate through the real path: tool-call pack → runtime → gate →
//! operator HTTP tool (a real loopback server) or host-extension tool.

use super::*;
use serde_json::json;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use wop_runtime::effects::EffectState;
use wop_runtime::events::ToolStatus;
use wop_runtime::store::{KvStore, SledStore};
use wop_runtime::tools::{
    RegisteredTool, SafetyTier, ToolAuth, ToolCall, ToolDescriptor, ToolFailure, ToolProvider,
    ToolSource,
};
use wop_runtime::{Outcome, Principal, RunContext};
use wop_testkit::{Mode, Server};

fn http_policy(url: &str, extra_tool: &str, extra: &str) -> String {
    format!(
        r#"
[[tools]]
id = "payments:charge"
url = "{url}"
safetyTier = "write"
scopes = ["payments.write"]
timeoutMs = 3000
{extra_tool}

[packs.tool-call]
capabilities = ["tools"]
tools = ["payments:*", "crm:*", "packs:*"]
{extra}
"#
    )
}

fn req(
    tool: &str,
    args: Value,
    key: Option<&str>,
    run: &str,
    node: &str,
    attempt: u32,
) -> InvokeRequest {
    let mut inputs = json!({"tool": tool, "arguments": args});
    if let Some(k) = key {
        inputs["idempotencyKey"] = json!(k);
    }
    let mut r = InvokeRequest::new("wop.samples.tool-call", inputs);
    r.context = RunContext {
        run_id: run.into(),
        node_id: node.into(),
        tenant_id: "acme".into(),
        attempt,
    };
    r.principal = Principal {
        id: "agent-7".into(),
        tenant: "acme".into(),
        scopes: vec!["payments.write".into(), "crm.read".into()],
    };
    r
}

fn runtime_with(
    policy: &str,
    store: Option<Arc<dyn KvStore>>,
    executor: &str,
    tools: Vec<RegisteredTool>,
) -> Runtime {
    let mut cfg = RuntimeConfig::new();
    cfg.policy(Policy::from_toml(policy).unwrap())
        .executor_id(executor);
    if let Some(s) = store {
        cfg.effect_store(s);
    }
    for t in tools {
        cfg.tool(t);
    }
    Runtime::new(&cfg).unwrap()
}

fn returned(
    r: &wop_runtime::InvocationReport,
) -> Vec<(ToolStatus, Option<u64>, bool, Option<String>)> {
    r.events
        .iter()
        .filter_map(|e| match e {
            Event::ToolReturned {
                status,
                duration_ms,
                replayed,
                effect_id,
                ..
            } => Some((*status, *duration_ms, *replayed, effect_id.clone())),
            _ => None,
        })
        .collect()
}

fn output(r: &wop_runtime::InvocationReport) -> Value {
    match &r.outcome {
        Ok(Outcome::Completed { output }) => output.clone(),
        other => panic!("{other:?}"),
    }
}

#[test]
fn two_executors_sharing_a_store_charge_once() {
    let server = Server::start_detached(Mode::Ok);
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn KvStore> = Arc::new(SledStore::open(&dir.path().join("effects")).unwrap());
    let policy = http_policy(&server.url("/charge"), "", "");
    let handles: Vec<_> = (0..2u32)
        .map(|i| {
            let (store, policy) = (store.clone(), policy.clone());
            std::thread::spawn(move || {
                let rt = tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(1)
                    .enable_all()
                    .build()
                    .unwrap();
                rt.block_on(async move {
                    let wop = runtime_with(&policy, Some(store), &format!("executor-{i}"), vec![]);
                    load(&wop, "tool-call").await;
                    // Both re-execute the same node (attempts 1 and 2).
                    wop.invoke(req(
                        "payments:charge",
                        json!({"amount": 100}),
                        None,
                        "run-1",
                        "charge",
                        i + 1,
                    ))
                    .await
                })
            })
        })
        .collect();
    let reports: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    assert_eq!(
        server.count(),
        1,
        "exactly one request reached the provider"
    );
    let key = server.requests()[0].headers["idempotency-key"].clone();
    let mut replays = 0;
    for r in &reports {
        let out = output(r);
        assert_eq!(out["result"]["n"], 1, "both see the one charge");
        let ret = returned(r);
        assert_eq!(ret.len(), 1);
        assert_eq!(ret[0].0, ToolStatus::Ok);
        assert_eq!(
            ret[0].3.as_deref(),
            Some(key.as_str()),
            "Idempotency-Key is the effect id"
        );
        replays += usize::from(ret[0].2);
    }
    assert_eq!(replays, 1, "one performed, one replayed");
    let expected =
        wop_runtime::effects::activity_id("acme", "run-1", "charge", 1, "payments:charge");
    assert_eq!(key, expected, "activity recipe, attempt not included");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixteen_concurrent_duplicates_perform_once() {
    let server = Server::start(Mode::Ok).await;
    let wop = runtime_with(
        &http_policy(&server.url("/charge"), "", ""),
        None,
        "e1",
        vec![],
    );
    load(&wop, "tool-call").await;
    let tasks: Vec<_> = (0..16)
        .map(|_| {
            let wop = wop.clone();
            tokio::spawn(async move {
                wop.invoke(req(
                    "payments:charge",
                    json!({"amount": 5}),
                    Some("order-42"),
                    "run-2",
                    "n",
                    1,
                ))
                .await
            })
        })
        .collect();
    let mut ok = 0;
    for t in tasks {
        let r = t.await.unwrap();
        match &r.outcome {
            Ok(_) => ok += 1,
            Err(e) => assert_eq!(e.code, "idempotency_in_flight", "{e}"),
        }
    }
    assert!(ok >= 1);
    assert_eq!(server.count(), 1);
    let effects = wop.effects("acme", "run-2").await.unwrap();
    assert_eq!(effects.len(), 1, "none lost, none duplicated");
    assert_eq!(effects[0].state, EffectState::Completed);
    assert_eq!(
        serde_json::to_value(effects[0].keying).unwrap(),
        "business-identity"
    );
}

/// A host-extension tool that counts its calls.
struct Counting(Arc<AtomicU32>);

#[async_trait::async_trait]
impl ToolProvider for Counting {
    async fn call(&self, c: ToolCall) -> Result<Value, ToolFailure> {
        let n = self.0.fetch_add(1, Ordering::SeqCst) + 1;
        Ok(json!({"n": n, "key": c.idempotency_key}))
    }
}

fn counting_tool(
    id: &str,
    tier: SafetyTier,
    scopes: &[&str],
    rate: Option<(u32, f64)>,
) -> (RegisteredTool, Arc<AtomicU32>) {
    let n = Arc::new(AtomicU32::new(0));
    let mut d = ToolDescriptor::new(id, ToolSource::HostExtension, tier);
    d.auth = Some(ToolAuth {
        scopes: scopes.iter().map(|s| s.to_string()).collect(),
        credential_ref: false,
    });
    (
        RegisteredTool {
            descriptor: d,
            tenants: None,
            rate: rate.map(
                |(capacity, refill_per_sec)| wop_runtime::ratelimit::RateSpec {
                    capacity,
                    refill_per_sec,
                },
            ),
            timeout: std::time::Duration::from_secs(2),
            provider: Arc::new(Counting(n.clone())),
        },
        n,
    )
}

/// A copy of tool-call whose manifest declares `tools`.
fn tool_call_declaring(tmp: &Path, tools: Value) -> PathBuf {
    let dir = copy_pack("tool-call", tmp);
    let p = dir.join("pack.json");
    let mut m: Value = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
    m["x-wop"]["tools"] = tools;
    std::fs::write(&p, m.to_string()).unwrap();
    dir
}

#[tokio::test]
async fn every_denial_is_never_performed_and_says_why() {
    let (crm, crm_n) = counting_tool("crm:update", SafetyTier::Write, &["crm.write"], None);
    let (read, read_n) = counting_tool(
        "crm:read",
        SafetyTier::Read,
        &["crm.read"],
        Some((1, 0.001)),
    );
    let (other, other_n) = counting_tool("other:thing", SafetyTier::Read, &[], None);
    let policy =
        "[packs.tool-call]\ncapabilities = [\"tools\"]\ntools = [\"crm:*\", \"ghost:*\"]\n";
    let wop = runtime_with(policy, None, "e", vec![crm, read, other]);
    load(&wop, "tool-call").await;

    // (tool, expected code, expected status, reason)
    let cases = [
        (
            "other:thing",
            "forbidden",
            ToolStatus::Forbidden,
            Some("not-granted"),
        ),
        (
            "crm:update",
            "forbidden",
            ToolStatus::Forbidden,
            Some("missing-scopes"),
        ),
        ("ghost:tool", "not_found", ToolStatus::Error, None),
        ("crm:read", "ok", ToolStatus::Ok, None),
        ("crm:read", "rate_limited", ToolStatus::RateLimited, None),
    ];
    for (tool, code, status, reason) in cases {
        let r = wop
            .invoke(req(tool, json!({}), None, "run-d", "n", 1))
            .await;
        let got = match &r.outcome {
            Ok(_) => "ok".to_owned(),
            Err(e) => e.code.clone(),
        };
        assert_eq!(got, code, "{tool}: {:?}", r.outcome);
        let ret = returned(&r);
        assert_eq!(ret.len(), 1, "{tool}");
        assert_eq!(ret[0].0, status, "{tool}");
        if status != ToolStatus::Ok {
            assert_eq!(ret[0].1, None, "{tool}: never invoked, so no durationMs");
        }
        if let (Some(reason), Err(e)) = (reason, &r.outcome) {
            assert_eq!(e.detail("reason"), Some(&json!(reason)), "{tool}");
            assert_eq!(e.detail("scope"), Some(&json!("tool")));
            assert_eq!(e.detail("toolName"), Some(&json!(tool)));
        }
        if tool == "crm:update" {
            let e = r.outcome.as_ref().unwrap_err();
            assert_eq!(e.detail("requiredScopes"), Some(&json!(["crm.write"])));
        }
        if code == "rate_limited" {
            let e = r.outcome.as_ref().unwrap_err();
            assert!(e.detail("retryAfterMs").unwrap().as_u64().unwrap() > 0);
        }
    }
    assert_eq!(crm_n.load(Ordering::SeqCst), 0);
    assert_eq!(other_n.load(Ordering::SeqCst), 0);
    assert_eq!(
        read_n.load(Ordering::SeqCst),
        1,
        "only the allowed call ran"
    );

    // Undeclared (the manifest lists other tools) and a policy path that
    // cannot be evaluated (a malformed pattern in the manifest): forbidden.
    let tmp = tempfile::tempdir().unwrap();
    for (tools, reason) in [
        (json!(["crm:read"]), "not-declared"),
        (json!(["crm:*x"]), "policy-error"),
    ] {
        let dir = tool_call_declaring(tmp.path(), tools);
        wop.load_pack(&dir).await.unwrap();
        let mut r = req("crm:update", json!({}), None, "run-d2", "n", 1);
        r.principal.scopes.push("crm.write".into());
        let r = wop.invoke(r).await;
        let e = r.outcome.as_ref().unwrap_err();
        assert_eq!(e.code, "forbidden");
        assert_eq!(e.detail("reason"), Some(&json!(reason)), "{e}");
        assert_eq!(returned(&r)[0].0, ToolStatus::Forbidden);
        std::fs::remove_dir_all(&dir).unwrap();
    }
    assert_eq!(crm_n.load(Ordering::SeqCst), 0, "never performed");

    // The audit pair: tool-called carries argsHash (JCS, secrets redacted).
    let r = wop
        .invoke(req(
            "crm:read",
            json!({"b": 1, "a": {"password": "x"}}),
            None,
            "r9",
            "n",
            1,
        ))
        .await;
    let called = r.events.iter().find_map(|e| match e {
        Event::ToolCalled {
            args_hash,
            transport,
            principal,
            ..
        } => Some((args_hash.clone(), *transport, principal.clone())),
        _ => None,
    });
    let (hash, transport, principal) = called.unwrap();
    assert_eq!(
        hash,
        wop_runtime::jcs::sha256_hex(&json!({"a": {"password": "[REDACTED]"}, "b": 1}))
    );
    assert_eq!(transport, wop_runtime::events::Transport::Native);
    assert_eq!(principal, "agent-7");
}

#[tokio::test]
async fn catalog_hides_unauthorized_tools_like_missing_ones() {
    let (crm, _) = counting_tool("crm:update", SafetyTier::Write, &["crm.write"], None);
    let (read, _) = counting_tool("crm:read", SafetyTier::Read, &[], None);
    let policy = "[packs.tool-call]\ncapabilities = [\"tools\"]\ntools = [\"crm:read\"]\n";
    let wop = runtime_with(policy, None, "e", vec![crm, read]);
    let nobody = Principal::default();
    let hidden = wop
        .gate()
        .describe(&nobody, "acme", "crm:update")
        .unwrap_err();
    let missing = wop
        .gate()
        .describe(&nobody, "acme", "crm:nothing")
        .unwrap_err();
    assert_eq!(hidden.code, missing.code);
    assert_eq!(hidden.kind, missing.kind);
    assert_eq!(
        hidden.message.replace("crm:update", "X"),
        missing.message.replace("crm:nothing", "X")
    );
    let ids = |v: Vec<ToolDescriptor>| v.into_iter().map(|d| d.tool_id).collect::<Vec<_>>();
    assert_eq!(ids(wop.catalog(&nobody, "acme")), vec!["crm:read"]);
    let admin = Principal {
        scopes: vec!["crm.write".into()],
        ..Principal::default()
    };
    assert_eq!(
        ids(wop.catalog(&admin, "acme")),
        vec!["crm:read", "crm:update"]
    );

    // Inside a pack, tools.list() shows only what that invocation may call.
    load(&wop, "tool-call").await;
    let mut r = req("", json!({}), None, "r", "n", 1);
    r.inputs = json!({"list": true});
    r.principal.scopes = vec!["crm.write".into()];
    let out = output(&wop.invoke(r).await);
    assert_eq!(out["tools"].as_array().unwrap().len(), 1, "{out}");
    assert_eq!(out["tools"][0]["toolId"], "crm:read");
}

#[tokio::test]
async fn business_keys_dedupe_across_runs_and_detect_mismatch() {
    let server = Server::start(Mode::Ok).await;
    let wop = runtime_with(&http_policy(&server.url("/c"), "", ""), None, "e", vec![]);
    load(&wop, "tool-call").await;
    let a = wop
        .invoke(req(
            "payments:charge",
            json!({"amount": 1}),
            Some("inv-1"),
            "run-a",
            "n1",
            1,
        ))
        .await;
    let b = wop
        .invoke(req(
            "payments:charge",
            json!({"amount": 1}),
            Some("inv-1"),
            "run-b",
            "n9",
            3,
        ))
        .await;
    assert_eq!(output(&a), output(&b));
    assert_eq!(server.count(), 1);
    let c = wop
        .invoke(req(
            "payments:charge",
            json!({"amount": 2}),
            Some("inv-1"),
            "run-c",
            "n1",
            1,
        ))
        .await;
    assert_eq!(c.outcome.unwrap_err().code, "idempotency_key_mismatch");
    assert_eq!(server.count(), 1);
    assert_eq!(
        server.requests()[0].headers["idempotency-key"],
        wop_runtime::effects::business_id("acme", "payments:charge", "inv-1")
    );
}

#[tokio::test]
async fn a_silent_provider_is_never_refired_unless_idempotent() {
    let server = Server::start(Mode::Hang).await;
    let idem = format!(
        "[[tools]]\nid = \"crm:sync\"\nurl = \"{}\"\nsafetyTier = \"write\"\nreplayPolicy = \"idempotent\"\ntimeoutMs = 300\n",
        server.url("/sync")
    );
    let policy = http_policy(&server.url("/charge"), &idem, "")
        .replace("timeoutMs = 3000", "timeoutMs = 300");
    let wop = runtime_with(&policy, None, "e", vec![]);
    load(&wop, "tool-call").await;

    // Non-idempotent: sent, no answer → escaped; the retry is refused.
    let first = wop
        .invoke(req(
            "payments:charge",
            json!({"amount": 9}),
            None,
            "run-u",
            "n",
            1,
        ))
        .await;
    assert_eq!(first.outcome.unwrap_err().code, "effect_outcome_unknown");
    let again = wop
        .invoke(req(
            "payments:charge",
            json!({"amount": 9}),
            None,
            "run-u",
            "n",
            2,
        ))
        .await;
    let e = again.outcome.unwrap_err();
    assert_eq!(e.code, "effect_outcome_unknown");
    assert_eq!(server.count(), 1, "not re-fired");
    let eid = e.detail("effectId").unwrap().as_str().unwrap().to_owned();
    assert!(
        e.message.contains("wop effects resolve"),
        "says what to do: {e}"
    );
    let list = wop.effects("acme", "run-u").await.unwrap();
    assert_eq!(list[0].state, EffectState::Escaped);

    // The operator checked the provider: it did not happen. Released → the
    // next attempt may perform it.
    wop.resolve_effect(&eid, EffectState::Released)
        .await
        .unwrap();
    let _ = wop
        .invoke(req(
            "payments:charge",
            json!({"amount": 9}),
            None,
            "run-u",
            "n",
            3,
        ))
        .await;
    assert_eq!(server.count(), 2);

    // Idempotent: re-sent with the same key.
    let _ = wop
        .invoke(req("crm:sync", json!({}), None, "run-i", "n", 1))
        .await;
    let _ = wop
        .invoke(req("crm:sync", json!({}), None, "run-i", "n", 2))
        .await;
    let sync: Vec<_> = server
        .requests()
        .into_iter()
        .filter(|r| r.line.contains("/sync"))
        .collect();
    assert_eq!(sync.len(), 2, "re-sent");
    assert_eq!(
        sync[0].headers["idempotency-key"],
        sync[1].headers["idempotency-key"]
    );
}

#[tokio::test]
async fn node_pack_tools_run_in_their_own_sandbox_within_a_depth_limit() {
    let policy = r#"
[[tools]]
id = "packs:transform"
packType = "wop.samples.transform"
safetyTier = "pure"

[[tools]]
id = "packs:self"
packType = "wop.samples.tool-call"
safetyTier = "read"

[packs.tool-call]
capabilities = ["tools"]
tools = ["packs:*"]

[effects]
maxToolDepth = 2
"#;
    let wop = runtime_with(policy, None, "e", vec![]);
    load(&wop, "tool-call").await;
    load(&wop, "transform").await;
    let r = wop
        .invoke(req(
            "packs:transform",
            json!({"items": [{"a": 2}, {"a": 1}], "select": ["a"], "sortBy": "a"}),
            None,
            "r",
            "n",
            1,
        ))
        .await;
    assert_eq!(output(&r)["result"]["items"], json!([{"a": 1}, {"a": 2}]));

    // tool-call calling itself: depth 1 and 2 run, depth 3 is refused.
    let mut args = json!({"tool": "packs:transform", "arguments": {"items": []}});
    for _ in 0..3 {
        args = json!({"tool": "packs:self", "arguments": args});
    }
    let r = wop
        .invoke(req(
            "packs:self",
            args["arguments"].clone(),
            None,
            "r",
            "n",
            1,
        ))
        .await;
    let e = r.outcome.unwrap_err();
    assert_eq!(e.code, "tool_depth_exceeded", "{e}");
}
