//! The `wop` binary end to end: exit codes, human and JSON output.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use serde_json::Value;
use std::process::{Command, Output};

fn wop(args: &[&str]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_wop"));
    c.args(args);
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
