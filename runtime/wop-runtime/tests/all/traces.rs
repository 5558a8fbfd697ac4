//! Traces (issue 20, item 2), through the real path: a pack's invocation
//! and its host calls exported over OTLP/HTTP JSON to a loopback
//! collector, the caller's `traceparent` as the parent, and each host
//! call's `traceparent` carried on to the tool and the fetched URL.

use super::*;
use serde_json::json;
use wop_runtime::RunContext;
use wop_runtime::gate::telemetry::otlp::{Config, Sampler};
use wop_testkit::{Mode, Server};

const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT: &str = "00f067aa0ba902b7";

fn spans_of(collector: &Server) -> Vec<Value> {
    let mut out = Vec::new();
    for r in collector.requests() {
        assert_eq!(r.line, "POST /v1/traces HTTP/1.1");
        assert_eq!(r.headers["content-type"], "application/json");
        assert_eq!(r.headers["x-otlp-token"], "t0k3n", "OTLP headers are sent");
        let body: Value = serde_json::from_str(&r.body).unwrap();
        for rs in body["resourceSpans"].as_array().unwrap() {
            for ss in rs["scopeSpans"].as_array().unwrap() {
                out.extend(ss["spans"].as_array().unwrap().iter().cloned());
            }
        }
    }
    out
}

/// A runtime under `policy` exporting its traces to `collector`.
fn traced_runtime(policy: &str, collector: &Server) -> Runtime {
    sampled_runtime(policy, collector, Default::default())
}

/// [`traced_runtime`] with a sampler.
fn sampled_runtime(policy: &str, collector: &Server, sampler: Sampler) -> Runtime {
    let mut cfg = RuntimeConfig::new();
    cfg.policy(Policy::from_toml(policy).unwrap()).otlp(Config {
        endpoint: collector.url("/v1/traces"),
        headers: vec![("x-otlp-token".into(), "t0k3n".into())],
        sampler,
    });
    Runtime::new(&cfg).unwrap()
}

fn attr<'a>(span: &'a Value, key: &str) -> &'a Value {
    span["attributes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["key"] == key)
        .map(|a| &a["value"])
        .unwrap_or(&Value::Null)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invocation_and_its_host_calls_are_one_trace_carried_on() {
    let collector = Server::start(Mode::Ok).await;
    let upstream = Server::start(Mode::Ok).await;
    let site = Server::start(Mode::Ok).await;
    let policy = format!(
        "[egress]\nallowLoopback = true\n\
         [[tools]]\nid = \"crm:read\"\nurl = \"{}\"\nsafetyTier = \"read\"\n\
         [packs.tool-call]\ncapabilities = [\"tools\"]\ntools = [\"crm:*\"]\n\
         [packs.fetch]\ncapabilities = [\"log\", \"http\"]\negress = [\"http://127.0.0.1:*\"]\n",
        upstream.url("/read")
    );
    let rt = traced_runtime(&policy, &collector);
    rt.load_pack(&pack("tool-call")).await.unwrap();
    rt.load_pack(&pack("fetch")).await.unwrap();

    let mut req = InvokeRequest::new("wop.samples.tool-call", json!({"tool": "crm:read"}));
    req.context = RunContext {
        run_id: "run-trace".into(),
        node_id: "n1".into(),
        tenant_id: "acme".into(),
        attempt: 2,
    };
    req.traceparent = Some(format!("00-{TRACE}-{PARENT}-01"));
    let r = rt.invoke(req).await;
    assert!(r.outcome.is_ok(), "{:?}", r.outcome);
    let mut f = InvokeRequest::new("wop.samples.fetch", json!({"url": site.url("/x")}));
    // A malformed parent is ignored: a trace of its own.
    f.traceparent = Some("00-not-a-trace-01".into());
    let r = rt.invoke(f).await;
    assert!(r.outcome.is_ok(), "{:?}", r.outcome);
    rt.flush_traces(std::time::Duration::from_secs(10)).await;

    let spans = spans_of(&collector);
    let named = |n: &str| -> Vec<&Value> { spans.iter().filter(|s| s["name"] == n).collect() };
    let node = named("openwop.node.wop.samples.tool-call");
    assert_eq!(node.len(), 1, "{spans:?}");
    let node = node[0];
    assert_eq!(node["traceId"], TRACE);
    assert_eq!(node["parentSpanId"], PARENT);
    assert_eq!(node["kind"], 2);
    assert_eq!(attr(node, "openwop.run_id")["stringValue"], "run-trace");
    assert_eq!(attr(node, "openwop.node_id")["stringValue"], "n1");
    assert_eq!(
        attr(node, "openwop.node_type")["stringValue"],
        "wop.samples.tool-call"
    );
    assert_eq!(
        attr(node, "openwop.node_attempt")["intValue"],
        "1",
        "0-based"
    );
    assert_eq!(attr(node, "openwop.tenant_id")["stringValue"], "acme");
    assert_eq!(attr(node, "openwop.outcome")["stringValue"], "completed");
    assert_ne!(attr(node, "wop.usage.fuel")["intValue"], Value::Null);

    let tool = named("openwop.activity.tool");
    assert_eq!(tool.len(), 1, "{spans:?}");
    let tool = tool[0];
    assert_eq!(tool["traceId"], TRACE);
    assert_eq!(tool["parentSpanId"], node["spanId"]);
    assert_eq!(tool["kind"], 3);
    assert_eq!(attr(tool, "openwop.tool_name")["stringValue"], "crm:read");
    assert_eq!(attr(tool, "openwop.tool_status")["stringValue"], "ok");
    // The tool received the call's own span as its parent.
    let tp = upstream.requests()[0].headers["traceparent"].clone();
    assert_eq!(
        tp,
        format!("00-{TRACE}-{}-01", tool["spanId"].as_str().unwrap())
    );

    // safe-fetch: its own trace (the malformed parent was ignored), the
    // destination gets the fetch span's context.
    let fetch_node = named("openwop.node.wop.samples.fetch")[0];
    assert!(fetch_node.get("parentSpanId").is_none(), "{fetch_node}");
    assert_ne!(fetch_node["traceId"], TRACE);
    let http = named("openwop.activity.http")[0];
    assert_eq!(http["parentSpanId"], fetch_node["spanId"]);
    let tp = site.requests()[0].headers["traceparent"].clone();
    assert_eq!(
        tp,
        format!(
            "00-{}-{}-01",
            fetch_node["traceId"].as_str().unwrap(),
            http["spanId"].as_str().unwrap()
        )
    );
    assert_eq!(rt.trace_export_losses(), (0, 0));
}

/// `OTEL_TRACES_SAMPLER=parentbased_traceidratio`, ratio 0: a caller's
/// sampled trace is recorded and carried on sampled; a caller's unsampled
/// trace and a new trace are never exported, and the host call's
/// `traceparent` says "not sampled" in the same trace.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sampled_out_traces_are_carried_on_unsampled_and_never_exported() {
    let collector = Server::start(Mode::Ok).await;
    let upstream = Server::start(Mode::Ok).await;
    let policy = format!(
        "[[tools]]\nid = \"crm:read\"\nurl = \"{}\"\nsafetyTier = \"read\"\n\
         [packs.tool-call]\ncapabilities = [\"tools\"]\ntools = [\"crm:*\"]\n",
        upstream.url("/read")
    );
    let (sampler, warning) = Sampler::from_vars(Some("parentbased_traceidratio"), Some("0"));
    assert_eq!(warning, None);
    let rt = sampled_runtime(&policy, &collector, sampler);
    rt.load_pack(&pack("tool-call")).await.unwrap();
    let call = |traceparent: Option<String>| {
        let mut req = InvokeRequest::new("wop.samples.tool-call", json!({"tool": "crm:read"}));
        req.traceparent = traceparent;
        req
    };
    let unsampled_trace = "0af7651916cd43dd8448eb211c80319c";
    assert!(
        rt.invoke(call(Some(format!("00-{unsampled_trace}-{PARENT}-00"))))
            .await
            .outcome
            .is_ok()
    );
    assert!(rt.invoke(call(None)).await.outcome.is_ok());
    assert!(
        rt.invoke(call(Some(format!("00-{TRACE}-{PARENT}-01"))))
            .await
            .outcome
            .is_ok()
    );
    rt.flush_traces(std::time::Duration::from_secs(10)).await;

    let seen: Vec<String> = upstream
        .requests()
        .iter()
        .map(|r| r.headers["traceparent"].clone())
        .collect();
    assert_eq!(seen.len(), 3);
    assert!(
        seen[0].starts_with(&format!("00-{unsampled_trace}-")) && seen[0].ends_with("-00"),
        "{seen:?}"
    );
    assert!(seen[1].ends_with("-00"), "a new trace at ratio 0: {seen:?}");
    assert!(
        seen[2].starts_with(&format!("00-{TRACE}-")) && seen[2].ends_with("-01"),
        "{seen:?}"
    );
    let spans = spans_of(&collector);
    assert_eq!(
        spans.len(),
        2,
        "the sampled invocation and its tool call: {spans:?}"
    );
    assert!(spans.iter().all(|s| s["traceId"] == TRACE), "{spans:?}");
    assert_eq!(rt.trace_export_losses(), (0, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_an_endpoint_nothing_is_traced_or_carried_on() {
    let upstream = Server::start(Mode::Ok).await;
    let rt = runtime(&format!(
        "[[tools]]\nid = \"crm:read\"\nurl = \"{}\"\nsafetyTier = \"read\"\n\
         [packs.tool-call]\ncapabilities = [\"tools\"]\ntools = [\"crm:*\"]\n",
        upstream.url("/read")
    ));
    rt.load_pack(&pack("tool-call")).await.unwrap();
    let mut req = InvokeRequest::new("wop.samples.tool-call", json!({"tool": "crm:read"}));
    req.traceparent = Some(format!("00-{TRACE}-{PARENT}-01"));
    assert!(rt.invoke(req).await.outcome.is_ok());
    assert!(!upstream.requests()[0].headers.contains_key("traceparent"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_call_carries_its_span_in_meta() {
    if super::mcp::skip("an_mcp_call_carries_its_span_in_meta") {
        return;
    }
    let (_server, port) = wop_testkit::start_python_mcp_http();
    let collector = Server::start(Mode::Ok).await;
    let policy = format!(
        "[mcp.servers.py]\ntransport = \"streamable-http\"\nurl = \"http://127.0.0.1:{port}/mcp\"\ntimeoutMs = 20000\ntiers = {{ meta_traceparent = \"read\" }}\n\
         [packs.mcp]\ncapabilities = [\"log\", \"mcp\"]\nmcp = [\"py/meta_traceparent\"]\n"
    );
    let rt = traced_runtime(&policy, &collector);
    rt.load_pack(&pack("mcp")).await.unwrap();
    let mut req = InvokeRequest::new(
        "wop.samples.mcp",
        json!({"server": "py", "tool": "meta_traceparent", "arguments": {}}),
    );
    req.traceparent = Some(format!("00-{TRACE}-{PARENT}-01"));
    let r = rt.invoke(req).await;
    let out = match &r.outcome {
        Ok(wop_runtime::Outcome::Completed { output }) => output.to_string(),
        other => panic!("{other:?}"),
    };
    rt.flush_traces(std::time::Duration::from_secs(10)).await;
    let spans = spans_of(&collector);
    let mcp = spans
        .iter()
        .find(|s| s["name"] == "openwop.activity.mcp")
        .unwrap_or_else(|| panic!("{spans:?}"));
    let want = format!("00-{TRACE}-{}-01", mcp["spanId"].as_str().unwrap());
    assert!(out.contains(&want), "the server saw {out}, want {want}");
}
