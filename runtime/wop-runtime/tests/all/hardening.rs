//! Hardening (issue 14): hostile packs that make the host do, hold or
//! allow more than the pack pays for. Each test asserts the bound and the
//! code.

use super::*;
use serde_json::json;
use wop_runtime::Outcome;
use wop_testkit::abi_v1::{DIGIT, Module};

/// A minimal ABI v1 module of node type `test.<name>` (see
/// [`wop_testkit::abi_v1::Module`]).
pub(super) fn module(
    name: &str,
    imports: &str,
    pages: u32,
    alloc: &str,
    extra: &str,
    invoke: &str,
) -> Vec<u8> {
    let wat = Module {
        imports,
        pages,
        alloc,
        extra,
        invoke,
        ..Module::new("test", name)
    }
    .wat();
    wat::parse_str(&wat).unwrap_or_else(|e| panic!("{e}\n{wat}"))
}

/// Writes an ABI v1 pack directory for `wasm` with `caps`.
pub(super) fn abi_pack(root: &Path, name: &str, wasm: &[u8], caps: &[&str]) -> PathBuf {
    wop_testkit::abi_v1::write_pack(root, "test", name, wasm, caps).unwrap()
}

pub(super) fn code(r: &InvocationReport) -> String {
    match &r.outcome {
        Err(e) => e.code.clone(),
        Ok(o) => panic!("expected a failure, got {o:?}"),
    }
}

const VGET: &str =
    r#"(import "openwop" "openwop_variable_get" (func $vget (param i32 i32) (result i32 i32)))"#;
const VSET: &str = r#"(import "openwop" "openwop_variable_set" (func $vset (param i32 i32 i32 i32) (result i32)))"#;

/// Class 6: `openwop_alloc` calls `openwop_variable_get`, whose host side
/// calls `openwop_alloc` again, and so on. Each level would take a fiber
/// stack of the process; the runtime stops at the second level with its
/// own error and `cap.breached`, and the process stays usable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alloc_reentering_the_host_is_bounded_per_invocation() {
    let tmp = tempfile::tempdir().unwrap();
    let rt = runtime(
        "[packs.reenter]\ncapabilities = [\"variables\"]\n[packs.calm]\ncapabilities = [\"variables\"]\n",
    );
    let extra = r#"(data (i32.const 300) "k")"#;
    let lookup = "(drop (drop (call $vget (i32.const 300) (i32.const 1))))";
    let hostile = module("reenter", VGET, 16, lookup, extra, lookup);
    let calm = module("calm", VGET, 16, "", extra, lookup);
    rt.load_pack(&abi_pack(tmp.path(), "reenter", &hostile, &["variables"]))
        .await
        .unwrap();
    rt.load_pack(&abi_pack(tmp.path(), "calm", &calm, &["variables"]))
        .await
        .unwrap();
    let mut req = InvokeRequest::new("test.reenter", json!({}));
    req.config = json!({"variables": {"k": "v"}});
    for _ in 0..3 {
        let r = rt.invoke(req.clone()).await;
        assert_eq!(code(&r), "sandbox_invocation_error", "{:?}", r.outcome);
        assert!(
            breaches(&r).contains(&"host-reentrancy".to_owned()),
            "{:?}",
            r.events
        );
        let e = r.outcome.as_ref().unwrap_err();
        assert_eq!(e.detail("cause"), Some(&json!("host-reentrancy")));
        assert_eq!(e.detail("limit"), Some(&json!(1)));
    }
    // One level (the ABI's own use) still works, and the pool is intact.
    let mut ok = InvokeRequest::new("test.calm", json!({}));
    ok.config = json!({"variables": {"k": "v"}});
    let r = rt.invoke(ok).await;
    assert!(
        matches!(r.outcome, Ok(Outcome::Completed { .. })),
        "{:?}",
        r.outcome
    );
}

/// Class 8: overwriting one variable again and again holds one value, so
/// it must never hit the state cap (4 × hostArgBytes = 4000 bytes here;
/// each write is 503 bytes).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overwriting_a_variable_frees_its_old_size() {
    let tmp = tempfile::tempdir().unwrap();
    let rt = runtime(
        "[limits]\nhostArgBytes = 1000\n[packs.overwrite]\ncapabilities = [\"variables\"]\n",
    );
    let extra = r#"(data (i32.const 300) "k")"#;
    let body = format!(
        r#"(local $i i32)
    (memory.fill (i32.const 1024) (i32.const 97) (i32.const 502))
    (i32.store8 (i32.const 1024) (i32.const 34))
    (i32.store8 (i32.const 1525) (i32.const 34))
    (block $done (loop $l
      (br_if $done (i32.ge_u (local.get $i) (i32.const 20)))
      (if (call $vset (i32.const 300) (i32.const 1) (i32.const 1024) (i32.const 502))
        (then (i32.store8 (i32.const {DIGIT}) (i32.const 49))))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br $l)))"#
    );
    let wasm = module("overwrite", VSET, 16, "", extra, &body);
    rt.load_pack(&abi_pack(tmp.path(), "overwrite", &wasm, &["variables"]))
        .await
        .unwrap();
    let r = invoke(&rt, "test.overwrite", json!({})).await;
    match &r.outcome {
        Ok(Outcome::Completed { output }) => assert_eq!(*output, json!(0), "a write was refused"),
        other => panic!("{other:?}"),
    }
}

/// Class 1 (ABI v1): each `openwop_variable_set` makes the host copy and
/// parse ~1 MB of JSON for a handful of guest instructions. The host call
/// itself checks the deadline and charges fuel per byte, so the pack stops
/// near its 200 ms wall clock (bound asserted: 10×) and its usage shows
/// the host work.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn host_parsing_cannot_outrun_the_wall_clock() {
    let tmp = tempfile::tempdir().unwrap();
    let rt = runtime(
        "[limits]\nwallClockMs = 200\nfuel = 1000000000000\n[packs.parse-flood]\ncapabilities = [\"variables\"]\n",
    );
    const LEN: i32 = 1_000_000;
    let extra = r#"(data (i32.const 300) "k")"#;
    let body = format!(
        r#"(memory.fill (i32.const 65536) (i32.const 97) (i32.const {LEN}))
    (i32.store8 (i32.const 65536) (i32.const 34))
    (i32.store8 (i32.const {end}) (i32.const 34))
    (loop $l
      (drop (call $vset (i32.const 300) (i32.const 1) (i32.const 65536) (i32.const {LEN})))
      (br $l))"#,
        end = 65536 + LEN - 1
    );
    let wasm = module("parse-flood", VSET, 48, "", extra, &body);
    rt.load_pack(&abi_pack(tmp.path(), "parse-flood", &wasm, &["variables"]))
        .await
        .unwrap();
    // No timing threshold (tests assert, benchmarks measure): the loop has
    // fuel for hours, so only the wall-clock deadline can have ended it.
    let r = invoke(&rt, "test.parse-flood", json!({})).await;
    assert_eq!(code(&r), "sandbox_timeout", "{:?}", r.outcome);
    assert!(breaches(&r).contains(&"wasm-execution-time".to_owned()));
    let calls = r.usage.host_calls.get("variables").copied().unwrap_or(0);
    assert!(calls >= 1);
    assert!(
        r.usage.fuel_consumed >= (calls - 1) * LEN as u64,
        "fuel {} for {calls} calls of {LEN} bytes",
        r.usage.fuel_consumed
    );
}

/// Class 1 (components): a 32 MiB log line in a loop — cheap in fuel, each
/// call makes the host lift 32 MiB — stops near the 200 ms wall clock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn huge_log_lines_cannot_outrun_the_wall_clock() {
    let rt = runtime(
        "[limits]\nwallClockMs = 200\nfuel = 1000000000000\nmemoryBytes = 134217728\n[packs.id-flood]\ncapabilities = [\"tools\"]\ntools = [\"crm:*\"]\n",
    );
    load(&rt, "id-flood").await;
    // Fuel for hours: only the wall-clock deadline can have ended it.
    let r = invoke(&rt, "wop.testing.id-flood", json!({"mode": "log"})).await;
    assert_eq!(code(&r), "sandbox_timeout", "{:?}", r.outcome);
    assert!(breaches(&r).contains(&"wasm-execution-time".to_owned()));
    let calls = r.usage.host_calls.get("log").copied().unwrap_or(0);
    assert!(
        r.usage.fuel_consumed >= calls.saturating_sub(1) * (32 << 20),
        "fuel {} for {calls} log calls",
        r.usage.fuel_consumed
    );
}

/// Class 2: 30 tool calls with a 1 MB tool id. The id is refused with
/// `validation_error` before it is stored, echoed or hashed: the report
/// (events + usage) stays small.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_megabyte_tool_id_is_refused_before_it_is_stored() {
    let rt = runtime("[packs.id-flood]\ncapabilities = [\"tools\"]\ntools = [\"crm:*\"]\n");
    load(&rt, "id-flood").await;
    let r = invoke(
        &rt,
        "wop.testing.id-flood",
        json!({"mode": "tools", "calls": 30, "idBytes": 1_000_000}),
    )
    .await;
    match &r.outcome {
        Ok(Outcome::Completed { output }) => {
            assert_eq!(output["errors"], json!(30), "{output}");
            assert_eq!(output["codes"], json!(["validation_error"]), "{output}");
        }
        other => panic!("{other:?}"),
    }
    let size =
        serde_json::to_vec(&r.events).unwrap().len() + serde_json::to_vec(&r.usage).unwrap().len();
    assert!(size < 64 << 10, "report holds {size} bytes");
}
