//! Hardening (issue 14), what a pack returns: the output cap covers the
//! whole outcome and `outputBytes` counts it (class 4); a pack's error is
//! checked, never taken at face value (class 5); suspension and the
//! filesystem need their grants (class 8). Both pack kinds.

use super::hardening::abi_pack;
use super::*;
use serde_json::json;
use wop_runtime::{FailureSource, NodeError, Outcome};

/// The output cap of these tests.
const CAP: u64 = 4096;

fn policy(extra: &str) -> String {
    format!("[limits]\noutputBytes = {CAP}\n{extra}")
}

/// `s` as the body of a WAT string literal.
fn wat_str(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b' '..=b'~' if b != b'"' && b != b'\\' => (b as char).to_string(),
            _ => format!("\\{b:02x}"),
        })
        .collect()
}

/// An ABI v1 module whose `openwop_node_invoke` runs `pre` (WAT), then
/// answers `prefix` + `fill` × `x` + `suffix`, assembled at 65536.
fn responder(
    name: &str,
    imports: &str,
    prefix: &str,
    fill: u32,
    suffix: &str,
    pre: &str,
) -> Vec<u8> {
    const AT: u32 = 65536;
    let total = prefix.len() as u32 + fill + suffix.len() as u32;
    let heap = (AT + total).div_ceil(65536) * 65536 + 65536;
    let wat = format!(
        r#"(module
  {imports}
  (memory (export "memory") {pages})
  (global $bump (mut i32) (i32.const {heap}))
  (data (i32.const 16) "{name}")
  (data (i32.const 64) "test.{name}")
  (data (i32.const {AT}) "{p}")
  (data (i32.const {suffix_at}) "{s}")
  (func (export "openwop_alloc") (param $n i32) (result i32)
    (local $p i32)
    (local.set $p (global.get $bump))
    (global.set $bump (i32.add (local.get $p) (local.get $n)))
    (local.get $p))
  (func (export "openwop_abi_version") (result i32) (i32.const 1))
  (func (export "openwop_pack_name") (result i32 i32) (i32.const 16) (i32.const {nl}))
  (func (export "openwop_node_count") (result i32) (i32.const 1))
  (func (export "openwop_node_id_at") (param i32) (result i32 i32) (i32.const 64) (i32.const {tl}))
  (func (export "openwop_free") (param i32 i32))
  (func (export "openwop_node_invoke") (param i32 i32 i32) (result i32 i32)
    (memory.fill (i32.const {fill_at}) (i32.const 120) (i32.const {fill}))
    {pre}
    (i32.const {AT}) (i32.const {total}))
)"#,
        pages = heap / 65536 + 16,
        p = wat_str(prefix),
        s = wat_str(suffix),
        fill_at = AT + prefix.len() as u32,
        suffix_at = AT + prefix.len() as u32 + fill,
        nl = name.len(),
        tl = name.len() + 5,
    );
    wat::parse_str(&wat).unwrap_or_else(|e| panic!("{e}\n{wat}"))
}

/// The error of a failed report.
fn failure(r: &InvocationReport) -> &NodeError {
    r.outcome
        .as_ref()
        .err()
        .unwrap_or_else(|| panic!("expected a failure, got {:?}", r.outcome))
}

/// Asserts the output-cap verdict: the code, the `cap.breached`, and
/// `outputBytes` counting all `size` bytes the pack returned.
fn assert_output_cap(r: &InvocationReport, size: u64, what: &str) {
    let e = failure(r);
    assert_eq!(e.code, "sandbox_invocation_error", "{what}: {e}");
    assert_eq!(e.source, FailureSource::Runtime, "{what}");
    assert_eq!(e.detail("cause"), Some(&json!("output-bytes")), "{what}");
    assert_eq!(e.detail("limit"), Some(&json!(CAP)), "{what}");
    assert_eq!(e.detail("observed"), Some(&json!(size)), "{what}");
    assert_eq!(breaches(r), vec!["output-bytes".to_owned()], "{what}");
    assert_eq!(r.usage.output_bytes, size, "{what}: outputBytes");
}

/// Class 4 (ABI v1): whatever part of the response is large — error
/// details (1 MiB, or just over the cap), the message, an interrupt, the
/// output — the response is refused at the cap and `outputBytes` counts
/// it; a response under the cap is counted too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abi_v1_the_output_cap_covers_the_whole_response() {
    let tmp = tempfile::tempdir().unwrap();
    let grants: String = (0..6)
        .map(|i| format!("[packs.resp{i}]\ncapabilities = [\"interrupt\"]\n"))
        .collect();
    let rt = runtime(&policy(&grants));
    let cases: [(&str, &str, u32, &str); 6] = [
        (
            "details (1 MiB)",
            r#"{"outcome":"failed","error":{"code":"e","message":"m","details":{"d":""#,
            1 << 20,
            r#""}}}"#,
        ),
        (
            "details",
            r#"{"outcome":"failed","error":{"code":"e","message":"m","details":{"d":""#,
            10_000,
            r#""}}}"#,
        ),
        (
            "message",
            r#"{"outcome":"failed","error":{"code":"e","message":""#,
            10_000,
            r#""}}"#,
        ),
        (
            "interrupt",
            r#"{"outcome":"suspended","interrupt":""#,
            10_000,
            r#""}"#,
        ),
        (
            "output",
            r#"{"outcome":"completed","output":""#,
            10_000,
            r#""}"#,
        ),
        (
            "under the cap",
            r#"{"outcome":"completed","output":""#,
            100,
            r#""}"#,
        ),
    ];
    for (i, (what, prefix, fill, suffix)) in cases.into_iter().enumerate() {
        let name = format!("resp{i}");
        let wasm = responder(&name, "", prefix, fill, suffix, "");
        let dir = abi_pack(tmp.path(), &name, &wasm, &["interrupt"]);
        rt.load_pack(&dir).await.unwrap();
        let r = invoke(&rt, &format!("test.{name}"), json!({})).await;
        let size = (prefix.len() + fill as usize + suffix.len()) as u64;
        if size <= CAP {
            assert!(
                matches!(r.outcome, Ok(Outcome::Completed { .. })),
                "{what}: {:?}",
                r.outcome
            );
            assert_eq!(r.usage.output_bytes, size, "{what}");
        } else {
            assert_output_cap(&r, size, what);
        }
    }
}

/// Class 4 (ABI v1): the payload of `openwop_interrupt` is the outcome of
/// a suspended node: it is under the output cap and counted, like a
/// returned `{"outcome":"suspended"}`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abi_v1_interrupt_payloads_count_against_the_output_cap() {
    let tmp = tempfile::tempdir().unwrap();
    let rt = runtime(&policy(
        "[packs.ask0]\ncapabilities = [\"interrupt\"]\n[packs.ask1]\ncapabilities = [\"interrupt\"]\n",
    ));
    let import =
        r#"(import "openwop" "openwop_interrupt" (func $int (param i32 i32) (result i32 i32)))"#;
    for (i, fill) in [10_000u32, 100].into_iter().enumerate() {
        let size = fill + 2;
        let call = format!("(drop (drop (call $int (i32.const 65536) (i32.const {size}))))");
        let name = format!("ask{i}");
        let wasm = responder(&name, import, "\"", fill, "\"", &call);
        let dir = abi_pack(tmp.path(), &name, &wasm, &["interrupt"]);
        rt.load_pack(&dir).await.unwrap();
        let r = invoke(&rt, &format!("test.{name}"), json!({})).await;
        if u64::from(size) > CAP {
            assert_output_cap(&r, size.into(), "openwop_interrupt");
        } else {
            assert_eq!(
                r.outcome,
                Ok(Outcome::Suspended {
                    interrupt: json!("x".repeat(fill as usize))
                })
            );
            assert_eq!(r.usage.output_bytes, u64::from(size));
        }
    }
}

/// Class 4 (components): a 10 kB error `details`, message or interrupt
/// is refused at the 4 kB cap like a 10 kB output, and counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn components_the_output_cap_covers_the_whole_outcome() {
    let rt = runtime(&policy(""));
    load(&rt, "huge-output").await;
    // (where, bytes the pack returns for its outcome)
    for (place, size) in [
        // code + message + details
        (
            "details",
            "too_big".len() + "see details".len() + r#"{"d":""}"#.len() + 10_000,
        ),
        ("message", "too_big".len() + 10_000),
        ("interrupt", 10_002),
        ("output", 10_002),
    ] {
        let r = invoke(
            &rt,
            "wop.testing.huge-output",
            json!({"bytes": 10_000, "in": place}),
        )
        .await;
        assert_output_cap(&r, size as u64, place);
    }
    let r = invoke(&rt, "wop.testing.huge-output", json!({"bytes": 100})).await;
    assert!(
        matches!(r.outcome, Ok(Outcome::Completed { .. })),
        "{:?}",
        r.outcome
    );
    assert_eq!(r.usage.output_bytes, 102);
}

/// A pack's error and what it must become.
struct ErrorCase {
    /// What the pack returns: code, message, details (JSON text).
    code: &'static str,
    message: &'static str,
    details: Option<&'static str>,
    /// The node's code and source, and a detail that must be present.
    want: &'static str,
    source: FailureSource,
    detail: Option<(&'static str, Value)>,
}

fn case(
    code: &'static str,
    message: &'static str,
    details: Option<&'static str>,
    want: &'static str,
    source: FailureSource,
    detail: Option<(&'static str, Value)>,
) -> ErrorCase {
    ErrorCase {
        code,
        message,
        details,
        want,
        source,
        detail,
    }
}

fn error_cases() -> Vec<ErrorCase> {
    use FailureSource::{Pack, Runtime};
    let invalid = Some(("trapKind", json!("invalid-error")));
    vec![
        case(
            "acme.crm-down_2",
            "m",
            Some(r#"{"x":1}"#),
            "acme.crm-down_2",
            Pack,
            Some(("x", json!(1))),
        ),
        case("", "m", None, "node_failed", Pack, None),
        case(
            "bad\ncode",
            "m",
            None,
            "sandbox_invocation_error",
            Runtime,
            invalid.clone(),
        ),
        // Upper case is a pack's own code (the registry's JavaScript packs
        // use `CONFIG_INVALID`); a leading digit is not a code.
        case("CONFIG_INVALID", "m", None, "CONFIG_INVALID", Pack, None),
        case(
            "1bad",
            "m",
            None,
            "sandbox_invocation_error",
            Runtime,
            invalid.clone(),
        ),
        case(
            "a\u{e9}",
            "m",
            None,
            "sandbox_invocation_error",
            Runtime,
            invalid.clone(),
        ),
        case(
            "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
            "m",
            None,
            "sandbox_invocation_error",
            Runtime,
            invalid.clone(),
        ),
        case(
            "e",
            "m",
            Some("[1]"),
            "sandbox_invocation_error",
            Runtime,
            invalid.clone(),
        ),
        case(
            "e",
            "m",
            Some(r#""text""#),
            "sandbox_invocation_error",
            Runtime,
            invalid.clone(),
        ),
        case(
            "e",
            "m",
            Some("5"),
            "sandbox_invocation_error",
            Runtime,
            invalid,
        ),
        case(
            "sandbox_timeout",
            "m",
            None,
            "node_failed",
            Pack,
            Some(("reservedCode", json!("sandbox_timeout"))),
        ),
        case(
            "budget_exhausted",
            "m",
            Some(r#"{"dimension":"fuel"}"#),
            "node_failed",
            Pack,
            Some(("packDetails", json!({"dimension": "fuel"}))),
        ),
        case(
            "sandbox_memory_exceeded",
            "m",
            None,
            "node_failed",
            Pack,
            Some(("reservedCode", json!("sandbox_memory_exceeded"))),
        ),
        case(
            "internal_error",
            "m",
            None,
            "node_failed",
            Pack,
            Some(("reservedCode", json!("internal_error"))),
        ),
    ]
}

fn assert_error_case(r: &InvocationReport, c: &ErrorCase) {
    let code = c.code;
    let e = failure(r);
    assert_eq!(e.code, c.want, "{code:?}: {e}");
    assert_eq!(e.source, c.source, "{code:?}");
    assert!(breaches(r).is_empty(), "{code:?}: {:?}", r.events);
    assert!(!e.code.contains('\n') && e.code.len() <= 64, "{code:?}");
    if let Some((k, v)) = &c.detail {
        assert_eq!(e.detail(k), Some(v), "{code:?}: {:?}", e.details);
    }
    assert!(
        e.details.as_ref().is_none_or(Value::is_object),
        "{code:?}: details are an object"
    );
}

/// Class 5 (ABI v1): codes with newlines, upper case, non-ASCII or over 64
/// bytes and `details` that are not objects fail the node with
/// `sandbox_invocation_error` from the runtime; a runtime-reserved code is
/// rewritten to `node_failed` with `details.reservedCode` (and the pack's
/// own details under `packDetails`); a well-formed code is the pack's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abi_v1_pack_errors_are_checked() {
    let tmp = tempfile::tempdir().unwrap();
    let rt = runtime("");
    for (i, case) in error_cases().iter().enumerate() {
        let mut error = json!({"code": case.code, "message": case.message});
        if let Some(d) = case.details {
            error["details"] = serde_json::from_str(d).unwrap();
        }
        let response = json!({"outcome": "failed", "error": error}).to_string();
        let name = format!("err{i}");
        let wasm = responder(&name, "", &response, 0, "", "");
        rt.load_pack(&abi_pack(tmp.path(), &name, &wasm, &[]))
            .await
            .unwrap();
        let r = invoke(&rt, &format!("test.{name}"), json!({})).await;
        assert_error_case(&r, case);
    }
    // A long message is cut (4096 bytes), not refused.
    let response =
        json!({"outcome": "failed", "error": {"code": "e", "message": "m".repeat(10_000)}})
            .to_string();
    let wasm = responder("long", "", &response, 0, "", "");
    rt.load_pack(&abi_pack(tmp.path(), "long", &wasm, &[]))
        .await
        .unwrap();
    let r = invoke(&rt, "test.long", json!({})).await;
    let e = failure(&r);
    assert_eq!(e.code, "e");
    // 4096 bytes of the message, then the cut marker.
    assert!(e.message.len() < 4096 + 32, "{}", e.message.len());
    assert!(e.message.starts_with(&"m".repeat(4000)));
}

/// Class 5 (components): the same checks on a component's `error-info`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn components_pack_errors_are_checked() {
    let rt = runtime("");
    load(&rt, "huge-output").await;
    for case in &error_cases() {
        let mut fail = json!({"code": case.code, "message": case.message});
        if let Some(d) = case.details {
            fail["details"] = serde_json::from_str(d).unwrap();
        }
        let r = invoke(&rt, "wop.testing.huge-output", json!({"fail": fail})).await;
        assert_error_case(&r, case);
    }
}

/// Class 8 (ABI v1): a module answering `{"outcome":"suspended"}` without
/// the `interrupt` grant does not suspend the node: it fails closed with
/// `sandbox_capability_denied` (`requestedCapability: "interrupt"`), as
/// the `openwop_interrupt` host call does. With the grant it suspends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abi_v1_suspension_needs_the_interrupt_grant() {
    let tmp = tempfile::tempdir().unwrap();
    let rt = runtime("[packs.granted]\ncapabilities = [\"interrupt\"]\n");
    let response = r#"{"outcome":"suspended","interrupt":{"ask":"approve?"}}"#;
    for (name, caps) in [
        ("ungranted", &[][..]),
        ("unrequested", &[][..]),
        ("granted", &["interrupt"][..]),
    ] {
        // `ungranted` requests the capability, the policy does not grant it.
        let requested: &[&str] = if name == "ungranted" {
            &["interrupt"]
        } else {
            caps
        };
        let wasm = responder(name, "", response, 0, "", "");
        rt.load_pack(&abi_pack(tmp.path(), name, &wasm, requested))
            .await
            .unwrap();
        let r = invoke(&rt, &format!("test.{name}"), json!({})).await;
        if name == "granted" {
            assert_eq!(
                r.outcome,
                Ok(Outcome::Suspended {
                    interrupt: json!({"ask": "approve?"})
                })
            );
        } else {
            let e = failure(&r);
            assert_eq!(e.code, "sandbox_capability_denied", "{name}: {e}");
            assert_eq!(
                e.detail("requestedCapability"),
                Some(&json!("interrupt")),
                "{name}"
            );
            assert_eq!(e.source, FailureSource::Runtime, "{name}");
        }
    }
}

/// Class 8 (components): `describe()` runs at load without the pack's
/// filesystem grant. fs-probe's describe() tries to write into `/data`;
/// after the load the granted directory is still empty, while the same
/// write from `invoke` (which has the grant) lands.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn describe_gets_no_filesystem_grant() {
    let data = tempfile::tempdir().unwrap();
    let rt = runtime(&format!(
        "[packs.fs-probe.filesystem]\npath = {:?}\nreadOnly = false\n",
        data.path()
    ));
    load(&rt, "fs-probe").await;
    let entries = || -> Vec<String> {
        std::fs::read_dir(data.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect()
    };
    assert!(entries().is_empty(), "describe() wrote {:?}", entries());
    let r = invoke(
        &rt,
        "wop.testing.fs-probe",
        json!({"op": "write", "path": "/data/written-by-invoke", "content": "x"}),
    )
    .await;
    assert!(
        matches!(&r.outcome, Ok(Outcome::Completed { output }) if output["ok"] == json!(true)),
        "{:?}",
        r.outcome
    );
    assert_eq!(entries(), vec!["written-by-invoke".to_owned()]);
}
