//! After authorization, the one path every gate call takes, as named
//! steps: rate limit, credentials, then a read performed directly or an
//! effect (its record reserved, claimed, performed or answered from the
//! record: `effect.rs`), and **one** exit that emits
//! `agent.tool-returned`.

use super::{CallReceipt, CallScope, CallSite, Gate, GateError, GateErrorKind, Returned};
use crate::tools::{RegisteredTool, ToolCall, ToolFailure};
use serde_json::{Value, json};
use std::time::{Duration, Instant};
use wop_core::breach::BreachKind;
use wop_core::error::ErrorCode;
use wop_core::events::ToolStatus;

/// How a call ended: its result and what its `agent.tool-returned` says.
pub(super) struct Ended {
    status: ToolStatus,
    duration: Option<Duration>,
    result: Result<Value, GateError>,
    replayed: bool,
    effect_id: Option<String>,
}

impl Ended {
    /// Refused with `error` before the provider was called.
    pub(super) fn refused(
        status: ToolStatus,
        error: GateError,
        effect_id: Option<String>,
    ) -> Ended {
        Ended {
            status,
            duration: None,
            result: Err(error),
            replayed: false,
            effect_id,
        }
    }

    /// Performed (in `duration`) or replayed: `ok` or `error` by `result`.
    pub(super) fn ran(
        result: Result<Value, GateError>,
        duration: Option<Duration>,
        replayed: bool,
        effect_id: Option<String>,
    ) -> Ended {
        let status = if result.is_ok() {
            ToolStatus::Ok
        } else {
            ToolStatus::Error
        };
        Ended {
            status,
            duration,
            result,
            replayed,
            effect_id,
        }
    }
}

impl Gate {
    /// Runs an authorized call: its steps, then the one exit every
    /// call takes, whether it ran or was refused on the way.
    pub(super) async fn perform(
        &self,
        scope: &mut CallScope<'_>,
        tool: &RegisteredTool,
        arguments: Value,
        idempotency_key: Option<&str>,
        ret: &Returned,
        receipt: &mut CallReceipt,
    ) -> Result<Value, GateError> {
        let steps = self.steps(scope, tool, arguments, idempotency_key, ret, receipt);
        let (Ok(ended) | Err(ended)) = steps.await;
        let Ended {
            status,
            duration,
            result,
            replayed,
            effect_id,
        } = ended;
        scope
            .events
            .push(ret.event(status, duration, &result, replayed, effect_id));
        result
    }

    /// The steps after authorization, in order. `Err` is a step refusing
    /// the call (nothing after it runs); events a step raises are already
    /// appended, before the call's `agent.tool-returned`.
    async fn steps(
        &self,
        scope: &mut CallScope<'_>,
        tool: &RegisteredTool,
        arguments: Value,
        idempotency_key: Option<&str>,
        ret: &Returned,
        receipt: &mut CallReceipt,
    ) -> Result<Ended, Ended> {
        let site = scope.site;
        self.rate_limit(site, tool)?;
        let credentials = self
            .credentials_for(site, tool, scope.events)
            .map_err(|e| Ended::refused(ToolStatus::Forbidden, e, None))?;
        let call = tool_call(site, tool, arguments.clone(), credentials, ret);
        if !tool.descriptor.is_effect() {
            return self.read(site, tool, call, scope.events, receipt).await;
        }
        self.reserve_record(scope, tool)?;
        let claim = self.effect_claim(scope, tool, &arguments, idempotency_key);
        receipt.effect_id = Some(claim.effect_id.clone());
        let begin = self.claim(&claim, site).await?;
        self.settle(scope, tool, call, &claim, begin, receipt).await
    }

    /// Rate limit: at most the tool's rate per (principal, tool).
    fn rate_limit(&self, site: &CallSite, tool: &RegisteredTool) -> Result<(), Ended> {
        let tool_id = tool.descriptor.tool_id.as_str();
        let Some(spec) = &tool.rate else {
            return Ok(());
        };
        let Err(retry) =
            self.limiter
                .try_acquire(&site.principal.id, tool_id, spec, Instant::now())
        else {
            return Ok(());
        };
        let ms = u64::try_from(retry.as_millis()).unwrap_or(u64::MAX);
        let e = GateError::new(
            GateErrorKind::RateLimited,
            ErrorCode::RateLimited,
            format!("tool `{tool_id}` is rate limited for this principal; retry in {ms} ms"),
            json!({"toolName": tool_id, "retryAfterMs": ms}),
        );
        Err(Ended::refused(ToolStatus::RateLimited, e, None))
    }

    /// Reads and pure tools: charged to the run's budget, then
    /// performed directly (no claim, no record).
    async fn read(
        &self,
        site: &CallSite,
        tool: &RegisteredTool,
        call: ToolCall,
        events: &mut dyn crate::audit::Audit,
        receipt: &mut CallReceipt,
    ) -> Result<Ended, Ended> {
        let tool_id = tool.descriptor.tool_id.as_str();
        self.charge(site, tool_id, events)
            .await
            .map_err(|e| Ended::refused(ToolStatus::Error, e, None))?;
        let started = Instant::now();
        receipt.performed = true;
        let r = self.bounded(call_provider(tool, call, &site.credentials).await);
        self.breach_if_too_large(site, &r, events);
        Ok(Ended::ran(r, Some(started.elapsed()), false, None))
    }

    /// Charges one call to the run's budget; `Err` (with the events
    /// already appended) when it would exceed a dimension.
    pub(super) async fn charge(
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
    pub(super) fn breach_if_too_large(
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
    pub(super) fn bounded(&self, r: Result<Value, ToolFailure>) -> Result<Value, GateError> {
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
}

/// The call handed to the provider: the arguments, who calls, the
/// attached credentials, the time left (the tool's timeout at most) and
/// the span's `traceparent`. An effect adds its idempotency key later.
fn tool_call(
    site: &CallSite,
    tool: &RegisteredTool,
    arguments: Value,
    credentials: Vec<std::sync::Arc<wop_core::secrets::Credential>>,
    ret: &Returned,
) -> ToolCall {
    let remaining = site.deadline.saturating_duration_since(Instant::now());
    ToolCall {
        tool_id: tool.descriptor.tool_id.clone(),
        arguments,
        idempotency_key: None,
        principal: site.principal.clone(),
        context: site.context.clone(),
        timeout: tool.timeout.min(remaining),
        depth: site.depth,
        credentials,
        traceparent: ret
            .span
            .as_ref()
            .map(crate::telemetry::Started::traceparent),
    }
}

/// The length of `v` as JSON, without building the text.
pub(super) fn json_len(v: &Value) -> u64 {
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
pub(super) async fn call_provider(
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
