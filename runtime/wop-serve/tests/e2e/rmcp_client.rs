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
