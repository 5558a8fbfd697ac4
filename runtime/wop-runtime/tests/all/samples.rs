//! The documentation-grade sample packs.

use super::*;
use serde_json::json;
use wop_runtime::{ErrorCode, FailureSource, Outcome};

#[tokio::test]
async fn hello_greets_logs_and_reports_usage() {
    let rt = runtime("");
    load(&rt, "hello").await;
    let r = invoke(&rt, "wop.samples.hello", json!({"name": "Ada"})).await;
    assert_eq!(
        r.outcome,
        Ok(Outcome::Completed {
            output: json!({"greeting": "Hello, Ada!"})
        })
    );
    assert!(
        r.events.iter().any(|e| matches!(e,
            Event::LogAppended { level: wop_runtime::LogLevel::Info, fields: Some(f), .. }
                if f["name"] == "Ada")),
        "{:?}",
        r.events
    );
    assert!(r.usage.fuel_consumed > 0);
    assert!(r.usage.fuel_consumed < r.usage.fuel_limit);
    assert!(r.usage.peak_memory_bytes > 0);
    assert_eq!(r.usage.pack, "hello");
    assert_eq!(r.usage.host_calls.get("log"), Some(&1));
}

#[tokio::test]
async fn transform_is_pure() {
    let rt = runtime("");
    load(&rt, "transform").await;
    let r = invoke(
        &rt,
        "wop.samples.transform",
        json!({"items": [{"a": 2, "b": "x"}, {"a": 1, "b": "y"}], "select": ["a"], "sortBy": "a"}),
    )
    .await;
    let Ok(Outcome::Completed { output }) = r.outcome else {
        panic!("{:?}", r.outcome)
    };
    assert_eq!(output["items"], json!([{"a": 1}, {"a": 2}]));
    assert!(r.usage.host_calls.is_empty(), "{:?}", r.usage.host_calls);
}

#[tokio::test]
async fn tool_call_gets_the_typed_denial_and_an_empty_catalog() {
    let rt = runtime("[packs.tool-call]\ncapabilities = [\"tools\"]\n");
    load(&rt, "tool-call").await;
    let r = invoke(
        &rt,
        "wop.samples.tool-call",
        json!({"tool": "payments:charge", "arguments": {"amount": 1}}),
    )
    .await;
    let e = r.outcome.unwrap_err();
    assert_eq!(e.code, "forbidden");
    assert_eq!(
        e.source,
        FailureSource::Pack,
        "the pack reported the tool's error"
    );
    assert_eq!(e.detail("scope"), Some(&json!("tool")));
    assert_eq!(e.detail("toolName"), Some(&json!("payments:charge")));

    let r = invoke(&rt, "wop.samples.tool-call", json!({"list": true})).await;
    let Ok(Outcome::Completed { output }) = r.outcome else {
        panic!("{:?}", r.outcome)
    };
    assert_eq!(output["tools"], json!([]));
}

#[tokio::test]
async fn tool_call_without_the_grant_is_refused_at_load() {
    let rt = runtime("");
    let e = rt.load_pack(&pack("tool-call")).await.unwrap_err();
    assert_eq!(e.code(), ErrorCode::SandboxCapabilityDenied);
    let d = e.details();
    assert!(
        d["requestedCapability"]
            .as_str()
            .unwrap()
            .starts_with("openwop:node-pack/tools@"),
        "{d:?}"
    );
}

#[tokio::test]
async fn unknown_type_is_not_found() {
    let rt = runtime("");
    let r = invoke(&rt, "wop.nope", json!({})).await;
    assert_eq!(r.outcome.unwrap_err().code, "not_found");
}

#[tokio::test]
async fn concurrent_invocations_are_independent() {
    let rt = runtime("");
    load(&rt, "hello").await;
    let mut tasks = Vec::new();
    for i in 0..16 {
        let rt = rt.clone();
        tasks.push(tokio::spawn(async move {
            invoke(&rt, "wop.samples.hello", json!({"name": format!("n{i}")})).await
        }));
    }
    for (i, t) in tasks.into_iter().enumerate() {
        let r = t.await.unwrap();
        assert_eq!(
            r.outcome,
            Ok(Outcome::Completed {
                output: json!({"greeting": format!("Hello, n{i}!")})
            })
        );
    }
}
