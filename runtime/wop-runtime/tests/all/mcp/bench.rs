//! Per-call overhead of `ctx.mcp` (a measurement, ignored by default).

use super::*;

/// Per-call overhead of `ctx.mcp` over a direct wop-mcp call to the same
/// server program, in the same run. A measurement, not a test (no
/// thresholds): `cargo test --release -p wop-runtime --test all
/// mcp_overhead -- --ignored --nocapture`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "benchmark; run explicitly with --release --ignored --nocapture"]
async fn mcp_overhead() {
    const N: u32 = 300;
    let (_server, port) = start_python_http();
    let url = format!("http://127.0.0.1:{port}/mcp");
    let policy = format!(
        r#"
[mcp.servers.everything]
transport = "stdio"
command = "node"
args = ["{}", "stdio"]
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
"#,
        everything_js()
    );
    let rt = runtime(&policy);
    load(&rt, "mcp").await;
    let p = wop_runtime::Policy::from_toml(&policy).unwrap();
    let direct = wop_runtime::gate::mcp::McpGateway::new(p.mcp.servers.clone()).unwrap();
    for (server, tool, args) in [
        ("everything", "echo", json!({"message": "hi"})),
        ("py", "add", json!({"a": 1, "b": 2})),
    ] {
        let call = |n: u32| {
            req(
                json!({"server": server, "tool": tool, "arguments": args, "repeat": n}),
                "r-bench",
                1,
            )
        };
        // Warm up both paths (start, handshake, compile cache).
        output(&rt.invoke(call(5)).await);
        for _ in 0..5 {
            direct
                .hub()
                .call_tool(server, tool, args.clone(), Default::default())
                .await
                .unwrap();
        }
        let mut best = (f64::MAX, f64::MAX);
        for _ in 0..3 {
            let t = Instant::now();
            for _ in 0..N {
                direct
                    .hub()
                    .call_tool(server, tool, args.clone(), Default::default())
                    .await
                    .unwrap();
            }
            let d = t.elapsed().as_secs_f64() * 1e6 / f64::from(N);
            let t0 = Instant::now();
            output(&rt.invoke(call(0)).await);
            let empty = t0.elapsed().as_secs_f64() * 1e6;
            let t = Instant::now();
            output(&rt.invoke(call(N)).await);
            let g = (t.elapsed().as_secs_f64() * 1e6 - empty) / f64::from(N);
            best = (best.0.min(d), best.1.min(g));
        }
        println!(
            "MCP overhead {server}/{tool} ({}): direct wop-mcp {:.1} µs/call, ctx.mcp {:.1} µs/call, overhead {:.1} µs/call ({:.2}x)",
            p.mcp.servers[server].transport.as_str(),
            best.0,
            best.1,
            best.1 - best.0,
            best.1 / best.0
        );
    }
}
