//! A web page cannot drive the server: `Origin` and `Host` checks on real
//! sockets (issue 19, item 2).

use super::*;
use serde_json::json;

fn invoke_body(run: &str) -> Vec<u8> {
    json!({"typeId": "wop.samples.hello", "inputs": {"name": "Page"},
           "nodeContext": {"runId": run}})
    .to_string()
    .into_bytes()
}

/// Usage of `run` as the anonymous caller: `404` means nothing ran there.
async fn ran(addr: SocketAddr, run: &str) -> bool {
    let r = req(addr, "GET", &format!("/host/wop/usage?run={run}"), &[], b"").await;
    match r.status {
        200 => true,
        404 => false,
        s => panic!("usage answered {s}: {}", String::from_utf8_lossy(&r.body)),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rebinding_host_and_foreign_origin_run_nothing_on_an_anonymous_server() {
    let s = start("", "anonymousLoopback = true", &["hello"]).await;
    let json_ct = ("Content-Type", "application/json");

    // A page that rebound evil.example to 127.0.0.1: its Host is its own.
    let r = req(
        s.addr,
        "POST",
        "/host/wop/invocations",
        &[("Host", "evil.example"), json_ct],
        &invoke_body("rebound"),
    )
    .await;
    assert_eq!(r.status, 403, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.json()["error"], "forbidden");
    assert_eq!(r.json()["details"]["scope"], "host");
    assert!(!ran(s.addr, "rebound").await, "the node did not run");
    for path in ["/tools", "/.well-known/openwop", "/healthz"] {
        let r = req(s.addr, "GET", path, &[("Host", "evil.example:8080")], b"").await;
        assert_eq!(r.status, 403, "{path}");
    }
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).to_string();
    let r = req(
        s.addr,
        "POST",
        "/mcp",
        &[("Host", "evil.example"), json_ct],
        list.as_bytes(),
    )
    .await;
    assert_eq!(r.status, 403, "the MCP mount is guarded too");

    // A page on another site calling 127.0.0.1 directly: Host is fine,
    // Origin is not.
    let r = req(
        s.addr,
        "POST",
        "/host/wop/invocations",
        &[("Origin", "https://evil.example"), json_ct],
        &invoke_body("cross-site"),
    )
    .await;
    assert_eq!(r.status, 403);
    assert_eq!(r.json()["details"]["scope"], "origin");
    assert!(!ran(s.addr, "cross-site").await);
    let r = req(
        s.addr,
        "POST",
        "/mcp",
        &[("Origin", "null"), json_ct],
        list.as_bytes(),
    )
    .await;
    assert_eq!(
        r.status, 403,
        "an opaque origin (sandboxed frame, file:) too"
    );

    // Loopback names work without a token.
    let port_host = format!("127.0.0.1:{}", s.addr.port());
    for host in ["localhost", port_host.as_str(), "[::1]:1"] {
        let r = req(
            s.addr,
            "POST",
            "/host/wop/invocations",
            &[("Host", host), json_ct],
            &invoke_body("local"),
        )
        .await;
        assert_eq!(
            r.status,
            200,
            "{host}: {}",
            String::from_utf8_lossy(&r.body)
        );
    }
    assert!(ran(s.addr, "local").await);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_listed_origins_reach_a_token_server() {
    let s = start(
        "",
        &serve_toml(r#"allowedOrigins = ["https://console.example"]"#),
        &["hello"],
    )
    .await;
    let auth = bearer(TOKEN);
    let call = |origin: &'static str| {
        let auth = auth.clone();
        async move {
            req(
                s.addr,
                "POST",
                "/host/wop/invocations",
                &[
                    ("Content-Type", "application/json"),
                    ("Authorization", &auth),
                    ("Origin", origin),
                    // A token server answers to any name.
                    ("Host", "executor.internal"),
                ],
                &invoke_body("from-browser"),
            )
            .await
        }
    };
    let r = call("https://evil.example").await;
    assert_eq!(r.status, 403, "a valid token does not admit a foreign page");
    assert_eq!(r.json()["details"]["scope"], "origin");
    assert!(
        r.json()["message"]
            .as_str()
            .unwrap()
            .contains("allowedOrigins")
    );
    let r = call("https://console.example").await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.json()["outcome"], "completed");
    let r = call("HTTPS://CONSOLE.EXAMPLE:443").await;
    assert_eq!(r.status, 200, "the same origin, spelled otherwise");
    // No Origin at all: a server-side client.
    let r = post_json(
        s.addr,
        "/host/wop/invocations",
        TOKEN,
        &json!({"typeId": "wop.samples.hello", "inputs": {}}),
    )
    .await;
    assert_eq!(r.status, 200);
    s.stop().await;
}

#[test]
fn an_origin_that_is_not_an_origin_is_a_configuration_error() {
    for bad in [
        r#"allowedOrigins = ["console.example"]"#,
        r#"allowedOrigins = ["https://console.example/app"]"#,
        r#"allowedOrigins = ["ftp://console.example"]"#,
    ] {
        let e = ServeConfig::from_toml(bad).unwrap_err();
        assert!(e.contains("allowedOrigins[0]"), "{bad}: {e}");
    }
}
