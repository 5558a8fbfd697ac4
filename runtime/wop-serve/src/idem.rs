//! Idempotent node invocations: an idempotency key (MCP `params._meta`
//! `dev.openwop/idempotencyKey`, or the invoke API's `Idempotency-Key`
//! header) claims the whole invocation as an effect in the runtime's
//! effect store, keyed by business identity (tenant, `node:<typeId>`, key).
//! The first caller runs the node and records its response; a retry with
//! the same request gets the recorded response; a different request under
//! the same key is `idempotency_key_mismatch`; a duplicate while the first
//! still runs is `409 idempotency_in_flight` with `Retry-After`.
//!
//! A node invocation is claimed as an *idempotent* effect: running it again
//! is safe, because every world-changing call it makes is itself claimed
//! through the gate under an identity that does not depend on the attempt
//! (a retry replays those calls instead of repeating them). So an
//! invocation whose executor died, or that a drain cut short (its claim is
//! then released at once, see `Shared::claims`), is run again by the next
//! request with its key — never left `500` or stuck as `escaped`.

use crate::state::AppState;
use serde_json::{Value, json};
use std::future::Future;
use std::time::{Duration, Instant};
use wop_runtime::effects::{
    Begin, ClaimRequest, EffectTimings, Keying, business_id, request_digest,
};
use wop_runtime::error::ErrorCode;

/// Why an idempotent invocation did not run or replay.
#[derive(Debug)]
pub(crate) enum IdemError {
    /// Same key, different request.
    Mismatch,
    /// Another caller holds the claim right now (or its outcome is unknown):
    /// details, and seconds until a retry may succeed.
    InFlight(Value, u64),
    /// The effect store failed.
    Store(String),
}

impl IdemError {
    /// `(code, message, details)`.
    pub(crate) fn parts(&self) -> (ErrorCode, String, Option<Value>) {
        match self {
            IdemError::Mismatch => (
                ErrorCode::IdempotencyKeyMismatch,
                "this idempotency key was used with a different request".into(),
                None,
            ),
            IdemError::InFlight(d, _) => (
                ErrorCode::IdempotencyInFlight,
                "an invocation with this idempotency key is still in flight; retry after the Retry-After delay".into(),
                Some(d.clone()),
            ),
            IdemError::Store(m) => (
                ErrorCode::InternalError,
                format!("effect store: {m}"),
                None,
            ),
        }
    }
}

/// The tool id under which a node type's invocations are claimed.
pub(crate) fn tool_id(type_id: &str) -> String {
    format!("node:{type_id}")
}

/// The effect id of `(tenant, typeId, key)`.
pub(crate) fn effect_id(tenant: &str, type_id: &str, key: &str) -> String {
    business_id(tenant, &tool_id(type_id), key)
}

/// Runs `perform` at most once for `(tenant, typeId, key)`. `perform`
/// returns the response to record and whether to record it (`false`
/// releases the claim so that a retry runs again). Returns the response and
/// whether it was replayed.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn once<F, Fut>(
    state: &AppState,
    tenant: &str,
    type_id: &str,
    key: &str,
    request: &Value,
    run_id: &str,
    node_id: &str,
    attempt: u32,
    perform: F,
) -> Result<(Value, bool), IdemError>
where
    F: FnOnce() -> Fut,
    Fut: Future<Output = (Value, bool)>,
{
    let effects = state.rt.gate().effects();
    let policy = state.rt.policy();
    let lease_ms = policy
        .effects
        .lease_ms
        .unwrap_or_else(|| policy.limits().wall_clock_ms.saturating_add(5_000));
    let timings = EffectTimings {
        lease: Duration::from_millis(lease_ms),
        in_flight_wait: Duration::from_millis(policy.effects.in_flight_wait_ms.unwrap_or(2_000)),
        poll: Duration::from_millis(25),
    };
    let tool = tool_id(type_id);
    let claim = ClaimRequest {
        effect_id: effect_id(tenant, type_id, key),
        keying: Keying::BusinessIdentity,
        tenant_id: tenant.to_owned(),
        run_id: run_id.to_owned(),
        node_id: node_id.to_owned(),
        attempt,
        tool_id: tool.clone(),
        digest: request_digest(&tool, request),
        // Re-running a node is safe (module docs): an abandoned claim is
        // taken over, not reported as an unknown outcome.
        idempotent: true,
    };
    let deadline = Instant::now() + timings.in_flight_wait;
    let begin = effects
        .begin(&claim, timings, deadline)
        .await
        .map_err(|e| IdemError::Store(e.to_string()))?;
    match begin {
        Begin::Perform { claimed, .. } => {
            let held = state.hold_claim(&claimed);
            let (response, record) = perform().await;
            drop(held);
            let stored = if record {
                effects.complete(&claimed, Ok(response.clone())).await
            } else {
                effects.release(&claimed).await
            };
            if let Err(e) = stored {
                tracing::error!(effect = %claimed.effect_id, error = %e, "cannot record the invocation's outcome");
            }
            Ok((response, false))
        }
        Begin::Replay(rec) => match rec.result {
            Some(v) => Ok((v, true)),
            None => Err(IdemError::Store(
                "a completed record holds no response".into(),
            )),
        },
        Begin::Mismatch { .. } => Err(IdemError::Mismatch),
        Begin::InFlight {
            lease_expires_at_ms,
        } => {
            let wait_ms = lease_expires_at_ms.saturating_sub(wop_runtime::effects::now_ms());
            // At most the lease: by then the holder finished or is taken over.
            let retry_after = wait_ms.div_ceil(1000).max(1);
            Err(IdemError::InFlight(
                json!({"state": "claimed", "leaseExpiresAtMs": lease_expires_at_ms,
                       "retryAfterMs": wait_ms}),
                retry_after,
            ))
        }
        // Only a record written before node invocations were claimed as
        // idempotent (or resolved by hand) can be here.
        Begin::UnknownOutcome(r) => Err(IdemError::InFlight(
            json!({"state": "escaped", "effectId": r.effect_id,
                   "resolve": format!("wop effects resolve {} --as released", r.effect_id)}),
            1,
        )),
    }
}
