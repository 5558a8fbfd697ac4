//! One tenant cannot fill the store for the others (decision 0054): each
//! tenant's effect records (here: keyed responses) are counted, and past
//! `maxStoreBytesPerTenant` (by default, with several tenants, three
//! quarters of the store) its new claims are `507 effect_store_full` with
//! its own figures, while its recorded responses replay, its un-keyed
//! invocations run and the other tenants go on. The counts survive a
//! restart: they are rebuilt from the store.

use super::*;
use serde_json::json;
use std::sync::Arc;

async fn keyed(addr: SocketAddr, token: &str, key: &str, body: &Value) -> Resp {
    keyed_as(addr, Some(token), key, body).await
}

/// A hello whose recorded response is about 200 KB.
fn big() -> Value {
    json!({"typeId": "wop.samples.hello", "inputs": {"name": "A".repeat(100_000)}})
}

/// Sends keyed requests as `token` until one is refused: how many were
/// recorded, and the refusal.
async fn fill(addr: SocketAddr, token: &str, most: usize) -> (usize, Resp) {
    for ok in 0..most {
        let r = keyed(addr, token, &format!("key-{ok}"), &big()).await;
        if r.status != 200 {
            return (ok, r);
        }
    }
    panic!("{most} responses of ~200 KB and still not refused");
}

/// Waits until the stopped server's sled store is closed (a flush on a
/// blocking thread can hold it a moment after the server stopped).
async fn until_unlocked(path: &std::path::Path) {
    for _ in 0..600 {
        if wop_runtime::store::SledStore::open(path).is_ok() {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("the store at {} stayed locked for 30 s", path.display());
}

fn assert_own_share_refusal(r: &Resp, tenant: &str, share: u64) {
    let body = String::from_utf8_lossy(&r.body);
    let head: String = body.chars().take(300).collect();
    assert_eq!(r.status, 507, "{head}");
    let b = r.json();
    assert_eq!(b["error"], "effect_store_full", "{b}");
    let m = b["message"].as_str().unwrap();
    assert!(m.contains(&format!("tenant `{tenant}`")), "{m}");
    assert!(m.contains(&format!("share of {share} bytes")), "{m}");
    assert!(m.contains("maxStoreBytesPerTenant"), "{m}");
    // The same figures, for programs.
    let d = &b["details"];
    assert_eq!(d["tenant"], tenant, "{b}");
    assert_eq!(d["maxStoreBytesPerTenant"], share, "{b}");
    // Taken when the write was refused: what it held and what the claim
    // needed, which together pass the share.
    let held = d["heldBytes"].as_u64().expect("heldBytes");
    let needed = d["neededBytes"].as_u64().expect("neededBytes");
    assert!(needed > 0 && held + needed > share, "{b}");
}

/// A `507` for an invocation that claims nothing, refused before it
/// started because `tenant` holds its share.
fn assert_past_share_at_start(r: &Resp, tenant: &str, share: u64) {
    let b = r.json();
    assert_eq!(r.status, 507, "{b}");
    assert_eq!(b["error"], "effect_store_full", "{b}");
    let m = b["message"].as_str().unwrap();
    assert!(
        m.contains("did not run") && m.contains("maxStoreBytesPerTenant"),
        "{m}"
    );
    let d = &b["details"];
    assert_eq!(d["tenant"], tenant, "{b}");
    assert_eq!(d["maxStoreBytesPerTenant"], share, "{b}");
    assert!(d["heldBytes"].as_u64() >= Some(share), "{b}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_past_its_share_is_refused_and_the_others_go_on_after_a_restart_too() {
    const SHARE: u64 = 1 << 20;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store");
    let spec = || wop_serve::StoreChoice::Spec(path.to_str().unwrap().to_owned());
    let cfg = serve_toml(&format!("maxStoreBytesPerTenant = {SHARE}"));
    let s = start_on("", &cfg, &["hello"], spec()).await;
    let (ok, refused) = fill(s.addr, TOKEN, 40).await;
    // ~200 KB each: four or five fit in 1 MiB (the last one's claim is
    // admitted below the share and its response recorded past it).
    assert!((4..=6).contains(&ok), "{ok} responses in 1 MiB");
    assert_own_share_refusal(&refused, "acme", SHARE);
    // Its recorded response replays; an un-keyed invocation, which would
    // record its usage, does not start (decision 0055).
    let again = keyed(s.addr, TOKEN, "key-0", &big()).await;
    assert_eq!(again.status, 200);
    assert_eq!(again.header("idempotent-replayed"), Some("true"));
    let plain = post_json(s.addr, "/host/wop/invocations", TOKEN, &big()).await;
    assert_past_share_at_start(&plain, "acme", SHARE);
    // Another tenant records as much as acme did.
    for i in 0..ok {
        let r = keyed(s.addr, OTHER_TOKEN, &format!("key-{i}"), &big()).await;
        assert_eq!(r.status, 200, "globex's response {i}");
        assert_eq!(r.header("idempotent-replayed"), None);
    }
    // Operators count the share's refusals apart from the disk's.
    let gauge = |name: &str| format!("wop_store_{name}{{backend=\"sled\"}}");
    let refusals = metric_of(s.addr, &gauge("share_refused_writes")).await;
    assert!(refusals >= Some(1), "{refusals:?}");
    assert_eq!(metric_of(s.addr, &gauge("refused_writes")).await, Some(0));
    // And see what each tenant holds of its share, to alert before it
    // is refused.
    let share = metric_of(s.addr, "wop_store_tenant_share_bytes").await;
    assert_eq!(share, Some(SHARE));
    let acme = metric_of(s.addr, r#"wop_store_tenant_bytes{tenant="acme"}"#).await;
    assert!(acme >= Some(SHARE), "{acme:?}");
    let globex = metric_of(s.addr, r#"wop_store_tenant_bytes{tenant="globex"}"#).await;
    assert!(globex.is_some_and(|g| g > SHARE / 2), "{globex:?}");
    s.stop().await;

    // A new process counts what each tenant holds again.
    until_unlocked(&path).await;
    let s = start_on("", &cfg, &["hello"], spec()).await;
    let r = keyed(s.addr, TOKEN, "after-restart", &big()).await;
    assert_own_share_refusal(&r, "acme", SHARE);
    let again = keyed(s.addr, TOKEN, "key-1", &big()).await;
    assert_eq!(again.header("idempotent-replayed"), Some("true"));
    let r = keyed(s.addr, OTHER_TOKEN, "after-restart", &big()).await;
    assert_eq!(r.status, 507, "globex holds its share too now");
    s.stop().await;

    // 0: no share.
    until_unlocked(&path).await;
    let cfg = serve_toml("maxStoreBytesPerTenant = 0");
    let s = start_on("", &cfg, &["hello"], spec()).await;
    let r = keyed(s.addr, TOKEN, "no-share", &big()).await;
    assert_eq!(r.status, 200);
}

/// By default, with several tenants, one holds at most three quarters of
/// the in-memory store: the others still record their quarter.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn by_default_a_tenant_leaves_a_quarter_of_the_memory_store_to_the_others() {
    let cfg = serve_toml("memoryStoreBytes = 4194304");
    let s = start_on("", &cfg, &["hello"], wop_serve::StoreChoice::Memory).await;
    let (ok, refused) = fill(s.addr, TOKEN, 40).await;
    assert_own_share_refusal(&refused, "acme", 3 << 20);
    assert!(ok >= 12, "{ok} responses of ~200 KB in 3 MiB");
    // globex's quarter (1 MiB, less the usage records): several responses.
    let (theirs, full) = fill(s.addr, OTHER_TOKEN, 40).await;
    assert!(theirs >= 3, "globex recorded {theirs}");
    assert_eq!(full.status, 507);
}

/// A share counted in one process cannot hold for executors sharing a
/// PostgreSQL store: the setting is refused there, before connecting.
#[tokio::test]
async fn a_share_on_a_postgresql_store_is_refused_at_start() {
    let dir = packs(&["hello"]);
    let mut opts = ServeOptions::new("127.0.0.1:0".parse().unwrap());
    let cfg = serve_toml("maxStoreBytesPerTenant = 1048576");
    opts.packs_dir(dir.path())
        .store(wop_serve::StoreChoice::Spec(
            "postgres://nobody@127.0.0.1:1/none".into(),
        ))
        .config(ServeConfig::from_toml(&cfg).unwrap());
    let e = Server::bind(opts).await.err().expect("refused").to_string();
    assert!(
        e.contains("maxStoreBytesPerTenant") && e.contains("PostgreSQL"),
        "{e}"
    );
}

/// Usage alone: every invocation records its usage, so a tenant sending
/// un-keyed invocations as fast as it can fills its share with usage
/// records, and then its invocations do not start; the other tenants'
/// still run (before decision 0055 it filled the store for everyone).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_whose_usage_fills_its_share_starts_no_more_invocations() {
    const SHARE: u64 = 32 << 10;
    let cfg = serve_toml(&format!("maxStoreBytesPerTenant = {SHARE}"));
    let s = start("", &cfg, &["hello"]).await;
    let hello = json!({"typeId": "wop.samples.hello", "inputs": {"name": "Ada"}});
    let mut ran = 0;
    let refused = loop {
        let r = post_json(s.addr, "/host/wop/invocations", TOKEN, &hello).await;
        if r.status != 200 {
            break r;
        }
        ran += 1;
        assert!(ran < 2_000, "2,000 invocations and still within 32 KiB");
    };
    assert!(ran >= 10, "refused after {ran} invocations");
    assert_past_share_at_start(&refused, "acme", SHARE);
    // Through MCP, the tool's error result says the same.
    let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "wop.samples.hello", "arguments": {"name": "Ada"}}});
    let r = post_json(s.addr, "/mcp", TOKEN, &call).await.json();
    assert_eq!(r["result"]["isError"], true, "{r}");
    let refusal = &r["result"]["structuredContent"];
    assert_eq!(refusal["code"], "effect_store_full", "{r}");
    assert_eq!(refusal["details"]["tenant"], "acme", "{r}");
    // An event stream is refused before it starts, with the status.
    let auth = bearer(TOKEN);
    let headers = [
        ("Content-Type", "application/json"),
        ("Accept", "text/event-stream"),
        ("Authorization", auth.as_str()),
    ];
    let body = hello.to_string();
    let r = req(
        s.addr,
        "POST",
        "/host/wop/invocations",
        &headers,
        body.as_bytes(),
    )
    .await;
    assert_past_share_at_start(&r, "acme", SHARE);
    // Another tenant runs.
    let r = post_json(s.addr, "/host/wop/invocations", OTHER_TOKEN, &hello).await;
    assert_eq!(r.status, 200);
    s.stop().await;
}

/// A recorded MCP call replayed from ever new runs (`_meta` runId: the
/// digest covers the tool and its arguments only) past the share is
/// answered, and listed in none of those runs: listed, each new run
/// would grow the store past the share by an entry.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_the_share_a_replay_from_a_new_run_is_answered_and_not_listed() {
    let cfg = serve_toml("maxStoreBytesPerTenant = 1048576");
    let s = start("", &cfg, &["hello"]).await;
    let call = |key: &str, run: &str| {
        let params = json!({"name": "wop.samples.hello",
            "arguments": {"name": "A".repeat(100_000)},
            "_meta": {"dev.openwop/idempotencyKey": key, "dev.openwop/runId": run}});
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params})
    };
    let (mut recorded, mut first) = (0, Value::Null);
    loop {
        let body = call(&format!("key-{recorded}"), "filling");
        let r = post_json(s.addr, "/mcp", TOKEN, &body).await.json();
        let code = &r["result"]["structuredContent"]["code"];
        if r["result"]["isError"] == true {
            assert_eq!(code, "effect_store_full");
            break;
        }
        if recorded == 0 {
            first = r["result"]["_meta"]["dev.openwop/invocationId"].clone();
            assert!(first.is_string(), "{}", r["result"]["_meta"]);
        }
        recorded += 1;
        assert!(recorded < 40, "40 responses of ~200 KB within 1 MiB");
    }
    for run in ["elsewhere-1", "elsewhere-2", "elsewhere-3"] {
        let r = post_json(s.addr, "/mcp", TOKEN, &call("key-0", run))
            .await
            .json();
        assert_eq!(r["result"]["isError"], false, "replay from {run}");
        // The recorded invocation, not a new one.
        let id = &r["result"]["_meta"]["dev.openwop/invocationId"];
        assert_eq!(id, &first, "{run}");
        let listed = get(s.addr, TOKEN, &format!("/runs/{run}/effects")).await;
        assert_eq!(listed.status, 200);
        let effects = &listed.json()["effects"];
        assert_eq!(
            effects.as_array().map(Vec::len),
            Some(0),
            "{run}: {effects}"
        );
    }
    // The run it was recorded in lists it.
    let listed = get(s.addr, TOKEN, "/runs/filling/effects").await.json();
    assert_eq!(listed["effects"].as_array().map(Vec::len), Some(recorded));
    s.stop().await;
}

/// Under concurrent load on sled — acme flooding with keyed responses
/// and un-keyed invocations, globex invoking — globex is never refused,
/// acme is, acme passes its share by at most what its invocations in
/// flight recorded, and the counts kept while the requests raced are
/// exactly what a fresh count of the store finds after a restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_tenants_keep_exact_counts_and_only_the_flooder_is_refused() {
    const SHARE: u64 = 2 << 20;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store");
    let spec = wop_serve::StoreChoice::Spec(path.to_str().unwrap().to_owned());
    let cfg = serve_toml(&format!("maxStoreBytesPerTenant = {SHARE}"));
    let s = start_on("", &cfg, &["hello"], spec).await;
    let addr = s.addr;
    let hello = json!({"typeId": "wop.samples.hello", "inputs": {"name": "Ada"}});
    let mut tasks = Vec::new();
    // Acme: four keyed floods and two un-keyed ones, each until refused.
    for t in 0..6 {
        let hello = hello.clone();
        tasks.push(tokio::spawn(async move {
            // Un-keyed hellos alone fill 2 MiB in ~2,500 (850 bytes each).
            for i in 0..10_000 {
                let r = if t < 4 {
                    keyed(addr, TOKEN, &format!("flood-{t}-{i}"), &big()).await
                } else {
                    post_json(addr, "/host/wop/invocations", TOKEN, &hello).await
                };
                if r.status != 200 {
                    assert_eq!(r.status, 507, "acme's refusal");
                    return ("acme", i);
                }
            }
            panic!("acme task {t}: 10,000 requests and never refused");
        }));
    }
    // Globex: four un-keyed loops alongside.
    for _ in 0..4 {
        let hello = hello.clone();
        tasks.push(tokio::spawn(async move {
            for i in 0..60 {
                let r = post_json(addr, "/host/wop/invocations", OTHER_TOKEN, &hello).await;
                assert_eq!(r.status, 200, "globex's request {i} was refused");
            }
            ("globex", 60)
        }));
    }
    for t in tasks {
        let (tenant, n) = t.await.unwrap();
        assert!(n > 0 || tenant == "acme", "{tenant} {n}");
    }
    // The deferred usage of the last invocations is written within 10 ms.
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let held = |tenant: &str| {
        let name = format!("wop_store_tenant_bytes{{tenant=\"{tenant}\"}}");
        async move { metric_of(addr, &name).await.unwrap() }
    };
    let (acme, globex) = (held("acme").await, held("globex").await);
    // Six requests of acme's in flight, each recording at most a
    // response of ~200 KB and its usage.
    assert!((SHARE..=SHARE + 6 * (256 << 10)).contains(&acme), "{acme}");
    assert!(globex > 0 && globex < SHARE / 4, "{globex}");
    s.stop().await;
    until_unlocked(&path).await;
    let sled: Arc<dyn wop_runtime::store::KvStore> =
        Arc::new(wop_runtime::store::SledStore::open(&path).unwrap());
    let recount = wop_runtime::store::TenantShare::open(sled, SHARE)
        .await
        .unwrap();
    assert_eq!(
        (recount.held("acme"), recount.held("globex")),
        (acme, globex)
    );
}

/// A store the embedder built is not shared out by default (other
/// executors may write it too), but `maxStoreBytesPerTenant` applies to
/// it when set.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_share_set_for_the_embedders_own_store_holds() {
    const SHARE: u64 = 1 << 20;
    let store = Arc::new(wop_runtime::store::MemoryStore::new());
    let custom = wop_serve::StoreChoice::Custom(store);
    let cfg = serve_toml(&format!("maxStoreBytesPerTenant = {SHARE}"));
    let s = start_on("", &cfg, &["hello"], custom).await;
    let (ok, refused) = fill(s.addr, TOKEN, 40).await;
    assert!((4..=6).contains(&ok), "{ok} responses in 1 MiB");
    assert_own_share_refusal(&refused, "acme", SHARE);
    let r = keyed(s.addr, OTHER_TOKEN, "key-0", &big()).await;
    assert_eq!(r.status, 200, "globex's first response");
}

/// Scans that fail: the store's disk cannot be read.
struct UnreadableScans;

#[async_trait::async_trait]
impl wop_runtime::store::tap::Tap for UnreadableScans {
    fn fails(&self, op: wop_runtime::store::tap::Op<'_>) -> Option<wop_runtime::store::StoreError> {
        use wop_runtime::store::tap::Op;
        matches!(op, Op::ScanRange { .. } | Op::ScanPrefix { .. })
            .then(|| wop_runtime::store::StoreError::Io("Input/output error (os error 5)".into()))
    }
}

/// The shares are counted from the store at start; a store that cannot
/// be read does not start a server whose shares would be wrong, and the
/// operator learns why.
#[tokio::test]
async fn a_store_whose_records_cannot_be_counted_does_not_start() {
    let memory = Arc::new(wop_runtime::store::MemoryStore::new());
    let store = wop_runtime::store::tap::Tapped::new(memory, UnreadableScans);
    let dir = packs(&["hello"]);
    let mut opts = ServeOptions::new("127.0.0.1:0".parse().unwrap());
    opts.packs_dir(dir.path())
        .store(wop_serve::StoreChoice::Custom(store))
        .config(ServeConfig::from_toml(&serve_toml("maxStoreBytesPerTenant = 1048576")).unwrap());
    let e = Server::bind(opts).await.err().expect("refused").to_string();
    assert!(
        e.contains("cannot count the tenants' records") && e.contains("os error 5"),
        "{e}"
    );
}
