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
//!
//! The invocation path takes three steps here: [`claim_request`] (what is
//! claimed), [`claim`] (perform, or the recorded response), and
//! [`Held::settle`] (record the response, or release the claim).

use crate::state::Shared;
use serde_json::{Value, json};
use std::time::{Duration, Instant};
use wop_runtime::RunContext;
use wop_runtime::effects::{
    Begin, ClaimRequest, EffectRecord, EffectTimings, Keying, business_id, request_digest,
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
    /// The effect store is full (a bounded in-memory store, the disk's
    /// reserve, the tenant's share): nothing ran. With a share, the
    /// tenant's figures as details.
    Full(String, Option<Value>),
    /// The tenant holds its share of the store (decision 0055): an
    /// invocation that claims nothing did not start. Details.
    OverShare(String, Value),
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
            IdemError::Full(m, d) => (
                ErrorCode::EffectStoreFull,
                format!("the invocation was not claimed, so it did not run: {m}"),
                d.clone(),
            ),
            IdemError::OverShare(m, d) => (
                ErrorCode::EffectStoreFull,
                format!("the invocation did not run: {m}"),
                Some(d.clone()),
            ),
        }
    }
}

/// Whether `tenant` may start an invocation that claims nothing (it
/// still records its usage): not once it holds its share of the store.
pub(crate) fn within_share(state: &Shared, tenant: &str) -> Result<(), IdemError> {
    let Some(share) = &state.share else {
        return Ok(());
    };
    share.admits(tenant).map_err(|e| {
        let details = e
            .share_refusal()
            .map_or(Value::Null, |r| r.details().into());
        IdemError::OverShare(e.to_string(), details)
    })
}

/// The tool id under which a node type's invocations are claimed.
fn tool_id(type_id: &str) -> String {
    format!("node:{type_id}")
}

/// The effect id of `(tenant, typeId, key)`.
pub(crate) fn effect_id(tenant: &str, type_id: &str, key: &str) -> String {
    business_id(tenant, &tool_id(type_id), key)
}

/// The claim of one invocation of `type_id` under the effect id
/// [`effect_id`] made of its key, at the place in its run `at` names;
/// `request` is what the digest covers (same key, other request:
/// [`IdemError::Mismatch`]).
pub(crate) fn claim_request(
    effect_id: String,
    at: &RunContext,
    type_id: &str,
    request: &Value,
) -> ClaimRequest {
    let tool = tool_id(type_id);
    ClaimRequest {
        effect_id,
        keying: Keying::BusinessIdentity,
        tenant_id: at.tenant_id.clone(),
        run_id: at.run_id.clone(),
        node_id: at.node_id.clone(),
        attempt: at.attempt,
        digest: request_digest(&tool, request),
        tool_id: tool,
        // Re-running a node is safe (module docs): an abandoned claim is
        // taken over, not reported as an unknown outcome.
        idempotent: true,
    }
}

/// What [`claim`] found.
pub(crate) enum Claimed<'a> {
    /// This caller runs the invocation.
    Held(Held<'a>),
    /// The invocation ran before: its recorded response.
    Replay(Value),
}

/// Claims `request` in the effect store: the invocation is this caller's
/// to run ([`Claimed::Held`]), or already ran ([`Claimed::Replay`]), or
/// cannot run now ([`IdemError`]).
pub(crate) async fn claim<'a>(
    shared: &'a Shared,
    request: &ClaimRequest,
) -> Result<Claimed<'a>, IdemError> {
    let policy = shared.rt.policy();
    let lease_ms = policy
        .effects
        .lease_ms
        .unwrap_or_else(|| policy.limits().wall_clock_ms.saturating_add(5_000));
    let timings = EffectTimings {
        lease: Duration::from_millis(lease_ms),
        in_flight_wait: Duration::from_millis(policy.effects.in_flight_wait_ms.unwrap_or(2_000)),
        poll: Duration::from_millis(25),
    };
    let deadline = Instant::now() + timings.in_flight_wait;
    let begin = shared
        .rt
        .gate()
        .effects()
        .begin(request, timings, deadline)
        .await
        .map_err(|e| match e.is_store_full() {
            // A refusal for the tenant's share carries its figures, taken
            // when it refused (`neededBytes` included); a full disk none.
            true => IdemError::Full(e.to_string(), e.share_refusal().map(|r| r.details().into())),
            false => IdemError::Store(e.to_string()),
        })?;
    match begin {
        Begin::Perform { claimed, .. } => Ok(Claimed::Held(Held::list(shared, claimed))),
        Begin::Replay(rec) => match rec.result {
            Some(v) => Ok(Claimed::Replay(v)),
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

/// A claim this process holds while it runs the invocation: listed in
/// [`Shared::claims`] until it is settled (or dropped), so that a drain
/// that cuts the invocation releases it ([`release_cut`]).
pub(crate) struct Held<'a> {
    claimed: Box<EffectRecord>,
    listed: Listed<'a>,
}

/// Removes its claim from [`Shared::claims`] when dropped.
struct Listed<'a> {
    shared: &'a Shared,
    effect_id: String,
}

impl Drop for Listed<'_> {
    fn drop(&mut self) {
        if let Ok(mut c) = self.shared.claims.lock() {
            c.remove(&self.effect_id);
        }
    }
}

impl<'a> Held<'a> {
    /// Lists `claimed` as running here.
    fn list(shared: &'a Shared, claimed: Box<EffectRecord>) -> Self {
        if let Ok(mut c) = shared.claims.lock() {
            c.insert(claimed.effect_id.clone(), (*claimed).clone());
        }
        let effect_id = claimed.effect_id.clone();
        Held {
            claimed,
            listed: Listed { shared, effect_id },
        }
    }

    /// The invocation ended: records `response` as the key's answer, or,
    /// without `record`, releases the claim so that a retry runs again.
    /// A store failure is logged: the caller still gets its response.
    pub(crate) async fn settle(self, response: &Value, record: bool) {
        let Held { claimed, listed } = self;
        let shared = listed.shared;
        drop(listed);
        let effects = shared.rt.gate().effects();
        let stored = if record {
            effects.complete(&claimed, Ok(response.clone())).await
        } else {
            effects.release(&claimed).await
        };
        match stored {
            Ok(_) => {}
            // No room for the response: give the claim back, so a retry
            // runs the invocation again at once (its effects replay from
            // their own claims) instead of waiting out the lease.
            Err(e) if record && e.is_store_full() => {
                tracing::error!(effect = %claimed.effect_id, error = %e, "no room to record the invocation's response; its claim is released");
                if let Err(e) = effects.release(&claimed).await {
                    tracing::error!(effect = %claimed.effect_id, error = %e, "cannot release the invocation's claim");
                }
            }
            Err(e) => {
                tracing::error!(effect = %claimed.effect_id, error = %e, "cannot record the invocation's outcome");
            }
        }
    }
}

/// Releases the claims of node invocations still running here (a drain
/// ran out): their outcome will not be recorded by this process, so a
/// retry with their key runs them again at once instead of waiting for
/// the lease.
pub(crate) async fn release_cut(shared: &Shared) {
    let cut: Vec<EffectRecord> = match shared.claims.lock() {
        Ok(mut c) => c.drain().map(|(_, r)| r).collect(),
        Err(_) => return,
    };
    for r in cut {
        match shared.rt.gate().effects().release(&r).await {
            Ok(true) => {
                tracing::warn!(effect = %r.effect_id, "released the claim of an invocation the drain cut; a retry with its key runs it again")
            }
            Ok(false) => {}
            Err(e) => {
                tracing::error!(effect = %r.effect_id, error = %e, "cannot release a cut invocation's claim")
            }
        }
    }
}
