//! Revision negotiation against scripted servers (tests/servers/).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use serde_json::{Map, json};
use wop_mcp::McpServerConfig;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pre_2026_servers_negotiate_their_revision() {
    if common::skip("pre_2026_servers_negotiate_their_revision") {
        return;
    }
    for rev in ["2025-03-26", "2025-06-18", "2025-11-25"] {
        let hub = common::hub(vec![(
            "old",
            common::fake_stdio("legacy", Some(rev), 5_000),
        )]);
        let mut meta = Map::new();
        meta.insert("dev.openwop/idempotencyKey".into(), json!("k-1"));
        let r = hub
            .call_tool("old", "echo", json!({"x": 1}), meta)
            .await
            .unwrap();
        assert_eq!(hub.protocol_version("old").as_deref(), Some(rev));
        // Unaltered result, including fields unknown to the MCP schema.
        assert_eq!(r["x-extra"]["kept"], true, "{r}");
        let params = &r["structuredContent"]["params"];
        assert_eq!(params["_meta"]["dev.openwop/idempotencyKey"], "k-1");
        assert!(
            params["_meta"]
                .get("io.modelcontextprotocol/protocolVersion")
                .is_none()
        );

        // isError results are Ok.
        let r = hub
            .call_tool("old", "fail", json!({}), Map::new())
            .await
            .unwrap();
        assert_eq!(r["isError"], true);

        // cursor handling: one page at a time, nextCursor passed through.
        let p1 = hub.list_tools("old", None).await.unwrap();
        assert_eq!(p1["nextCursor"], "page2");
        let p2 = hub.list_tools("old", Some("page2".into())).await.unwrap();
        assert_eq!(p2["tools"][0]["name"], "b");
        assert!(p2.get("nextCursor").is_none());

        let r = hub.read_resource("old", "file:///x").await.unwrap();
        assert_eq!(r["contents"][0]["uri"], "file:///x");
        let h = hub.server_health("old").await.unwrap();
        assert_eq!(h["state"], "ready");
        assert_eq!(h["protocolVersion"], rev);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stateless_2026_server_gets_meta_context() {
    if common::skip("stateless_2026_server_gets_meta_context") {
        return;
    }
    let hub = common::hub(vec![("new", common::fake_stdio("modern", None, 5_000))]);
    let mut meta = Map::new();
    meta.insert("dev.openwop/idempotencyKey".into(), json!("k-2"));
    let r = hub.call_tool("new", "echo", json!({}), meta).await.unwrap();
    assert_eq!(hub.protocol_version("new").as_deref(), Some("2026-07-28"));
    let m = &r["structuredContent"]["params"]["_meta"];
    assert_eq!(m["dev.openwop/idempotencyKey"], "k-2");
    assert_eq!(m["io.modelcontextprotocol/protocolVersion"], "2026-07-28");
    assert!(m["io.modelcontextprotocol/clientCapabilities"].is_object());
    assert_eq!(m["io.modelcontextprotocol/clientInfo"]["name"], "wop-mcp");
}

async fn expect_unsupported(cfg: McpServerConfig, offered: &str) {
    let hub = common::hub(vec![("s", cfg)]);
    let e = hub
        .call_tool("s", "echo", json!({}), Map::new())
        .await
        .unwrap_err();
    assert_eq!(e.code(), "interop_version_unsupported", "{e}");
    assert_eq!(e.details()["offered"], offered);
    assert_eq!(hub.protocol_version("s"), None, "nothing recorded");
    let h = hub.server_health("s").await.unwrap();
    assert_eq!(h["state"], "down", "{h}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_revisions_are_refused() {
    if common::skip("unknown_revisions_are_refused") {
        return;
    }
    // initialize answering an unknown and a known-but-unsupported revision.
    expect_unsupported(
        common::fake_stdio("legacy", Some("1999-01-01"), 5_000),
        "1999-01-01",
    )
    .await;
    expect_unsupported(
        common::fake_stdio("legacy", Some("2024-11-05"), 5_000),
        "2024-11-05",
    )
    .await;
    // server/discover offering only a future revision.
    expect_unsupported(
        common::fake_stdio("modern", Some("2099-01-01"), 5_000),
        "2099-01-01",
    )
    .await;
    // Over HTTP.
    let (_srv, port) = common::start_hostile_http();
    expect_unsupported(common::http_cfg(port, "unknownrev", 5_000), "1999-01-01").await;
}
