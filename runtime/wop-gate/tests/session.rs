//! The gate and its per-invocation session, without any wasm pack: a
//! counting provider stands in for the tool, a memory store holds claims.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use wop_core::error::ErrorCode;
use wop_core::events::{Event, ToolStatus, Transport};
use wop_core::logbuf::LogBuffer;
use wop_core::model::{Principal, RunContext};
use wop_core::tools::{SafetyTier, ToolCall, ToolDescriptor, ToolFailure, ToolSource};
use wop_effects::effects::{EffectTimings, Effects};
use wop_effects::store::MemoryStore;
use wop_gate::{CallSite, Gate, GateConfig, GateErrorKind, GateSession};
use wop_gate::{RegisteredTool, ToolProvider, ToolRegistry};

/// Counts calls and echoes the idempotency key it was sent.
struct Counting(Arc<AtomicU64>);

#[async_trait::async_trait]
impl ToolProvider for Counting {
    async fn call(&self, call: ToolCall) -> Result<Value, ToolFailure> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Ok(json!({"key": call.idempotency_key, "args": call.arguments}))
    }
}

fn tool(id: &str, tier: SafetyTier, n: &Arc<AtomicU64>) -> RegisteredTool {
    RegisteredTool {
        descriptor: ToolDescriptor::new(id, ToolSource::HostExtension, tier),
        tenants: None,
        rate: None,
        timeout: Duration::from_secs(5),
        provider: Arc::new(Counting(n.clone())),
    }
}

fn gate(n: &Arc<AtomicU64>) -> Arc<Gate> {
    let mut reg = ToolRegistry::default();
    reg.register(tool("crm:update", SafetyTier::Write, n))
        .unwrap();
    reg.register(tool("crm:read", SafetyTier::Read, n)).unwrap();
    Arc::new(Gate::new(
        reg,
        Effects::new(Arc::new(MemoryStore::new()), "test"),
        GateConfig {
            timings: EffectTimings {
                lease: Duration::from_secs(30),
                in_flight_wait: Duration::from_millis(200),
                poll: Duration::from_millis(10),
            },
            max_result_bytes: 1 << 20,
            max_records_per_invocation: 64,
            max_record_bytes_per_invocation: 4 << 20,
        },
    ))
}

fn session(gate: &Arc<Gate>, attempt: u32, granted: &[&str]) -> GateSession {
    let site = CallSite {
        principal: Principal::default(),
        context: RunContext {
            attempt,
            ..RunContext::default()
        },
        pack: "p".into(),
        declared: vec!["crm:*".into()],
        granted: granted.iter().map(|s| s.to_string()).collect(),
        deadline: Instant::now() + Duration::from_secs(10),
        depth: 0,
        transport: Transport::Native,
        meter: None,
        credentials: Default::default(),
        trace: None,
    };
    let log = Arc::new(Mutex::new(LogBuffer::new(1 << 20, 4096)));
    GateSession::new(gate.clone(), site, None, log)
}

#[tokio::test]
async fn a_write_fires_once_across_attempts_and_usage_comes_from_receipts() {
    let n = Arc::new(AtomicU64::new(0));
    let g = gate(&n);
    let mut first = session(&g, 1, &["crm:*"]);
    let a = first
        .call("crm:update", json!({"x": 1}), None)
        .await
        .unwrap();
    // A retry of the same node (attempt 2) replays the recorded outcome.
    let mut retry = session(&g, 2, &["crm:*"]);
    let b = retry
        .call("crm:update", json!({"x": 1}), None)
        .await
        .unwrap();
    assert_eq!(a, b);
    assert_eq!(n.load(Ordering::SeqCst), 1, "performed once");
    // The key sent to the provider is the effect id (activity recipe).
    assert!(a["key"].as_str().is_some_and(|k| !k.is_empty()));
    assert_eq!(first.usage().effect_claims, 1);
    assert_eq!(first.usage().tool_calls_by_id.get("crm:update"), Some(&1));
    assert_eq!(retry.usage().effect_claims, 0, "a replay is not a claim");
    assert!(
        retry.usage().tool_calls_by_id.is_empty(),
        "a replay is not performed"
    );
}

#[tokio::test]
async fn denials_never_perform_and_are_remembered_as_verdicts() {
    let n = Arc::new(AtomicU64::new(0));
    let g = gate(&n);
    let mut s = session(&g, 1, &["crm:read"]);
    let e = s.call("crm:update", json!({}), None).await.unwrap_err();
    assert_eq!(
        (e.kind, e.code.as_str()),
        (GateErrorKind::Forbidden, "forbidden")
    );
    let e = s.call("crm:ghost", json!({}), None).await.unwrap_err();
    assert_eq!(
        e.code,
        ErrorCode::Forbidden,
        "not granted is decided before existence"
    );
    let mut all = session(&g, 1, &["crm:*"]);
    let e = all.call("crm:ghost", json!({}), None).await.unwrap_err();
    assert_eq!(
        (e.kind, e.code.as_str()),
        (GateErrorKind::NotFound, "not_found")
    );
    assert_eq!(n.load(Ordering::SeqCst), 0);
    assert!(s.usage().tool_calls_by_id.is_empty());
    assert!(s.usage().verdicts.contains("forbidden"));
    // A read is performed directly, without a claim.
    s.call("crm:read", json!({}), None).await.unwrap();
    assert_eq!(n.load(Ordering::SeqCst), 1);
    assert_eq!(s.usage().effect_claims, 0);
}

#[tokio::test]
async fn audit_pairs_are_recorded_in_the_invocation_log() {
    let n = Arc::new(AtomicU64::new(0));
    let g = gate(&n);
    let site_log = Arc::new(Mutex::new(LogBuffer::new(1 << 20, 4096)));
    let mut s = GateSession::new(
        g.clone(),
        session(&g, 1, &["crm:read"]).site().clone(),
        None,
        site_log.clone(),
    );
    s.call("crm:update", json!({}), None).await.unwrap_err();
    s.call("crm:read", json!({}), None).await.unwrap();
    drop(s);
    let events = Arc::try_unwrap(site_log)
        .unwrap()
        .into_inner()
        .unwrap()
        .finish();
    let statuses: Vec<(ToolStatus, bool)> = events
        .iter()
        .filter_map(|e| match e {
            Event::ToolReturned {
                status,
                duration_ms,
                ..
            } => Some((*status, duration_ms.is_some())),
            _ => None,
        })
        .collect();
    // Refused: no durationMs (never invoked). Performed: a duration.
    assert_eq!(
        statuses,
        vec![(ToolStatus::Forbidden, false), (ToolStatus::Ok, true)]
    );
    let called = events
        .iter()
        .filter(|e| matches!(e, Event::ToolCalled { .. }))
        .count();
    assert_eq!(called, 2);
}

#[tokio::test]
async fn a_session_without_egress_refuses_every_fetch() {
    let n = Arc::new(AtomicU64::new(0));
    let g = gate(&n);
    let mut s = session(&g, 1, &["crm:*"]);
    let e = s
        .fetch(wop_gate::fetch::FetchRequest {
            method: "GET".into(),
            url: "https://example.com/".into(),
            headers: Vec::new(),
            body: None,
            idempotency_key: None,
        })
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::EgressDenied);
    assert_eq!(s.usage().egress_bytes_out, 0);
}
