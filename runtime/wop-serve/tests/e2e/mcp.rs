//! The MCP mount with a minimal raw client and a 2026-07-28 client.

use super::*;
use serde_json::json;
use wop_testkit::{Mode, Server as Upstream};

fn rpc(id: u64, method: &str, params: Value) -> Vec<u8> {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
        .to_string()
        .into_bytes()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn minimal_client_is_served_with_one_json_object() {
    let s = start("", &serve_toml(""), &["hello", "describe-mismatch"]).await;
    // The refused pack is logged with its code and absent.
    assert_eq!(s.refused.len(), 1, "{:?}", s.refused);
    assert!(s.refused[0]["code"].as_str().unwrap().len() > 3);
    let auth = bearer(TOKEN);
    for accept in [Some("*/*"), None] {
        let mut headers = vec![
            ("Content-Type", "application/json"),
            ("Authorization", auth.as_str()),
        ];
        if let Some(a) = accept {
            headers.push(("Accept", a));
        }
        let mut c = Conn::open(s.addr).await;
        for v in ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"] {
            let r = c
                .send("POST", "/mcp", &headers, &rpc(1, "initialize", json!({"protocolVersion": v, "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}})))
                .await;
            assert_eq!(r.status, 200);
            assert!(
                r.header("content-type")
                    .unwrap()
                    .starts_with("application/json")
            );
            assert!(r.header("mcp-session-id").is_none());
            let b = r.json();
            assert_eq!(b["jsonrpc"], "2.0");
            assert_eq!(b["id"], 1);
            assert_eq!(b["result"]["protocolVersion"], v);
            assert!(b["result"]["capabilities"]["tools"].is_object());
            assert!(b["result"].get("resultType").is_none());
        }
        // No notifications/initialized, no session, no version header.
        let r = c
            .send("POST", "/mcp", &headers, &rpc(2, "tools/list", json!({})))
            .await;
        assert_eq!(r.status, 200);
        let tools = r.json()["result"]["tools"].as_array().unwrap().clone();
        let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["wop.samples.hello"]);
        assert_eq!(tools[0]["inputSchema"], json!({"type": "object"}));
        let r = c
            .send(
                "POST",
                "/mcp",
                &headers,
                &rpc(
                    3,
                    "tools/call",
                    json!({"name": "wop.samples.hello", "arguments": {"name": "Ada"}}),
                ),
            )
            .await;
        assert_eq!(r.status, 200);
        assert!(
            r.header("content-type")
                .unwrap()
                .starts_with("application/json")
        );
        let res = &r.json()["result"];
        assert_eq!(res["isError"], false, "{res}");
        let text = res["content"][0]["text"].as_str().unwrap();
        let out: Value = serde_json::from_str(text).unwrap();
        assert_eq!(res["content"][0]["type"], "text");
        assert_eq!(res["structuredContent"], out);
        assert!(text.contains("Ada"));
        // A notification is accepted without a body.
        let r = c
            .send(
                "POST",
                "/mcp",
                &headers,
                br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            )
            .await;
        assert_eq!(r.status, 202);
    }
    for m in ["GET", "DELETE"] {
        let r = req(s.addr, m, "/mcp", &[("Authorization", &auth)], b"").await;
        assert_eq!(r.status, 405);
        assert_eq!(r.header("allow"), Some("POST"));
    }
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_errors_unknown_tools_and_bad_arguments() {
    let s = start("", &serve_toml(""), &["hello", "panic"]).await;
    let auth = bearer(TOKEN);
    let h = [
        ("Content-Type", "application/json"),
        ("Accept", "*/*"),
        ("Authorization", auth.as_str()),
    ];
    let r = req(
        s.addr,
        "POST",
        "/mcp",
        &h,
        &rpc(
            1,
            "tools/call",
            json!({"name": "wop.nope", "arguments": {}}),
        ),
    )
    .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["error"]["code"], -32602);
    let r = req(
        s.addr,
        "POST",
        "/mcp",
        &h,
        &rpc(
            2,
            "tools/call",
            json!({"name": "wop.samples.hello", "arguments": [1]}),
        ),
    )
    .await;
    let res = &r.json()["result"];
    assert_eq!(res["isError"], true);
    assert_eq!(res["structuredContent"]["code"], "validation_error");
    // A node that fails inside the sandbox: isError with {code,message,details}.
    let r = req(
        s.addr,
        "POST",
        "/mcp",
        &h,
        &rpc(
            3,
            "tools/call",
            json!({"name": "wop.testing.panic", "arguments": {}}),
        ),
    )
    .await;
    assert_eq!(r.status, 200);
    let res = &r.json()["result"];
    assert_eq!(res["isError"], true, "{res}");
    let e = &res["structuredContent"];
    assert!(
        e["code"].is_string() && e["message"].is_string() && e["details"].is_object(),
        "{e}"
    );
    let r = req(
        s.addr,
        "POST",
        "/mcp",
        &h,
        &rpc(4, "resources/list", json!({})),
    )
    .await;
    assert_eq!(r.json()["error"]["code"], -32601);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revision_2026_07_28_is_served_statelessly() {
    let s = start("", &serve_toml(""), &["hello"]).await;
    let auth = bearer(TOKEN);
    let modern = [
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
        ("Authorization", auth.as_str()),
        ("MCP-Protocol-Version", "2026-07-28"),
    ];
    let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                      "io.modelcontextprotocol/clientCapabilities": {},
                      "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"}});
    let r = req(
        s.addr,
        "POST",
        "/mcp",
        &modern,
        &rpc(1, "server/discover", json!({"_meta": meta})),
    )
    .await;
    assert_eq!(r.status, 200);
    let d = r.json()["result"].clone();
    assert_eq!(d["resultType"], "complete");
    assert!(
        d["supportedVersions"]
            .as_array()
            .unwrap()
            .contains(&json!("2026-07-28"))
    );
    assert!(
        d["supportedVersions"]
            .as_array()
            .unwrap()
            .contains(&json!("2024-11-05"))
    );
    assert_eq!(
        d["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        "wop-serve"
    );
    let r = req(
        s.addr,
        "POST",
        "/mcp",
        &modern,
        &rpc(2, "tools/list", json!({"_meta": meta})),
    )
    .await;
    assert_eq!(r.json()["result"]["resultType"], "complete");
    let r = req(
        s.addr,
        "POST",
        "/mcp",
        &modern,
        &rpc(
            3,
            "tools/call",
            json!({"_meta": meta, "name": "wop.samples.hello", "arguments": {"name": "Bo"}}),
        ),
    )
    .await;
    let res = &r.json()["result"];
    assert_eq!(res["resultType"], "complete");
    assert_eq!(res["isError"], false);
    // Header and _meta disagree: -32020.
    let mismatch = [
        ("Content-Type", "application/json"),
        ("Authorization", auth.as_str()),
        ("MCP-Protocol-Version", "2025-11-25"),
    ];
    let r = req(
        s.addr,
        "POST",
        "/mcp",
        &mismatch,
        &rpc(4, "tools/list", json!({"_meta": meta})),
    )
    .await;
    assert_eq!(r.status, 400);
    assert_eq!(r.json()["error"]["code"], -32020);
    assert_eq!(r.json()["id"], 4);
    // An unsupported revision: -32022 with the supported list.
    let future = [
        ("Content-Type", "application/json"),
        ("Authorization", auth.as_str()),
        ("MCP-Protocol-Version", "2099-01-01"),
    ];
    let r = req(
        s.addr,
        "POST",
        "/mcp",
        &future,
        &rpc(
            5,
            "tools/list",
            json!({"_meta": {"io.modelcontextprotocol/protocolVersion": "2099-01-01"}}),
        ),
    )
    .await;
    assert_eq!(r.status, 400);
    let e = &r.json()["error"];
    assert_eq!(e["code"], -32022);
    assert_eq!(e["data"]["requested"], "2099-01-01");
    assert!(
        e["data"]["supported"]
            .as_array()
            .unwrap()
            .contains(&json!("2026-07-28"))
    );
    s.stop().await;
}

pub fn tool_call_policy(url: &str) -> String {
    format!(
        r#"
[[tools]]
id = "payments:charge"
url = "{url}"
safetyTier = "write"
scopes = ["payments.write"]
timeoutMs = 3000

[packs.tool-call]
capabilities = ["tools"]
tools = ["payments:*"]
"#
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idempotency_key_in_meta_fires_the_effect_once() {
    let upstream = Upstream::start_detached(Mode::Ok);
    let s = start(
        &tool_call_policy(&upstream.url("/charge")),
        &serve_toml(""),
        &["tool-call"],
    )
    .await;
    let auth = bearer(TOKEN);
    let h = [
        ("Content-Type", "application/json"),
        ("Accept", "*/*"),
        ("Authorization", auth.as_str()),
    ];
    let call = |id: u64, amount: u64, key: Option<&str>| {
        let mut p = json!({"name": "wop.samples.tool-call", "arguments": {"tool": "payments:charge", "arguments": {"amount": amount}}});
        if let Some(k) = key {
            p["_meta"] = json!({"dev.openwop/idempotencyKey": k});
        }
        rpc(id, "tools/call", p)
    };
    let first = req(s.addr, "POST", "/mcp", &h, &call(1, 100, Some("order-1")))
        .await
        .json();
    assert_eq!(first["result"]["isError"], false, "{first}");
    for i in 0..3 {
        let again = req(
            s.addr,
            "POST",
            "/mcp",
            &h,
            &call(2 + i, 100, Some("order-1")),
        )
        .await
        .json();
        assert_eq!(
            again["result"]["structuredContent"],
            first["result"]["structuredContent"]
        );
        assert_eq!(
            again["result"]["_meta"], first["result"]["_meta"],
            "the recorded invocation is replayed"
        );
    }
    assert_eq!(upstream.count(), 1, "the charge fired once across retries");
    // Same key, other arguments.
    let other = req(s.addr, "POST", "/mcp", &h, &call(9, 200, Some("order-1")))
        .await
        .json();
    assert_eq!(other["result"]["isError"], true);
    assert_eq!(
        other["result"]["structuredContent"]["code"],
        "idempotency_key_mismatch"
    );
    assert_eq!(upstream.count(), 1);
    // Without a key every call is a new invocation.
    req(s.addr, "POST", "/mcp", &h, &call(10, 100, None)).await;
    req(s.addr, "POST", "/mcp", &h, &call(11, 100, None)).await;
    assert_eq!(upstream.count(), 3);
    // Another tenant's key space is its own (and it may not call payments).
    s.stop().await;
}
