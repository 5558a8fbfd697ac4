//! Hostile servers cannot hurt the host: each failure is typed and bounded
//! in time (asserted only against timeoutMs × a generous factor).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::time::Instant;

use serde_json::{Map, json};
use wop_mcp::McpHub;

const TIMEOUT_MS: u64 = 2_000;

async fn call(
    hub: &McpHub,
    server: &str,
) -> (
    Result<serde_json::Value, wop_mcp::McpError>,
    std::time::Duration,
) {
    let t = Instant::now();
    let r = hub
        .call_tool(server, "echo", json!({"a": 1}), Map::new())
        .await;
    (r, t.elapsed())
}

async fn stdio_case(mode: &str, code: &str) -> McpHub {
    let hub = common::hub(vec![("h", common::fake_stdio(mode, None, TIMEOUT_MS))]);
    let (r, took) = call(&hub, "h").await;
    let e = r.expect_err(mode);
    assert_eq!(e.code(), code, "{mode}: {e}");
    assert!(e.details().is_object());
    common::assert_bounded(took, TIMEOUT_MS);
    hub
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_stdio_servers() {
    if common::skip("hostile_stdio_servers") {
        return;
    }
    let mut small = common::fake_stdio("huge", None, TIMEOUT_MS);
    small.max_result_bytes = 64 * 1024;
    let hub = common::hub(vec![("h", small)]);
    let (r, took) = call(&hub, "h").await;
    let e = r.unwrap_err();
    assert_eq!(e.code(), "mcp_result_too_large", "{e}");
    assert_eq!(e.details()["limit"], 64 * 1024);
    common::assert_bounded(took, TIMEOUT_MS);
    // The connection survives an oversized line.
    let ok = hub.list_tools("h", None).await.unwrap();
    assert_eq!(ok["nextCursor"], "page2");

    stdio_case("huge", "mcp_result_too_large").await; // 4 MiB > 1 MiB default
    stdio_case("endless", "mcp_result_too_large").await;
    stdio_case("invalid", "upstream_unavailable").await;
    stdio_case("wrongid", "upstream_unavailable").await;
    stdio_case("silent", "upstream_unavailable").await;

    // A notification flood before the answer: the answer still arrives.
    let hub = common::hub(vec![("h", common::fake_stdio("flood", None, 30_000))]);
    let (r, took) = call(&hub, "h").await;
    assert_eq!(r.unwrap()["isError"], false);
    common::assert_bounded(took, 30_000);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdio_stderr_flood_is_bounded() {
    if common::skip("stdio_stderr_flood_is_bounded") {
        return;
    }
    let hub = common::hub(vec![("h", common::fake_stdio("stderr", None, 30_000))]);
    let (r, took) = call(&hub, "h").await;
    assert_eq!(
        r.unwrap()["isError"],
        false,
        "64 MiB of stderr did not stall the call"
    );
    common::assert_bounded(took, 30_000);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdio_exit_mid_call_fails_promptly_and_restarts() {
    if common::skip("stdio_exit_mid_call_fails_promptly_and_restarts") {
        return;
    }
    // A long timeout: the failure must come from the exit, not the timer.
    let hub = common::hub(vec![("h", common::fake_stdio("exit", None, 60_000))]);
    let (r, took) = call(&hub, "h").await;
    let e = r.unwrap_err();
    assert_eq!(e.code(), "upstream_unavailable", "{e}");
    assert!(
        took.as_millis() < 30_000,
        "exit must fail the call before the 60 s timeout, took {took:?}"
    );
    // Restarted (after backoff) on next use.
    let page = hub.list_tools("h", None).await.unwrap();
    assert_eq!(page["nextCursor"], "page2");
    let h = hub.server_health("h").await.unwrap();
    assert_eq!(h["state"], "ready", "{h}");
    assert_eq!(h["restarts"], 1, "{h}");
    let last = h["lastError"].as_str().unwrap();
    assert!(
        last.contains("exiting mid-call"),
        "stderr tail kept: {last}"
    );
}

use common::http_cfg;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_http_servers() {
    if common::skip("hostile_http_servers") {
        return;
    }
    let (_srv, port) = common::start_hostile_http();
    let cases = [
        ("ok", None),
        ("sse", None),
        ("huge", Some("mcp_result_too_large")),
        ("endless", Some("mcp_result_too_large")),
        ("invalid", Some("upstream_unavailable")),
        ("wrongid", Some("upstream_unavailable")),
        ("silent", Some("upstream_unavailable")),
    ];
    for (path, code) in cases {
        let hub = common::hub(vec![("h", http_cfg(port, path, TIMEOUT_MS))]);
        let (r, took) = call(&hub, "h").await;
        match code {
            None => assert_eq!(r.unwrap()["content"][0]["text"], "ok", "{path}"),
            Some(code) => {
                let e = r.expect_err(path);
                assert_eq!(e.code(), code, "{path}: {e}");
            }
        }
        common::assert_bounded(took, TIMEOUT_MS);
    }
    // Notification flood and a wrong-id response on the stream, then ours.
    let hub = common::hub(vec![("h", http_cfg(port, "flood", 30_000))]);
    let (r, took) = call(&hub, "h").await;
    assert_eq!(r.unwrap()["content"][0]["text"], "ok");
    common::assert_bounded(took, 30_000);

    // A forgotten session (404): a new session is made and the call sent once more.
    let hub = common::hub(vec![("h", http_cfg(port, "expire", TIMEOUT_MS))]);
    let (r, took) = call(&hub, "h").await;
    assert_eq!(r.unwrap()["content"][0]["text"], "ok");
    common::assert_bounded(took, TIMEOUT_MS);
    let h = hub.server_health("h").await.unwrap();
    assert_eq!(h["restarts"], 1, "{h}");
    assert_eq!(h["state"], "ready", "{h}");

    // Nothing listening.
    let dead = common::free_port();
    let hub = common::hub(vec![("h", http_cfg(dead, "ok", TIMEOUT_MS))]);
    let (r, took) = call(&hub, "h").await;
    assert_eq!(r.unwrap_err().code(), "upstream_unavailable");
    common::assert_bounded(took, TIMEOUT_MS);
    let h = hub.server_health("h").await.unwrap();
    assert_eq!(h["state"], "down");
    assert!(h["lastError"].is_string(), "{h}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdio_child_gets_only_configured_env() {
    if common::skip("stdio_child_gets_only_configured_env") {
        return;
    }
    let mut cfg = common::fake_stdio("legacy", None, 5_000);
    cfg.env.insert("WOP_TEST_VAR".into(), "configured".into());
    let cwd = std::env::temp_dir();
    cfg.cwd = Some(cwd.display().to_string());
    let hub = common::hub(vec![("h", cfg)]);
    let r = hub
        .call_tool("h", "env", json!({}), Map::new())
        .await
        .unwrap();
    let env = r["structuredContent"]["env"].as_object().unwrap();
    assert_eq!(env["WOP_TEST_VAR"], "configured");
    assert!(env.contains_key("PATH"));
    assert!(!env.contains_key("HOME"), "{env:?}");
    assert!(!env.keys().any(|k| k.starts_with("CARGO")), "{env:?}");
    let got = std::path::PathBuf::from(r["structuredContent"]["cwd"].as_str().unwrap());
    assert_eq!(got.canonicalize().unwrap(), cwd.canonicalize().unwrap());
}
