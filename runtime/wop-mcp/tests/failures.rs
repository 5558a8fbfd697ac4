//! How client failures are classified (issue 19, decision 0007): a connect
//! or handshake that fails or runs out of time never sends the call
//! (`McpFailure::sent == false`, `upstream_unavailable`, retryable), a
//! server that starts slowly still negotiates, and invalid UTF-8 is refused
//! the same way on every transport.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use serde_json::{Map, Value, json};
use std::path::Path;
use wop_mcp::McpServerConfig;

fn with_env(mut c: McpServerConfig, key: &str, value: &str) -> McpServerConfig {
    c.env.insert(key.to_owned(), value.to_owned());
    c
}

/// The methods a `FAKE_MCP_LOG` server received, in order.
fn received(log: &Path) -> Vec<String> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            v["method"].as_str().unwrap().to_owned()
        })
        .collect()
}

/// The failure of `tool` on server `id`, which must fail.
async fn failed(
    hub: &wop_mcp::McpHub,
    id: &str,
    tool: &str,
    by: Option<tokio::time::Instant>,
) -> wop_mcp::McpFailure {
    hub.call_tool_by(id, tool, json!({}), Map::new(), by)
        .await
        .unwrap_err()
}

/// A stdio server that reads nothing for 4 s — longer than the 3 s
/// discovery probe — negotiates its revision within the call's timeout,
/// legacy and 2026-07-28 alike (the latter answered `initialize` with an
/// error, which failed the handshake before).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stdio_server_that_starts_in_four_seconds_works() {
    if common::skip("a_stdio_server_that_starts_in_four_seconds_works") {
        return;
    }
    for (mode, rev) in [("legacy", "2025-06-18"), ("modern", "2026-07-28")] {
        let cfg = with_env(
            common::fake_stdio(mode, None, 10_000),
            "FAKE_MCP_START_DELAY_MS",
            "4000",
        );
        let hub = common::hub(vec![("slow", cfg)]);
        let r = hub
            .call_tool("slow", "echo", json!({"x": 1}), Map::new())
            .await
            .unwrap_or_else(|e| panic!("{mode}: {e}"));
        assert_eq!(
            r["structuredContent"]["params"]["arguments"]["x"], 1,
            "{mode}: {r}"
        );
        assert_eq!(hub.protocol_version("slow").as_deref(), Some(rev), "{mode}");
    }
}

/// Failures before the call is written are `sent: false`; after, `true`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_handshake_never_sends_the_call() {
    if common::skip("a_failed_handshake_never_sends_the_call") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    // A server that answers nothing: the handshake runs out of time.
    let log = tmp.path().join("mute.log");
    let cfg = with_env(
        common::fake_stdio("mute", None, 1_500),
        "FAKE_MCP_LOG",
        log.to_str().unwrap(),
    );
    let hub = common::hub(vec![("mute", cfg)]);
    let f = failed(&hub, "mute", "echo", None).await;
    assert!(!f.sent, "{f:?}");
    assert_eq!(f.error.code(), "upstream_unavailable", "{f:?}");
    assert!(f.error.retryable());
    assert_eq!(f.error.details()["retryable"], true);
    assert!(
        !received(&log).iter().any(|m| m == "tools/call"),
        "{:?}",
        received(&log)
    );
    // The caller's own deadline, shorter than the server's timeout: the
    // same verdict.
    let hub = common::hub(vec![("mute", common::fake_stdio("mute", None, 60_000))]);
    let by = tokio::time::Instant::now() + std::time::Duration::from_millis(800);
    let f = failed(&hub, "mute", "echo", Some(by)).await;
    assert!(!f.sent, "{f:?}");

    // A server whose first start fails: not sent; the next call starts it
    // again and reaches it.
    let log = tmp.path().join("flaky.log");
    let cfg = with_env(
        with_env(
            common::fake_stdio("legacy", None, 5_000),
            "FAKE_MCP_FAIL_FIRST",
            tmp.path().join("started").to_str().unwrap(),
        ),
        "FAKE_MCP_LOG",
        log.to_str().unwrap(),
    );
    let hub = common::hub(vec![("flaky", cfg)]);
    let f = failed(&hub, "flaky", "echo", None).await;
    assert!(!f.sent, "{f:?}");
    assert_eq!(f.error.code(), "upstream_unavailable");
    assert!(received(&log).is_empty(), "nothing reached it");
    hub.call_tool_by("flaky", "echo", json!({}), Map::new(), None)
        .await
        .unwrap();
    assert!(received(&log).iter().any(|m| m == "tools/call"));

    // Sent and never answered: sent. Sent and answered with an error: sent.
    let hub = common::hub(vec![
        ("silent", common::fake_stdio("silent", None, 1_500)),
        ("legacy", common::fake_stdio("legacy", None, 5_000)),
    ]);
    let f = failed(&hub, "silent", "echo", None).await;
    assert!(f.sent, "{f:?}");
    assert_eq!(f.error.code(), "upstream_unavailable");
    let f = failed(&hub, "legacy", "rpcerror", None).await;
    assert!(f.sent, "{f:?}");
    assert_eq!(f.error.code(), "mcp_error");
    // An unknown server id: never sent.
    let f = failed(&hub, "ghost", "echo", None).await;
    assert!(!f.sent);
    assert_eq!(f.error.code(), "not_found");
}

/// A result with invalid UTF-8 is refused alike over stdio, an HTTP JSON
/// body and an HTTP event stream (HTTP used to replace it silently in
/// events): the same code and reason, sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_utf8_is_refused_alike_on_every_transport() {
    if common::skip("invalid_utf8_is_refused_alike_on_every_transport") {
        return;
    }
    let (_srv, port) = common::start_hostile_http();
    let hub = common::hub(vec![
        ("stdio", common::fake_stdio("badutf8", None, 5_000)),
        ("json", common::http_cfg(port, "badutf8", 5_000)),
        ("sse", common::http_cfg(port, "badutf8sse", 5_000)),
    ]);
    let mut seen = Vec::new();
    for id in ["stdio", "json", "sse"] {
        let f = hub
            .call_tool_by(id, "echo", json!({}), Map::new(), None)
            .await
            .unwrap_err();
        assert!(f.sent, "{id}: {f:?}");
        seen.push((id, f.error.code(), f.error.details()["reason"].clone()));
    }
    for (id, code, reason) in &seen {
        assert_eq!(*code, "upstream_unavailable", "{id}");
        assert_eq!(
            reason,
            &json!("MCP server sent a message that is not valid UTF-8"),
            "{id}"
        );
    }
}
