//! Every hostile pack through the real runtime: exact code, `cap.breached`
//! kind, and the host survives (a good pack still runs afterwards).

use super::*;
use serde_json::json;
use wop_runtime::{ErrorCode, Outcome};

const POLICY: &str = r#"
[limits]
memoryBytes = 33554432
fuel = 300000000
wallClockMs = 20000
outputBytes = 1048576
logBytes = 65536
"#;

struct Case {
    pack: &'static str,
    inputs: Value,
    code: &'static str,
    breach: Option<&'static str>,
    detail: Option<(&'static str, Value)>,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_table() {
    let rt = runtime(POLICY);
    let cases = [
        Case {
            pack: "spin",
            inputs: json!({}),
            code: "sandbox_timeout",
            breach: Some("wasm-fuel"),
            detail: Some(("cause", json!("fuel"))),
        },
        Case {
            pack: "memory-bomb",
            inputs: json!({}),
            code: "sandbox_memory_exceeded",
            breach: Some("wasm-memory"),
            detail: Some(("cause", json!("memory-growth"))),
        },
        Case {
            pack: "deep-recursion",
            inputs: json!({}),
            code: "sandbox_invocation_error",
            breach: None,
            detail: Some(("trapKind", json!("stack-overflow"))),
        },
        Case {
            pack: "deep-recursion",
            inputs: json!({"mode": "shadow"}),
            code: "sandbox_memory_exceeded",
            breach: None,
            detail: Some(("cause", json!("out-of-bounds"))),
        },
        Case {
            pack: "huge-output",
            inputs: json!({"bytes": 2_000_000}),
            code: "sandbox_invocation_error",
            breach: Some("output-bytes"),
            detail: Some(("cause", json!("output-bytes"))),
        },
        Case {
            pack: "panic",
            inputs: json!({}),
            code: "sandbox_invocation_error",
            breach: None,
            detail: Some(("trapKind", json!("unreachable"))),
        },
    ];
    for c in &cases {
        load(&rt, c.pack).await;
        let type_id = format!("wop.testing.{}", c.pack);
        let r = invoke(&rt, &type_id, c.inputs.clone()).await;
        let e = r
            .outcome
            .as_ref()
            .err()
            .unwrap_or_else(|| panic!("{} should fail: {:?}", c.pack, r.outcome));
        assert_eq!(e.code, c.code, "{}: {e}", c.pack);
        assert_eq!(e.source, wop_runtime::FailureSource::Runtime, "{}", c.pack);
        assert_eq!(
            breaches(&r),
            c.breach.map(|b| vec![b.to_owned()]).unwrap_or_default(),
            "{}",
            c.pack
        );
        if let Some((k, v)) = &c.detail {
            assert_eq!(e.detail(k), Some(v), "{}: {:?}", c.pack, e.details);
        }
        // The host survives: a good pack still runs on the same runtime.
        load(&rt, "hello").await;
        let ok = invoke(&rt, "wop.samples.hello", json!({"name": "after"})).await;
        assert!(ok.outcome.is_ok(), "after {}: {:?}", c.pack, ok.outcome);
    }
}

#[tokio::test]
async fn limits_report_truthful_limit_and_observed() {
    let rt = runtime(POLICY);
    load(&rt, "memory-bomb").await;
    let r = invoke(&rt, "wop.testing.memory-bomb", json!({})).await;
    let Some(Event::CapBreached {
        limit, observed, ..
    }) = r.events.last()
    else {
        panic!("{:?}", r.events)
    };
    assert_eq!(*limit, 33554432);
    assert!(*observed > *limit);
    assert!(r.usage.peak_memory_bytes <= *limit);

    load(&rt, "spin").await;
    let r = invoke(&rt, "wop.testing.spin", json!({})).await;
    assert_eq!(r.usage.fuel_consumed, 300_000_000);
    let Some(Event::CapBreached {
        limit, observed, ..
    }) = r.events.last()
    else {
        panic!("{:?}", r.events)
    };
    assert_eq!((*limit, *observed), (300_000_000, 300_000_000));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wall_clock_stops_a_tight_loop() {
    let rt = runtime("[limits]\nfuel = 1000000000000000\nwallClockMs = 200\n");
    load(&rt, "spin").await;
    let r = invoke(&rt, "wop.testing.spin", json!({})).await;
    let e = r.outcome.as_ref().unwrap_err();
    assert_eq!(e.code, "sandbox_timeout");
    assert_eq!(e.detail("cause"), Some(&json!("wall-clock")));
    assert_eq!(breaches(&r), vec!["wasm-execution-time"]);
    // Tests assert behaviour, not timing: the loop was stopped (we got
    // here) with fuel to spare, so the wall clock is what stopped it.
    assert!(r.usage.fuel_consumed < r.usage.fuel_limit);
}

#[tokio::test]
async fn wall_clock_also_works_on_a_current_thread_runtime() {
    let rt = runtime("[limits]\nfuel = 1000000000000000\nwallClockMs = 100\n");
    load(&rt, "spin").await;
    let r = invoke(&rt, "wop.testing.spin", json!({})).await;
    assert_eq!(breaches(&r), vec!["wasm-execution-time"]);
}

#[tokio::test]
async fn printing_becomes_truncated_log_events() {
    let rt = runtime(POLICY);
    load(&rt, "heavy-print").await;
    let r = invoke(&rt, "wop.testing.heavy-print", json!({"lines": 20000})).await;
    assert!(
        matches!(r.outcome, Ok(Outcome::Completed { .. })),
        "{:?}",
        r.outcome
    );
    let lines = logs(&r);
    assert!(lines.len() > 10);
    let last = lines.last().unwrap();
    assert!(last.contains("log truncated"), "{last}");
    let kept: usize = lines[..lines.len() - 1].iter().map(String::len).sum();
    assert!(kept <= 65536, "{kept}");
    assert!(r.usage.log_bytes_dropped > 0);
    assert!(
        r.events.iter().any(|e| matches!(
            e,
            Event::LogAppended {
                stream: wop_runtime::LogStream::Stderr,
                ..
            }
        )),
        "stderr is captured too"
    );
}

#[tokio::test]
async fn panic_message_reaches_the_log() {
    let rt = runtime(POLICY);
    load(&rt, "panic").await;
    let r = invoke(&rt, "wop.testing.panic", json!({})).await;
    assert!(
        logs(&r).iter().any(|l| l.contains("boom")),
        "{:?}",
        logs(&r)
    );
}

#[tokio::test]
async fn no_state_survives_between_invocations() {
    let rt = runtime("");
    load(&rt, "static-counter").await;
    for _ in 0..3 {
        let r = invoke(&rt, "wop.testing.static-counter", json!({})).await;
        assert_eq!(
            r.outcome,
            Ok(Outcome::Completed {
                output: json!({"count": 1})
            })
        );
    }
}

#[tokio::test]
async fn sockets_import_is_refused_before_running() {
    let data = tempfile::tempdir().unwrap();
    let rt = runtime(&format!(
        "[packs.sockets.filesystem]\npath = {:?}\nreadOnly = false\n",
        data.path()
    ));
    let before = rt.stats().instantiations;
    let e = rt.load_pack(&pack("sockets")).await.unwrap_err();
    assert_eq!(e.code(), ErrorCode::SandboxEscapeAttempt);
    assert_eq!(e.details()["escapeKind"], json!("network-escape"));
    assert!(
        e.details()["import"]
            .as_str()
            .unwrap()
            .starts_with("wasi:sockets/"),
        "{:?}",
        e.details()
    );
    assert_eq!(rt.stats().instantiations, before, "no instance was created");
    let r = invoke(&rt, "wop.testing.sockets", json!({})).await;
    assert_eq!(r.outcome.unwrap_err().code, "not_found", "never registered");
    assert!(
        std::fs::read_dir(data.path()).unwrap().next().is_none(),
        "its side effect never happened"
    );
}

#[tokio::test]
async fn ungranted_interface_is_refused_before_running() {
    let rt = runtime("");
    let before = rt.stats().instantiations;
    let e = rt.load_pack(&pack("ungranted")).await.unwrap_err();
    assert_eq!(e.code(), ErrorCode::SandboxCapabilityDenied);
    assert!(
        e.details()["requestedCapability"]
            .as_str()
            .unwrap()
            .starts_with("openwop:node-pack/http@0.1"),
        "{:?}",
        e.details()
    );
    assert!(
        e.to_string().contains("x-wop.capabilities"),
        "says how to fix: {e}"
    );
    // Names the pack's own policy table and the flag that reads it
    // (issue 23 item 11), not a `[packs.<name>]` placeholder.
    assert_eq!(e.details()["pack"], "ungranted");
    assert!(e.to_string().contains("under [packs.ungranted]"), "{e}");
    assert!(e.to_string().contains("--policy"), "{e}");
    assert!(!e.to_string().contains("<name>"), "{e}");
    assert_eq!(rt.stats().instantiations, before);
    // Inspection shows the same verdict without running anything.
    let i = rt.inspect_pack(&pack("ungranted")).await.unwrap();
    assert_eq!(i.refusal.unwrap().code, "sandbox_capability_denied");
    assert_eq!(rt.stats().instantiations, before);
}
