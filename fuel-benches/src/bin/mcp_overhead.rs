//! Per-call overhead of `ctx.mcp` over a direct `rmcp` client call to the
//! same MCP server program, in the same run (issue 10). Three columns per
//! server, measured interleaved, best of 5 rounds:
//!
//! - `rmcp`: the official Rust SDK's client, its own child process (stdio)
//!   or its own HTTP session, calling the tool directly;
//! - `wop-mcp`: our hub (the transports the gate uses), called directly;
//! - `ctx.mcp`: the `mcp` sample pack calling the tool N times inside one
//!   invocation (pack → runtime → gate: authorization, rate limit, budget,
//!   events, usage → wop-mcp → server), minus an empty invocation.
//!
//! Servers: `@modelcontextprotocol/server-everything` over stdio (`echo`)
//! and the PyPI `mcp` Streamable HTTP test server on loopback (`add`);
//! install both with `bash runtime/wop-mcp/tests/setup.sh`.
//!
//! Run: `cargo run --release -p fuel-benches --features rmcp-baseline
//! --bin mcp_overhead [-- N]`
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::{ConfigureCommandExt, StreamableHttpClientTransport, TokioChildProcess};
use serde_json::{Value, json};
use wop_runtime::{InvokeRequest, Outcome, Policy, Runtime, RuntimeConfig};

const ROUNDS: usize = 5;

fn tests_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../runtime/wop-mcp/tests")
}

fn need(p: PathBuf) -> String {
    assert!(
        p.exists(),
        "missing {}; run `bash runtime/wop-mcp/tests/setup.sh` first",
        p.display()
    );
    p.display().to_string()
}

fn invoke_req(server: &str, tool: &str, args: &Value, repeat: u32) -> InvokeRequest {
    InvokeRequest::new(
        "wop.samples.mcp",
        json!({"server": server, "tool": tool, "arguments": args, "repeat": repeat}),
    )
}

async fn invoke_ok(rt: &Runtime, r: InvokeRequest) {
    match rt.invoke(r).await.outcome {
        Ok(Outcome::Completed { .. }) => {}
        other => panic!("ctx.mcp invocation failed: {other:?}"),
    }
}

fn us_per_call(d: Duration, n: u32) -> f64 {
    d.as_secs_f64() * 1e6 / f64::from(n)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let n: u32 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(300);
    let everything = need(
        tests_dir().join("node/node_modules/@modelcontextprotocol/server-everything/dist/index.js"),
    );
    let (_py, port) = wop_testkit::start_python_mcp_http();
    let url = format!("http://127.0.0.1:{port}/mcp");
    let policy = format!(
        r#"
[mcp.servers.everything]
transport = "stdio"
command = "node"
args = ["{everything}", "stdio"]
timeoutMs = 20000
tiers = {{ echo = "pure" }}

[mcp.servers.py]
transport = "streamable-http"
url = "{url}"
timeoutMs = 20000
tiers = {{ add = "read" }}

[packs.mcp]
capabilities = ["log", "mcp"]
mcp = ["everything/echo", "py/add"]
"#
    );
    let p = Policy::from_toml(&policy).unwrap();
    let mut cfg = RuntimeConfig::new();
    cfg.policy(p.clone());
    let rt = Runtime::new(&cfg).unwrap();
    rt.load_pack(&wop_test_packs::pack_dir("mcp"))
        .await
        .unwrap();
    let hub = wop_runtime::gate::mcp::McpGateway::new(p.mcp.servers.clone()).unwrap();

    // The rmcp baselines: one client per server, as a host would hold.
    let stdio_client = ()
        .serve(
            TokioChildProcess::new(tokio::process::Command::new("node").configure(|c| {
                c.arg(&everything).arg("stdio").stderr(Stdio::null());
            }))
            .unwrap(),
        )
        .await
        .unwrap();
    let http_client =
        ().serve(StreamableHttpClientTransport::from_uri(url.as_str()))
            .await
            .unwrap();

    println!("ctx.mcp per-call overhead, {n} calls per sample, best of {ROUNDS} rounds");
    println!(
        "| server / tool (transport) | rmcp direct | wop-mcp direct | ctx.mcp | ctx.mcp − rmcp | ratio ctx.mcp / rmcp |"
    );
    println!("|---|---|---|---|---|---|");
    for (server, tool, args, client) in [
        (
            "everything",
            "echo",
            json!({"message": "hi"}),
            &stdio_client,
        ),
        ("py", "add", json!({"a": 1, "b": 2}), &http_client),
    ] {
        let Value::Object(obj) = args.clone() else {
            unreachable!()
        };
        let rmcp_call = || async {
            client
                .call_tool(CallToolRequestParams::new(tool).with_arguments(obj.clone()))
                .await
                .unwrap();
        };
        let hub_call = || async {
            hub.hub()
                .call_tool(server, tool, args.clone(), Default::default())
                .await
                .unwrap();
        };
        // Warm up every path (process start, handshake, compile cache).
        for _ in 0..20 {
            rmcp_call().await;
            hub_call().await;
        }
        invoke_ok(&rt, invoke_req(server, tool, &args, 20)).await;

        let mut best = [f64::MAX; 3];
        for _ in 0..ROUNDS {
            let t = Instant::now();
            for _ in 0..n {
                rmcp_call().await;
            }
            best[0] = best[0].min(us_per_call(t.elapsed(), n));
            let t = Instant::now();
            for _ in 0..n {
                hub_call().await;
            }
            best[1] = best[1].min(us_per_call(t.elapsed(), n));
            let t = Instant::now();
            invoke_ok(&rt, invoke_req(server, tool, &args, 0)).await;
            let empty = t.elapsed();
            let t = Instant::now();
            invoke_ok(&rt, invoke_req(server, tool, &args, n)).await;
            let full = t.elapsed().saturating_sub(empty);
            best[2] = best[2].min(us_per_call(full, n));
        }
        let transport = p.mcp.servers[server].transport.as_str();
        println!(
            "| {server} / {tool} ({transport}) | {:.1} µs | {:.1} µs | {:.1} µs | {:+.1} µs | {:.2}× |",
            best[0],
            best[1],
            best[2],
            best[2] - best[0],
            best[2] / best[0]
        );
    }
    let _ = stdio_client.cancel().await;
    let _ = http_client.cancel().await;
}
