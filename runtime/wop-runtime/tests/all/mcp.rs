//! `ctx.mcp` through the real path: the `mcp` sample pack → runtime → gate
//! → wop-mcp → a real MCP server process. The servers are wop-mcp's test
//! servers (install once: `bash runtime/wop-mcp/tests/setup.sh`):
//! `@modelcontextprotocol/server-everything` over stdio, a PyPI `mcp`
//! Streamable HTTP server on loopback, and scripted stdio servers.
//! `WOP_MCP_TESTS=skip` skips them (and says so).

use super::*;
use serde_json::json;
use wop_runtime::events::ToolStatus;
use wop_runtime::{NodeError, Outcome, Principal, RunContext};

const SETUP: &str = "bash runtime/wop-mcp/tests/setup.sh";

pub(super) fn skip(test: &str) -> bool {
    if std::env::var("WOP_MCP_TESTS").as_deref() == Ok("skip") {
        println!("SKIPPED {test}: WOP_MCP_TESTS=skip (unset it and run `{SETUP}`)");
        return true;
    }
    false
}

fn mcp_tests_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../wop-mcp/tests")
}

fn need(p: PathBuf) -> String {
    assert!(
        p.exists(),
        "missing MCP test server {}; install with: {SETUP}",
        p.display()
    );
    p.display().to_string()
}

fn everything_js() -> String {
    need(
        mcp_tests_dir()
            .join("node/node_modules/@modelcontextprotocol/server-everything/dist/index.js"),
    )
}

pub(super) fn fake_stdio() -> String {
    need(mcp_tests_dir().join("servers/fake_stdio.py"))
}

/// The `mcp` sample with its manifest's `x-wop.mcp` replaced.
fn mcp_pack(dir: &Path, request: Value) -> PathBuf {
    let p = copy_pack("mcp", dir);
    let path = p.join("pack.json");
    let mut m: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    m["x-wop"]["mcp"] = request;
    std::fs::write(&path, m.to_string()).unwrap();
    p
}

fn req(inputs: Value, run: &str, attempt: u32) -> InvokeRequest {
    let mut r = InvokeRequest::new("wop.samples.mcp", inputs);
    r.context = RunContext {
        run_id: run.into(),
        node_id: "n1".into(),
        tenant_id: "acme".into(),
        attempt,
    };
    r.principal = Principal {
        id: "agent-1".into(),
        tenant: "acme".into(),
        scopes: vec![],
    };
    r
}

fn output(r: &InvocationReport) -> Value {
    match &r.outcome {
        Ok(Outcome::Completed { output }) => output.clone(),
        other => panic!("expected completed, got {other:?}"),
    }
}

fn failure(r: &InvocationReport) -> &NodeError {
    match &r.outcome {
        Err(e) => e,
        other => panic!("expected a failure, got {other:?}"),
    }
}

fn det(e: &NodeError) -> Value {
    e.details.clone().unwrap_or(Value::Null)
}

/// (toolName, status, durationMs, effectId) of every `agent.tool-returned`.
type Returned = (String, ToolStatus, Option<u64>, Option<String>);

fn returned(r: &InvocationReport) -> Vec<Returned> {
    r.events
        .iter()
        .filter_map(|e| match e {
            Event::ToolReturned {
                tool_name,
                status,
                duration_ms,
                effect_id,
                ..
            } => Some((tool_name.clone(), *status, *duration_ms, effect_id.clone())),
            _ => None,
        })
        .collect()
}

fn mcp_transport(r: &InvocationReport) -> bool {
    r.events.iter().any(|e| {
        matches!(e, Event::ToolCalled { transport, .. } if *transport == wop_runtime::events::Transport::Mcp)
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn everything_server_over_stdio() {
    if skip("everything_server_over_stdio") {
        return;
    }
    let rt = runtime(&format!(
        r#"
[mcp.servers.everything]
transport = "stdio"
command = "node"
args = ["{}", "stdio"]
timeoutMs = 20000
tiers = {{ echo = "pure", "get-sum" = "pure" }}

[packs.mcp]
capabilities = ["log", "mcp"]
mcp = ["everything"]
"#,
        everything_js()
    ));
    load(&rt, "mcp").await;

    // Call a tool: the result is the server's, unaltered.
    let r = rt
        .invoke(req(
            json!({"server": "everything", "tool": "echo", "arguments": {"message": "hi"}}),
            "r-ev",
            1,
        ))
        .await;
    let out = output(&r);
    assert_eq!(out["result"]["content"][0]["type"], "text", "{out}");
    assert!(
        out["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("hi"),
        "{out}"
    );
    assert!(mcp_transport(&r));
    let ret = returned(&r);
    assert_eq!(ret.len(), 1);
    assert_eq!(ret[0].0, "mcp:everything/echo");
    assert_eq!(ret[0].1, ToolStatus::Ok);
    assert!(ret[0].2.is_some());
    assert_eq!(ret[0].3, None, "a pure tool is not claimed");
    assert_eq!(
        r.usage.tool_calls_by_id.get("mcp:everything/echo"),
        Some(&1)
    );

    // A tool-level failure is a success value (isError: true).
    let r = rt
        .invoke(req(
            json!({"server": "everything", "tool": "get-sum", "arguments": {"a": "x"}}),
            "r-ev",
            1,
        ))
        .await;
    assert_eq!(output(&r)["result"]["isError"], true);

    // List tools, following every page.
    let r = rt
        .invoke(req(
            json!({"server": "everything", "list": true, "allPages": true}),
            "r-ev",
            1,
        ))
        .await;
    let out = output(&r);
    let names: Vec<&str> = out["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"echo") && names.contains(&"get-sum"),
        "{names:?}"
    );

    // Read a resource.
    let r = rt
        .invoke(req(
            json!({"server": "everything", "resource": "demo://resource/dynamic/text/1"}),
            "r-ev",
            1,
        ))
        .await;
    let out = output(&r);
    assert!(out["resource"]["contents"].is_array(), "{out}");

    // Health: the server started once and negotiated a revision.
    let r = rt
        .invoke(req(
            json!({"server": "everything", "health": true}),
            "r-ev",
            1,
        ))
        .await;
    let h = output(&r)["health"].clone();
    assert_eq!(h["state"], "ready", "{h}");
    assert_eq!(h["restarts"], 0, "{h}");
    assert!(h["protocolVersion"].is_string(), "{h}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_streamable_http_effects_and_denials() {
    if skip("python_streamable_http_effects_and_denials") {
        return;
    }
    let (_server, port) = wop_testkit::start_python_mcp_http();
    let url = format!("http://127.0.0.1:{port}/mcp");
    let server = |extra: &str| {
        format!(
            "transport = \"streamable-http\"\nurl = \"{url}\"\ntimeoutMs = 20000\ntiers = {{ add = \"read\", idempotency_count = \"read\" }}\n{extra}"
        )
    };
    let rt = runtime(&format!(
        r#"
[mcp.servers.py]
{}
[mcp.servers.pyrl]
{}
[mcp.servers.pyscoped]
{}
[mcp.servers.unreq]
{}
[mcp.servers.nogrant]
{}
[packs.mcp]
capabilities = ["log", "mcp"]
mcp = ["py/add", "py/echo", "py/idempotency_count", "pyrl", "pyscoped", "unreq", "ghost"]
"#,
        server(""),
        server("rateLimit = { capacity = 1, refillPerSec = 0.001 }"),
        server("scopes = [\"mcp.py\"]"),
        server(""),
        server(""),
    ));
    let dir = tempfile::tempdir().unwrap();
    let pack = mcp_pack(
        dir.path(),
        json!({
            "servers": ["py", "pyrl", "pyscoped", "nogrant", "ghost"],
            "tools": ["py/add", "py/echo", "py/idempotency_count", "py/undeclared-but-granted",
                      "pyrl/*", "pyscoped/*", "nogrant/*", "ghost/*"]
        }),
    );
    rt.load_pack(&pack).await.unwrap();
    let count =
        |key: &str| json!({"server": "py", "tool": "idempotency_count", "arguments": {"key": key}});

    // Call a (read-tier) tool.
    let r = rt
        .invoke(req(
            json!({"server": "py", "tool": "add", "arguments": {"a": 2, "b": 40}}),
            "r-py",
            1,
        ))
        .await;
    let out = output(&r);
    assert_eq!(out["result"]["content"][0]["text"], "42", "{out}");
    assert_eq!(out["result"]["isError"], false, "{out}");

    // List tools: only the granted ∩ requested ones.
    let r = rt
        .invoke(req(
            json!({"server": "py", "list": true, "allPages": true}),
            "r-py",
            1,
        ))
        .await;
    let mut names: Vec<String> = serde_json::from_value(output(&r)["tools"].clone()).unwrap();
    names.sort();
    assert_eq!(names, ["add", "echo", "idempotency_count"]);

    // Read a resource; a missing one is the server's JSON-RPC error.
    let r = rt
        .invoke(req(
            json!({"server": "py", "resource": "test://greeting"}),
            "r-py",
            1,
        ))
        .await;
    assert_eq!(
        output(&r)["resource"]["contents"][0]["text"],
        "hello from python"
    );
    let r = rt
        .invoke(req(
            json!({"server": "py", "resource": "test://missing"}),
            "r-py",
            1,
        ))
        .await;
    let e = failure(&r);
    assert_eq!(e.code, "mcp_error", "{e:?}");
    assert_eq!(det(e)["service"], "mcp", "{e:?}");
    assert!(det(e).get("code").is_some(), "{e:?}");

    // Health.
    let r = rt
        .invoke(req(json!({"server": "py", "health": true}), "r-py", 1))
        .await;
    let h = output(&r)["health"].clone();
    assert_eq!(h["transport"], "streamable-http", "{h}");
    assert_eq!(h["state"], "ready", "{h}");

    // A write-tier (unclassified) tool in two executions of the same node
    // fires once; the server received the effect id as its key.
    let call = json!({"server": "py", "tool": "echo", "arguments": {"message": "once"}});
    let first = rt.invoke(req(call.clone(), "r-eff", 1)).await;
    let again = rt.invoke(req(call.clone(), "r-eff", 2)).await;
    assert_eq!(output(&first)["result"], output(&again)["result"]);
    let (a, b) = (returned(&first), returned(&again));
    let effect_id = a[0].3.clone().expect("write tier is claimed");
    assert_eq!(b[0].3.as_deref(), Some(effect_id.as_str()));
    assert!(
        a[0].2.is_some() && b[0].2.is_none(),
        "replayed, not re-sent"
    );
    assert_eq!(first.usage.effect_claims, 1);
    assert_eq!(again.usage.tool_calls, 0);
    let r = rt.invoke(req(count(&effect_id), "r-py", 1)).await;
    assert_eq!(
        output(&r)["result"]["content"][0]["text"],
        "1",
        "fired once, keyed by the effect id"
    );

    // Denials: never sent, the right agent.tool-returned status.
    let key = "deny-key";
    let cases: Vec<(&str, Value, &str, ToolStatus)> = vec![
        (
            "not requested",
            json!({"server": "unreq", "tool": "echo"}),
            "not_found",
            ToolStatus::Error,
        ),
        (
            "unknown server",
            json!({"server": "ghost", "tool": "echo"}),
            "not_found",
            ToolStatus::Error,
        ),
        (
            "server not granted",
            json!({"server": "nogrant", "tool": "echo"}),
            "forbidden",
            ToolStatus::Forbidden,
        ),
        (
            "tool not requested",
            json!({"server": "py", "tool": "other"}),
            "forbidden",
            ToolStatus::Forbidden,
        ),
        (
            "tool not granted",
            json!({"server": "py", "tool": "undeclared-but-granted"}),
            "forbidden",
            ToolStatus::Forbidden,
        ),
        (
            "missing scope",
            json!({"server": "pyscoped", "tool": "echo"}),
            "forbidden",
            ToolStatus::Forbidden,
        ),
    ];
    for (what, mut inputs, code, status) in cases {
        inputs["arguments"] = json!({"message": "denied"});
        inputs["idempotencyKey"] = json!(key);
        let r = rt.invoke(req(inputs, "r-deny", 1)).await;
        assert_eq!(failure(&r).code, code, "{what}: {:?}", r.outcome);
        let ret = returned(&r);
        assert_eq!(ret.len(), 1, "{what}");
        assert_eq!(ret[0].1, status, "{what}");
        assert_eq!(ret[0].2, None, "{what}: never invoked");
        assert_eq!(r.usage.tool_calls, 0, "{what}");
    }
    // Reads on a server the pack may not see / was not granted.
    let r = rt
        .invoke(req(json!({"server": "unreq", "list": true}), "r-deny", 1))
        .await;
    assert_eq!(failure(&r).code, "not_found");
    let r = rt
        .invoke(req(
            json!({"server": "nogrant", "health": true}),
            "r-deny",
            1,
        ))
        .await;
    assert_eq!(failure(&r).code, "forbidden");

    // Rate limit: the second call in the loop is refused before sending.
    let r = rt
        .invoke(req(
            json!({"server": "pyrl", "tool": "add", "arguments": {"a": 1, "b": 1}, "repeat": 2}),
            "r-rl",
            1,
        ))
        .await;
    assert_eq!(failure(&r).code, "rate_limited");
    let ret = returned(&r);
    assert_eq!(ret[0].1, ToolStatus::Ok);
    assert_eq!((ret[1].1, ret[1].2), (ToolStatus::RateLimited, None));
    assert_eq!(r.usage.tool_calls, 1);

    // Budget: one tool call per run; the second is refused before sending.
    let mut q = req(
        json!({"server": "py", "tool": "echo", "arguments": {"message": "b"}, "repeat": 2}),
        "r-budget",
        1,
    );
    q.budget = Some(wop_runtime::metering::RunBudget {
        max_tool_calls: Some(1),
        ..Default::default()
    });
    let r = rt.invoke(q).await;
    assert_eq!(failure(&r).code, "budget_exhausted", "{:?}", r.outcome);
    let ret = returned(&r);
    assert_eq!(ret[1].1, ToolStatus::Error);
    assert_eq!(ret[1].2, None);
    assert_eq!(r.usage.tool_calls, 1);
    // The refused budget call never reached the server: its would-be
    // effect (the second activity) was released, and only one key fired.
    let fired = ret[0].3.clone().unwrap();
    let r = rt.invoke(req(count(&fired), "r-py", 1)).await;
    assert_eq!(output(&r)["result"]["content"][0]["text"], "1");
    let second = wop_runtime::effects::activity_id("acme", "r-budget", "n1", 2, "mcp:py/echo");
    let r = rt.invoke(req(count(&second), "r-py", 1)).await;
    assert_eq!(output(&r)["result"]["content"][0]["text"], "0");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scripted_stdio_key_listing_and_hostile_server() {
    if skip("scripted_stdio_key_listing_and_hostile_server") {
        return;
    }
    let script = fake_stdio();
    let rt = runtime(&format!(
        r#"
[mcp.servers.fake]
transport = "stdio"
command = "python3"
args = ["{script}", "legacy"]
tiers = {{ a = "read" }}

[mcp.servers.silent]
transport = "stdio"
command = "python3"
args = ["{script}", "silent"]
timeoutMs = 1500
tiers = {{ x = "read" }}

[packs.mcp]
capabilities = ["log", "mcp"]
mcp = ["fake/a", "fake/w", "silent"]
"#
    ));
    let dir = tempfile::tempdir().unwrap();
    let pack = mcp_pack(dir.path(), json!({"servers": ["fake", "silent"]}));
    rt.load_pack(&pack).await.unwrap();

    // The effect id travels in params._meta (the fake server echoes params).
    let r = rt
        .invoke(req(
            json!({"server": "fake", "tool": "w", "arguments": {"v": 1}}),
            "r-f",
            1,
        ))
        .await;
    let out = output(&r);
    let ret = returned(&r);
    let eid = ret[0].3.clone().expect("claimed");
    assert_eq!(
        out["result"]["structuredContent"]["params"]["_meta"]["dev.openwop/idempotencyKey"],
        json!(eid),
        "{out}"
    );
    assert_eq!(
        out["result"]["x-extra"]["kept"], true,
        "unknown fields kept: {out}"
    );

    // A paginated listing keeps only granted tools on every page.
    let r = rt
        .invoke(req(
            json!({"server": "fake", "list": true, "allPages": true}),
            "r-f",
            1,
        ))
        .await;
    let out = output(&r);
    assert_eq!(out["pages"], 2, "{out}");
    assert_eq!(out["tools"], json!(["a"]), "{out}");
    assert_eq!(
        out["first"]["nextCursor"], "page2",
        "unaltered besides the filter"
    );

    // A server that never answers: upstream_unavailable from the per-call
    // timeout (the test would hang, not fail, without it).
    let r = rt
        .invoke(req(json!({"server": "silent", "tool": "x"}), "r-s", 1))
        .await;
    let e = failure(&r);
    assert_eq!(e.code, "upstream_unavailable", "{e:?}");
    assert_eq!(det(e)["service"], "mcp");
    assert_eq!(det(e)["retryable"], true);
    assert_eq!(returned(&r)[0].1, ToolStatus::Error);

    // Deny by default at load: a pack requesting `mcp` without the grant.
    let strict = runtime("");
    let err = strict.load_pack(&pack).await.unwrap_err();
    assert!(err.to_string().contains("mcp"), "{err}");
}

/// Each hostile server, and each protocol revision, reached from a built
/// pack: the pack sees the typed error (or the result), the host stays up,
/// and `agent.tool-returned` records the failure.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_servers_and_revisions_through_a_pack() {
    if skip("hostile_servers_and_revisions_through_a_pack") {
        return;
    }
    let script = fake_stdio();
    let server = |id: &str, args: &str, timeout_ms: u64| {
        format!(
            "[mcp.servers.{id}]\ntransport = \"stdio\"\ncommand = \"python3\"\nargs = [\"{script}\", {args}]\ntimeoutMs = {timeout_ms}\ntiers = {{ echo = \"read\" }}\n"
        )
    };
    let cases: &[(&str, &str, u64)] = &[
        ("huge", "\"huge\"", 5_000),
        ("endless", "\"endless\"", 5_000),
        ("invalid", "\"invalid\"", 2_000),
        ("wrongid", "\"wrongid\"", 2_000),
        ("exit", "\"exit\"", 60_000),
        ("stderr", "\"stderr\"", 30_000),
        ("flood", "\"flood\"", 30_000),
        ("legacy", "\"legacy\", \"2025-03-26\"", 5_000),
        ("modern", "\"modern\"", 5_000),
        ("ancient", "\"legacy\", \"2024-11-05\"", 5_000),
    ];
    let mut policy: String = cases.iter().map(|(id, a, t)| server(id, a, *t)).collect();
    let ids: Vec<&str> = cases.iter().map(|c| c.0).collect();
    policy.push_str(&format!(
        "[packs.mcp]\ncapabilities = [\"log\", \"mcp\"]\nmcp = {}\n",
        serde_json::to_string(&ids).unwrap()
    ));
    let rt = runtime(&policy);
    let dir = tempfile::tempdir().unwrap();
    let pack = mcp_pack(dir.path(), json!({ "servers": ids }));
    rt.load_pack(&pack).await.unwrap();
    let call = |id: &str| {
        req(
            json!({"server": id, "tool": "echo", "arguments": {"a": 1}}),
            &format!("r-{id}"),
            1,
        )
    };

    for (id, code) in [
        ("huge", "mcp_result_too_large"),
        ("endless", "mcp_result_too_large"),
        ("invalid", "upstream_unavailable"),
        ("wrongid", "upstream_unavailable"),
        ("exit", "upstream_unavailable"),
        ("ancient", "interop_version_unsupported"),
    ] {
        let r = rt.invoke(call(id)).await;
        let e = failure(&r);
        assert_eq!(e.code, code, "{id}: {e:?}");
        let ret = returned(&r);
        assert_eq!(ret.len(), 1, "{id}: one call, one return");
        assert_eq!(ret[0].0, format!("mcp:{id}/echo"));
        assert_eq!(ret[0].1, ToolStatus::Error, "{id}");
        if code == "upstream_unavailable" {
            assert_eq!(det(e)["service"], "mcp", "{id}: {e:?}");
            assert_eq!(det(e)["retryable"], true, "{id}: {e:?}");
        }
    }
    // A server that floods notifications or stderr still answers.
    for id in ["flood", "stderr"] {
        let r = rt.invoke(call(id)).await;
        assert_eq!(output(&r)["result"]["isError"], false, "{id}");
    }
    // The crashed server was restarted (with backoff) and answers again.
    let r = rt
        .invoke(req(json!({"server": "exit", "list": true}), "r-exit", 2))
        .await;
    assert_eq!(output(&r)["tools"], json!(["a"]), "restarted and listing");

    // Revisions: each server's negotiated revision is recorded and
    // visible to the pack in server-health; nothing was downgraded.
    for (id, rev) in [("legacy", "2025-03-26"), ("modern", "2026-07-28")] {
        let r = rt.invoke(call(id)).await;
        assert!(output(&r)["result"].is_object(), "{id}");
        let r = rt
            .invoke(req(
                json!({"server": id, "health": true}),
                &format!("r-{id}"),
                1,
            ))
            .await;
        let h = &output(&r)["health"];
        assert_eq!(h["protocolVersion"], rev, "{id}: {h}");
        assert_eq!(h["state"], "ready", "{id}: {h}");
    }
    // The host is still serving: a well-behaved call after all of it works.
    let r = rt.invoke(call("legacy")).await;
    assert!(output(&r)["result"].is_object());
}
