//! `wop probe`, `wop capabilities` and `wop run`/`inspect` of WASM ABI v1
//! core-module packs, end to end through the binary.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn wop(args: &[&str]) -> Output {
    let data = tempfile::tempdir().unwrap();
    Command::new(env!("CARGO_BIN_EXE_wop"))
        .args(args)
        .env("WOP_DATA_DIR", data.path())
        .env("WOP_CACHE_DIR", data.path().join("cache"))
        .output()
        .expect("run wop")
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

/// One line of JSON on stdout.
fn line(o: &Output) -> Value {
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(out.trim_end().lines().count(), 1, "{out}");
    json(o)
}

fn module(dir: &Path, name: &str, wat: &str) -> String {
    let p: PathBuf = dir.join(name);
    std::fs::write(&p, wat::parse_str(wat).unwrap()).unwrap();
    p.display().to_string()
}

#[test]
fn probe_ok_with_an_argument_and_without_parameters() {
    let tmp = tempfile::tempdir().unwrap();
    let m = module(
        tmp.path(),
        "add.wasm",
        r#"(module
             (func (export "invoke") (param i32) (result i32) (i32.add (local.get 0) (i32.const 1)))
             (func (export "answer") (result i32) (i32.const 42)))"#,
    );
    let o = wop(&["probe", &m, "--arg", "41"]);
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        "{\"ok\":true,\"result\":42}\n"
    );
    let o = wop(&["probe", &m, "--entry", "answer"]);
    assert_eq!(line(&o), json!({"ok": true, "result": 42}));
    let o = wop(&["probe", &m, "--entry", "missing"]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn probe_grants_only_what_is_allowed_and_granted_imports_are_identity() {
    let tmp = tempfile::tempdir().unwrap();
    let m = module(
        tmp.path(),
        "fetch.wasm",
        r#"(module
             (import "openwop" "host_fetch" (func $f (param i32) (result i32)))
             (func (export "invoke") (param i32) (result i32) (call $f (local.get 0))))"#,
    );
    let o = wop(&["probe", &m, "--arg", "7"]);
    assert_eq!(o.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&o.stdout).starts_with("{\"ok\":false,\"error\":{\"code\":"));
    let v = line(&o);
    assert_eq!(v["ok"], false);
    assert_eq!(v["error"]["code"], "sandbox_capability_denied");
    assert_eq!(v["error"]["details"]["requestedCapability"], "host_fetch");
    let o = wop(&["probe", &m, "--arg", "7", "--allow", "host_fetch"]);
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(line(&o), json!({"ok": true, "result": 7}));
    // Even the base ABI imports are not host calls a probe makes by default.
    let log = module(
        tmp.path(),
        "log.wasm",
        r#"(module
             (import "openwop" "openwop_log" (func $log (param i32 i32 i32)))
             (memory (export "memory") 1)
             (func (export "invoke") (result i32) (call $log (i32.const 2) (i32.const 0) (i32.const 0)) (i32.const 1)))"#,
    );
    let o = wop(&["probe", &log]);
    assert_eq!(
        line(&o)["error"]["details"]["requestedCapability"],
        "openwop_log"
    );
    let o = wop(&["probe", &log, "--allow", "openwop.openwop_log"]);
    assert_eq!(line(&o), json!({"ok": true, "result": 1}));
}

#[test]
fn probe_reports_each_escape_kind_without_running() {
    let tmp = tempfile::tempdir().unwrap();
    let cases = [
        (
            "fd_write",
            "(param i32 i32 i32 i32) (result i32)",
            "host-fs-escape",
        ),
        (
            "environ_get",
            "(param i32 i32) (result i32)",
            "host-env-leak",
        ),
        (
            "sock_open",
            "(param i32 i32 i32) (result i32)",
            "network-escape",
        ),
        ("proc_exit", "(param i32)", "host-process-escape"),
    ];
    for (name, ty, kind) in cases {
        // The start function would trap: a refusal proves it never ran.
        let m = module(
            tmp.path(),
            &format!("{name}.wasm"),
            &format!(
                r#"(module
                     (import "wasi_snapshot_preview1" "{name}" (func {ty}))
                     (func $s unreachable) (start $s)
                     (func (export "invoke") (param i32) (result i32) (local.get 0)))"#
            ),
        );
        let o = wop(&["probe", &m, "--allow", name]);
        assert_eq!(o.status.code(), Some(3), "{name}");
        let v = line(&o);
        assert_eq!(v["error"]["code"], "sandbox_escape_attempt", "{name}");
        assert_eq!(v["error"]["details"]["escapeKind"], kind, "{name}");
    }
}

#[test]
fn probe_memory_and_timeout_caps() {
    let tmp = tempfile::tempdir().unwrap();
    let grow = module(
        tmp.path(),
        "grow.wasm",
        r#"(module (memory (export "memory") 1)
             (func (export "invoke") (param i32) (result i32) (memory.grow (local.get 0))))"#,
    );
    // 2 MiB default: growing by 8 pages fits, by 64 does not.
    assert_eq!(
        line(&wop(&["probe", &grow, "--arg", "8"])),
        json!({"ok": true, "result": 1})
    );
    let o = wop(&["probe", &grow, "--arg", "64"]);
    assert_eq!(o.status.code(), Some(4));
    assert_eq!(line(&o)["error"]["code"], "sandbox_memory_exceeded");
    let o = wop(&["probe", &grow, "--arg", "64", "--memory", "8MiB"]);
    assert_eq!(line(&o)["ok"], true);
    let imported = module(
        tmp.path(),
        "grow-imported.wasm",
        r#"(module (import "env" "memory" (memory 1))
             (func (export "invoke") (param i32) (result i32) (memory.grow (local.get 0))))"#,
    );
    let o = wop(&["probe", &imported, "--arg", "64"]);
    assert_eq!(line(&o)["error"]["code"], "sandbox_memory_exceeded");
    let oob = module(
        tmp.path(),
        "oob.wasm",
        r#"(module (memory 1)
             (func (export "invoke") (param i32) (result i32) (i32.load (i32.const 70000))))"#,
    );
    assert_eq!(
        line(&wop(&["probe", &oob]))["error"]["code"],
        "sandbox_memory_exceeded"
    );
    let spin = module(
        tmp.path(),
        "spin.wasm",
        r#"(module (func (export "invoke") (param i32) (result i32) (loop $l (br $l)) (i32.const 0)))"#,
    );
    let o = wop(&["probe", &spin, "--timeout", "300ms"]);
    assert_eq!(o.status.code(), Some(4));
    let v = line(&o);
    assert_eq!(v["error"]["code"], "sandbox_timeout");
    assert_eq!(v["error"]["details"]["limitMs"], 300);
}

/// `wop probe` applies the loaders' declared-table check: a table above the
/// cap is the table limit, not "not a valid WebAssembly core module".
#[test]
fn probe_reports_a_declared_table_above_the_cap_as_the_table_limit() {
    let tmp = tempfile::tempdir().unwrap();
    let big = module(
        tmp.path(),
        "big-table.wasm",
        r#"(module (table 100001 funcref)
             (func (export "invoke") (param i32) (result i32) (i32.const 0)))"#,
    );
    let o = wop(&["probe", &big]);
    assert_eq!(o.status.code(), Some(3), "refused before running");
    let v = line(&o);
    assert_eq!(v["error"]["code"], "sandbox_memory_exceeded", "{v}");
    assert_eq!(v["error"]["details"]["cause"], "table-size", "{v}");
    assert_eq!(v["error"]["details"]["limit"], 100_000, "{v}");
    assert_eq!(v["error"]["details"]["observed"], 100_001, "{v}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!err.contains("not a valid WebAssembly"), "{err}");
    assert!(err.contains("limits.tableElements"), "{err}");
    // At the cap it is a module like any other.
    let ok = module(
        tmp.path(),
        "cap-table.wasm",
        r#"(module (table 100000 funcref)
             (func (export "invoke") (param i32) (result i32) (i32.const 7)))"#,
    );
    assert_eq!(line(&wop(&["probe", &ok]))["result"], 7);
    // The module file is read like every pack file: a FIFO is refused, not
    // waited on.
    let fifo = tmp.path().join("fifo.wasm");
    let made = Command::new("mkfifo").arg(&fifo).status().expect("mkfifo");
    assert!(made.success());
    let o = wop(&["probe", &fifo.display().to_string()]);
    assert_eq!(o.status.code(), Some(2), "usage error: {o:?}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("FIFO"), "{err}");
}

#[test]
fn capabilities_document() {
    let o = wop(&["capabilities", "--no-cache"]);
    assert_eq!(o.status.code(), Some(0));
    let v = json(&o);
    let wasm = &v["nodePackRuntimes"]["wasm"];
    assert_eq!(wasm["abiVersions"], json!([1]));
    assert_eq!(wasm["maxMemoryBytes"], 64 << 20);
    assert_eq!(wasm["loadedPacks"], json!([]));
    assert!(v["nodePackRuntimes"]["wasmComponent"].is_object());
    assert_eq!(v["sandbox"]["isolationModel"], "wasm");
    assert_eq!(v["sandbox"]["wallClockLimitMs"], 30000);
    assert_eq!(v["sandbox"]["memoryLimitBytes"], 64 << 20);
    let calls = v["sandbox"]["allowedHostCalls"].as_array().unwrap();
    assert!(calls.contains(&json!("openwop_log")));

    let hello = wop_test_packs::pack_dir("hello-abi").display().to_string();
    let o = wop(&["capabilities", "--no-cache", &hello]);
    let v = json(&o);
    assert_eq!(
        v["nodePackRuntimes"]["wasm"]["loadedPacks"],
        json!(["hello-abi"])
    );
}

#[test]
fn run_and_inspect_the_rust_abi_pack_and_a_bare_module() {
    let hello = wop_test_packs::pack_dir("hello-abi").display().to_string();
    let o = wop(&[
        "run",
        &hello,
        "wop.samples.hello-abi",
        "--input",
        r#"{"name":"Ada"}"#,
        "--json",
        "--no-cache",
    ]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v = json(&o);
    assert_eq!(v["outcome"]["outcome"], "completed");
    assert_eq!(v["outcome"]["output"]["greeting"], "Hello, Ada!");
    assert_eq!(v["events"][0]["type"], "log.appended");
    assert_eq!(v["events"][0]["level"], "info");
    assert_eq!(v["usage"]["pack"], "hello-abi");

    let o = wop(&["inspect", &hello, "--no-cache"]);
    assert_eq!(o.status.code(), Some(0));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("openwop.openwop_log"), "{out}");

    // The same module, bare: the manifest comes from its exports.
    let bare = wop_test_packs::pack_dir("hello-abi")
        .join("hello-abi.wasm")
        .display()
        .to_string();
    let o = wop(&["run", &bare, "wop.samples.hello-abi", "--no-cache"]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(String::from_utf8_lossy(&o.stdout).contains("Hello, world!"));
    let o = wop(&["inspect", &bare, "--json", "--no-cache"]);
    let v = json(&o);
    assert_eq!(v["manifest"]["name"], "hello-abi");
    assert!(v["integrity"].as_str().unwrap().contains("no sha256"));

    // A refused core module exits 3 with the protocol code.
    let tmp = tempfile::tempdir().unwrap();
    let m = module(
        tmp.path(),
        "env.wasm",
        r#"(module (import "wasi_snapshot_preview1" "environ_sizes_get" (func (param i32 i32) (result i32)))
             (func (export "openwop_abi_version") (result i32) (i32.const 1)))"#,
    );
    let o = wop(&["run", &m, "x.y", "--json", "--no-cache"]);
    assert_eq!(o.status.code(), Some(3));
    let v = json(&o);
    assert_eq!(v["error"]["code"], "sandbox_escape_attempt");
    assert_eq!(v["error"]["details"]["escapeKind"], "host-env-leak");
}
