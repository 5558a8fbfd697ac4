//! Traces through `wop serve` (issue 20, item 2): the service started with
//! the standard `OTEL_EXPORTER_OTLP_ENDPOINT` exports each invocation's
//! span to a loopback collector as a child of the caller's `traceparent`,
//! whether it came as an HTTP header on the invoke API or as
//! `params._meta.traceparent` on the MCP mount.

use super::*;
use serde_json::json;
use std::process::{Command, Stdio};
use wop_testkit::{Mode, Server as Upstream};

const TRACE: &str = "0af7651916cd43dd8448eb211c80319c";

fn spans(collector: &Upstream) -> Vec<Value> {
    collector
        .requests()
        .iter()
        .filter_map(|r| serde_json::from_str::<Value>(&r.body).ok())
        .flat_map(|b| {
            b["resourceSpans"][0]["scopeSpans"][0]["spans"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_service_exports_spans_under_the_callers_traceparent() {
    let collector = Upstream::start(Mode::Ok).await;
    let packs = packs(&["hello"]);
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_wop-serve"));
    cmd.args(["--packs", packs.path().to_str().unwrap()])
        .args(["--listen", "127.0.0.1:0", "--anonymous-loopback"])
        .args(["--store", dir.path().join("store").to_str().unwrap()])
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", collector.url(""))
        // OPERATIONS.md's form: percent-encoded values (issue 33, item 11).
        .env(
            "OTEL_EXPORTER_OTLP_HEADERS",
            "authorization=Bearer%20t0ken,x-scope-orgid=a%3Db%2Cc",
        )
        .stderr(Stdio::null());
    let (_child, addr, _out) = wop_testkit::spawn_serve(&mut cmd).unwrap();

    let via_header = format!("00-{TRACE}-b7ad6b7169203331-01");
    let r = req(
        addr,
        "POST",
        "/host/wop/invocations",
        &[
            ("Content-Type", "application/json"),
            ("traceparent", &via_header),
        ],
        br#"{"typeId":"wop.samples.hello","inputs":{"name":"T"},"nodeContext":{"runId":"tr-1","nodeId":"n"}}"#,
    )
    .await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));

    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"},
        "traceparent": format!("00-{TRACE}-c7ad6b7169203332-01"),
        "dev.openwop/runId": "tr-2",
    });
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                      "params": {"name": "wop.samples.hello", "arguments": {"name": "M"}, "_meta": meta}});
    let r = req(
        addr,
        "POST",
        "/mcp",
        &[
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
            ("MCP-Protocol-Version", "2026-07-28"),
        ],
        body.to_string().as_bytes(),
    )
    .await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));

    // The exporter batches for up to 200 ms.
    let mut got = Vec::new();
    for _ in 0..50 {
        got = spans(&collector);
        if got.len() >= 2 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let parent_of = |run: &str| {
        got.iter()
            .find(|s| {
                s["attributes"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|a| a["key"] == "openwop.run_id" && a["value"]["stringValue"] == run)
            })
            .map(|s| {
                (
                    s["traceId"].clone(),
                    s["parentSpanId"].clone(),
                    s["name"].clone(),
                )
            })
    };
    // The collector got the decoded values.
    for r in collector.requests() {
        assert_eq!(
            r.headers.get("authorization").map(String::as_str),
            Some("Bearer t0ken")
        );
        assert_eq!(
            r.headers.get("x-scope-orgid").map(String::as_str),
            Some("a=b,c")
        );
    }
    assert_eq!(
        parent_of("tr-1"),
        Some((
            json!(TRACE),
            json!("b7ad6b7169203331"),
            json!("openwop.node.wop.samples.hello")
        )),
        "{got:?}"
    );
    assert_eq!(
        parent_of("tr-2"),
        Some((
            json!(TRACE),
            json!("c7ad6b7169203332"),
            json!("openwop.node.wop.samples.hello")
        )),
        "{got:?}"
    );
    assert_eq!(collector.requests()[0].line, "POST /v1/traces HTTP/1.1");
}
