//! `ctx.mcp` through the real path: the `mcp` sample pack → runtime → gate
//! → wop-mcp → a real MCP server process. The servers are wop-mcp's test
//! servers (install once: `bash runtime/wop-mcp/tests/setup.sh`):
//! `@modelcontextprotocol/server-everything` over stdio, a PyPI `mcp`
//! Streamable HTTP server on loopback, and scripted stdio servers.
//! `WOP_MCP_TESTS=skip` skips them (and says so).

use super::*;
use serde_json::json;
use wop_runtime::events::ToolStatus;
use wop_runtime::gate::mcp::ServerState;
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
mcpResources = {{ everything = ["demo://resource/dynamic/*"] }}
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
mcpResources = {{ py = ["test://*"] }}
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
                      "pyrl/*", "pyscoped/*", "nogrant/*", "ghost/*"],
            "resources": {"py": ["test://*"]}
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
    // The passive status (what a metrics scrape reads): nothing started.
    let status = |id: &str| {
        rt.mcp_servers()
            .into_iter()
            .find(|(s, _)| s == id)
            .map(|(_, st)| st)
            .unwrap()
    };
    assert_eq!(rt.mcp_servers().len(), ids.len());
    for id in &ids {
        assert_eq!(status(id).state, ServerState::Idle, "{id}");
    }

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
    // The server that exited is seen down, without touching it.
    assert_eq!(status("exit").state, ServerState::Down);
    assert_eq!(status("exit").restarts, 0);
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
    assert_eq!(status("exit").state, ServerState::Ready);
    assert_eq!(status("exit").restarts, 1);

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

/// What a `FAKE_MCP_LOG` fake server received: `(method, params)` in order.
fn received(log: &Path) -> Vec<(String, Value)> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            (
                v["method"].as_str().unwrap().to_owned(),
                v["params"].clone(),
            )
        })
        .collect()
}

fn count(log: &Path, method: &str) -> usize {
    received(log).iter().filter(|(m, _)| m == method).count()
}

/// A scripted stdio server `id` in `mode` with environment `env` (see
/// `fake_stdio.py`) and `extra` policy lines.
fn scripted(id: &str, mode: &str, env: &[(&str, &str)], extra: &str) -> String {
    let env: Vec<String> = env.iter().map(|(k, v)| format!("{k} = {v:?}")).collect();
    format!(
        "[mcp.servers.{id}]\ntransport = \"stdio\"\ncommand = \"python3\"\nargs = [{:?}, {mode:?}]\nenv = {{ {} }}\ntiers = {{ a = \"read\" }}\n{extra}\n",
        fake_stdio(),
        env.join(", ")
    )
}

/// [`scripted`], logging what reaches the server to `log`.
fn logged(id: &str, mode: &str, log: &Path, extra: &str) -> String {
    scripted(id, mode, &[("FAKE_MCP_LOG", log.to_str().unwrap())], extra)
}

/// Reads under the gate (issue 19, decision 0017): a tool grant does not
/// allow reading resources (`forbidden`, nothing reaches the server); a
/// granted URI pattern does; reads and listings are audited and counted
/// against rate limits and the run's budget like calls (a budget of N
/// operations lets exactly N through).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_reads_need_their_own_grant_and_pass_the_gate() {
    if skip("mcp_reads_need_their_own_grant_and_pass_the_gate") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let (tonly, fake, rl) = (
        tmp.path().join("tonly.log"),
        tmp.path().join("fake.log"),
        tmp.path().join("rl.log"),
    );
    let rt = runtime(&format!(
        "{}{}{}[packs.mcp]\ncapabilities = [\"log\", \"mcp\"]\nmcp = [\"tonly\", \"fake\", \"rl\"]\nmcpResources = {{ fake = [\"test://allowed/*\"], rl = [\"test://*\"] }}\n",
        logged("tonly", "legacy", &tonly, ""),
        logged("fake", "legacy", &fake, ""),
        logged(
            "rl",
            "legacy",
            &rl,
            "rateLimit = { capacity = 1, refillPerSec = 0.001 }"
        ),
    ));
    let dir = tempfile::tempdir().unwrap();
    let pack = mcp_pack(
        dir.path(),
        json!({
            "servers": ["tonly", "fake", "rl"],
            // The pack asks for everything; the operator decides.
            "resources": {"tonly": ["file:///*"], "fake": ["test://*", "file:///*"], "rl": ["test://*"]}
        }),
    );
    rt.load_pack(&pack).await.unwrap();
    let read = |server: &str, uri: &str| json!({"server": server, "resource": uri});

    // Tools granted on `tonly`, no resources: its tools work, its
    // resources are forbidden and never reach it.
    let r = rt
        .invoke(req(json!({"server": "tonly", "tool": "a"}), "r-read", 1))
        .await;
    output(&r);
    let r = rt
        .invoke(req(read("tonly", "file:///etc/shadow"), "r-read", 1))
        .await;
    let e = failure(&r);
    assert_eq!(e.code, "forbidden", "{e:?}");
    assert_eq!(det(e)["reason"], "not-granted", "{e:?}");
    assert_eq!(det(e)["uri"], "file:///etc/shadow", "{e:?}");
    assert!(e.message.contains("mcpResources"), "{e:?}");
    assert_eq!(
        returned(&r),
        vec![(
            "mcp:tonly#resources/read".to_owned(),
            ToolStatus::Forbidden,
            None,
            None
        )]
    );
    assert_eq!(count(&tonly, "tools/call"), 1, "the server is up");
    assert_eq!(count(&tonly, "resources/read"), 0, "nothing reached it");

    // An allowed URI pattern works, audited and counted like a call.
    let r = rt
        .invoke(req(read("fake", "test://allowed/1"), "r-read", 1))
        .await;
    assert_eq!(
        output(&r)["resource"]["contents"][0]["uri"],
        "test://allowed/1"
    );
    let ret = returned(&r);
    assert_eq!(ret.len(), 1, "{ret:?}");
    assert_eq!(
        (ret[0].0.as_str(), ret[0].1),
        ("mcp:fake#resources/read", ToolStatus::Ok)
    );
    assert!(ret[0].2.is_some(), "performed: durationMs");
    assert!(mcp_transport(&r));
    assert_eq!(
        r.usage.tool_calls_by_id.get("mcp:fake#resources/read"),
        Some(&1)
    );
    let reads = received(&fake);
    assert_eq!(
        reads.last().map(|(m, p)| (m.as_str(), p["uri"].clone())),
        Some(("resources/read", json!("test://allowed/1")))
    );
    // Outside the operator's pattern, or escaping it: forbidden, not sent.
    for (uri, reason) in [
        ("file:///etc/passwd", "not-granted"),
        ("test://allowed/../secret", "uri-not-plain"),
        ("test://allowed/%2e%2e/secret", "uri-not-plain"),
    ] {
        let r = rt.invoke(req(read("fake", uri), "r-read", 1)).await;
        let e = failure(&r);
        assert_eq!(
            (e.code.as_str(), det(e)["reason"].as_str()),
            ("forbidden", Some(reason)),
            "{uri}"
        );
        assert_eq!(returned(&r)[0].1, ToolStatus::Forbidden);
    }
    assert_eq!(count(&fake, "resources/read"), 1);

    // list-tools is audited too.
    let r = rt
        .invoke(req(
            json!({"server": "fake", "list": true, "allPages": true}),
            "r-read",
            1,
        ))
        .await;
    assert_eq!(output(&r)["pages"], 2);
    let names: Vec<String> = returned(&r).into_iter().map(|x| x.0).collect();
    assert_eq!(names, ["mcp:fake#tools/list", "mcp:fake#tools/list"]);

    // A budget of 3 operations in one run: two listings and one read go
    // through, the fourth operation is refused before it is sent.
    let budget = || wop_runtime::metering::RunBudget {
        max_tool_calls: Some(3),
        ..Default::default()
    };
    let (lists, reads) = (count(&fake, "tools/list"), count(&fake, "resources/read"));
    let mut q = req(
        json!({"server": "fake", "list": true, "allPages": true}),
        "r-budget",
        1,
    );
    q.budget = Some(budget());
    output(&rt.invoke(q).await);
    let mut q = req(
        json!({"server": "fake", "resource": "test://allowed/1", "repeat": 5}),
        "r-budget",
        1,
    );
    q.budget = Some(budget());
    let r = rt.invoke(q).await;
    assert_eq!(failure(&r).code, "budget_exhausted", "{:?}", r.outcome);
    assert_eq!(count(&fake, "tools/list") - lists, 2);
    assert_eq!(
        count(&fake, "resources/read") - reads,
        1,
        "exactly N through"
    );
    let ret = returned(&r);
    assert_eq!(ret.len(), 2, "{ret:?}");
    assert_eq!((ret[1].1, ret[1].2), (ToolStatus::Error, None));

    // The server's rate limit holds for reads.
    let r = rt
        .invoke(req(
            json!({"server": "rl", "resource": "test://x", "repeat": 2}),
            "r-rl",
            1,
        ))
        .await;
    assert_eq!(failure(&r).code, "rate_limited", "{:?}", r.outcome);
    assert_eq!(count(&rl, "resources/read"), 1);
}

/// Issue 33, item 11: `server-health` is a gate call like the other reads
/// — the read tool `mcp:<server>#server-health`, audited (the
/// `agent.tool-called`/`tool-returned` pair, a denial included), counted in
/// usage and charged to the run's budget (a budget of 1 lets exactly one
/// through).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_server_health_is_audited_and_charged() {
    if skip("mcp_server_health_is_audited_and_charged") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let (fake, nogrant) = (tmp.path().join("fake.log"), tmp.path().join("ng.log"));
    let rt = runtime(&format!(
        "{}{}[packs.mcp]\ncapabilities = [\"log\", \"mcp\"]\nmcp = [\"fake\"]\n",
        logged("fake", "legacy", &fake, ""),
        logged("nogrant", "legacy", &nogrant, ""),
    ));
    let dir = tempfile::tempdir().unwrap();
    let pack = mcp_pack(dir.path(), json!({"servers": ["fake", "nogrant"]}));
    rt.load_pack(&pack).await.unwrap();
    let health = |server: &str| json!({"server": server, "health": true});

    let r = rt.invoke(req(health("fake"), "r-health", 1)).await;
    assert_eq!(output(&r)["health"]["state"], "ready", "{:?}", r.outcome);
    let ret = returned(&r);
    assert_eq!(ret.len(), 1, "{ret:?}");
    assert_eq!(
        (ret[0].0.as_str(), ret[0].1),
        ("mcp:fake#server-health", ToolStatus::Ok)
    );
    assert!(ret[0].2.is_some(), "performed: durationMs");
    assert!(mcp_transport(&r));
    assert_eq!(
        r.usage.tool_calls_by_id.get("mcp:fake#server-health"),
        Some(&1)
    );
    assert_eq!(r.usage.tool_calls, 1);

    // Not granted: refused, and the refusal audited.
    let r = rt.invoke(req(health("nogrant"), "r-health", 1)).await;
    assert_eq!(failure(&r).code, "forbidden");
    assert_eq!(
        returned(&r),
        vec![(
            "mcp:nogrant#server-health".to_owned(),
            ToolStatus::Forbidden,
            None,
            None
        )]
    );

    // A budget of one operation in one run: the second health is refused.
    let budget = || wop_runtime::metering::RunBudget {
        max_tool_calls: Some(1),
        ..Default::default()
    };
    let mut q = req(health("fake"), "r-health-budget", 1);
    q.budget = Some(budget());
    output(&rt.invoke(q).await);
    let mut q = req(health("fake"), "r-health-budget", 1);
    q.budget = Some(budget());
    let r = rt.invoke(q).await;
    assert_eq!(failure(&r).code, "budget_exhausted", "{:?}", r.outcome);
    let ret = returned(&r);
    assert_eq!(ret.len(), 1, "{ret:?}");
    assert_eq!((ret[0].1, ret[0].2), (ToolStatus::Error, None));
}

/// Client failures classified right (issue 19, decision 0018): a handshake
/// that times out or fails before the call is sent releases the claim
/// (`upstream_unavailable`, retryable; never `escaped`, never a recorded
/// outcome), so a retry reaches the server; a server that starts in 4 s
/// works; a replayed error keeps its original shape.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_failures_before_sending_release_the_claim() {
    if skip("mcp_failures_before_sending_release_the_claim") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let log = |n: &str| tmp.path().join(format!("{n}.log"));
    let marker = tmp.path().join("flaky-started");
    let rt = runtime(&format!(
        "{}{}{}{}[packs.mcp]\ncapabilities = [\"log\", \"mcp\"]\nmcp = [\"mute\", \"flaky\", \"slow\", \"fake\"]\n",
        logged("mute", "mute", &log("mute"), "timeoutMs = 1500"),
        scripted(
            "flaky",
            "legacy",
            &[
                ("FAKE_MCP_LOG", log("flaky").to_str().unwrap()),
                ("FAKE_MCP_FAIL_FIRST", marker.to_str().unwrap())
            ],
            "timeoutMs = 5000",
        ),
        scripted(
            "slow",
            "modern",
            &[("FAKE_MCP_START_DELAY_MS", "4000")],
            "timeoutMs = 10000",
        ),
        logged("fake", "legacy", &log("fake"), ""),
    ));
    let dir = tempfile::tempdir().unwrap();
    let pack = mcp_pack(
        dir.path(),
        json!({"servers": ["mute", "flaky", "slow", "fake"]}),
    );
    rt.load_pack(&pack).await.unwrap();
    // `w` is unclassified: a write, claimed as an effect.
    let write = |server: &str| json!({"server": server, "tool": "w", "arguments": {"v": 1}});
    let states = |run: &'static str| {
        let rt = rt.clone();
        async move {
            rt.effects("acme", run)
                .await
                .unwrap()
                .into_iter()
                .map(|e| e.state)
                .collect::<Vec<_>>()
        }
    };
    use wop_runtime::effects::EffectState;

    // A handshake that times out: released, not escaped; retryable.
    for attempt in [1, 2] {
        let r = rt.invoke(req(write("mute"), "r-mute", attempt)).await;
        let e = failure(&r);
        assert_eq!(e.code, "upstream_unavailable", "{e:?}");
        assert_eq!(det(e)["retryable"], true, "{e:?}");
        assert_ne!(e.code, "effect_outcome_unknown");
        assert_eq!(
            states("r-mute").await,
            [EffectState::Released],
            "attempt {attempt}"
        );
    }
    assert_eq!(count(&log("mute"), "tools/call"), 0, "never sent");

    // A handshake that fails (the first start of `flaky`): released; the
    // retry starts the server again and the call reaches it, once.
    let r = rt.invoke(req(write("flaky"), "r-flaky", 1)).await;
    assert_eq!(failure(&r).code, "upstream_unavailable", "{:?}", r.outcome);
    assert_eq!(states("r-flaky").await, [EffectState::Released]);
    assert!(received(&log("flaky")).is_empty());
    let r = rt.invoke(req(write("flaky"), "r-flaky", 2)).await;
    output(&r);
    let eid = returned(&r)[0].3.clone().expect("claimed");
    let calls: Vec<Value> = received(&log("flaky"))
        .into_iter()
        .filter(|(m, _)| m == "tools/call")
        .map(|(_, p)| p)
        .collect();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0]["_meta"]["dev.openwop/idempotencyKey"], json!(eid));
    assert_eq!(states("r-flaky").await, [EffectState::Completed]);

    // A 2026-07-28 server that starts in 4 s (longer than the discovery
    // probe): the write goes through.
    let r = rt.invoke(req(write("slow"), "r-slow", 1)).await;
    assert_eq!(output(&r)["result"]["isError"], false);
    assert_eq!(states("r-slow").await, [EffectState::Completed]);

    // The server's own error is the outcome; its replay has the same shape.
    let boom = json!({"server": "fake", "tool": "rpcerror", "arguments": {}});
    let first = rt.invoke(req(boom.clone(), "r-boom", 1)).await;
    let again = rt.invoke(req(boom, "r-boom", 2)).await;
    let (a, b) = (failure(&first), failure(&again));
    assert_eq!(
        (a.code.as_str(), b.code.as_str()),
        ("mcp_error", "mcp_error")
    );
    let mut replayed = det(b);
    assert_eq!(replayed["replayed"], true, "{replayed}");
    replayed.as_object_mut().unwrap().remove("replayed");
    assert_eq!(replayed, det(a), "the replay keeps the first error's shape");
    assert!(
        det(b).get("details").is_none(),
        "no nested details: {}",
        det(b)
    );
    assert_eq!(det(a)["message"], "tool exploded");
    assert_eq!(
        count(&log("fake"), "tools/call"),
        1,
        "replayed, not re-sent"
    );
}
