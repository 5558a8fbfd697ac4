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

/// `tests/mcp_client_refused.py` against `url`, initialized and waiting
/// for the word to call the tool.
struct WaitingClient {
    child: tokio::process::Child,
    stdout: tokio::io::BufReader<tokio::process::ChildStdout>,
}

impl WaitingClient {
    async fn start(py: &std::path::Path, url: &str) -> Self {
        Self::start_with(py, url, &[]).await
    }

    /// Like [`start`](Self::start), with the script's optional arguments.
    async fn start_with(py: &std::path::Path, url: &str, args: &[&str]) -> Self {
        use tokio::io::AsyncBufReadExt as _;
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/mcp_client_refused.py");
        let mut child = tokio::process::Command::new(py)
            .arg(script)
            .arg(url)
            .arg(TOKEN)
            .args(args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let mut stdout = tokio::io::BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        stdout.read_line(&mut line).await.unwrap();
        assert_eq!(line.trim(), "ready", "the client did not initialize");
        WaitingClient { child, stdout }
    }

    /// Calls the tool; what the script printed, as JSON.
    async fn call(mut self) -> Value {
        use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _};
        let mut stdin = self.child.stdin.take().unwrap();
        stdin.write_all(b"go\n").await.unwrap();
        let mut line = String::new();
        self.stdout.read_line(&mut line).await.unwrap();
        assert!(self.child.wait().await.unwrap().success(), "{line}");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"))
    }
}

/// A tool call refused for the tenant's share of the slots, as the
/// official SDK shows it: a JSON-RPC error carrying our message, code and
/// when to retry (before: the `429`'s body was not JSON-RPC, and the SDK
/// reported only "Server returned an error response", code -32603).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_mcp_sdk_sees_why_a_call_was_refused() {
    let Some(py) = python_or_skip() else { return };
    // The spin holds its slot until this wall clock ends: long enough to
    // outlast the checks on a starved machine (a run beside CI, at nice
    // 19, saw a 4 s spin end before them).
    let policy = "[limits]\nwallClockMs = 8000\nfuel = 1000000000000000\n";
    let cfg = serve_toml("maxInFlight = 4\nmaxInFlightPerTenant = 1\nretryAfterSecs = 3");
    let s = start(policy, &cfg, &["spin", "hello"]).await;
    let addr = s.addr;
    let url = format!("http://{addr}/mcp");
    // Initialized before the slot is taken (the interpreter's start is
    // slow on a busy machine; the spin's wall clock is not).
    let client = WaitingClient::start(&py, &url).await;
    let spin = serde_json::json!({"typeId": "wop.testing.spin", "inputs": {}});
    let held =
        tokio::spawn(async move { post_json(addr, "/host/wop/invocations", TOKEN, &spin).await });
    until_in_flight(addr, 1).await;
    let v = client.call().await;
    let e = &v["error"];
    assert_eq!(e["code"], -32001, "{v}");
    assert_eq!(e["data"]["error"], "rate_limited", "{v}");
    assert_eq!(e["data"]["retryAfterSecs"], 3, "{v}");
    assert_eq!(e["data"]["details"]["maxInFlightPerTenant"], 1, "{v}");
    let message = e["message"].as_str().unwrap_or_default();
    assert!(message.contains("maxInFlightPerTenant"), "{v}");
    // The same client is served once the tenant's slot is back.
    assert_eq!(held.await.unwrap().status, 200);
    let v = WaitingClient::start(&py, &url).await.call().await;
    assert_eq!(v["isError"], false, "{v}");
    assert!(
        v["text"].as_str().unwrap_or_default().contains("Ada"),
        "{v}"
    );
    s.stop().await;
}

/// A body refused before it is parsed (over `maxBodyBytes`), as the
/// official SDK shows it: a JSON-RPC error (`id: null`, which the SDK
/// gives the request's id) carrying our code and the limit. Before, the
/// `413`'s body was the invoke API's and the SDK reported only "Server
/// returned an error response" (-32603).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_mcp_sdk_sees_why_a_body_was_refused() {
    let Some(py) = python_or_skip() else { return };
    let s = start("", &serve_toml("maxBodyBytes = 4096"), &["hello"]).await;
    let url = format!("http://{}/mcp", s.addr);
    let v = WaitingClient::start_with(&py, &url, &["5000"])
        .await
        .call()
        .await;
    let e = &v["error"];
    assert_eq!(e["code"], -32600, "{v}");
    assert_eq!(e["data"]["error"], "payload_too_large", "{v}");
    assert_eq!(e["data"]["details"]["limitBytes"], 4096, "{v}");
    let message = e["message"].as_str().unwrap_or_default();
    assert!(message.contains("4096 bytes"), "{v}");
    // A call that fits is served by the same server.
    let v = WaitingClient::start(&py, &url).await.call().await;
    assert_eq!(v["isError"], false, "{v}");
    s.stop().await;
}

/// A keyed call past the tenant's share of the store (decision 0054), as
/// the official SDK shows it: the invocation's own error, naming the
/// share and the setting, with nothing run; and an un-keyed one, refused
/// before it starts (decision 0055).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_mcp_sdk_sees_a_call_refused_past_the_tenants_share() {
    let Some(py) = python_or_skip() else { return };
    let s = start(
        "",
        &serve_toml("maxStoreBytesPerTenant = 1048576"),
        &["hello"],
    )
    .await;
    let url = format!("http://{}/mcp", s.addr);
    let big =
        serde_json::json!({"typeId": "wop.samples.hello", "inputs": {"name": "A".repeat(100_000)}});
    let mut refused = false;
    for i in 0..40 {
        let r = keyed_as(s.addr, Some(TOKEN), &format!("key-{i}"), &big).await;
        if r.status == 507 {
            refused = true;
            break;
        }
        assert_eq!(r.status, 200, "response {i}");
    }
    assert!(refused, "40 responses of ~200 KB and still not past 1 MiB");
    let v = WaitingClient::start_with(&py, &url, &["100000", "from-the-sdk"])
        .await
        .call()
        .await;
    let head: String = v.to_string().chars().take(600).collect();
    assert_eq!(v["isError"], true, "{head}");
    let refusal = &v["structuredContent"];
    assert_eq!(refusal["code"], "effect_store_full", "{head}");
    assert_eq!(refusal["details"]["tenant"], "acme", "{head}");
    let message = refusal["message"].as_str().unwrap_or_default();
    for part in [
        "did not run",
        "tenant `acme`",
        "share of 1048576 bytes",
        "maxStoreBytesPerTenant",
    ] {
        assert!(message.contains(part), "no {part:?} in {head}");
    }
    // An un-keyed call, which would record its usage, does not start.
    let v = WaitingClient::start(&py, &url).await.call().await;
    assert_eq!(v["isError"], true, "{v}");
    let refusal = &v["structuredContent"];
    assert_eq!(refusal["code"], "effect_store_full", "{v}");
    assert_eq!(refusal["details"]["tenant"], "acme", "{v}");
    s.stop().await;
}
