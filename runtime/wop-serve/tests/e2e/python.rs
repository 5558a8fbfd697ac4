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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_mcp_sdk_lists_and_calls() {
    let Some(py) = venv_python() else {
        if std::env::var_os("WOP_SERVE_REQUIRE_PY").is_some() {
            panic!("no venv: run runtime/wop-serve/tests/setup.sh");
        }
        eprintln!(
            "SKIPPED: no Python venv; run runtime/wop-serve/tests/setup.sh (WOP_SERVE_REQUIRE_PY=1 makes this fatal)"
        );
        return;
    };
    let s = start("", &serve_toml(""), &["hello"]).await;
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/mcp_client.py");
    let url = format!("http://{}/mcp", s.addr);
    let out = tokio::process::Command::new(py)
        .arg(script)
        .arg(&url)
        .arg(TOKEN)
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "stdout: {stdout}\nstderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    assert_eq!(v["tools"], serde_json::json!(["wop.samples.hello"]));
    assert_eq!(v["isError"], false);
    assert!(v["text"].as_str().unwrap().contains("Ada"));
    s.stop().await;
}
