//! The protocol's JavaScript packs, unmodified, in the sandbox (issue 32):
//! a real registry pack installed by name from a served copy of the real
//! registry tree and run; hostile JavaScript of our own, each ending with
//! its own code within its limits; what a JavaScript pack may not do
//! without a grant. All through the real `wop` binary.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod common;

use common::{registry_fixtures as fixtures, registry_policy, serve_dir as serve, text, wop_in};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Command;

/// `wop run --json` of one node: the outcome document.
fn run(dir: &Path, pack: &Path, type_id: &str, input: &Value, extra: &[&str]) -> Value {
    let input = input.to_string();
    let pack = pack.display().to_string();
    let mut args = vec!["run", &pack, type_id, "--input", &input, "--json"];
    args.extend_from_slice(extra);
    let o = wop_in(dir, &args);
    serde_json::from_slice(&o.stdout).unwrap_or_else(|_| panic!("not JSON: {}", text(&o)))
}

#[test]
fn the_demo_pack_installs_by_name_from_the_real_registry_and_its_node_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let (_server, port) = serve(&fixtures());
    let policy = registry_policy(tmp.path(), "[egress]\nallowLoopback = true\n");
    let p = policy.display().to_string();
    let registry = format!("http://127.0.0.1:{port}");
    let o = wop_in(
        tmp.path(),
        &[
            "install",
            "community.openwop-team.demo",
            "--registry",
            &registry,
            "--policy",
            &p,
        ],
    );
    let t = text(&o);
    assert_eq!(o.status.code(), Some(0), "{t}");
    assert!(
        t.contains("installed community.openwop-team.demo@0.1.0"),
        "{t}"
    );
    assert!(
        t.contains("signed by `community-openwop-team-demo-1` (trusted)"),
        "{t}"
    );

    // The lock records what was built: engine, build id, component sha256.
    let lock: Value =
        serde_json::from_slice(&std::fs::read(tmp.path().join("pack-lock.json")).unwrap()).unwrap();
    let c = &lock["packs"][0]["component"];
    assert_eq!(c["sha256"].as_str().unwrap().len(), 64, "{lock}");
    assert!(
        c["engine"].as_str().unwrap().starts_with("wop-js/"),
        "{lock}"
    );

    let pack = tmp.path().join("packs/community.openwop-team.demo");
    let v = run(
        tmp.path(),
        &pack,
        "community.openwop-team.demo.uppercase",
        &json!({"text": "hello, registry"}),
        &["--policy", &p],
    );
    assert_eq!(v["outcome"]["outcome"], "completed", "{v}");
    assert_eq!(
        v["outcome"]["output"],
        json!({"text": "HELLO, REGISTRY"}),
        "{v}"
    );
    // Metered like any pack.
    assert!(v["usage"]["fuelConsumed"].as_u64().unwrap() > 0, "{v}");

    // A second install of the same archive builds the same component.
    let again = tempfile::tempdir().unwrap();
    let policy2 = registry_policy(again.path(), "[egress]\nallowLoopback = true\n");
    let o = wop_in(
        again.path(),
        &[
            "install",
            "community.openwop-team.demo",
            "--registry",
            &registry,
            "--policy",
            &policy2.display().to_string(),
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let lock2: Value =
        serde_json::from_slice(&std::fs::read(again.path().join("pack-lock.json")).unwrap())
            .unwrap();
    assert_eq!(lock2["packs"][0]["component"], *c);

    // A lock that pins another component for the same archive and engine:
    // the reinstall is refused and the installed pack stays as it was.
    let mut forged = lock2.clone();
    forged["packs"][0]["component"]["sha256"] = json!("0".repeat(64));
    let lock_path = again.path().join("pack-lock.json");
    std::fs::write(&lock_path, serde_json::to_vec_pretty(&forged).unwrap()).unwrap();
    let installed = again
        .path()
        .join("packs/community.openwop-team.demo/index.mjs");
    let before = std::fs::metadata(&installed).unwrap().modified().unwrap();
    let o = wop_in(
        again.path(),
        &[
            "install",
            "--registry",
            &registry,
            "--policy",
            &policy2.display().to_string(),
        ],
    );
    let t = text(&o);
    assert_eq!(o.status.code(), Some(3), "{t}");
    assert!(t.contains("pack_integrity_mismatch"), "{t}");
    assert!(t.contains("the build differs from the locked one"), "{t}");
    assert_eq!(
        std::fs::metadata(&installed).unwrap().modified().unwrap(),
        before
    );
    let kept: Value = serde_json::from_slice(&std::fs::read(&lock_path).unwrap()).unwrap();
    assert_eq!(kept, forged, "the lock is not rewritten");
}

/// A JavaScript pack of our own in `dir/name`: `nodes` maps a short name to
/// a handler's source; type ids are `h.js.<short>`.
fn js_pack(dir: &Path, nodes: &[(&str, &str)]) -> PathBuf {
    let p = dir.join("hostile");
    std::fs::create_dir_all(&p).unwrap();
    let decl: Vec<Value> = nodes
        .iter()
        .map(|(n, _)| json!({"typeId": format!("h.js.{n}"), "version": "0.1.0", "category": "data", "role": "pure"}))
        .collect();
    let manifest = json!({
        "name": "h.js", "version": "0.1.0", "engines": {"openwop": ">=1.0.0"},
        "nodes": decl,
        "runtime": {"language": "javascript", "format": "esm", "entry": "./index.mjs"}
    });
    std::fs::write(p.join("pack.json"), manifest.to_string()).unwrap();
    let mut src = String::from("export const nodes = {\n");
    for (n, body) in nodes {
        src.push_str(&format!("  'h.js.{n}': {body},\n"));
    }
    src.push_str("};\nexport default nodes;\n");
    std::fs::write(p.join("index.mjs"), src).unwrap();
    p
}

fn failed_with(v: &Value, code: &str) -> String {
    assert_eq!(v["outcome"]["outcome"], "failed", "{v}");
    assert_eq!(v["outcome"]["error"]["code"], code, "{v}");
    v["outcome"]["error"]["message"]
        .as_str()
        .unwrap_or("")
        .to_owned()
}

#[test]
fn hostile_javascript_ends_with_its_own_code_within_its_limits() {
    let tmp = tempfile::tempdir().unwrap();
    let pack = js_pack(
        tmp.path(),
        &[
            ("loop", "async () => { for (;;) {} }"),
            (
                "regex",
                "async () => ({ status: 'success', outputs: { v: /^(a+)+$/.test('a'.repeat(40) + 'b') } })",
            ),
            (
                "array",
                "async () => { const a = []; for (;;) a.push(new Array(4096).fill(7)); }",
            ),
            ("string", "async () => { let s = 'x'; for (;;) s += s; }"),
            (
                "recursion",
                "async () => { const f = (n) => f(n + 1) + 1; return f(0); }",
            ),
            ("never", "async () => { await new Promise(() => {}); }"),
            (
                "timer",
                "async () => { await new Promise((r) => setTimeout(r, 3_600_000)); return { status: 'success', outputs: { waited: true } }; }",
            ),
            ("eval", "async () => eval('1 + 1')"),
            (
                "function",
                "async () => (function(){}).constructor('return 1')()",
            ),
            (
                "asyncfn",
                "async () => (async function(){}).constructor('return 1')()",
            ),
            (
                "import",
                "async () => { await import('node:child_process'); }",
            ),
            ("shape", "async () => ({ ok: true })"),
            (
                "coded",
                "async () => { throw Object.assign(new Error('no such row'), { code: 'row_missing' }); }",
            ),
            (
                "tamper",
                "async () => { Object.defineProperty(Object.prototype, 'ok', { get() { return 'pwned'; } }); JSON.stringify = () => '\"pwned\"'; Promise.prototype.then = function () {}; globalThis.__wop = {}; return { status: 'success', outputs: { still: 'me' } }; }",
            ),
        ],
    );
    let fuel = ["--max-fuel", "2000000000"];
    let r = |n: &str| run(tmp.path(), &pack, &format!("h.js.{n}"), &json!({}), &fuel);

    // Endless work: the run's fuel budget (2e9 here; the pack's own
    // fuel limit, 1e10 by default, ends it as `sandbox_timeout` otherwise).
    for n in ["loop", "regex"] {
        let v = r(n);
        failed_with(&v, "budget_exhausted");
        assert_eq!(
            v["outcome"]["error"]["details"]["dimension"], "fuel",
            "{n}: {v}"
        );
    }
    // Endless allocation: the memory cap (or the engine's own string cap).
    let v = r("array");
    failed_with(&v, "sandbox_memory_exceeded");
    let m = failed_with(&r("string"), "node_error");
    assert!(m.contains("string too long"), "{m}");
    // Endless recursion: the stack.
    let v = r("recursion");
    assert_eq!(v["outcome"]["outcome"], "failed", "{v}");
    assert!(
        ["sandbox_invocation_error", "node_error"]
            .contains(&v["outcome"]["error"]["code"].as_str().unwrap()),
        "{v}"
    );
    // A promise nothing can settle, and a virtual timer that fires at once.
    failed_with(&r("never"), "js_promise_never_settled");
    let v = r("timer");
    assert_eq!(v["outcome"]["output"], json!({"waited": true}), "{v}");
    // No code from strings, no modules from outside the pack.
    for n in ["eval", "function", "asyncfn"] {
        let m = failed_with(&r(n), "node_error");
        assert!(
            m.contains("code generation from strings is disabled")
                || m.contains("eval is not defined"),
            "{n}: {m}"
        );
    }
    let m = failed_with(&r("import"), "node_error");
    assert!(m.contains("node:child_process"), "{m}");
    // Results outside the protocol's shape, and coded errors.
    let m = failed_with(&r("shape"), "invalid_node_result");
    assert!(m.contains("status"), "{m}");
    failed_with(&r("coded"), "row_missing");
    // Tampering with what the shim uses does not change the answer.
    let v = r("tamper");
    assert_eq!(v["outcome"]["output"], json!({"still": "me"}), "{v}");
}

#[test]
fn a_javascript_pack_reaches_no_host_capability_it_was_not_granted() {
    let tmp = tempfile::tempdir().unwrap();
    let pack = js_pack(
        tmp.path(),
        &[
            (
                "service",
                "async (ctx) => ({ status: 'success', outputs: await ctx.callAI({ prompt: 'hi' }) })",
            ),
            (
                "fetch",
                "async () => { const r = await fetch('https://example.com/'); return { status: 'success', outputs: { s: r.status } }; }",
            ),
            (
                "mcp",
                "async (ctx) => ({ status: 'success', outputs: await ctx.mcp.listTools('everything') })",
            ),
            (
                "pure",
                "async (ctx) => ({ status: 'success', outputs: { n: ctx.inputs.n * 2 } })",
            ),
        ],
    );
    // The service is mapped (so it exists in ctx), the capability is not granted.
    let policy = tmp.path().join("policy.toml");
    std::fs::write(
        &policy,
        "[[tools]]\nid = \"acme:llm\"\nurl = \"https://llm.example/\"\nsafetyTier = \"read\"\n\n[packs.\"h.js\"]\nservices = { callAI = \"acme:llm\" }\n",
    )
    .unwrap();
    let p = policy.display().to_string();
    for (n, cap) in [("service", "tools"), ("fetch", "http"), ("mcp", "mcp")] {
        let v = run(
            tmp.path(),
            &pack,
            &format!("h.js.{n}"),
            &json!({}),
            &["--policy", &p],
        );
        failed_with(&v, "sandbox_capability_denied");
        assert_eq!(
            v["outcome"]["error"]["details"]["requestedCapability"], cap,
            "{v}"
        );
    }
    let v = run(tmp.path(), &pack, "h.js.pure", &json!({"n": 21}), &[]);
    assert_eq!(v["outcome"]["output"], json!({"n": 42}), "{v}");

    // inspect shows what the code can reach before any grant.
    let o = wop_in(tmp.path(), &["inspect", &pack.display().to_string()]);
    let t = text(&o);
    assert!(
        t.contains("not-granted:denied-at-call openwop:node-pack/http@0.1.0"),
        "{t}"
    );
}

#[test]
fn a_pack_whose_code_cannot_build_is_refused_at_install_and_nothing_is_kept() {
    // Covered end to end for a served archive: the build runs on the
    // staged files before anything is moved into packs/. Here the same
    // refusal through `wop run` of a directory.
    let tmp = tempfile::tempdir().unwrap();
    let pack = js_pack(tmp.path(), &[("a", "async () => { return {;")]);
    let o = wop_in(tmp.path(), &["run", &pack.display().to_string(), "h.js.a"]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(3), "{t}");
    assert!(t.contains("pack_build_failed (js_syntax_error)"), "{t}");
    assert!(t.contains("index.mjs:2"), "{t}");
}

/// The envelope the Node reference produced, against an outcome document
/// of `wop run --json` (`outcome.outcome`/`output`/`error`) or of the
/// invoke API (the same keys at the top). A case whose config or inputs
/// break the node's own schema (`schemaViolation`: the JSON path) is
/// refused by the host before it runs (`validation_error` at that path),
/// where the reference engine, which checks no schema, ran it.
fn same_as_node(case: &Value, got: &Value) -> Result<(), String> {
    let outcome = got["outcome"].as_str().unwrap_or("");
    if let Some(path) = case.get("schemaViolation") {
        let e = &got["error"];
        if outcome == "failed" && e["code"] == "validation_error" && &e["details"]["path"] == path {
            return Ok(());
        }
        return Err(format!("want validation_error at {path}, got {got}"));
    }
    let want = &case["expected"];
    if let Some(ok) = want.get("ok") {
        let completed = &ok["completed"];
        if outcome == "completed" && &got["output"] == completed {
            return Ok(());
        }
        return Err(format!("want completed {completed}, got {got}"));
    }
    let err = &want["err"];
    let e = &got["error"];
    if outcome == "failed"
        && e["code"] == err["code"]
        && e["message"] == err["message"]
        && (err.get("details").is_none() || e["details"] == err["details"])
    {
        return Ok(());
    }
    Err(format!("want error {err}, got {got}"))
}

#[test]
fn real_registry_packs_install_by_name_and_every_case_matches_node_through_run_and_serve() {
    let cases: Vec<Value> = serde_json::from_slice(
        &std::fs::read(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/registry-js-cases.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let mut packs: Vec<String> = cases
        .iter()
        .map(|c| c["pack"].as_str().unwrap().to_owned())
        .collect();
    packs.sort();
    packs.dedup();
    assert!(packs.len() >= 10, "{packs:?}");

    let tmp = tempfile::tempdir().unwrap();
    let (_registry, registry, p) = real_registry(tmp.path());
    for name in &packs {
        install(tmp.path(), &registry, &p, name);
    }

    // Through `wop run`: the first case of each pack, and every case that
    // resumes a suspended node (the invoke API takes no resume value).
    let mut failures = Vec::new();
    let mut ran = 0;
    for (i, c) in cases.iter().enumerate() {
        let first_of_pack = cases[..i].iter().all(|o| o["pack"] != c["pack"]);
        if !first_of_pack && c.get("resume").is_none() {
            continue;
        }
        let dir = tmp.path().join("packs").join(c["pack"].as_str().unwrap());
        let (input, config) = (c["inputs"].to_string(), c["config"].to_string());
        let resume = c.get("resume").map(Value::to_string);
        let dir_s = dir.display().to_string();
        let mut args = vec![
            "run",
            &dir_s,
            c["typeId"].as_str().unwrap(),
            "--input",
            &input,
            "--config",
            &config,
            "--policy",
            &p,
            "--json",
        ];
        if let Some(r) = &resume {
            args.extend(["--resume", r.as_str()]);
        }
        let o = wop_in(tmp.path(), &args);
        let v: Value = serde_json::from_slice(&o.stdout).unwrap_or(Value::Null);
        if let Err(e) = same_as_node(c, &v["outcome"]) {
            failures.push(format!("#{i} run {} {}: {e}", c["typeId"], c["inputs"]));
        }
        ran += 1;
    }

    // Through `wop serve`: every case without a resume value.
    let (_child, addr, _out) = serve_packs(tmp.path(), &p);
    let mut served = 0;
    for (i, c) in cases
        .iter()
        .enumerate()
        .filter(|(_, c)| c.get("resume").is_none())
    {
        let body = json!({"typeId": c["typeId"], "inputs": c["inputs"], "config": c["config"]});
        let raw = common::post(addr, "/host/wop/invocations", &body.to_string());
        let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((&raw, ""));
        let status = head.lines().next().unwrap_or("");
        let v: Value = serde_json::from_str(body).unwrap_or(Value::Null);
        if let Err(e) = same_as_node(c, &v) {
            failures.push(format!(
                "#{i} serve {} {}: {status}: {e}",
                c["typeId"], c["inputs"]
            ));
        }
        served += 1;
    }
    assert!(
        failures.is_empty(),
        "{} of {} runs and {} served invocations differ from Node:\n{}",
        failures.len(),
        ran,
        served,
        failures.join("\n")
    );
    assert!(served >= 200, "{served}");
}

/// The real registry's fixtures served on loopback, and a policy in `dir`
/// that trusts its keys (loopback egress on): the server (stopped on
/// drop), the registry's URL and the policy's path.
fn real_registry(dir: &Path) -> (wop_testkit::ChildGuard, String, String) {
    let (server, port) = serve(&fixtures());
    let policy = registry_policy(dir, "[egress]\nallowLoopback = true\n");
    (
        server,
        format!("http://127.0.0.1:{port}"),
        policy.display().to_string(),
    )
}

/// `wop install <name>` into `dir/packs`; the test fails unless it did.
fn install(dir: &Path, registry: &str, policy: &str, name: &str) {
    let o = wop_in(
        dir,
        &["install", name, "--registry", registry, "--policy", policy],
    );
    assert_eq!(o.status.code(), Some(0), "{name}: {}", text(&o));
}

/// `wop serve` of `dir/packs` on loopback (memory store, anonymous): the
/// process (killed on drop), its address and its stdout (kept open).
fn serve_packs(
    dir: &Path,
    policy: &str,
) -> (
    wop_testkit::ChildGuard,
    std::net::SocketAddr,
    impl std::io::BufRead,
) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_wop"));
    cmd.current_dir(dir)
        .env("WOP_CACHE_DIR", dir.join("cache"))
        .args(["serve", "--packs"])
        .arg(dir.join("packs"))
        .args([
            "--policy",
            policy,
            "--listen",
            "127.0.0.1:0",
            "--memory-store",
            "--anonymous-loopback",
        ])
        .stderr(std::process::Stdio::null());
    wop_testkit::spawn_serve(&mut cmd).unwrap()
}

/// The body of a served invocation's answer.
fn served(addr: std::net::SocketAddr, body: &Value) -> Value {
    let raw = common::post(addr, "/host/wop/invocations", &body.to_string());
    let (_, body) = raw.split_once("\r\n\r\n").unwrap_or((&raw, ""));
    serde_json::from_str(body).unwrap_or_else(|_| panic!("not JSON: {raw}"))
}

#[test]
fn ctx_trigger_data_is_the_invocations_own_through_run_and_serve() {
    // core.openwop.triggers forwards ctx.triggerData; its input schema
    // refuses every input, so the payload can only come with the
    // invocation (`--trigger-data`, the invoke API's `triggerData`).
    let tmp = tempfile::tempdir().unwrap();
    let (_registry, registry, p) = real_registry(tmp.path());
    install(tmp.path(), &registry, &p, "core.openwop.triggers");
    let pack = tmp.path().join("packs/core.openwop.triggers");
    let trigger = json!({"method": "PUT", "body": {"order": 7}});
    let with = json!({"method": "PUT", "headers": {}, "query": {}, "body": {"order": 7}});
    let without = json!({"method": "POST", "headers": {}, "query": {}, "body": null});
    let config = json!({"path": "/hooks/orders"}).to_string();
    let t = trigger.to_string();
    let v = run(
        tmp.path(),
        &pack,
        "core.trigger.webhook",
        &json!({}),
        &["--config", &config, "--trigger-data", &t, "--policy", &p],
    );
    assert_eq!(v["outcome"]["output"], with, "{v}");
    let v = run(
        tmp.path(),
        &pack,
        "core.trigger.webhook",
        &json!({}),
        &["--config", &config, "--policy", &p],
    );
    assert_eq!(v["outcome"]["output"], without, "{v}");
    // Not JSON: a usage error that names the flag, nothing run.
    let pack_s = pack.display().to_string();
    let o = wop_in(
        tmp.path(),
        &[
            "run",
            &pack_s,
            "core.trigger.webhook",
            "--config",
            &config,
            "--trigger-data",
            "{oops",
            "--policy",
            &p,
        ],
    );
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains("--trigger-data is not valid JSON"),
        "{}",
        text(&o)
    );

    let (_child, addr, _out) = serve_packs(tmp.path(), &p);
    let body = json!({"typeId": "core.trigger.webhook", "inputs": {}, "config": {"path": "/hooks/orders"}});
    let mut with_trigger = body.clone();
    with_trigger["triggerData"] = trigger;
    let v = served(addr, &with_trigger);
    assert_eq!(v["output"], with, "{v}");
    // The next invocation is a fresh instance: nothing of the last one's payload.
    let v = served(addr, &body);
    assert_eq!(v["output"], without, "{v}");
}

#[test]
fn a_host_service_runs_as_the_tool_the_operator_mapped_and_an_unmapped_one_is_absent_as_on_a_reference_host()
 {
    let tool = wop_testkit::Server::start_detached(wop_testkit::Mode::Ok);
    let tmp = tempfile::tempdir().unwrap();
    let pack = js_pack(
        tmp.path(),
        &[
            (
                "ai",
                "async (ctx) => ({ status: 'success', outputs: await ctx.callAI({ prompt: 'hi' }) })",
            ),
            (
                "db",
                "async (ctx) => { await ctx.db.sql.query('select 1'); return { status: 'success', outputs: {} }; }",
            ),
            (
                "detect",
                "async (ctx) => ({ status: 'success', outputs: { callAI: typeof ctx.callAI, query: typeof ctx.db?.sql?.query, kanban: typeof ctx.kanban?.taskGet === 'function' } })",
            ),
        ],
    );
    let policy = tmp.path().join("policy.toml");
    std::fs::write(
        &policy,
        format!(
            "[egress]\nallowLoopback = true\n\n[[tools]]\nid = \"acme:llm\"\nurl = \"{}\"\nsafetyTier = \"read\"\n\n[packs.\"h.js\"]\ncapabilities = [\"tools\"]\nservices = {{ callAI = \"acme:llm\" }}\n",
            tool.url("/llm")
        ),
    )
    .unwrap();
    let p = policy.display().to_string();

    // Mapped: a gated call of the tool, the one argument object as its
    // arguments, the tool's answer as the service's.
    let v = run(tmp.path(), &pack, "h.js.ai", &json!({}), &["--policy", &p]);
    assert_eq!(v["outcome"]["outcome"], "completed", "{v}");
    assert_eq!(v["outcome"]["output"]["ok"], true, "{v}");
    assert_eq!(
        v["outcome"]["output"]["echo"],
        json!({"prompt": "hi"}),
        "{v}"
    );
    assert_eq!(tool.count(), 1);
    let types: Vec<&str> = v["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["type"].as_str())
        .collect();
    assert!(
        types.contains(&"agent.tool-called") && types.contains(&"agent.tool-returned"),
        "{v}"
    );

    // Unmapped: absent from ctx, as on a reference host without it (the
    // pack fails its own way, here reading `.sql` of undefined); the tool
    // server never hears of it.
    let v = run(tmp.path(), &pack, "h.js.db", &json!({}), &["--policy", &p]);
    let m = failed_with(&v, "node_error");
    assert!(m.contains("sql"), "{m}");
    assert_eq!(tool.count(), 1);
    // `wop run` says which services the code names that are not mapped.
    let pack_s = pack.display().to_string();
    let o = wop_in(tmp.path(), &["run", &pack_s, "h.js.db", "--policy", &p]);
    let t = text(&o);
    assert!(
        t.contains("hint: this pack's code names host services that are not mapped")
            && t.contains("db.sql.query, kanban.taskGet")
            && !t.contains("\"callAI\" = "),
        "{t}"
    );
    // A pack that feature-detects takes its fallback instead.
    let v = run(
        tmp.path(),
        &pack,
        "h.js.detect",
        &json!({}),
        &["--policy", &p],
    );
    assert_eq!(
        v["outcome"]["output"],
        json!({"callAI": "function", "query": "undefined", "kanban": false}),
        "{v}"
    );
    // `wop inspect` names every service the code uses, what it is mapped
    // to, and the policy line that maps the rest.
    let o = wop_in(tmp.path(), &["inspect", &pack_s, "--policy", &p, "--json"]);
    let insp: Value = serde_json::from_slice(&o.stdout).unwrap_or(Value::Null);
    assert_eq!(
        insp["services"],
        json!([
            {"name": "callAI", "tool": "acme:llm"},
            {"name": "db.sql.query", "tool": null},
            {"name": "kanban.taskGet", "tool": null}
        ]),
        "{}",
        text(&o)
    );
    let o = wop_in(tmp.path(), &["inspect", &pack_s, "--policy", &p]);
    let t = text(&o);
    assert!(
        t.contains("db.sql.query") && t.contains("not mapped")
            && t.contains(
                "under [packs.\"h.js\"] in the policy, services = { \"db.sql.query\" = \"<tool id>\", \"kanban.taskGet\" = \"<tool id>\" }"
            ),
        "{t}"
    );
}

#[test]
fn a_secret_reaches_a_javascript_pack_only_as_a_handle_that_safe_fetch_swaps_in_its_audience() {
    const VALUE: &str = "sk-test-handle-7f3a9c1e5b";
    let audience = wop_testkit::Server::start_detached(wop_testkit::Mode::EchoHeaders);
    let outsider = wop_testkit::Server::start_detached(wop_testkit::Mode::EchoHeaders);
    let tmp = tempfile::tempdir().unwrap();
    let secret = tmp.path().join("api-key");
    std::fs::write(&secret, format!("{VALUE}\n")).unwrap();
    let fetch = |url: &str, init: &str| {
        format!(
            "async (ctx) => {{ const s = await ctx.secrets.resolve({{ ref: 'api', purpose: 'test' }}); const h = s.plaintext; const r = await fetch('{url}', {init}); const b = await r.json(); return {{ status: 'success', outputs: {{ handle: h, isHandle: h.startsWith('wop-secret-') && h === s.handle, reflected: b.headers.authorization }} }}; }}"
        )
    };
    let aud = audience.url("/reflect");
    let out = outsider.url("/reflect");
    let nodes = [
        (
            "use",
            fetch(&aud, "{ headers: { Authorization: 'Bearer ' + h } }"),
        ),
        (
            "outside",
            fetch(&out, "{ headers: { Authorization: 'Bearer ' + h } }"),
        ),
        (
            "body",
            fetch(&aud, "{ method: 'POST', body: JSON.stringify({ key: h }) }"),
        ),
        (
            "url",
            fetch(&format!("{aud}?k=' + h + '"), "{}"),
        ),
        (
            "form",
            fetch(&aud, "{ headers: { 'X-Api-Key': h } }"),
        ),
        (
            "forged",
            fetch(&aud, "{ headers: { Authorization: 'Bearer wop-secret-' + 'a'.repeat(32) } }"),
        ),
        (
            "unknown",
            "async (ctx) => { await ctx.secrets.resolve({ ref: 'nope' }); return { status: 'success', outputs: {} }; }".to_owned(),
        ),
    ];
    let nodes: Vec<(&str, &str)> = nodes.iter().map(|(n, s)| (*n, s.as_str())).collect();
    let pack = js_pack(tmp.path(), &nodes);
    let origin = |s: &wop_testkit::Server| s.url("").trim_end_matches('/').to_owned();
    let policy = tmp.path().join("policy.toml");
    std::fs::write(
        &policy,
        format!(
            "[egress]\nallowLoopback = true\n\n[secrets.api]\nvalue = \"file:{}\"\naudiences = [\"{}\"]\nattach = \"bearer\"\n\n[packs.\"h.js\"]\ncapabilities = [\"http\"]\negress = [\"{}\", \"{}\"]\nsecrets = [\"api\"]\n",
            secret.display(),
            origin(&audience),
            origin(&audience),
            origin(&outsider),
        ),
    )
    .unwrap();
    let p = policy.display().to_string();

    // In its header, to its audience: the server gets the credential; the
    // pack had only a handle, and the reflected value comes back redacted.
    let v = run(tmp.path(), &pack, "h.js.use", &json!({}), &["--policy", &p]);
    assert_eq!(v["outcome"]["outcome"], "completed", "{v}");
    assert_eq!(v["outcome"]["output"]["isHandle"], true, "{v}");
    assert_eq!(
        audience.requests()[0]
            .headers
            .get("authorization")
            .map(String::as_str),
        Some(format!("Bearer {VALUE}").as_str())
    );
    assert!(
        !v.to_string().contains(VALUE),
        "the value reached the run's output or events: {v}"
    );
    assert_ne!(
        v["outcome"]["output"]["reflected"],
        json!(format!("Bearer {VALUE}"))
    );

    // Anywhere else: refused before anything is sent.
    for (n, reason, says) in [
        (
            "outside",
            "out-of-audience",
            "outside the credential's audience",
        ),
        ("body", "secret-handle", "in the request body"),
        ("url", "secret-handle", "in the URL"),
        ("form", "secret-handle", "Authorization: Bearer <handle>"),
        ("forged", "secret-handle", "was not given"),
    ] {
        let v = run(
            tmp.path(),
            &pack,
            &format!("h.js.{n}"),
            &json!({}),
            &["--policy", &p],
        );
        let m = failed_with(&v, "egress_denied");
        assert!(!v.to_string().contains(VALUE), "{n}: {v}");
        assert!(m.contains(says), "{n}: {m}");
        let returned = v["events"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["type"] == "agent.tool-returned")
            .unwrap_or_else(|| panic!("{n}: no tool-returned event: {v}"));
        assert_eq!(returned["error"]["details"]["reason"], reason, "{n}: {v}");
    }
    assert_eq!(
        audience.count(),
        1,
        "only the first request reached the audience"
    );
    assert_eq!(outsider.count(), 0);

    // A secret the operator did not grant: its own code and how to grant it.
    let v = run(
        tmp.path(),
        &pack,
        "h.js.unknown",
        &json!({}),
        &["--policy", &p],
    );
    let m = failed_with(&v, "credential_unavailable");
    assert!(
        m.contains("[secrets.nope]") && m.contains("secrets = [\"nope\"]"),
        "{m}"
    );
}

#[test]
fn core_openwop_http_fetch_reaches_a_loopback_server_through_safe_fetch_and_only_what_is_granted() {
    let granted = wop_testkit::Server::start_detached(wop_testkit::Mode::Ok);
    let other = wop_testkit::Server::start_detached(wop_testkit::Mode::Ok);
    let tmp = tempfile::tempdir().unwrap();
    let (_server, port) = serve(&fixtures());
    let origin = granted.url("").trim_end_matches('/').to_owned();
    let policy = registry_policy(
        tmp.path(),
        &format!(
            "[egress]\nallowLoopback = true\n\n[packs.\"core.openwop.http\"]\ncapabilities = [\"http\"]\negress = [\"{origin}\"]\n"
        ),
    );
    let p = policy.display().to_string();
    let registry = format!("http://127.0.0.1:{port}");
    install(tmp.path(), &registry, &p, "core.openwop.http");
    let pack = tmp.path().join("packs/core.openwop.http");
    let fetch = |url: &str| {
        let config = json!({"url": url, "method": "POST", "retry": {"maxAttempts": 1}}).to_string();
        run(
            tmp.path(),
            &pack,
            "core.openwop.http.fetch",
            &json!({"body": {"order": 42}}),
            &["--policy", &p, "--config", &config],
        )
    };

    // Granted: the real node's request arrives, with the idempotency key
    // the node derives, and its answer comes back as the node's output.
    let v = fetch(&granted.url("/orders"));
    assert_eq!(v["outcome"]["outcome"], "completed", "{v}");
    assert_eq!(v["outcome"]["output"]["status"], 200, "{v}");
    let seen = granted.requests();
    assert_eq!(seen.len(), 1, "{v}");
    assert!(seen[0].line.starts_with("POST /orders"), "{}", seen[0].line);
    assert_eq!(seen[0].body, r#"{"order":42}"#);
    assert!(
        seen[0].headers.contains_key("idempotency-key"),
        "{:?}",
        seen[0].headers
    );
    let decided: Vec<&Value> = v["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["type"] == "egress.decided")
        .collect();
    assert_eq!(decided[0]["decision"], "allowed", "{v}");

    // Not granted: nothing leaves; the gate's decision is in the events.
    let v = fetch(&other.url("/orders"));
    assert_eq!(other.count(), 0, "{v}");
    assert_ne!(v["outcome"]["output"]["status"], 200, "{v}");
    assert!(
        v["events"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["type"] == "egress.decided" && e["decision"] == "denied"),
        "{v}"
    );
}

/// `@modelcontextprotocol/server-everything`, installed by
/// `runtime/wop-mcp/tests/setup.sh` (which `.ci/test.sh` runs).
fn everything_js() -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join(
        "../wop-mcp/tests/node/node_modules/@modelcontextprotocol/server-everything/dist/index.js",
    );
    assert!(
        p.exists(),
        "missing {}: run bash runtime/wop-mcp/tests/setup.sh (bash .ci/test.sh does)",
        p.display()
    );
    p.display().to_string()
}

#[test]
fn core_openwop_mcp_nodes_reach_a_real_mcp_server_through_the_gate_and_only_the_granted_one() {
    let tmp = tempfile::tempdir().unwrap();
    let (_server, port) = serve(&fixtures());
    let policy = registry_policy(
        tmp.path(),
        &format!(
            r#"
[egress]
allowLoopback = true

[mcp.servers.everything]
transport = "stdio"
command = "node"
args = ["{js}", "stdio"]
timeoutMs = 20000
tiers = {{ echo = "pure" }}

[mcp.servers.other]
transport = "stdio"
command = "node"
args = ["{js}", "stdio"]

[packs."core.openwop.mcp"]
capabilities = ["mcp"]
mcp = ["everything"]
"#,
            js = everything_js()
        ),
    );
    let p = policy.display().to_string();
    let registry = format!("http://127.0.0.1:{port}");
    install(tmp.path(), &registry, &p, "core.openwop.mcp");
    let pack = tmp.path().join("packs/core.openwop.mcp");
    let node = |short: &str, config: Value, input: Value| {
        let config = config.to_string();
        run(
            tmp.path(),
            &pack,
            &format!("core.openwop.mcp.{short}"),
            &input,
            &["--policy", &p, "--config", &config],
        )
    };

    // list-tools: the server's own list, through the gate.
    let v = node("list-tools", json!({"serverId": "everything"}), json!({}));
    assert_eq!(v["outcome"]["outcome"], "completed", "{v}");
    let tools = v["outcome"]["output"]["tools"].as_array().unwrap();
    assert!(tools.iter().any(|t| t["name"] == "echo"), "{v}");

    // invoke-tool: the server's answer, marked untrusted by the node.
    let v = node(
        "invoke-tool",
        json!({"serverId": "everything", "toolName": "echo"}),
        json!({"args": {"message": "hello from a registry pack"}}),
    );
    assert_eq!(v["outcome"]["outcome"], "completed", "{v}");
    assert!(
        v["outcome"]["output"]
            .to_string()
            .contains("hello from a registry pack"),
        "{v}"
    );
    assert!(
        v["events"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["type"] == "agent.tool-called" && e["toolName"] == "mcp:everything/echo"),
        "{v}"
    );

    // server-status: healthy.
    let v = node(
        "server-status",
        json!({"serverId": "everything"}),
        json!({}),
    );
    assert_eq!(v["outcome"]["output"]["available"], true, "{v}");

    // A configured server the pack is not granted: nothing reaches it.
    let v = node(
        "invoke-tool",
        json!({"serverId": "other", "toolName": "echo"}),
        json!({"args": {"message": "x"}}),
    );
    let m = failed_with(&v, "not_found");
    assert!(m.contains("`other`"), "{m}");
    assert!(!v.to_string().contains("Echo: x"), "{v}");
}

#[test]
fn a_corrupt_cached_build_is_built_again_not_run() {
    let tmp = tempfile::tempdir().unwrap();
    let pack = js_pack(
        tmp.path(),
        &[(
            "double",
            "async (ctx) => ({ status: 'success', outputs: { n: ctx.inputs.n * 2 } })",
        )],
    );
    let first = run(tmp.path(), &pack, "h.js.double", &json!({"n": 4}), &[]);
    assert_eq!(first["outcome"]["output"], json!({"n": 8}), "{first}");
    let js_cache = tmp.path().join("cache/js");
    let files: Vec<PathBuf> = std::fs::read_dir(&js_cache)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "component"))
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    let good = std::fs::read(&files[0]).unwrap();
    // Torn (half the file), then flipped bytes: each time the pack is built
    // again and runs; the cache file is whole again afterwards.
    for bad in [good[..good.len() / 2].to_vec(), {
        let mut b = good.clone();
        let at = b.len() - 100;
        b[at] ^= 0xff;
        b
    }] {
        std::fs::write(&files[0], &bad).unwrap();
        let v = run(tmp.path(), &pack, "h.js.double", &json!({"n": 5}), &[]);
        assert_eq!(v["outcome"]["output"], json!({"n": 10}), "{v}");
        assert_eq!(
            std::fs::read(&files[0]).unwrap(),
            good,
            "the cache was rewritten whole"
        );
    }
}
