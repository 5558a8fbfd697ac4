//! The invoke API, discovery, the catalog, effects and usage.

use super::*;
use serde_json::json;
use wop_testkit::{Mode, Server as Upstream};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invoke_json_and_event_stream() {
    let s = start("", &serve_toml(""), &["hello"]).await;
    let body = json!({"typeId": "wop.samples.hello", "inputs": {"name": "Ada"},
                      "nodeContext": {"runId": "wf/run-1", "nodeId": "greet", "tenantId": "acme", "attempt": 1}});
    let r = post_json(s.addr, "/host/wop/invocations", TOKEN, &body).await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let b = r.json();
    assert_eq!(b["outcome"], "completed");
    assert!(b["output"].to_string().contains("Ada"));
    assert!(b["invocationId"].as_str().unwrap().len() >= 32);
    assert!(
        b["events"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["type"] == "log.appended")
    );
    assert_eq!(b["usage"]["runId"], "wf/run-1");
    assert_eq!(b["usage"]["tenantId"], "acme");

    // text/event-stream: events, then the outcome.
    let auth = bearer(TOKEN);
    let r = req(
        s.addr,
        "POST",
        "/host/wop/invocations",
        &[
            ("Content-Type", "application/json"),
            ("Accept", "text/event-stream"),
            ("Authorization", &auth),
        ],
        json!({"typeId": "wop.samples.hello", "inputs": {"name": "Sse"}})
            .to_string()
            .as_bytes(),
    )
    .await;
    assert_eq!(r.status, 200);
    assert!(
        r.header("content-type")
            .unwrap()
            .starts_with("text/event-stream")
    );
    let text = String::from_utf8(r.body.clone()).unwrap();
    let names: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("event: "))
        .collect();
    assert!(names.len() >= 2, "{text}");
    assert_eq!(*names.last().unwrap(), "outcome");
    assert!(names.contains(&"log.appended"), "{text}");
    let last = text
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .next_back()
        .unwrap();
    let outcome: Value = serde_json::from_str(last).unwrap();
    assert_eq!(outcome["outcome"], "completed");

    // Usage per run (its tenant only) and per pack (operator scope).
    let u = req(
        s.addr,
        "GET",
        "/host/wop/usage?run=wf/run-1",
        &[("Authorization", &auth)],
        b"",
    )
    .await;
    assert_eq!(u.status, 200);
    assert_eq!(
        u.json()["runs"]["wf/run-1"]["invocations"],
        1,
        "{}",
        u.json()
    );
    let other = bearer(OTHER_TOKEN);
    let u = req(
        s.addr,
        "GET",
        "/host/wop/usage?run=wf/run-1",
        &[("Authorization", &other)],
        b"",
    )
    .await;
    assert_eq!(u.status, 404);
    let u = req(
        s.addr,
        "GET",
        "/host/wop/usage?pack=hello@0.1.0",
        &[("Authorization", &auth)],
        b"",
    )
    .await;
    assert_eq!(u.status, 200, "{}", String::from_utf8_lossy(&u.body));
    let u = req(
        s.addr,
        "GET",
        "/host/wop/usage",
        &[("Authorization", &other)],
        b"",
    )
    .await;
    assert_eq!(u.status, 403);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discovery_catalog_and_health() {
    let policy = r#"
[[tools]]
id = "crm:lookup"
url = "http://127.0.0.1:9/lookup"
safetyTier = "read"

[[tools]]
id = "admin:wipe"
url = "http://127.0.0.1:9/wipe"
safetyTier = "write"
scopes = ["admin"]

[[tools]]
id = "node:hello"
packType = "wop.samples.hello"
safetyTier = "pure"
title = "Hello"
"#;
    let s = start(policy, &serve_toml(""), &["hello"]).await;
    // Discovery is public.
    let r = req(s.addr, "GET", "/.well-known/openwop", &[], b"").await;
    assert_eq!(r.status, 200);
    assert_eq!(
        r.header("openwop-version"),
        Some(wop_serve::OPENWOP_VERSION)
    );
    let etag = r.header("etag").unwrap().to_owned();
    let doc = r.json();
    assert_eq!(
        doc["mcp"]["serverMount"]["transports"],
        json!(["streamable-http"])
    );
    assert_eq!(doc["mcp"]["preferredVersion"], "2026-07-28");
    assert!(
        doc["nodePackRuntimes"]["wasmComponent"]["loadedPacks"]
            .to_string()
            .contains("hello")
    );
    assert!(doc["nodePackRuntimes"]["wasm"].get("supported").is_none());
    for fam in [
        &doc["mcp"],
        &doc["sandbox"],
        &doc["toolCatalog"],
        &doc["idempotency"],
    ] {
        assert!(
            fam["status"].is_string() && fam["since"].is_string() && fam["witness"].is_string(),
            "{fam}"
        );
    }
    assert!(!doc.to_string().contains("anonymous"));
    let r = req(
        s.addr,
        "GET",
        "/.well-known/openwop",
        &[("If-None-Match", &etag)],
        b"",
    )
    .await;
    assert_eq!(r.status, 304);
    assert!(r.body.is_empty());
    assert_eq!(r.header("etag"), Some(etag.as_str()));
    let r = req(s.addr, "GET", "/healthz", &[], b"").await;
    assert_eq!(r.status, 200);

    // The catalog shows only what the caller may invoke; unknown and
    // unauthorized are the same 404.
    let auth = bearer(TOKEN);
    let r = get(s.addr, TOKEN, "/tools").await;
    assert_eq!(r.status, 200);
    let ids: Vec<String> = r.json()["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["toolId"].as_str().unwrap().to_owned())
        .collect();
    assert!(ids.contains(&"crm:lookup".to_owned()));
    assert!(!ids.contains(&"admin:wipe".to_owned()));
    let r = req(
        s.addr,
        "GET",
        "/tools/crm:lookup",
        &[("Authorization", &auth)],
        b"",
    )
    .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["safetyTier"], "read");
    let unauthorized = req(
        s.addr,
        "GET",
        "/tools/admin:wipe",
        &[("Authorization", &auth)],
        b"",
    )
    .await;
    let unknown = req(
        s.addr,
        "GET",
        "/tools/admin:nope",
        &[("Authorization", &auth)],
        b"",
    )
    .await;
    assert_eq!(unauthorized.status, 404);
    assert_eq!(unknown.status, 404);
    assert_eq!(unauthorized.json()["error"], "not_found");
    let strip = |mut v: Value| {
        v["message"] = json!("");
        v["details"] = json!({});
        v
    };
    assert_eq!(strip(unauthorized.json()), strip(unknown.json()));

    // The MCP tool carries the operator tier's annotations and title.
    let h = [
        ("Content-Type", "application/json"),
        ("Authorization", auth.as_str()),
    ];
    let r = req(
        s.addr,
        "POST",
        "/mcp",
        &h,
        br#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#,
    )
    .await;
    let t = &r.json()["result"]["tools"][0];
    assert_eq!(t["annotations"]["readOnlyHint"], true);
    assert_eq!(t["title"], "Hello");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idempotency_key_header_and_effects_listing() {
    let upstream = Upstream::start_detached(Mode::Ok);
    let s = start(
        &super::mcp::tool_call_policy(&upstream.url("/charge")),
        &serve_toml(""),
        &["tool-call"],
    )
    .await;
    let auth = bearer(TOKEN);
    let body = |amount: u64, run: &str| {
        json!({"typeId": "wop.samples.tool-call",
               "inputs": {"tool": "payments:charge", "arguments": {"amount": amount}},
               "nodeContext": {"runId": run, "nodeId": "charge"}})
        .to_string()
    };
    let h = [
        ("Content-Type", "application/json"),
        ("Authorization", auth.as_str()),
        ("Idempotency-Key", "inv-key-1"),
    ];
    let first = req(
        s.addr,
        "POST",
        "/host/wop/invocations",
        &h,
        body(100, "wf/r-9").as_bytes(),
    )
    .await;
    assert_eq!(
        first.status,
        200,
        "{}",
        String::from_utf8_lossy(&first.body)
    );
    assert_eq!(first.json()["outcome"], "completed", "{}", first.json());
    for _ in 0..3 {
        let again = req(
            s.addr,
            "POST",
            "/host/wop/invocations",
            &h,
            body(100, "wf/r-9").as_bytes(),
        )
        .await;
        assert_eq!(again.status, 200);
        assert_eq!(again.header("idempotent-replayed"), Some("true"));
        assert_eq!(again.json(), first.json());
    }
    assert_eq!(upstream.count(), 1);
    let other = req(
        s.addr,
        "POST",
        "/host/wop/invocations",
        &h,
        body(999, "wf/r-9").as_bytes(),
    )
    .await;
    assert_eq!(other.status, 409);
    assert_eq!(other.json()["error"], "idempotency_key_mismatch");
    assert_eq!(upstream.count(), 1);

    // The run's effects: the node claim and the tool's, tenant-bound ids,
    // RFC 3339 times, no payloads; `/` in the run id as ~2F or %2F.
    let re = regex_lite(r"^(anon:)?[A-Za-z0-9._~-]{1,128}/[A-Za-z0-9._~-]{16,128}$");
    for path in ["/runs/wf~2Fr-9/effects", "/runs/wf%2Fr-9/effects"] {
        let r = get(s.addr, TOKEN, path).await;
        assert_eq!(r.status, 200);
        let b = r.json();
        assert_eq!(b["runId"], "wf/r-9");
        let effects = b["effects"].as_array().unwrap();
        assert_eq!(effects.len(), 2, "{b}");
        for e in effects {
            let id = e["effectId"].as_str().unwrap();
            assert!(re(id), "{id}");
            assert!(id.starts_with("acme/"));
            assert_eq!(e["state"], "completed");
            let at = e["at"].as_str().unwrap();
            assert!(at.ends_with('Z') && at.contains('T'), "{at}");
            assert!(e.get("result").is_none());
        }
        assert!(!b.to_string().contains("amount"));
    }
    // Another tenant sees none of them.
    let other = bearer(OTHER_TOKEN);
    let r = req(
        s.addr,
        "GET",
        "/runs/wf~2Fr-9/effects",
        &[("Authorization", &other)],
        b"",
    )
    .await;
    assert_eq!(r.json()["effects"], json!([]));
    s.stop().await;
}

/// A run's effects are listed a page at a time (decision 0052): `limit`
/// (default 100, at most 1000) and `next` to pass as `after`; bad paging
/// parameters are `400`; another tenant's run of the same id lists
/// nothing, whatever `after` says.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runs_effects_are_listed_in_pages() {
    let s = start("", &serve_toml(""), &["hello"]).await;
    let auth = bearer(TOKEN);
    // Five keyed invocations in one run: five node claims listed.
    for i in 0..5 {
        let key = format!("page-key-{i}");
        let h = [
            ("Content-Type", "application/json"),
            ("Authorization", auth.as_str()),
            ("Idempotency-Key", key.as_str()),
        ];
        let body = json!({"typeId": "wop.samples.hello", "inputs": {"name": "Ada"},
                          "nodeContext": {"runId": "pages", "nodeId": format!("n{i}")}});
        let r = req(
            s.addr,
            "POST",
            "/host/wop/invocations",
            &h,
            body.to_string().as_bytes(),
        )
        .await;
        assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    }
    let whole = get(s.addr, TOKEN, "/runs/pages/effects").await.json();
    assert_eq!(whole["effects"].as_array().unwrap().len(), 5, "{whole}");
    assert!(whole["next"].is_null(), "{whole}");
    let mut ids = Vec::new();
    let mut sizes = Vec::new();
    let mut path = "/runs/pages/effects?limit=2".to_owned();
    loop {
        let b = get(s.addr, TOKEN, &path).await.json();
        let page = b["effects"].as_array().unwrap();
        sizes.push(page.len());
        for e in page {
            assert_eq!(e["providerKey"], "node:wop.samples.hello", "{e}");
            ids.push(e["effectId"].as_str().unwrap().to_owned());
        }
        match b["next"].as_str() {
            Some(n) => path = format!("/runs/pages/effects?limit=2&after={n}"),
            None => break,
        }
    }
    assert_eq!(sizes, [2, 2, 1]);
    let want: Vec<String> = whole["effects"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["effectId"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(ids, want);
    // Another tenant's run of the same id: nothing, with or without after.
    let first = ids[0].split_once('/').unwrap().1;
    for path in [
        "/runs/pages/effects".to_owned(),
        format!("/runs/pages/effects?after={first}"),
    ] {
        let b = get(s.addr, OTHER_TOKEN, &path).await.json();
        assert_eq!(b["effects"], json!([]), "{b}");
    }
    // Bad paging parameters.
    let long = "x".repeat(300);
    for path in [
        "/runs/pages/effects?limit=0".to_owned(),
        "/runs/pages/effects?limit=1001".to_owned(),
        "/runs/pages/effects?limit=two".to_owned(),
        "/runs/pages/effects?page=2".to_owned(),
        format!("/runs/pages/effects?after={long}"),
    ] {
        let r = get(s.addr, TOKEN, &path).await;
        assert_eq!(
            r.status,
            400,
            "{path}: {}",
            String::from_utf8_lossy(&r.body)
        );
        assert_eq!(r.json()["error"], "validation_error", "{path}");
    }
    s.stop().await;
}

/// An operator's usage across runs comes a page at a time (decision
/// 0052): `limit` runs (default 1000, at most 10,000) and `next` to pass
/// as `after`; the packs' totals on every page; paging a single run's
/// query or a bad `limit` is `400`; only operators page across tenants.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn usage_across_runs_comes_in_pages() {
    let s = start("", &serve_toml(""), &["hello"]).await;
    for (token, runs) in [(TOKEN, 3), (OTHER_TOKEN, 2)] {
        for i in 0..runs {
            let body = json!({"typeId": "wop.samples.hello", "inputs": {"name": "Ada"},
                              "nodeContext": {"runId": format!("u/{i}"), "nodeId": "n"}});
            let r = post_json(s.addr, "/host/wop/invocations", token, &body).await;
            assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
        }
    }
    let whole = get(s.addr, TOKEN, "/host/wop/usage").await.json();
    assert_eq!(whole["runs"].as_object().unwrap().len(), 5, "{whole}");
    assert!(whole["next"].is_null(), "{whole}");
    let enc = |s: &str| {
        s.replace('%', "%25")
            .replace('/', "%2F")
            .replace('&', "%26")
    };
    let mut runs = serde_json::Map::new();
    let mut sizes = Vec::new();
    let mut path = "/host/wop/usage?limit=2".to_owned();
    loop {
        let b = get(s.addr, TOKEN, &path).await.json();
        assert_eq!(b["packs"], whole["packs"], "{b}");
        let page = b["runs"].as_object().unwrap();
        sizes.push(page.len());
        runs.extend(page.clone());
        match b["next"].as_str() {
            Some(n) => path = format!("/host/wop/usage?limit=2&after={}", enc(n)),
            None => break,
        }
    }
    assert!(
        sizes.iter().all(|n| *n <= 2) && sizes.len() >= 3,
        "{sizes:?}"
    );
    assert_eq!(Value::Object(runs), whole["runs"]);
    let long = format!("/host/wop/usage?after={}", "x".repeat(513));
    let longest = format!("/host/wop/usage?after={}", "x".repeat(512));
    for (path, status) in [
        (long.as_str(), 400),
        (longest.as_str(), 200),
        ("/host/wop/usage?run=u%2F0&limit=2", 400),
        ("/host/wop/usage?run=u%2F0&after=x", 400),
        ("/host/wop/usage?limit=0", 400),
        ("/host/wop/usage?limit=10001", 400),
        ("/host/wop/usage?page=2", 400),
        ("/host/wop/usage?run=u%2F0", 200),
    ] {
        let r = get(s.addr, TOKEN, path).await;
        assert_eq!(
            r.status,
            status,
            "{path}: {}",
            String::from_utf8_lossy(&r.body)
        );
    }
    let r = get(s.addr, OTHER_TOKEN, "/host/wop/usage?limit=2").await;
    assert_eq!(r.status, 403);
    s.stop().await;
}

/// A tiny matcher for the effectId grammar (no regex dependency).
fn regex_lite(_: &str) -> impl Fn(&str) -> bool {
    |s: &str| {
        let ok = |p: &str, min: usize| {
            (min..=128).contains(&p.len())
                && p.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"._~-".contains(&b))
        };
        match s.split_once('/') {
            Some((t, o)) => ok(t.strip_prefix("anon:").unwrap_or(t), 1) && ok(o, 16),
            None => false,
        }
    }
}

/// `usageDeferMs`: usage of unbudgeted runs is written off the response
/// path, and all of it is stored when the server drains (checked in the
/// store itself right after the stop, well inside the window).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deferred_usage_is_stored_at_drain() {
    use wop_runtime::store::KvStore as _;
    let kv = std::sync::Arc::new(wop_runtime::store::MemoryStore::new());
    let store = wop_serve::StoreChoice::Custom(kv.clone());
    let s = start_on("", &serve_toml("usageDeferMs = 1000"), &["hello"], store).await;
    for i in 0..3 {
        let body = json!({"typeId": "wop.samples.hello", "inputs": {"name": "Ada"},
                          "nodeContext": {"runId": "wf/deferred", "nodeId": format!("n{i}"), "tenantId": "acme", "attempt": 1}});
        let r = post_json(s.addr, "/host/wop/invocations", TOKEN, &body).await;
        assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    }
    s.stop().await;
    let records = kv.scan_prefix("usage/", 100).await.unwrap();
    assert_eq!(
        records.len(),
        3,
        "every deferred usage record stored at drain"
    );
}

/// `usageDeferMs` past its bound is refused at start, with the bound.
#[tokio::test]
async fn usage_defer_past_its_bound_is_refused() {
    let dir = packs(&["hello"]);
    let mut opts = ServeOptions::new("127.0.0.1:0".parse().unwrap());
    opts.packs_dir(dir.path())
        .store(wop_serve::StoreChoice::Memory)
        .config(ServeConfig::from_toml("usageDeferMs = 60000").unwrap());
    let Err(e) = Server::bind(opts).await else {
        panic!("a 60 s usage window was accepted");
    };
    let text = e.to_string();
    assert!(
        text.contains("usageDeferMs") && text.contains("1000"),
        "{text}"
    );
}
