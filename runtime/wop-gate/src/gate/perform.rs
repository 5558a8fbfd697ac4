//! After authorization: rate limit, the run's budget, the effect claim,
//! perform, record. The one path every gate call takes once it is allowed.

use super::errors::{recorded_error, unknown_outcome};
use super::{CallReceipt, CallScope, CallSite, Gate, GateError, GateErrorKind, Returned};
use crate::tools::{RegisteredTool, ReplayPolicy, ToolCall, ToolFailure};
use serde_json::{Value, json};
use std::time::Instant;
use wop_core::breach::BreachKind;
use wop_core::error::ErrorCode;
use wop_core::events::ToolStatus;
use wop_effects::effects::{Begin, ClaimRequest, EffectRecord, Keying};

impl Gate {
    pub(super) async fn perform(
        &self,
        scope: &mut CallScope<'_>,
        tool: &RegisteredTool,
        arguments: Value,
        idempotency_key: Option<&str>,
        ret: &Returned,
        receipt: &mut CallReceipt,
    ) -> Result<Value, GateError> {
        let site = scope.site;
        let counters = &mut *scope.counters;
        let events = &mut *scope.events;
        let tool_id = tool.descriptor.tool_id.as_str();
        let returned = |status, duration, r: &Result<Value, GateError>, replayed, effect_id| {
            ret.event(status, duration, r, replayed, effect_id)
        };
        // 2. Rate limit per (principal, tool).
        if let Some(spec) = &tool.rate
            && let Err(retry) =
                self.limiter
                    .try_acquire(&site.principal.id, tool_id, spec, Instant::now())
        {
            let ms = u64::try_from(retry.as_millis()).unwrap_or(u64::MAX);
            let r = Err(GateError::new(
                GateErrorKind::RateLimited,
                ErrorCode::RateLimited,
                format!("tool `{tool_id}` is rate limited for this principal; retry in {ms} ms"),
                json!({"toolName": tool_id, "retryAfterMs": ms}),
            ));
            events.push(returned(ToolStatus::RateLimited, None, &r, false, None));
            return r;
        }

        // 2b. Credentials whose audience is this tool.
        let credentials = match self.credentials_for(site, tool, events) {
            Ok(c) => c,
            Err(e) => {
                let r = Err(e);
                events.push(returned(ToolStatus::Forbidden, None, &r, false, None));
                return r;
            }
        };
        let remaining = site.deadline.saturating_duration_since(Instant::now());
        let mut call = ToolCall {
            tool_id: tool_id.to_owned(),
            arguments: arguments.clone(),
            idempotency_key: None,
            principal: site.principal.clone(),
            context: site.context.clone(),
            timeout: tool.timeout.min(remaining),
            depth: site.depth,
            credentials,
            traceparent: ret.span.as_ref().map(crate::trace::Started::traceparent),
        };

        // 3. Reads and pure tools: perform directly.
        if !tool.descriptor.is_effect() {
            if let Err(e) = self.charge(site, tool_id, events).await {
                let r = Err(e);
                events.push(returned(ToolStatus::Error, None, &r, false, None));
                return r;
            }
            let started = Instant::now();
            receipt.performed = true;
            let r = self.bounded(call_provider(tool, call, &site.credentials).await);
            self.breach_if_too_large(site, &r, events);
            let status = if r.is_ok() {
                ToolStatus::Ok
            } else {
                ToolStatus::Error
            };
            events.push(returned(status, Some(started.elapsed()), &r, false, None));
            return r;
        }

        // 4. Effects: at most `max_records_per_invocation` per invocation
        // (claimed or replayed alike, so a retry stops where the first
        // run stopped), then identity, durable claim, perform, record.
        let most = self.cfg.max_records_per_invocation;
        if counters.records >= most {
            events.push(wop_core::events::Event::CapBreached {
                kind: BreachKind::EffectRecords,
                limit: u64::from(most),
                observed: u64::from(most) + 1,
                node_id: site.context.node_id.clone(),
            });
            let r = Err(GateError::new(
                GateErrorKind::Failed,
                ErrorCode::EffectRecordsExceeded,
                format!(
                    "this invocation already made {most} effectful calls, the most one invocation may \
                     (policy effects.maxRecordsPerInvocation); `{tool_id}` was not performed"
                ),
                json!({"limit": most, "toolName": tool_id}),
            ));
            events.push(returned(ToolStatus::Error, None, &r, false, None));
            return r;
        }
        // 4b. ... and at most `max_record_bytes_per_invocation` result bytes
        // in them together: refused before it is sent when one more result
        // of up to `max_result_bytes` could pass it.
        let budget = self.cfg.max_record_bytes_per_invocation;
        let used = counters.record_bytes;
        if used.saturating_add(self.cfg.max_result_bytes) > budget {
            events.push(wop_core::events::Event::CapBreached {
                kind: BreachKind::EffectRecordBytes,
                limit: budget,
                observed: used.saturating_add(self.cfg.max_result_bytes),
                node_id: site.context.node_id.clone(),
            });
            let r = Err(GateError::new(
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
            ));
            events.push(returned(ToolStatus::Error, None, &r, false, None));
            return r;
        }
        counters.records += 1;
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
        let idempotent = tool.descriptor.replay_policy == Some(ReplayPolicy::Idempotent);
        let req = ClaimRequest {
            effect_id: effect_id.clone(),
            keying,
            tenant_id: site.context.tenant_id.clone(),
            run_id: site.context.run_id.clone(),
            node_id: site.context.node_id.clone(),
            attempt: site.context.attempt,
            tool_id: tool_id.to_owned(),
            digest: wop_effects::effects::request_digest(tool_id, &arguments),
            idempotent,
        };
        let eid = Some(effect_id.clone());
        receipt.effect_id = eid.clone();
        let begin = match self
            .effects
            .begin(&req, self.cfg.timings, site.deadline)
            .await
        {
            Ok(b) => b,
            Err(e) => {
                // Fail closed: without a durable claim the effect never fires.
                let r = Err(GateError::new(
                    GateErrorKind::Failed,
                    ErrorCode::InternalError,
                    format!("the effect could not be claimed, so it was not performed: {e}"),
                    json!({"effectId": effect_id}),
                ));
                events.push(returned(ToolStatus::Error, None, &r, false, eid));
                return r;
            }
        };
        match begin {
            Begin::Perform { claimed, resend } => {
                if let Err(e) = self.charge(site, tool_id, events).await {
                    // Refused before anything was sent: give the claim back.
                    if let Err(se) = self.effects.release(&claimed).await {
                        tracing::warn!(effect = %effect_id, error = %se, "cannot release a refused claim");
                    }
                    let r = Err(e);
                    events.push(returned(ToolStatus::Error, None, &r, false, eid));
                    return r;
                }
                call.idempotency_key = Some(effect_id.clone());
                let started = Instant::now();
                receipt.performed = true;
                receipt.claimed = true;
                let outcome = call_provider(tool, call, &site.credentials).await;
                let duration = started.elapsed();
                let (r, stored) = self.record(&claimed, outcome, idempotent, resend).await;
                counters.record_bytes = counters.record_bytes.saturating_add(stored);
                self.breach_if_too_large(site, &r, events);
                let status = if r.is_ok() {
                    ToolStatus::Ok
                } else {
                    ToolStatus::Error
                };
                events.push(returned(status, Some(duration), &r, false, eid));
                r
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
                counters.record_bytes = counters.record_bytes.saturating_add(stored);
                let r = match (rec.result, rec.error) {
                    (Some(v), _) => Ok(v),
                    (None, Some(e)) => Err(recorded_error(&e, &effect_id)),
                    (None, None) => Ok(Value::Null),
                };
                let status = if r.is_ok() {
                    ToolStatus::Ok
                } else {
                    ToolStatus::Error
                };
                events.push(returned(status, None, &r, true, eid));
                r
            }
            Begin::Mismatch { .. } => {
                let r = Err(GateError::new(
                    GateErrorKind::Conflict,
                    ErrorCode::IdempotencyKeyMismatch,
                    "this effect was already claimed with different arguments; use a new idempotency key",
                    json!({"effectId": effect_id, "toolName": tool_id}),
                ));
                events.push(returned(ToolStatus::Error, None, &r, false, eid));
                r
            }
            Begin::InFlight {
                lease_expires_at_ms,
            } => {
                let retry = lease_expires_at_ms.saturating_sub(wop_effects::effects::now_ms());
                let r = Err(GateError::new(
                    GateErrorKind::Conflict,
                    ErrorCode::IdempotencyInFlight,
                    "another execution is performing this effect right now; retry later",
                    json!({"effectId": effect_id, "toolName": tool_id, "retryable": true, "retryAfterMs": retry}),
                ));
                events.push(returned(ToolStatus::Error, None, &r, false, eid));
                r
            }
            Begin::UnknownOutcome(rec) => {
                let r = Err(unknown_outcome(&rec));
                events.push(returned(ToolStatus::Error, None, &r, false, eid));
                r
            }
        }
    }

    /// Charges one call to the run's budget; `Err` (with the events
    /// already appended) when it would exceed a dimension.
    async fn charge(
        &self,
        site: &CallSite,
        tool_id: &str,
        events: &mut dyn crate::audit::Audit,
    ) -> Result<(), GateError> {
        let Some(m) = &site.meter else {
            return Ok(());
        };
        match m
            .meter
            .charge_tool_call(&m.tenant_id, &m.run_id, &m.node_id, tool_id)
            .await
        {
            Ok((ev, Ok(()))) => {
                events.extend(ev);
                Ok(())
            }
            Ok((ev, Err(x))) => {
                events.extend(ev);
                Err(GateError::new(
                    GateErrorKind::BudgetExhausted,
                    ErrorCode::BudgetExhausted,
                    format!(
                        "the run's {} budget would be exceeded by this call ({} > {}); it was not performed",
                        x.dimension.as_str(),
                        x.attempted,
                        x.limit
                    ),
                    json!({"dimension": x.dimension.as_str(), "limit": x.limit, "attempted": x.attempted, "toolName": tool_id}),
                ))
            }
            // Fail closed: without a charge the call does not run.
            Err(e) => Err(GateError::new(
                GateErrorKind::Failed,
                ErrorCode::InternalError,
                format!(
                    "the run's budget could not be checked, so the call was not performed: {e}"
                ),
                json!({"toolName": tool_id}),
            )),
        }
    }

    /// The `cap.breached` of a result over the size cap (the call failed
    /// with `tool_result_too_large`; an effect is recorded with that error,
    /// so a retry gets the same answer).
    fn breach_if_too_large(
        &self,
        site: &CallSite,
        r: &Result<Value, GateError>,
        events: &mut dyn crate::audit::Audit,
    ) {
        if let Err(e) = r
            && e.code == ErrorCode::ToolResultTooLarge
        {
            let observed = e
                .details
                .get("observed")
                .and_then(Value::as_u64)
                .unwrap_or(self.cfg.max_result_bytes.saturating_add(1));
            events.push(wop_core::events::Event::CapBreached {
                kind: BreachKind::ToolResultBytes,
                limit: self.cfg.max_result_bytes,
                observed,
                node_id: site.context.node_id.clone(),
            });
        }
    }

    /// The credentials to attach to a call of `tool`, with their
    /// `egress.decided` events; an expired one refuses the call.
    fn credentials_for(
        &self,
        site: &CallSite,
        tool: &RegisteredTool,
        events: &mut dyn crate::audit::Audit,
    ) -> Result<Vec<std::sync::Arc<wop_core::secrets::Credential>>, GateError> {
        if site.credentials.is_empty() {
            return Ok(Vec::new());
        }
        let tool_id = tool.descriptor.tool_id.as_str();
        let plan = wop_core::secrets::decide::for_tool(
            &site.credentials,
            tool_id,
            wop_core::time::now_ms(),
        );
        let destination = tool
            .provider
            .destination()
            .unwrap_or_else(|| tool_id.to_owned());
        for d in &plan.decisions {
            events.push(wop_core::egress::Decision::credential(destination.clone(), d).event());
        }
        let reason = plan.last_reason();
        match plan.refused {
            None => Ok(plan.attach),
            Some(message) => Err(GateError::new(
                GateErrorKind::Forbidden,
                ErrorCode::EgressDenied,
                format!("`{tool_id}` was not called: {message}"),
                json!({"reason": reason, "toolName": tool_id}),
            )),
        }
    }

    /// Applies the result-size cap.
    fn bounded(&self, r: Result<Value, ToolFailure>) -> Result<Value, GateError> {
        match r {
            Ok(v) => {
                let n = json_len(&v);
                if n > self.cfg.max_result_bytes {
                    return Err(GateError::new(
                        GateErrorKind::Failed,
                        ErrorCode::ToolResultTooLarge,
                        format!(
                            "the tool's result is {n} bytes; the cap is {} (policy effects.maxResultBytes)",
                            self.cfg.max_result_bytes
                        ),
                        json!({"limit": self.cfg.max_result_bytes, "observed": n}),
                    ));
                }
                Ok(v)
            }
            Err(f) => Err(GateError::reported(
                &f.code,
                f.message,
                f.details.unwrap_or(Value::Null),
            )),
        }
    }

    /// Records what happened to a performed effect and returns the call's
    /// result, with the bytes of the result or error recorded (0 when the
    /// claim was released or abandoned).
    async fn record(
        &self,
        claimed: &EffectRecord,
        outcome: Result<Value, ToolFailure>,
        idempotent: bool,
        _resend: bool,
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

/// The length of `v` as JSON, without building the text.
fn json_len(v: &Value) -> u64 {
    struct Count(u64);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 = self.0.saturating_add(buf.len() as u64);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut c = Count(0);
    // Writing a `Value` to a writer that never fails cannot fail.
    let _ = serde_json::to_writer(&mut c, v);
    c.0
}

/// Calls the provider and takes the invocation's credential values out of
/// what it returns, before anything records, emits or returns it.
async fn call_provider(
    tool: &RegisteredTool,
    call: ToolCall,
    credentials: &wop_core::secrets::Credentials,
) -> Result<Value, ToolFailure> {
    let mut r = tool.provider.call(call).await;
    if credentials.is_empty() {
        return r;
    }
    use wop_core::secrets::redact;
    match &mut r {
        Ok(v) => {
            redact::value(credentials, v);
        }
        Err(f) => {
            if let Some(m) = redact::string(credentials, &f.message) {
                f.message = m;
            }
            if let Some(d) = &mut f.details {
                redact::value(credentials, d);
            }
        }
    }
    r
}
