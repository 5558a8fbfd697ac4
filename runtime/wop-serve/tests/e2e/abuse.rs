//! Bad input, auth, load and saturation.

use super::*;
use serde_json::json;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_gets_exact_status_and_code() {
    let s = start(
        "",
        &serve_toml("maxBodyBytes = 4096\nmaxJsonDepth = 16"),
        &["hello"],
    )
    .await;
    let auth = bearer(TOKEN);
    let json_h = [
        ("Content-Type", "application/json"),
        ("Authorization", auth.as_str()),
    ];
    let path = "/host/wop/invocations";
    let check = |r: Resp, status: u16, code: &str| {
        assert_eq!(r.status, status, "{}", String::from_utf8_lossy(&r.body));
        let b = r.json();
        assert_eq!(b["error"], code, "{b}");
        assert!(b["message"].is_string());
    };
    check(
        req(s.addr, "POST", path, &json_h, b"{\"typeId\": ").await,
        400,
        "validation_error",
    );
    let big = format!(
        "{{\"typeId\":\"wop.samples.hello\",\"inputs\":{{\"x\":\"{}\"}}}}",
        "a".repeat(5000)
    );
    check(
        req(s.addr, "POST", path, &json_h, big.as_bytes()).await,
        413,
        "payload_too_large",
    );
    check(
        req(
            s.addr,
            "POST",
            path,
            &[("Content-Type", "text/plain"), ("Authorization", &auth)],
            b"{}",
        )
        .await,
        415,
        "unsupported_media_type",
    );
    check(
        req(s.addr, "POST", path, &[("Authorization", &auth)], b"{}").await,
        415,
        "unsupported_media_type",
    );
    let deep = format!(
        "{{\"typeId\":\"wop.samples.hello\",\"inputs\":{}{}}}",
        "[".repeat(40),
        "]".repeat(40)
    );
    check(
        req(s.addr, "POST", path, &json_h, deep.as_bytes()).await,
        400,
        "validation_error",
    );
    check(
        req(
            s.addr,
            "POST",
            path,
            &json_h,
            br#"{"typeId":"wop.nope","inputs":{}}"#,
        )
        .await,
        404,
        "not_found",
    );
    check(
        req(s.addr, "POST", path, &json_h, br#"{"inputs":{}}"#).await,
        400,
        "validation_error",
    );
    check(
        req(
            s.addr,
            "POST",
            path,
            &[("Content-Type", "application/json")],
            br#"{"typeId":"wop.samples.hello","inputs":{}}"#,
        )
        .await,
        401,
        "forbidden",
    );
    let r = req(
        s.addr,
        "POST",
        path,
        &[
            ("Content-Type", "application/json"),
            ("Authorization", "Bearer wrong"),
        ],
        b"{}",
    )
    .await;
    assert_eq!(r.header("www-authenticate"), Some("Bearer"));
    check(r, 401, "forbidden");
    check(
        req(s.addr, "GET", "/tools", &[], b"").await,
        401,
        "forbidden",
    );
    check(
        req(s.addr, "GET", "/runs/x/effects", &[], b"").await,
        401,
        "forbidden",
    );
    check(
        req(
            s.addr,
            "POST",
            "/mcp",
            &[("Content-Type", "application/json")],
            b"{}",
        )
        .await,
        401,
        "forbidden",
    );
    check(
        req(
            s.addr,
            "POST",
            path,
            &json_h,
            br#"{"typeId":"wop.samples.hello","inputs":{},"nodeContext":{"tenantId":"globex"}}"#,
        )
        .await,
        403,
        "forbidden",
    );
    // The MCP mount: the same statuses, every refusal a JSON-RPC error
    // (before the body is parsed: `id: null`, `-32600`), so an MCP client
    // shows why.
    let rpc_check = |r: Resp, status: u16, rpc: i64, code: &str| {
        assert_eq!(r.status, status, "{}", String::from_utf8_lossy(&r.body));
        let b = r.json();
        assert_eq!(b["jsonrpc"], "2.0", "{b}");
        assert!(b["id"].is_null(), "{b}");
        assert_eq!(b["error"]["code"], rpc, "{b}");
        assert_eq!(b["error"]["data"]["error"], code, "{b}");
        assert!(b["error"]["message"].is_string(), "{b}");
    };
    let r = req(s.addr, "POST", "/mcp", &json_h, big.as_bytes()).await;
    assert_eq!(r.header("connection"), Some("close"));
    rpc_check(r, 413, -32600, "payload_too_large");
    let text_h = [("Content-Type", "text/plain"), ("Authorization", &auth)];
    let r = req(s.addr, "POST", "/mcp", &text_h, b"{}").await;
    rpc_check(r, 415, -32600, "unsupported_media_type");
    let r = req(s.addr, "POST", "/mcp", &json_h, b"{nope").await;
    rpc_check(r, 400, -32700, "validation_error");
    let r = req(s.addr, "POST", "/mcp", &json_h, deep.as_bytes()).await;
    rpc_check(r, 400, -32600, "validation_error");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_clients_all_answered() {
    const CLIENTS: usize = 64;
    const CALLS: usize = 50;
    // One tenant's 64 clients: its share is the whole server here (with
    // two tenants configured it would be 48 by default).
    let cfg = serve_toml("maxInFlight = 64\nmaxInFlightPerTenant = 64");
    let s = start("", &cfg, &["hello"]).await;
    let addr = s.addr;
    let ok = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for c in 0..CLIENTS {
        let ok = ok.clone();
        tasks.push(tokio::spawn(async move {
            let auth = bearer(TOKEN);
            let mut conn = Conn::open(addr).await;
            for i in 0..CALLS {
                let name = format!("c{c}-{i}");
                let r = if i % 2 == 0 {
                    let body = json!({"typeId": "wop.samples.hello", "inputs": {"name": name}});
                    let r = conn
                        .send("POST", "/host/wop/invocations", &[("Content-Type", "application/json"), ("Authorization", &auth)], body.to_string().as_bytes())
                        .await;
                    assert_eq!(r.status, 200);
                    assert_eq!(r.json()["outcome"], "completed");
                    r.json()["output"].to_string()
                } else {
                    let body = json!({"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {"name": "wop.samples.hello", "arguments": {"name": name}}});
                    let r = conn
                        .send("POST", "/mcp", &[("Content-Type", "application/json"), ("Accept", "*/*"), ("Authorization", &auth)], body.to_string().as_bytes())
                        .await;
                    assert_eq!(r.status, 200);
                    let b = r.json();
                    assert_eq!(b["id"], i);
                    assert_eq!(b["result"]["isError"], false);
                    b["result"]["content"][0]["text"].as_str().unwrap().to_owned()
                };
                // Each answer is this call's own.
                assert!(r.contains(&name), "{r} lacks {name}");
                ok.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    assert_eq!(ok.load(Ordering::Relaxed), CLIENTS * CALLS);
    s.stop().await;
}

/// One tenant cannot take every invocation slot (decision 0048): with
/// two tenants configured and `maxInFlight = 4`, a tenant holding three
/// running invocations (its default share, three quarters) gets `429
/// rate_limited` with `Retry-After` for a fourth, on the invoke API and
/// on MCP (its listings are still read), while the other tenant's
/// invocation still runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_tenant_cannot_take_every_slot() {
    // The spin holds its slot until this wall clock ends: long enough to
    // outlast the checks on a starved machine (a run beside CI, at nice
    // 19, saw a 4 s spin end before them).
    let policy = "[limits]\nwallClockMs = 8000\nfuel = 1000000000000000\n";
    let cfg = serve_toml("maxInFlight = 4\nretryAfterSecs = 3");
    let s = start(policy, &cfg, &["spin", "hello"]).await;
    let addr = s.addr;
    let spin = json!({"typeId": "wop.testing.spin", "inputs": {}});
    let held: Vec<_> = (0..3)
        .map(|_| {
            let spin = spin.clone();
            tokio::spawn(
                async move { post_json(addr, "/host/wop/invocations", TOKEN, &spin).await },
            )
        })
        .collect();
    let health = until_in_flight(addr, 3).await;
    assert_eq!(health["maxInFlightPerTenant"], 3, "{health}");
    assert_eq!(health["tenantsInFlight"], 1, "{health}");
    let hello = json!({"typeId": "wop.samples.hello", "inputs": {"name": "Ada"}});
    let r = post_json(addr, "/host/wop/invocations", TOKEN, &hello).await;
    assert_eq!(r.status, 429, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.header("retry-after"), Some("3"));
    let b = r.json();
    assert_eq!(b["error"], "rate_limited", "{b}");
    assert_eq!(b["details"]["tenant"], "acme", "{b}");
    assert_eq!(b["details"]["maxInFlightPerTenant"], 3, "{b}");
    let b = mcp_call_is_refused(addr, 429, "3", "rate_limited").await;
    assert_eq!(b["error"]["data"]["retryAfterSecs"], 3, "{b}");
    // Its listings have slots of their own (`e2e::listings`).
    let r = get(addr, TOKEN, "/runs/r1/effects").await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    // The other tenant still gets the fourth slot.
    let r = post_json(addr, "/host/wop/invocations", OTHER_TOKEN, &hello).await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.json()["outcome"], "completed");
    for h in held {
        assert_eq!(h.await.unwrap().status, 200);
    }
    // Its slots came back: the tenant is served again.
    let r = post_json(addr, "/host/wop/invocations", TOKEN, &hello).await;
    assert_eq!(r.status, 200);
    s.stop().await;
}

/// A raw MCP `tools/call` of hello (acme's token) while no slot is free
/// for it: the refusal's `status` and `Retry-After`, and a JSON-RPC error
/// answering the request and naming `error`, so an MCP client shows why.
/// Returns the body.
async fn mcp_call_is_refused(
    addr: std::net::SocketAddr,
    status: u16,
    retry_after: &str,
    error: &str,
) -> serde_json::Value {
    let auth = bearer(TOKEN);
    let headers = [
        ("Content-Type", "application/json"),
        ("Authorization", auth.as_str()),
    ];
    let call = br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"wop.samples.hello","arguments":{}}}"#;
    let r = req(addr, "POST", "/mcp", &headers, call).await;
    assert_eq!(r.status, status, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.header("retry-after"), Some(retry_after));
    let b = r.json();
    assert_eq!(b["id"], 1, "{b}");
    assert_eq!(b["error"]["code"], -32001, "{b}");
    assert_eq!(b["error"]["data"]["error"], error, "{b}");
    b
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn saturation_is_503_with_retry_after() {
    let policy = "[limits]\nwallClockMs = 1500\n";
    let s = start(
        policy,
        &serve_toml("maxInFlight = 1\nretryAfterSecs = 2"),
        &["spin", "hello"],
    )
    .await;
    let addr = s.addr;
    let slow = tokio::spawn(async move {
        post_json(
            addr,
            "/host/wop/invocations",
            TOKEN,
            &json!({"typeId": "wop.testing.spin", "inputs": {}}),
        )
        .await
    });
    // Wait until the slow invocation holds the only permit.
    until_in_flight(addr, 1).await;
    let r = post_json(
        addr,
        "/host/wop/invocations",
        TOKEN,
        &json!({"typeId": "wop.samples.hello", "inputs": {}}),
    )
    .await;
    assert_eq!(r.status, 503);
    assert_eq!(r.header("retry-after"), Some("2"));
    assert_eq!(r.json()["error"], "service_unavailable");
    mcp_call_is_refused(addr, 503, "2", "service_unavailable").await;
    let auth = bearer(TOKEN);
    // Listing is not an invocation: still served.
    let r = req(
        addr,
        "POST",
        "/mcp",
        &[
            ("Content-Type", "application/json"),
            ("Authorization", &auth),
        ],
        br#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#,
    )
    .await;
    assert_eq!(r.status, 200);
    let slow = slow.await.unwrap();
    assert_eq!(slow.status, 200);
    assert_eq!(slow.json()["error"]["code"], "sandbox_timeout");
    // Capacity is back.
    let r = post_json(
        addr,
        "/host/wop/invocations",
        TOKEN,
        &json!({"typeId": "wop.samples.hello", "inputs": {}}),
    )
    .await;
    assert_eq!(r.status, 200);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anonymous_mode_is_loopback_only() {
    let mut opts = ServeOptions::new("0.0.0.0:0".parse().unwrap());
    opts.config(ServeConfig::from_toml("anonymousLoopback = true").unwrap());
    let e = Server::bind(opts).await.err().expect("refused");
    assert!(e.to_string().contains("loopback"), "{e}");
    let s = start("", "anonymousLoopback = true", &["hello"]).await;
    let r = req(
        s.addr,
        "POST",
        "/host/wop/invocations",
        &[("Content-Type", "application/json")],
        br#"{"typeId":"wop.samples.hello","inputs":{"name":"anon"}}"#,
    )
    .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["usage"]["tenantId"], "anon:local");
    // A wrong token is still refused.
    let r = req(
        s.addr,
        "GET",
        "/tools",
        &[("Authorization", "Bearer nope")],
        b"",
    )
    .await;
    assert_eq!(r.status, 401);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connection_cap_is_503_with_retry_after_and_close() {
    let s = start(
        "",
        &serve_toml("maxConnections = 2\nretryAfterSecs = 3"),
        &["hello"],
    )
    .await;
    let addr = s.addr;
    // Two keep-alive connections, each answered (so each is open on the
    // server side), fill the cap.
    let mut c1 = Conn::open(addr).await;
    assert_eq!(c1.send("GET", "/healthz", &[], b"").await.status, 200);
    let mut c2 = Conn::open(addr).await;
    let h = c2.send("GET", "/healthz", &[], b"").await;
    assert_eq!(h.status, 200);
    assert_eq!(h.json()["connections"], 2, "{}", h.json());
    assert_eq!(h.json()["maxConnections"], 2);

    // A third connection is accepted, answered 503 + Retry-After, closed.
    let mut c3 = Conn::open(addr).await;
    let r = c3.send("GET", "/healthz", &[], b"").await;
    assert_eq!(r.status, 503);
    assert_eq!(r.header("retry-after"), Some("3"));
    assert_eq!(r.header("connection"), Some("close"));
    let b = r.json();
    assert_eq!(b["error"], "service_unavailable", "{b}");
    assert!(b["message"].is_string());
    assert_eq!(b["details"]["maxConnections"], 2);
    assert!(!c3.fill().await, "the refused connection stays open");
    // The same for an invocation with a body: the body is not run.
    let auth = bearer(TOKEN);
    let r = req(
        addr,
        "POST",
        "/host/wop/invocations",
        &[
            ("Content-Type", "application/json"),
            ("Authorization", &auth),
        ],
        br#"{"typeId":"wop.samples.hello","inputs":{"name":"over"}}"#,
    )
    .await;
    assert_eq!(r.status, 503);
    assert_eq!(r.json()["error"], "service_unavailable");

    // The open connections are still served.
    let r = c1
        .send(
            "POST",
            "/host/wop/invocations",
            &[
                ("Content-Type", "application/json"),
                ("Authorization", &auth),
            ],
            br#"{"typeId":"wop.samples.hello","inputs":{"name":"kept"}}"#,
        )
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["outcome"], "completed");

    // Closing one frees its slot: a new connection is served again once the
    // server has seen the close.
    drop(c1);
    let mut served = false;
    for _ in 0..500 {
        let r = req(addr, "GET", "/healthz", &[("Connection", "close")], b"").await;
        if r.status == 200 {
            served = true;
            break;
        }
        assert_eq!(r.status, 503);
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert!(served, "the freed slot was never reused");
    let h = c2.send("GET", "/healthz", &[], b"").await.json();
    assert!(h["connectionsRefused"].as_u64().unwrap() >= 2, "{h}");
    s.stop().await;
}

/// An idle keep-alive connection does not hold its slot forever: the
/// header-read timer also runs between requests, so the server closes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_keep_alive_connection_frees_its_slot() {
    let s = start(
        "",
        &serve_toml("maxConnections = 1\nheaderTimeoutMs = 200"),
        &["hello"],
    )
    .await;
    let mut idle = Conn::open(s.addr).await;
    assert_eq!(idle.send("GET", "/healthz", &[], b"").await.status, 200);
    // The idle connection is closed by the server (EOF), not by us.
    let closed = tokio::time::timeout(std::time::Duration::from_secs(30), idle.fill())
        .await
        .expect("the idle connection was never closed");
    assert!(!closed, "unexpected bytes on an idle connection");
    let mut served = false;
    for _ in 0..500 {
        let r = req(s.addr, "GET", "/healthz", &[], b"").await;
        if r.status == 200 {
            served = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert!(served, "the idle connection's slot was never freed");
    s.stop().await;
}

/// An oversized body is answered `413` with `Connection: close` (the rest
/// of the request was not read, so the connection is not reused), and the
/// client gets that answer rather than a reset: the server reads and
/// discards a bounded remainder before closing. Both a declared length and
/// a chunked body of 2 MiB against a 1 MiB cap, several times.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversized_body_gets_its_413_and_a_closed_connection() {
    let s = start("", &serve_toml("maxBodyBytes = 1048576"), &["hello"]).await;
    let body = format!(
        "{{\"typeId\":\"wop.samples.hello\",\"inputs\":{{\"x\":\"{}\"}}}}",
        "a".repeat(2 << 20)
    );
    for chunked in [false, true] {
        for _ in 0..5 {
            let mut c = tokio::net::TcpStream::connect(s.addr).await.unwrap();
            let framing = if chunked {
                "Transfer-Encoding: chunked".to_owned()
            } else {
                format!("Content-Length: {}", body.len())
            };
            let head = format!(
                "POST /host/wop/invocations HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nAuthorization: {}\r\n{framing}\r\n\r\n",
                bearer(TOKEN)
            );
            let mut wire = head.into_bytes();
            if chunked {
                for part in body.as_bytes().chunks(64 << 10) {
                    wire.extend_from_slice(format!("{:x}\r\n", part.len()).as_bytes());
                    wire.extend_from_slice(part);
                    wire.extend_from_slice(b"\r\n");
                }
                wire.extend_from_slice(b"0\r\n\r\n");
            } else {
                wire.extend_from_slice(body.as_bytes());
            }
            // Write the whole request while reading, as a real client does
            // (the answer may come before the last byte is sent).
            let (mut rd, mut wr) = c.split();
            let (w, got) = tokio::join!(wr.write_all(&wire), async {
                let mut got = Vec::new();
                let r = rd.read_to_end(&mut got).await;
                (r, got)
            });
            let (r, got) = got;
            let text = String::from_utf8_lossy(&got).to_ascii_lowercase();
            assert!(
                r.is_ok() && text.starts_with("http/1.1 413"),
                "chunked={chunked}: {r:?} (write {w:?}): {text}"
            );
            assert!(text.contains("connection: close"), "{text}");
            assert!(text.contains("payload_too_large"), "{text}");
        }
    }
    s.stop().await;
}

/// A body that stops arriving is answered `408 request_timeout` with
/// `Connection: close` once `bodyTimeoutMs` has passed, on the invoke API
/// (the service's body) and on the MCP mount (a JSON-RPC error of
/// `id: null`, decision 0051), and nothing runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_that_stops_arriving_gets_408_on_both_mounts() {
    let s = start("", &serve_toml("bodyTimeoutMs = 300"), &["hello"]).await;
    let ran = metric_of(s.addr, "wop_instantiations").await;
    assert!(ran.is_some());
    for path in ["/host/wop/invocations", "/mcp"] {
        let mut c = tokio::net::TcpStream::connect(s.addr).await.unwrap();
        // 100 bytes declared, 10 sent, then silence (the socket stays open).
        let head = format!(
            "POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nAuthorization: {}\r\nContent-Length: 100\r\n\r\n{{\"typeId\":",
            bearer(TOKEN)
        );
        c.write_all(head.as_bytes()).await.unwrap();
        let mut got = Vec::new();
        let read =
            tokio::time::timeout(std::time::Duration::from_secs(30), c.read_to_end(&mut got)).await;
        assert!(matches!(read, Ok(Ok(_))), "{path}: {read:?}");
        let text = String::from_utf8_lossy(&got).to_string();
        let lower = text.to_ascii_lowercase();
        assert!(lower.starts_with("http/1.1 408"), "{path}: {text}");
        assert!(lower.contains("connection: close"), "{path}: {text}");
        let body: Value = match text.split_once("\r\n\r\n") {
            Some((_, b)) => serde_json::from_str(b).unwrap_or_else(|e| panic!("{e}: {text}")),
            None => panic!("{path}: no body: {text}"),
        };
        if path == "/mcp" {
            assert!(body["id"].is_null(), "{body}");
            assert_eq!(body["error"]["code"], -32600, "{body}");
            assert_eq!(body["error"]["data"]["error"], "request_timeout", "{body}");
        } else {
            assert_eq!(body["error"], "request_timeout", "{body}");
        }
    }
    assert_eq!(metric_of(s.addr, "wop_instantiations").await, ran);
    s.stop().await;
}
