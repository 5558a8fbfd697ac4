//! The effect steps of a gate call: room for one more effect record, the
//! effect's identity and durable claim (fail closed: without a claim the
//! effect never fires), then what the claim says — perform and record,
//! answer from the record, or refuse.

use super::errors::{recorded_error, unknown_outcome};
use super::perform::{Ended, call_provider, json_len};
use super::{CallReceipt, CallScope, CallSite, Gate, GateError, GateErrorKind};
use crate::tools::{RegisteredTool, ReplayPolicy, ToolCall, ToolFailure};
use serde_json::{Value, json};
use std::time::Instant;
use wop_core::breach::BreachKind;
use wop_core::error::ErrorCode;
use wop_core::events::{Event, ToolStatus};
use wop_effects::effects::{Begin, ClaimRequest, EffectRecord, Keying};

impl Gate {
    /// Reserves one of the invocation's effect records, or refuses the
    /// call with its `cap.breached`: at most `max_records_per_invocation`
    /// records (claimed or replayed alike, so a retry stops where the
    /// first run stopped), and at most `max_record_bytes_per_invocation`
    /// result bytes in them together — refused before it is sent when one
    /// more result of up to `max_result_bytes` could pass it.
    pub(super) fn reserve_record(
        &self,
        scope: &mut CallScope<'_>,
        tool: &RegisteredTool,
    ) -> Result<(), Ended> {
        let tool_id = tool.descriptor.tool_id.as_str();
        let node_id = &scope.site.context.node_id;
        let counters = &mut *scope.counters;
        let most = self.cfg.max_records_per_invocation;
        if counters.records >= most {
            scope.events.push(Event::CapBreached {
                kind: BreachKind::EffectRecords,
                limit: u64::from(most),
                observed: u64::from(most) + 1,
                node_id: node_id.clone(),
            });
            let e = GateError::new(
                GateErrorKind::Failed,
                ErrorCode::EffectRecordsExceeded,
                format!(
                    "this invocation already made {most} effectful calls, the most one invocation may \
                     (policy effects.maxRecordsPerInvocation); `{tool_id}` was not performed"
                ),
                json!({"limit": most, "toolName": tool_id}),
            );
            return Err(Ended::refused(ToolStatus::Error, e, None));
        }
        let budget = self.cfg.max_record_bytes_per_invocation;
        let used = counters.record_bytes;
        if used.saturating_add(self.cfg.max_result_bytes) > budget {
            scope.events.push(Event::CapBreached {
                kind: BreachKind::EffectRecordBytes,
                limit: budget,
                observed: used.saturating_add(self.cfg.max_result_bytes),
                node_id: node_id.clone(),
            });
            let e = GateError::new(
                GateErrorKind::Failed,
                ErrorCode::EffectRecordBytesExceeded,
                format!(
                    "this invocation's effect records already hold {used} bytes of results; one more \
                     of up to {} bytes (effects.maxResultBytes) could pass the {budget} bytes one \
                     invocation may record (policy effects.maxRecordBytesPerInvocation); `{tool_id}` \
                     was not performed",
                    self.cfg.max_result_bytes
                ),
                json!({"limit": budget, "used": used, "maxResultBytes": self.cfg.max_result_bytes, "toolName": tool_id}),
            );
            return Err(Ended::refused(ToolStatus::Error, e, None));
        }
        counters.records += 1;
        Ok(())
    }

    /// The effect's identity — the business key when the caller gave one,
    /// else the activity recipe (the invocation's next effect ordinal) —
    /// and the claim request for it.
    pub(super) fn effect_claim(
        &self,
        scope: &mut CallScope<'_>,
        tool: &RegisteredTool,
        arguments: &Value,
        idempotency_key: Option<&str>,
    ) -> ClaimRequest {
        let (site, counters) = (scope.site, &mut *scope.counters);
        let tool_id = tool.descriptor.tool_id.as_str();
        let (effect_id, keying) = match idempotency_key {
            Some(k) => (
                wop_effects::effects::business_id(&site.context.tenant_id, tool_id, k),
                Keying::BusinessIdentity,
            ),
            None => {
                counters.effects += 1;
                (
                    wop_effects::effects::activity_id(
                        &site.context.tenant_id,
                        &site.context.run_id,
                        &site.context.node_id,
                        counters.effects,
                        tool_id,
                    ),
                    Keying::ActivityRecipe,
                )
            }
        };
        ClaimRequest {
            effect_id,
            keying,
            tenant_id: site.context.tenant_id.clone(),
            run_id: site.context.run_id.clone(),
            node_id: site.context.node_id.clone(),
            attempt: site.context.attempt,
            tool_id: tool_id.to_owned(),
            digest: wop_effects::effects::request_digest(tool_id, arguments),
            idempotent: tool.descriptor.replay_policy == Some(ReplayPolicy::Idempotent),
        }
    }

    /// The durable claim. Fail closed: without it the effect never fires.
    pub(super) async fn claim(&self, req: &ClaimRequest, site: &CallSite) -> Result<Begin, Ended> {
        self.effects
            .begin(req, self.cfg.timings, site.deadline)
            .await
            .map_err(|e| {
                let code = match e.is_store_full() {
                    true => ErrorCode::EffectStoreFull,
                    false => ErrorCode::InternalError,
                };
                // Past the tenant's share: its figures too, as `wop
                // serve`'s own refusals carry them.
                let mut details = e.share_refusal().map(|r| r.details()).unwrap_or_default();
                details.insert("effectId".into(), req.effect_id.clone().into());
                let e = GateError::new(
                    GateErrorKind::Failed,
                    code,
                    format!("the effect could not be claimed, so it was not performed: {e}"),
                    serde_json::Value::Object(details),
                );
                Ended::refused(ToolStatus::Error, e, Some(req.effect_id.clone()))
            })
    }

    /// What the claim said: perform it (this call won the claim), answer
    /// from the record of an earlier execution, or refuse (other
    /// arguments, in flight elsewhere, outcome unknown).
    pub(super) async fn settle(
        &self,
        scope: &mut CallScope<'_>,
        tool: &RegisteredTool,
        call: ToolCall,
        req: &ClaimRequest,
        begin: Begin,
        receipt: &mut CallReceipt,
    ) -> Result<Ended, Ended> {
        let (effect_id, tool_id) = (&req.effect_id, req.tool_id.as_str());
        let eid = Some(effect_id.clone());
        let refused = |e| Err(Ended::refused(ToolStatus::Error, e, eid.clone()));
        match begin {
            Begin::Perform { claimed, .. } => {
                self.perform_claimed(scope, tool, call, req, &claimed, receipt)
                    .await
            }
            Begin::Replay(rec) => {
                receipt.replayed = true;
                // Counted as when it was recorded, so a retry stops where
                // the first run stopped.
                let stored = rec
                    .result
                    .as_ref()
                    .or(rec.error.as_ref())
                    .map_or(0, json_len);
                scope.counters.record_bytes = scope.counters.record_bytes.saturating_add(stored);
                let r = match (rec.result, rec.error) {
                    (Some(v), _) => Ok(v),
                    (None, Some(e)) => Err(recorded_error(&e, effect_id)),
                    (None, None) => Ok(Value::Null),
                };
                Ok(Ended::ran(r, None, true, eid))
            }
            Begin::Mismatch { .. } => refused(GateError::new(
                GateErrorKind::Conflict,
                ErrorCode::IdempotencyKeyMismatch,
                "this effect was already claimed with different arguments; use a new idempotency key",
                json!({"effectId": effect_id, "toolName": tool_id}),
            )),
            Begin::InFlight {
                lease_expires_at_ms,
            } => {
                let retry = lease_expires_at_ms.saturating_sub(wop_effects::effects::now_ms());
                refused(GateError::new(
                    GateErrorKind::Conflict,
                    ErrorCode::IdempotencyInFlight,
                    "another execution is performing this effect right now; retry later",
                    json!({"effectId": effect_id, "toolName": tool_id, "retryable": true, "retryAfterMs": retry}),
                ))
            }
            Begin::UnknownOutcome(rec) => refused(unknown_outcome(&rec)),
        }
    }

    /// Performs a claimed effect: charged first (a refusal gives the claim
    /// back, nothing was sent), sent with the effect id as its idempotency
    /// key, then recorded.
    async fn perform_claimed(
        &self,
        scope: &mut CallScope<'_>,
        tool: &RegisteredTool,
        mut call: ToolCall,
        req: &ClaimRequest,
        claimed: &EffectRecord,
        receipt: &mut CallReceipt,
    ) -> Result<Ended, Ended> {
        let site = scope.site;
        let effect_id = &req.effect_id;
        if let Err(e) = self.charge(site, &req.tool_id, scope.events).await {
            // Refused before anything was sent: give the claim back.
            if let Err(se) = self.effects.release(claimed).await {
                tracing::warn!(effect = %effect_id, error = %se, "cannot release a refused claim");
            }
            return Err(Ended::refused(
                ToolStatus::Error,
                e,
                Some(effect_id.clone()),
            ));
        }
        call.idempotency_key = Some(effect_id.clone());
        let started = Instant::now();
        receipt.performed = true;
        receipt.claimed = true;
        let outcome = call_provider(tool, call, &site.credentials).await;
        let duration = started.elapsed();
        let (r, stored) = self.record(claimed, outcome, req.idempotent).await;
        scope.counters.record_bytes = scope.counters.record_bytes.saturating_add(stored);
        self.breach_if_too_large(site, &r, scope.events);
        Ok(Ended::ran(
            r,
            Some(duration),
            false,
            Some(effect_id.clone()),
        ))
    }

    /// Records what happened to a performed effect and returns the call's
    /// result, with the bytes of the result or error recorded (0 when the
    /// claim was released or abandoned).
    async fn record(
        &self,
        claimed: &EffectRecord,
        outcome: Result<Value, ToolFailure>,
        idempotent: bool,
    ) -> (Result<Value, GateError>, u64) {
        let id = &claimed.effect_id;
        let mut bytes = 0;
        let stored = match &outcome {
            Ok(_) => match self.bounded(outcome.clone()) {
                Ok(v) => {
                    bytes = json_len(&v);
                    self.effects.complete(claimed, Ok(v)).await.map(|_| ())
                }
                Err(e) => {
                    let e = e.as_json();
                    bytes = json_len(&e);
                    self.effects.complete(claimed, Err(e)).await.map(|_| ())
                }
            },
            Err(f) if !f.sent => self.effects.release(claimed).await.map(|_| ()),
            Err(f) if f.definite => {
                let e = json!({"code": f.code, "message": f.message, "details": f.details});
                bytes = json_len(&e);
                self.effects.complete(claimed, Err(e)).await.map(|_| ())
            }
            Err(f) if idempotent => {
                // Unknown outcome, but the provider dedupes by key: leave the
                // claim with an expired lease so the next attempt re-sends.
                self.effects.abandon(claimed).await.map(|_| ()).map_err(|e| {
                    tracing::warn!(effect = %id, error = %e, reason = %f.message, "cannot abandon claim");
                    e
                })
            }
            Err(f) => {
                let e = json!({"reason": "no-answer", "code": f.code, "message": f.message});
                bytes = json_len(&e);
                self.effects.escape(claimed, e).await.map(|_| ())
            }
        };
        if let Err(e) = stored {
            tracing::error!(effect = %id, error = %e, "cannot record an effect outcome");
        }
        let r = match outcome {
            Err(f) if f.sent && !f.definite && !idempotent => {
                let mut rec = claimed.clone();
                rec.error = Some(json!({"code": f.code, "message": f.message}));
                Err(unknown_outcome(&rec))
            }
            other => self.bounded(other).map_err(|mut e| {
                if let Value::Object(m) = &mut e.details {
                    m.insert("effectId".to_owned(), json!(id));
                } else {
                    e.details = json!({"effectId": id, "cause": e.details});
                }
                e
            }),
        };
        (r, bytes)
    }
}
