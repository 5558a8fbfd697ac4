//! A Streamable HTTP server built on the pinned PyPI `mcp` SDK
//! (tests/python/requirements.txt), on 127.0.0.1 with a free port.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use serde_json::{Map, json};
use wop_mcp::{McpServerConfig, REV_2026_07_28};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdk_over_streamable_http() {
    if common::skip("python_sdk_over_streamable_http") {
        return;
    }
    let python = common::venv_python();
    let port = common::free_port();
    let script = common::tests_dir().join("python/http_server.py");
    let _server = common::start_http(
        &python.display().to_string(),
        &[script.display().to_string(), port.to_string()],
        port,
    );
    let mut cfg = McpServerConfig::streamable_http(format!("http://127.0.0.1:{port}/mcp"));
    cfg.timeout_ms = 20_000;
    let hub = common::hub(vec![("py", cfg)]);

    let mut meta = Map::new();
    meta.insert("dev.openwop/idempotencyKey".into(), json!("effect-1"));
    let r = hub
        .call_tool("py", "add", json!({"a": 2, "b": 40}), meta)
        .await
        .unwrap();
    assert_eq!(r["content"][0]["text"], "42", "{r}");
    assert_eq!(r["isError"], false);
    // The SDK speaks the stateless revision; we negotiated it via server/discover.
    assert_eq!(hub.protocol_version("py").as_deref(), Some(REV_2026_07_28));

    let r = hub
        .call_tool("py", "echo", json!({"message": "hé"}), Map::new())
        .await
        .unwrap();
    assert_eq!(r["content"][0]["text"], "hé");

    // The idempotency key reached the server in params._meta, exactly once.
    let r = hub
        .call_tool(
            "py",
            "idempotency_count",
            json!({"key": "effect-1"}),
            Map::new(),
        )
        .await
        .unwrap();
    assert_eq!(r["content"][0]["text"], "1", "{r}");

    // A tool error is a result (isError: true), not an McpError.
    let r = hub
        .call_tool("py", "add", json!({"a": "not a number"}), Map::new())
        .await
        .unwrap();
    assert_eq!(r["isError"], true, "{r}");

    let page = hub.list_tools("py", None).await.unwrap();
    let names: Vec<_> = page["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect();
    assert!(names.contains(&"echo".to_owned()), "{names:?}");
    if let Some(c) = page.get("nextCursor").and_then(|c| c.as_str()) {
        hub.list_tools("py", Some(c.to_owned())).await.unwrap();
    }

    let r = hub.read_resource("py", "test://greeting").await.unwrap();
    assert_eq!(r["contents"][0]["text"], "hello from python", "{r}");

    let e = hub.read_resource("py", "test://missing").await.unwrap_err();
    assert_eq!(e.code(), "mcp_error", "{e}");

    let h = hub.server_health("py").await.unwrap();
    assert_eq!(h["state"], "ready", "{h}");
    assert_eq!(h["transport"], "streamable-http");
    assert_eq!(h["protocolVersion"], REV_2026_07_28);
}
