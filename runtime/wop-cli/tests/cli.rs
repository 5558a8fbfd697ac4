//! The `wop` binary end to end: exit codes, human and JSON output.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use serde_json::Value;
use std::process::{Command, Output};

fn wop(args: &[&str]) -> Output {
    // Each call gets its own effect store unless the test passes --store.
    let data = tempfile::tempdir().unwrap();
    let mut c = Command::new(env!("CARGO_BIN_EXE_wop"));
    c.args(args).env("WOP_DATA_DIR", data.path());
    if args.first() != Some(&"pack") {
        c.arg("--no-cache");
    }
    c.output().expect("run wop")
}

fn pack(name: &str) -> String {
    wop_test_packs::pack_dir(name).display().to_string()
}

fn json(o: &Output) -> Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}): {}\nstderr: {}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    })
}

#[test]
fn run_prints_outcome_events_and_usage() {
    let o = wop(&[
        "run",
        &pack("hello"),
        "wop.samples.hello",
        "--input",
        r#"{"name":"Ada"}"#,
    ]);
    assert_eq!(o.status.code(), Some(0));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("completed"), "{out}");
    assert!(out.contains("Hello, Ada!"), "{out}");
    assert!(out.contains("log.appended"), "{out}");
    assert!(out.contains("fuel"), "{out}");

    let o = wop(&[
        "run",
        &pack("hello"),
        "wop.samples.hello",
        "--input",
        r#"{"name":"Ada"}"#,
        "--json",
        "--run-id",
        "r9",
        "--node-id",
        "n9",
        "--tenant",
        "acme",
        "--attempt",
        "2",
    ]);
    assert_eq!(o.status.code(), Some(0));
    let v = json(&o);
    assert_eq!(v["outcome"]["outcome"], "completed");
    assert_eq!(v["outcome"]["output"]["greeting"], "Hello, Ada!");
    assert_eq!(v["usage"]["runId"], "r9");
    assert_eq!(v["usage"]["nodeId"], "n9");
    assert_eq!(v["usage"]["tenantId"], "acme");
    assert_eq!(v["usage"]["attempt"], 2);
    assert_eq!(v["events"][0]["type"], "log.appended");
}

#[test]
fn node_failure_exits_4_with_the_code() {
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("policy.toml");
    std::fs::write(&policy, "[limits]\nfuel = 1000000\n").unwrap();
    let o = wop(&[
        "run",
        &pack("spin"),
        "wop.testing.spin",
        "--json",
        "--policy",
        policy.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(4));
    let v = json(&o);
    assert_eq!(v["outcome"]["outcome"], "failed");
    assert_eq!(v["outcome"]["error"]["code"], "sandbox_timeout");
    assert_eq!(v["events"][0]["type"], "cap.breached");
    assert_eq!(v["events"][0]["kind"], "wasm-fuel");
}

#[test]
fn refused_pack_exits_3() {
    let o = wop(&["run", &pack("sockets"), "wop.testing.sockets", "--json"]);
    assert_eq!(o.status.code(), Some(3));
    let v = json(&o);
    assert_eq!(v["error"]["code"], "sandbox_escape_attempt");
    assert_eq!(v["error"]["details"]["escapeKind"], "network-escape");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("refused"), "{err}");
}

#[test]
fn usage_errors_exit_2_and_say_what_is_wrong() {
    let o = wop(&[
        "run",
        &pack("hello"),
        "wop.samples.hello",
        "--input",
        "{nope",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--input is not valid JSON"));

    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("policy.toml");
    std::fs::write(&policy, "[limits]\nmemroyBytes = 1\n").unwrap();
    let o = wop(&[
        "run",
        &pack("hello"),
        "wop.samples.hello",
        "--policy",
        policy.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("memroyBytes"));

    let o = wop(&["run"]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn inspect_shows_imports_and_verdict() {
    let o = wop(&["inspect", &pack("hello")]);
    assert_eq!(o.status.code(), Some(0));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("openwop:node-pack/log@0.1.0"), "{out}");
    assert!(out.contains("verdict: loadable"), "{out}");

    let o = wop(&["inspect", &pack("ungranted"), "--json"]);
    assert_eq!(o.status.code(), Some(3));
    let v = json(&o);
    assert_eq!(v["refusal"]["code"], "sandbox_capability_denied");
    assert_eq!(v["requested"], serde_json::json!(["http"]));
    assert_eq!(v["granted"], serde_json::json!([]));
}

#[test]
fn inspect_lists_declared_secrets_against_the_policy_and_warns_without_values() {
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("policy.toml");
    std::fs::write(
        &policy,
        "[secrets.api]\nvalue = \"sk-inline-secret-value\"\naudiences = [\"api.example.com\"]\n\
         [secrets.tenant-key]\ntenants = { acme = \"env:WOP_TEST_SURELY_UNSET_KEY\" }\n\
         audiences = [\"api.example.com\"]\n\
         [packs.exfil]\ncapabilities = [\"log\", \"http\", \"tools\", \"mcp\"]\nsecrets = [\"api\"]\n",
    )
    .unwrap();
    let p = policy.display().to_string();
    let o = wop(&["inspect", &pack("exfil"), "--policy", &p]);
    let out = String::from_utf8_lossy(&o.stdout);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(out.contains("secrets (declared by nodes"), "{out}");
    let row = |id: &str| {
        out.lines()
            .find(|l| l.split_whitespace().nth(1) == Some(id))
            .unwrap_or_else(|| panic!("no row for {id}: {out}"))
            .to_owned()
    };
    assert!(row("api").contains("provided") && row("api").contains("api.example.com"));
    assert!(row("tenant-key").contains("not granted"), "{out}");
    // Warned about, never shown.
    assert!(
        err.contains("secrets.api.value holds the value itself"),
        "{err}"
    );
    assert!(
        err.contains("WOP_TEST_SURELY_UNSET_KEY is not set"),
        "{err}"
    );
    assert!(!out.contains("sk-inline-secret-value") && !err.contains("sk-inline-secret-value"));

    let o = wop(&["inspect", &pack("exfil"), "--policy", &p, "--json"]);
    let v = json(&o);
    let rows = v["secrets"].as_array().unwrap();
    assert_eq!(rows.len(), 2, "{v}");
    assert_eq!(rows[0]["typeId"], "wop.testing.exfil");
    assert_eq!(rows[0]["kind"], "api-key");
    assert_eq!(rows[0]["state"], "provided");
    assert_eq!(
        v["manifest"]["nodes"][1]["requiresSecrets"][0]["scope"],
        "tenant"
    );
    assert!(!v.to_string().contains("sk-inline-secret-value"));
}

#[test]
fn run_exports_its_trace_with_otlp() {
    let collector = wop_testkit::Server::start_detached(wop_testkit::Mode::Ok);
    let url = collector.url("/v1/traces");
    let o = wop(&[
        "run",
        &pack("hello"),
        "wop.samples.hello",
        "--input",
        "{\"name\":\"T\"}",
        "--otlp",
        &url,
    ]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    // Flushed before the process exited.
    let seen = collector.requests();
    assert_eq!(seen.len(), 1, "{seen:?}");
    let body: Value = serde_json::from_str(&seen[0].body).unwrap();
    let span = &body["resourceSpans"][0]["scopeSpans"][0]["spans"][0];
    assert_eq!(span["name"], "openwop.node.wop.samples.hello");
}

#[test]
fn demo_tells_the_whole_story() {
    let o = Command::new(env!("CARGO_BIN_EXE_wop"))
        .arg("demo")
        .env("WOP_CACHE_DIR", tempfile::tempdir().unwrap().path())
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{out}");
    for needle in [
        "Hello, Ada!",
        "forbidden",
        "kind=wasm-fuel",
        "kind=wasm-memory",
        "kind=wasm-execution-time",
        "sandbox_escape_attempt",
        "sandbox_capability_denied",
        "every step behaved as expected",
    ] {
        assert!(out.contains(needle), "missing {needle}:\n{out}");
    }
}

#[test]
fn pack_assembles_a_runnable_pack() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    std::fs::create_dir(&src).unwrap();
    let mut manifest: Value = serde_json::from_slice(
        &std::fs::read(wop_test_packs::pack_dir("hello").join("pack.json")).unwrap(),
    )
    .unwrap();
    manifest["x-wop"]["sha256"] = "".into();
    std::fs::write(src.join("pack.json"), manifest.to_string()).unwrap();
    let out = tmp.path().join("dist");
    let o = wop(&[
        "pack",
        src.to_str().unwrap(),
        "--wasm",
        wop_test_packs::wasm_path("hello").to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let o = wop(&[
        "run",
        out.join("hello").to_str().unwrap(),
        "wop.samples.hello",
    ]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(String::from_utf8_lossy(&o.stdout).contains("Hello, world!"));
}

fn tool_policy(dir: &std::path::Path, url: &str, extra: &str) -> String {
    let p = dir.join("policy.toml");
    std::fs::write(
        &p,
        format!(
            "[[tools]]\nid = \"payments:charge\"\nurl = \"{url}\"\nsafetyTier = \"write\"\nscopes = [\"payments.write\"]\n{extra}\n[packs.tool-call]\ncapabilities = [\"tools\"]\ntools = [\"payments:charge\"]\n"
        ),
    )
    .unwrap();
    p.display().to_string()
}

fn charge_args<'a>(policy: &'a str, store: &'a str, attempt: &'a str) -> Vec<&'a str> {
    vec![
        "run",
        "POLICY_PACK",
        "wop.samples.tool-call",
        "--policy",
        policy,
        "--store",
        store,
        "--principal",
        "agent-7",
        "--scopes",
        "payments.write",
        "--tenant",
        "acme",
        "--run-id",
        "run-cli",
        "--node-id",
        "charge",
        "--attempt",
        attempt,
        "--json",
        "--input",
        r#"{"tool":"payments:charge","arguments":{"amount":100}}"#,
    ]
}

#[test]
fn running_the_same_command_twice_charges_once() {
    let server = wop_testkit::Server::start_detached(wop_testkit::Mode::Ok);
    let tmp = tempfile::tempdir().unwrap();
    let policy = tool_policy(tmp.path(), &server.url("/charge"), "");
    let store = tmp.path().join("effects").display().to_string();
    let pack_dir = pack("tool-call");
    let mut outs = Vec::new();
    for attempt in ["1", "2"] {
        let mut args = charge_args(&policy, &store, attempt);
        args[1] = &pack_dir;
        let o = wop(&args);
        assert_eq!(
            o.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
        outs.push(json(&o));
    }
    assert_eq!(server.count(), 1, "the effect fired once");
    assert_eq!(outs[0]["outcome"]["output"], outs[1]["outcome"]["output"]);
    let ret = |v: &Value| {
        v["events"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["type"] == "agent.tool-returned")
            .cloned()
            .unwrap()
    };
    assert_eq!(ret(&outs[1])["replayed"], true);
    assert!(ret(&outs[1]).get("durationMs").is_none());
    let key = &server.requests()[0].headers["idempotency-key"];
    assert_eq!(ret(&outs[0])["effectId"].as_str(), Some(key.as_str()));

    let o = wop(&[
        "effects", "run-cli", "--tenant", "acme", "--store", &store, "--json",
    ]);
    assert_eq!(o.status.code(), Some(0));
    let list = json(&o);
    assert_eq!(list.as_array().unwrap().len(), 1);
    assert_eq!(list[0]["effectId"].as_str(), Some(key.as_str()));
    assert_eq!(list[0]["state"], "completed");
    assert_eq!(list[0]["keying"], "activity-recipe");
    assert!(list[0].get("result").is_none(), "never payloads");

    // Retention purges effect and usage records past 14 days: nothing of
    // this run, which keeps its effect.
    let o = wop(&["effects", "purge", "--store", &store]);
    assert_eq!(o.status.code(), Some(0));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("purged 0 finished effect record(s)"), "{out}");
    assert!(out.contains("purged 0 usage record(s)"), "{out}");
    let o = wop(&[
        "effects", "run-cli", "--tenant", "acme", "--store", &store, "--json",
    ]);
    assert_eq!(json(&o).as_array().unwrap().len(), 1);
}

/// A child claims, sends, and is SIGKILLed before recording the outcome.
fn crash_mid_effect(
    extra_tool_line: &str,
) -> (wop_testkit::Server, tempfile::TempDir, String, String) {
    let server = wop_testkit::Server::start_detached(wop_testkit::Mode::Hang);
    let tmp = tempfile::tempdir().unwrap();
    let policy = tool_policy(
        tmp.path(),
        &server.url("/charge"),
        &format!(
            "timeoutMs = 60000\n{extra_tool_line}\n[limits]\nwallClockMs = 500\n[effects]\nleaseMs = 1500\n"
        ),
    );
    let store = tmp.path().join("effects").display().to_string();
    let pack_dir = pack("tool-call");
    let mut args = charge_args(&policy, &store, "1");
    args[1] = &pack_dir;
    let data = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_wop"))
        .args(&args)
        .arg("--no-cache")
        .env("WOP_DATA_DIR", data.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // The claim is durable before the request is sent: wait for the request.
    let start = std::time::Instant::now();
    while server.count() == 0 {
        assert!(
            start.elapsed() < std::time::Duration::from_secs(60),
            "the child never sent"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1600)); // past the 1500 ms lease
    (server, tmp, policy, store)
}

#[test]
fn a_killed_executor_leaves_an_unknown_outcome_that_is_not_refired() {
    let (server, _tmp, policy, store) = crash_mid_effect("");
    let pack_dir = pack("tool-call");
    let mut args = charge_args(&policy, &store, "2");
    args[1] = &pack_dir;
    let o = wop(&args);
    assert_eq!(o.status.code(), Some(4));
    let v = json(&o);
    assert_eq!(
        v["outcome"]["error"]["code"], "effect_outcome_unknown",
        "{v}"
    );
    assert_eq!(server.count(), 1, "not re-fired");
    let o = wop(&[
        "effects", "run-cli", "--tenant", "acme", "--store", &store, "--json",
    ]);
    assert_eq!(json(&o)[0]["state"], "escaped");
}

#[test]
fn a_killed_executor_of_an_idempotent_tool_is_resent_with_the_same_key() {
    let (server, _tmp, policy, store) = crash_mid_effect("replayPolicy = \"idempotent\"");
    let pack_dir = pack("tool-call");
    let mut args = charge_args(&policy, &store, "2");
    args[1] = &pack_dir;
    // The server still hangs, so this attempt also gets no answer; what
    // matters is what reached the server.
    let policy_short = std::fs::read_to_string(&policy)
        .unwrap()
        .replace("timeoutMs = 60000", "timeoutMs = 300");
    std::fs::write(&policy, policy_short).unwrap();
    let _ = wop(&args);
    assert_eq!(server.count(), 2, "re-sent");
    assert_eq!(server.distinct_keys().len(), 1, "with the same key");
}

#[test]
fn usage_is_persisted_and_rolled_up_and_budgets_come_from_flags() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("effects").display().to_string();
    let hello = pack("hello");
    for _ in 0..2 {
        let o = wop(&[
            "run",
            &hello,
            "wop.samples.hello",
            "--store",
            &store,
            "--run-id",
            "r-usage",
        ]);
        assert_eq!(
            o.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    let o = wop(&[
        "usage",
        "--run",
        "r-usage",
        "--store",
        &store,
        "--json",
        "--records",
    ]);
    assert_eq!(o.status.code(), Some(0));
    let v = json(&o);
    assert_eq!(v["byRun"]["r-usage"]["invocations"], 2);
    assert_eq!(v["byPack"]["hello@0.1.0"]["invocations"], 2);
    let records = v["records"].as_array().unwrap();
    let sum: u64 = records
        .iter()
        .map(|r| r["fuelConsumed"].as_u64().unwrap())
        .sum();
    assert_eq!(v["byRun"]["r-usage"]["fuel"].as_u64(), Some(sum));

    // A run budget from flags: too little fuel for one hello.
    let o = wop(&[
        "run",
        &hello,
        "wop.samples.hello",
        "--store",
        &store,
        "--run-id",
        "r-tight",
        "--max-fuel",
        "1000",
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(4));
    let v = json(&o);
    assert_eq!(v["outcome"]["error"]["code"], "budget_exhausted");
    assert_eq!(v["outcome"]["error"]["details"]["dimension"], "fuel");
    let kinds: Vec<&str> = v["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["type"].as_str().unwrap())
        .collect();
    assert_eq!(kinds.first(), Some(&"budget.reserved"), "{kinds:?}");
    let ex = kinds.iter().position(|k| *k == "budget.exhausted").unwrap();
    assert_eq!(kinds[ex + 1], "cap.breached");
}

/// `[effects] store` in the policy picks the store when `--store` is not
/// given (here through `env:NAME`, which keeps a database URL out of the
/// file); a missing variable is a usage error naming it.
#[test]
fn the_policy_can_name_the_store() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("from-policy");
    let policy = tmp.path().join("policy.toml");
    std::fs::write(&policy, "[effects]\nstore = \"env:WOP_TEST_STORE\"\n").unwrap();
    let p = policy.display().to_string();
    let hello = pack("hello");
    let run = |env: Option<&std::path::Path>| {
        let data = tempfile::tempdir().unwrap();
        let mut c = Command::new(env!("CARGO_BIN_EXE_wop"));
        c.args(["run", &hello, "wop.samples.hello", "--policy", &p])
            .args(["--run-id", "r-policy-store", "--no-cache"])
            .env("WOP_DATA_DIR", data.path())
            .env_remove("WOP_TEST_STORE");
        if let Some(s) = env {
            c.env("WOP_TEST_STORE", s);
        }
        c.output().unwrap()
    };
    let o = run(Some(&store));
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    // The usage landed in the store the policy named.
    let o = wop(&[
        "usage",
        "--run",
        "r-policy-store",
        "--store",
        &store.display().to_string(),
        "--json",
    ]);
    assert_eq!(json(&o)["byRun"]["r-policy-store"]["invocations"], 1);

    let o = run(None);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("WOP_TEST_STORE is not set"), "{err}");
}

/// `wop inspect` runs no node, so it does not need (or lock) the effect
/// store: it works while another process holds the store's lock.
#[test]
fn inspect_does_not_take_the_store_lock() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("held");
    // Hold the store's lock the way a running `wop run` does.
    let _held = wop_runtime::store::SledStore::open(&store).unwrap();
    let o = wop(&[
        "inspect",
        &pack("hello"),
        "--store",
        &store.display().to_string(),
        "--json",
    ]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    // `run` does need it, and says why it cannot have it.
    let o = wop(&[
        "run",
        &pack("hello"),
        "wop.samples.hello",
        "--store",
        &store.display().to_string(),
    ]);
    assert_ne!(o.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&o.stderr).contains("locked"));
}

/// `wop run … | head -1`: a reader that closes stdout ends wop quietly
/// (exit 141, as SIGPIPE would), never with a panic. The read end is
/// closed before wop writes anything, so every write meets the closed pipe.
#[test]
fn a_closed_stdout_ends_quietly() {
    let data = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_wop"))
        .args(["run", &pack("hello"), "wop.samples.hello", "--no-cache"])
        .env("WOP_DATA_DIR", data.path())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let o = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(o.status.code(), Some(141), "{stderr}");
}

/// A node type the pack does not have: a usage error naming the ones it has.
#[test]
fn an_unknown_type_lists_the_packs_types() {
    let o = wop(&["run", &pack("transform"), "wop.samples.nope"]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("has no node type `wop.samples.nope`")
            && err.contains("wop.samples.transform"),
        "{err}"
    );
    assert!(!err.contains("load its pack first"), "{err}");
}

/// Without --run-id each `wop run` is a run of its own: a write tool is
/// performed again (and a run timeout does not carry over); with the same
/// --run-id it replays.
#[test]
fn each_run_without_a_run_id_is_a_new_run() {
    let server = wop_testkit::Server::start_detached(wop_testkit::Mode::Ok);
    let tmp = tempfile::tempdir().unwrap();
    let policy = tool_policy(tmp.path(), &server.url("/charge"), "");
    let store = tmp.path().join("effects").display().to_string();
    let pack_dir = pack("tool-call");
    let args = |run: Option<&'static str>| {
        let mut v: Vec<String> = [
            "run",
            &pack_dir,
            "wop.samples.tool-call",
            "--policy",
            &policy,
            "--store",
            &store,
            "--scopes",
            "payments.write",
            "--input",
            r#"{"tool":"payments:charge","arguments":{"amount":5}}"#,
            "--run-timeout-ms",
            "60000",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        if let Some(r) = run {
            v.extend(["--run-id".to_owned(), r.to_owned()]);
        }
        v
    };
    for run in [None, None, Some("named"), Some("named")] {
        let a = args(run);
        let o = wop(&a.iter().map(String::as_str).collect::<Vec<_>>());
        assert_eq!(
            o.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&o.stdout)
        );
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(out.contains("usage (run run-") || run.is_some(), "{out}");
    }
    assert_eq!(
        server.count(),
        3,
        "two unnamed runs, one named run replayed"
    );
}
