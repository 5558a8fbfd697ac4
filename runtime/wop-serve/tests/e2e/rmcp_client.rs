//! The official Rust MCP SDK (`rmcp` =3.11.0, its Streamable HTTP client on
//! reqwest) against the mount: initialize, list the tools, call
//! `wop.samples.hello`. The bearer token goes in the transport config's
//! `auth_header` (rmcp adds the `Bearer ` prefix).

use super::*;
use rmcp::ServiceExt as _;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rmcp_client_lists_and_calls() {
    let s = start("", &serve_toml(""), &["hello"]).await;
    let url = format!("http://{}/mcp", s.addr);
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(url.as_str()).auth_header(TOKEN),
    );
    let client = ().serve(transport).await.unwrap();
    let info = client.peer_info().expect("initialized");
    assert!(info.capabilities.tools.is_some(), "{info:?}");
    eprintln!("rmcp negotiated {}", info.protocol_version);
    assert!(
        wop_serve::MCP_REVISIONS.contains(&info.protocol_version.as_str()),
        "{info:?}"
    );

    let tools = client.list_all_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    assert_eq!(names, ["wop.samples.hello"]);
    assert_eq!(tools[0].input_schema.get("type"), Some(&json!("object")));

    let args = json!({"name": "Ada"}).as_object().cloned().unwrap();
    let result = client
        .call_tool(CallToolRequestParams::new("wop.samples.hello").with_arguments(args))
        .await
        .unwrap();
    assert_eq!(result.is_error, Some(false), "{result:?}");
    let text = &result.content[0].as_text().expect("a text block").text;
    let out: Value = serde_json::from_str(text).unwrap();
    assert!(text.contains("Ada"), "{text}");
    assert_eq!(result.structured_content.as_ref(), Some(&out));

    // Bad arguments are an `isError` result carrying `{code, message, details}`.
    let args = json!({"name": 42}).as_object().cloned().unwrap();
    let bad = client
        .call_tool(CallToolRequestParams::new("wop.samples.hello").with_arguments(args))
        .await
        .unwrap();
    assert_eq!(bad.is_error, Some(true), "{bad:?}");
    let err = bad.structured_content.as_ref().unwrap();
    assert_eq!(err["code"], "validation_error", "{err}");
    assert!(err["message"].as_str().unwrap().contains("invalid inputs"));
    assert!(err["details"].is_object());
    // An unknown tool is a JSON-RPC error (-32602) the SDK surfaces as Err.
    let e = client
        .call_tool(CallToolRequestParams::new("wop.samples.nope"))
        .await
        .unwrap_err();
    assert!(e.to_string().contains("Unknown tool"), "{e}");

    client.cancel().await.unwrap();
    s.stop().await;
}

/// Without a token the transport reports the `401`, it does not hang.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rmcp_client_without_token_is_refused() {
    let s = start("", &serve_toml(""), &["hello"]).await;
    let url = format!("http://{}/mcp", s.addr);
    let r = tokio::time::timeout(
        std::time::Duration::from_secs(30),
        ().serve(StreamableHttpClientTransport::from_uri(url.as_str())),
    )
    .await
    .expect("answered");
    assert!(r.is_err(), "initialize without a token succeeded");
    s.stop().await;
}

/// rmcp's stateless lifecycle (`server/discover`, 2026-07-28 per-request
/// `_meta`): the listing carries `ttlMs` and `cacheScope: private` (the
/// catalog depends on the caller), tools sorted by name; calls work.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rmcp_client_stateless_2026_07_28() {
    use rmcp::model::ProtocolVersion;
    use rmcp::service::{ClientLifecycleMode, ClientServiceExt as _};
    let s = start("", &serve_toml(""), &["hello", "transform"]).await;
    let url = format!("http://{}/mcp", s.addr);
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(url.as_str()).auth_header(TOKEN),
    );
    let modern = ProtocolVersion::KNOWN_VERSIONS
        .iter()
        .find(|v| v.as_str() == "2026-07-28")
        .cloned()
        .expect("rmcp knows 2026-07-28");
    let client = ()
        .serve_with_lifecycle(
            transport,
            ClientLifecycleMode::Discover {
                preferred_versions: vec![modern],
            },
        )
        .await
        .unwrap();
    let listed = client.list_tools(None).await.unwrap();
    let names: Vec<&str> = listed.tools.iter().map(|t| t.name.as_ref()).collect();
    assert_eq!(names, ["wop.samples.hello", "wop.samples.transform"]);
    let raw = serde_json::to_value(&listed).unwrap();
    assert_eq!(raw["cacheScope"], "private", "{raw}");
    assert!(raw["ttlMs"].as_u64().is_some(), "{raw}");
    let args = json!({"name": "Ada"}).as_object().cloned().unwrap();
    let result = client
        .call_tool(CallToolRequestParams::new("wop.samples.hello").with_arguments(args))
        .await
        .unwrap();
    assert_eq!(result.is_error, Some(false), "{result:?}");
    client.cancel().await.unwrap();
    s.stop().await;
}

/// Starts `wop.testing.spin` for `token` and waits until `/healthz`
/// counts `in_flight` invocations; the handle answers when it ends.
async fn hold_a_slot(
    addr: SocketAddr,
    token: &'static str,
    in_flight: u64,
) -> tokio::task::JoinHandle<Resp> {
    let spin = json!({"typeId": "wop.testing.spin", "inputs": {}});
    let held =
        tokio::spawn(async move { post_json(addr, "/host/wop/invocations", token, &spin).await });
    until_in_flight(addr, in_flight).await;
    held
}

/// A call refused for a slot, as rmcp reports it: the `429` of the
/// tenant's share with its `Retry-After` (rmcp reads no body there), and
/// the `503` of a full executor with our JSON-RPC error's message (rmcp
/// keeps a JSON-RPC error body at a 5xx; before decision 0050 it had only
/// the status).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rmcp_client_sees_refused_calls_with_their_reason() {
    // The spin holds its slot until this wall clock ends: long enough to
    // outlast the checks on a starved machine (a run beside CI, at nice
    // 19, saw a 4 s spin end before them).
    let policy = "[limits]\nwallClockMs = 8000\nfuel = 1000000000000000\n";
    let hello = || {
        let args = json!({"name": "Ada"}).as_object().cloned().unwrap();
        CallToolRequestParams::new("wop.samples.hello").with_arguments(args)
    };
    for (cfg, what, reason) in [
        (
            "maxInFlight = 4\nmaxInFlightPerTenant = 1\nretryAfterSecs = 3",
            "status: 429",
            "retry_after: Some(\"3\")",
        ),
        (
            "maxInFlight = 1\nretryAfterSecs = 3",
            "ErrorCode(-32001)",
            "the executor is at capacity",
        ),
    ] {
        let s = start(policy, &serve_toml(cfg), &["spin", "hello"]).await;
        let url = format!("http://{}/mcp", s.addr);
        let transport = StreamableHttpClientTransport::from_config(
            StreamableHttpClientTransportConfig::with_uri(url.as_str()).auth_header(TOKEN),
        );
        let client = ().serve(transport).await.unwrap();
        let held = hold_a_slot(s.addr, TOKEN, 1).await;
        let e = client.call_tool(hello()).await.unwrap_err();
        let e = format!("{e:?}");
        assert!(e.contains(what) && e.contains(reason), "{cfg}: {e}");
        assert_eq!(held.await.unwrap().status, 200);
        // Served once the slot is back.
        let ok = client.call_tool(hello()).await.unwrap();
        assert_eq!(ok.is_error, Some(false), "{ok:?}");
        client.cancel().await.unwrap();
        s.stop().await;
    }
}
