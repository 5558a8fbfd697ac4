//! The reference server `@modelcontextprotocol/server-everything` (pinned in
//! tests/node/package-lock.json) over stdio.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use serde_json::{Map, json};
use wop_mcp::{McpServerConfig, REV_2025_11_25};

fn everything_hub() -> wop_mcp::McpHub {
    let js = common::everything_js();
    let mut cfg = McpServerConfig::stdio("node", vec![js.display().to_string(), "stdio".into()]);
    cfg.timeout_ms = 20_000;
    common::hub(vec![("everything", cfg)])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn everything_over_stdio() {
    if common::skip("everything_over_stdio") {
        return;
    }
    let hub = everything_hub();
    assert_eq!(
        hub.protocol_version("everything"),
        None,
        "lazy: not started yet"
    );

    // call a tool: unaltered result.
    let r = hub
        .call_tool("everything", "echo", json!({"message": "hi"}), Map::new())
        .await
        .unwrap();
    assert_eq!(r["content"][0]["text"], "Echo: hi", "{r}");
    // The server answers 2025-11-25 to our initialize (its newest).
    assert_eq!(
        hub.protocol_version("everything").as_deref(),
        Some(REV_2025_11_25)
    );

    let r = hub
        .call_tool("everything", "get-sum", json!({"a": 2, "b": 3}), Map::new())
        .await
        .unwrap();
    assert!(
        r["content"][0]["text"].as_str().unwrap().contains('5'),
        "{r}"
    );

    // A tool-level failure (bad arguments) is still a result, not an error.
    let r = hub
        .call_tool("everything", "get-sum", json!({"a": "x"}), Map::new())
        .await;
    match r {
        Ok(v) => assert_eq!(v["isError"], true, "{v}"),
        Err(e) => assert_eq!(e.code(), "mcp_error", "{e}"),
    }

    // Concurrent calls on one child are matched to their own answers by id.
    let hub = std::sync::Arc::new(hub);
    let tasks: Vec<_> = (0..8)
        .map(|i| {
            let hub = hub.clone();
            tokio::spawn(async move {
                hub.call_tool(
                    "everything",
                    "echo",
                    json!({"message": format!("m{i}")}),
                    Map::new(),
                )
                .await
            })
        })
        .collect();
    for (i, t) in tasks.into_iter().enumerate() {
        let r = t.await.unwrap().unwrap();
        assert_eq!(r["content"][0]["text"], format!("Echo: m{i}"));
    }

    // list tools, following the cursor if the server paginates.
    let mut cursor = None;
    let mut names = Vec::new();
    for _ in 0..20 {
        let page = hub.list_tools("everything", cursor.clone()).await.unwrap();
        for t in page["tools"].as_array().unwrap() {
            names.push(t["name"].as_str().unwrap().to_owned());
        }
        match page.get("nextCursor").and_then(|c| c.as_str()) {
            Some(c) => cursor = Some(c.to_owned()),
            None => break,
        }
    }
    assert!(names.iter().any(|n| n == "echo"), "{names:?}");
    assert!(names.iter().any(|n| n == "get-sum"), "{names:?}");

    // read a resource.
    let r = hub
        .read_resource("everything", "demo://resource/dynamic/text/1")
        .await
        .unwrap();
    assert!(
        r["contents"][0]["text"]
            .as_str()
            .unwrap()
            .starts_with("Resource 1"),
        "{r}"
    );

    // health.
    let h = hub.server_health("everything").await.unwrap();
    assert_eq!(h["serverId"], "everything");
    assert_eq!(h["transport"], "stdio");
    assert_eq!(h["state"], "ready", "{h}");
    assert_eq!(h["protocolVersion"], REV_2025_11_25);
    assert_eq!(h["restarts"], 0);

    // unknown server id.
    let e = hub
        .call_tool("nope", "echo", json!({}), Map::new())
        .await
        .unwrap_err();
    assert_eq!(e.code(), "not_found");
    hub.shutdown().await;
}

/// The same reference server over its Streamable HTTP transport: stateful
/// sessions (`Mcp-Session-Id`) and SSE-framed answers, pre-2026 revision.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn everything_over_streamable_http() {
    if common::skip("everything_over_streamable_http") {
        return;
    }
    let js = common::everything_js();
    let port = common::free_port();
    let _server = common::start_http_env(
        "node",
        &[js.display().to_string(), "streamableHttp".into()],
        &[("PORT", port.to_string())],
        port,
    );
    let mut cfg = McpServerConfig::streamable_http(format!("http://127.0.0.1:{port}/mcp"));
    cfg.timeout_ms = 20_000;
    let hub = std::sync::Arc::new(common::hub(vec![("everything", cfg)]));

    let r = hub
        .call_tool(
            "everything",
            "echo",
            json!({"message": "over http"}),
            Map::new(),
        )
        .await
        .unwrap();
    assert_eq!(r["content"][0]["text"], "Echo: over http", "{r}");
    assert_eq!(
        hub.protocol_version("everything").as_deref(),
        Some(REV_2025_11_25)
    );

    // Concurrent calls on one session are matched to their own answers.
    let tasks: Vec<_> = (0..8)
        .map(|i| {
            let hub = hub.clone();
            tokio::spawn(async move {
                hub.call_tool(
                    "everything",
                    "get-sum",
                    json!({"a": i, "b": 1000}),
                    Map::new(),
                )
                .await
            })
        })
        .collect();
    for (i, t) in tasks.into_iter().enumerate() {
        let r = t.await.unwrap();
        let text = r.unwrap()["content"][0]["text"]
            .as_str()
            .unwrap()
            .to_owned();
        assert!(text.contains(&(i + 1000).to_string()), "{i}: {text}");
    }

    let page = hub.list_tools("everything", None).await.unwrap();
    assert!(page["tools"].as_array().unwrap().len() > 3);
    let r = hub
        .read_resource("everything", "demo://resource/dynamic/text/2")
        .await
        .unwrap();
    assert!(
        r["contents"][0]["text"]
            .as_str()
            .unwrap()
            .starts_with("Resource 2")
    );
    let h = hub.server_health("everything").await.unwrap();
    assert_eq!(h["state"], "ready", "{h}");
    assert_eq!(h["transport"], "streamable-http");
}
