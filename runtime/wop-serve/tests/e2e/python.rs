//! The official Python MCP SDK (`mcp`, pinned in tests/setup.sh) against
//! the mount: list tools, call `wop.samples.hello`.

use super::*;
use std::path::PathBuf;

fn venv_python() -> Option<PathBuf> {
    let venv = std::env::var_os("WOP_SERVE_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/wop-serve-venv")
        });
    let py = venv.join("bin/python");
    py.exists().then_some(py)
}

/// The venv's Python, or `None` (skipped, unless `WOP_SERVE_REQUIRE_PY`).
fn python_or_skip() -> Option<PathBuf> {
    let py = venv_python();
    if py.is_none() {
        if std::env::var_os("WOP_SERVE_REQUIRE_PY").is_some() {
            panic!("no venv: run runtime/wop-serve/tests/setup.sh");
        }
        eprintln!(
            "SKIPPED: no Python venv; run runtime/wop-serve/tests/setup.sh (WOP_SERVE_REQUIRE_PY=1 makes this fatal)"
        );
    }
    py
}

/// Runs `tests/<script>` with the mount's URL and `token`; its last
/// stdout line, as JSON.
async fn run_script(py: PathBuf, script: &str, url: &str, token: &str) -> Value {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join(script);
    let out = tokio::process::Command::new(py)
        .arg(script)
        .arg(url)
        .arg(token)
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "stdout: {stdout}\nstderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(stdout.lines().last().unwrap()).unwrap()
}

/// `ClientSession` with the initialize handshake.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_mcp_sdk_lists_and_calls() {
    let Some(py) = python_or_skip() else { return };
    let s = start("", &serve_toml(""), &["hello"]).await;
    let url = format!("http://{}/mcp", s.addr);
    let v = run_script(py, "mcp_client.py", &url, TOKEN).await;
    assert_eq!(v["tools"], serde_json::json!(["wop.samples.hello"]));
    assert_eq!(v["isError"], false);
    assert!(v["text"].as_str().unwrap().contains("Ada"));
    s.stop().await;
}

/// The SDK's `Client` in its default mode (`auto`: `server/discover`, then
/// stateless 2026-07-28 requests whose results it validates, with its
/// response cache on): it rejected our listing without `ttlMs` and
/// `cacheScope` before (issue 19, item 9).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_mcp_client_default_mode_lists_and_calls() {
    let Some(py) = python_or_skip() else { return };
    let s = start("", &serve_toml(""), &["hello", "transform"]).await;
    let url = format!("http://{}/mcp", s.addr);
    let v = run_script(py, "mcp_client_auto.py", &url, TOKEN).await;
    assert_eq!(v["protocolVersion"], "2026-07-28", "{v}");
    assert_eq!(
        v["tools"],
        serde_json::json!(["wop.samples.hello", "wop.samples.transform"])
    );
    assert_eq!(v["cacheScope"], "private");
    assert!(v["ttlMs"].as_u64().is_some_and(|t| t > 0), "{v}");
    assert_eq!(v["sameAgain"], true);
    assert_eq!(v["isError"], false, "{v}");
    assert!(v["text"].as_str().unwrap().contains("Ada"));
    s.stop().await;
}
