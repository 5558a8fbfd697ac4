//! The gate: the one code path every side-effecting host call goes through.
//!
//! For each call: `agent.tool-called` → authorization (pack, then tool
//! visibility, then principal scopes; fail closed) → rate limit → effect
//! claim for world-changing tools (durable before the call fires) →
//! perform → record → `agent.tool-returned`. A denied call is never
//! performed. `tools.call` uses it now; safe-fetch and the MCP client must
//! use it too rather than growing their own copy.

use crate::tools::{
    Catalogued, RegisteredTool, ReplayPolicy, ToolCall, ToolDescriptor, ToolFailure, ToolRegistry,
};
use serde_json::{Value, json};
use std::time::{Duration, Instant};
use wop_core::authz::{self, Denial};
use wop_core::error::ErrorCode;
use wop_core::events::{Event, ToolStatus, Transport};
use wop_core::model::{Principal, RunContext};
use wop_core::ratelimit::RateLimiter;
use wop_effects::effects::{Begin, ClaimRequest, EffectRecord, EffectTimings, Effects, Keying};

/// Why the gate did not return a result; maps onto the WIT `tool-error`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GateErrorKind {
    /// `forbidden`.
    Forbidden,
    /// `not_found`.
    NotFound,
    /// `rate_limited`.
    RateLimited,
    /// `budget_exhausted`.
    BudgetExhausted,
    /// `idempotency_in_flight` / `idempotency_key_mismatch`.
    Conflict,
    /// Anything else (the tool failed, the outcome is unknown, ...).
    Failed,
}

/// A gate error: its class plus the protocol error.
#[derive(Debug, Clone, PartialEq)]
pub struct GateError {
    /// Class.
    pub kind: GateErrorKind,
    /// Protocol code.
    pub code: String,
    /// For people.
    pub message: String,
    /// Machine-readable details (a JSON object).
    pub details: Value,
}

impl GateError {
    fn new(kind: GateErrorKind, code: &str, message: impl Into<String>, details: Value) -> Self {
        Self {
            kind,
            code: code.to_owned(),
            message: message.into(),
            details,
        }
    }

    fn as_json(&self) -> Value {
        json!({"code": self.code, "message": self.message, "details": self.details})
    }
}

/// Who is calling, from where.
#[derive(Debug, Clone)]
pub struct CallSite {
    /// On whose behalf.
    pub principal: Principal,
    /// Run, node, tenant, attempt of the calling node.
    pub context: RunContext,
    /// The calling pack's name.
    pub pack: String,
    /// Tools the pack's manifest declares.
    pub declared: Vec<String>,
    /// Tool grant patterns the operator gave the pack.
    pub granted: Vec<String>,
    /// When the calling invocation's wall clock runs out.
    pub deadline: Instant,
    /// Nesting depth (0 for a top-level node).
    pub depth: u32,
    /// How the call arrived.
    pub transport: Transport,
    /// The run's budget meter; tool calls are charged before they run.
    pub meter: Option<MeterSite>,
}

/// The run whose budget pays for calls at a call site.
#[derive(Clone)]
pub struct MeterSite {
    /// The meter.
    pub meter: wop_effects::Meter,
    /// The run.
    pub run_id: String,
    /// The node (for `cap.breached`).
    pub node_id: String,
}

impl std::fmt::Debug for MeterSite {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MeterSite")
            .field("run_id", &self.run_id)
            .finish()
    }
}

/// Per-invocation counters the gate advances.
#[derive(Debug, Default, Clone, Copy)]
pub struct CallCounters {
    /// Calls made so far (for call ids).
    pub calls: u32,
    /// Effectful calls so far (the activity recipe's ordinal).
    pub effects: u32,
}

/// What the gate did with one call. Usage is counted from receipts, never
/// by re-reading the audit events.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CallReceipt {
    /// The provider was called (the call may still have failed).
    pub performed: bool,
    /// The call was performed under an effect claim this call won.
    pub claimed: bool,
    /// The recorded outcome of an earlier execution was returned instead.
    pub replayed: bool,
    /// The effect identity, for effectful calls.
    pub effect_id: Option<String>,
}

/// The per-invocation state a call runs in: who calls, the counters, and
/// where the call's audit events go. Owned by a `GateSession`.
#[derive(Debug)]
pub struct CallScope<'a> {
    /// Who is calling, from where.
    pub site: &'a CallSite,
    /// Call ids and effect ordinals so far.
    pub counters: &'a mut CallCounters,
    /// The call's audit events are appended here.
    pub events: &'a mut Vec<Event>,
}

/// Gate settings.
#[derive(Debug, Clone, Copy)]
pub struct GateConfig {
    /// Claim timings.
    pub timings: EffectTimings,
    /// Largest tool result accepted and recorded, in bytes.
    pub max_result_bytes: u64,
}

/// The gate.
pub struct Gate {
    registry: ToolRegistry,
    effects: Effects,
    limiter: RateLimiter,
    cfg: GateConfig,
}

const EVENT_OUTCOME_PREVIEW: usize = 4096;

fn call_id(ctx: &RunContext, seq: u32) -> String {
    use sha2::Digest;
    let mut h = sha2::Sha256::new();
    h.update(format!(
        "{}\0{}\0{}\0{}\0{}",
        ctx.tenant_id, ctx.run_id, ctx.node_id, ctx.attempt, seq
    ));
    format!("call_{}", hex::encode(&h.finalize()[..12]))
}

fn preview(v: &Value) -> Value {
    let s = v.to_string();
    if s.len() <= EVENT_OUTCOME_PREVIEW {
        v.clone()
    } else {
        json!({"truncated": true, "bytes": s.len()})
    }
}

impl Gate {
    /// A gate over `registry`, claiming effects in `effects`.
    pub fn new(registry: ToolRegistry, effects: Effects, cfg: GateConfig) -> Self {
        Self {
            registry,
            effects,
            limiter: RateLimiter::new(),
            cfg,
        }
    }

    /// The effect store.
    pub fn effects(&self) -> &Effects {
        &self.effects
    }

    /// The registry (unfiltered; for operators).
    pub fn registry(&self) -> &ToolRegistry {
        &self.registry
    }

    /// The catalog a principal may see in a tenant, sorted by `toolId`.
    pub fn catalog(&self, principal: &Principal, tenant: &str) -> Vec<ToolDescriptor> {
        self.registry
            .all()
            .filter(|t| {
                t.visible_to(tenant) && authz::principal_allows(*t, &principal.scopes).is_ok()
            })
            .map(|t| t.descriptor.clone())
            .collect()
    }

    /// One catalog entry. An unknown tool and one the principal may not use
    /// give the same `not_found`.
    pub fn describe(
        &self,
        principal: &Principal,
        tenant: &str,
        tool_id: &str,
    ) -> Result<ToolDescriptor, GateError> {
        match self.registry.get(tool_id) {
            Some(t)
                if t.visible_to(tenant)
                    && authz::principal_allows(t, &principal.scopes).is_ok() =>
            {
                Ok(t.descriptor.clone())
            }
            _ => Err(not_found(tool_id)),
        }
    }

    /// What a pack invocation may call: the catalog further filtered by the
    /// pack's declaration and grant. Sorted by `toolId`.
    pub fn list_for(&self, site: &CallSite) -> Vec<ToolDescriptor> {
        self.catalog(&site.principal, &site.context.tenant_id)
            .into_iter()
            .filter(|d| authz::pack_allows(&site.declared, &site.granted, &d.tool_id).is_ok())
            .collect()
    }

    /// Runs one call through the gate. Events are appended to `events`.
    pub async fn call(
        &self,
        scope: &mut CallScope<'_>,
        tool_id: &str,
        arguments: Value,
        idempotency_key: Option<&str>,
    ) -> (Result<Value, GateError>, CallReceipt) {
        let mut receipt = CallReceipt::default();
        let ret = self.begin_call(scope, tool_id, &arguments);
        let site = scope.site;

        // 1. Authorization (never performed when denied).
        let tool = self.registry.get(tool_id);
        if let Err(d) = authz::authorize(
            &site.declared,
            &site.granted,
            tool,
            tool_id,
            &site.context.tenant_id,
            &site.principal.scopes,
        ) {
            let (status, err) = denial_error(tool_id, d);
            let r = Err(err);
            scope.events.push(ret.event(status, None, &r, false, None));
            return (r, receipt);
        }
        let Some(tool) = tool else {
            let r = Err(not_found(tool_id));
            scope
                .events
                .push(ret.event(ToolStatus::Error, None, &r, false, None));
            return (r, receipt);
        };
        let r = self
            .perform(scope, tool, arguments, idempotency_key, &ret, &mut receipt)
            .await;
        (r, receipt)
    }

    /// Runs a call of a tool the caller has already authorized by its own
    /// rules (safe-fetch destinations: `http:<host>` after the allow-list
    /// and address checks). Everything after authorization is the same path
    /// as [`Gate::call`]: rate limit, effect claim, perform, record, events.
    pub async fn call_authorized(
        &self,
        scope: &mut CallScope<'_>,
        tool: &RegisteredTool,
        arguments: Value,
        idempotency_key: Option<&str>,
    ) -> (Result<Value, GateError>, CallReceipt) {
        let mut receipt = CallReceipt::default();
        let ret = self.begin_call(scope, &tool.descriptor.tool_id, &arguments);
        let r = self
            .perform(scope, tool, arguments, idempotency_key, &ret, &mut receipt)
            .await;
        (r, receipt)
    }

    /// Emits a denial for a call refused before the gate could run it
    /// (e.g. a safe-fetch destination outside the allow-list): the pair of
    /// audit events, status `forbidden`, no `durationMs`.
    pub fn deny(
        &self,
        scope: &mut CallScope<'_>,
        tool_id: &str,
        arguments: &Value,
        error: GateError,
    ) -> GateError {
        let ret = self.begin_call(scope, tool_id, arguments);
        let status = match error.kind {
            GateErrorKind::Forbidden => ToolStatus::Forbidden,
            GateErrorKind::RateLimited => ToolStatus::RateLimited,
            _ => ToolStatus::Error,
        };
        let r = Err(error);
        scope.events.push(ret.event(status, None, &r, false, None));
        match r {
            Err(e) => e,
            Ok(_) => unreachable_error(),
        }
    }

    fn begin_call(&self, scope: &mut CallScope<'_>, tool_id: &str, arguments: &Value) -> Returned {
        let site = scope.site;
        scope.counters.calls += 1;
        let id = call_id(&site.context, scope.counters.calls);
        scope.events.push(Event::ToolCalled {
            agent_id: site.principal.id.clone(),
            tool_name: tool_id.to_owned(),
            call_id: id.clone(),
            args_hash: wop_core::jcs::args_hash(arguments),
            principal: site.principal.id.clone(),
            transport: site.transport,
        });
        Returned {
            agent: site.principal.id.clone(),
            tool: tool_id.to_owned(),
            call_id: id,
        }
    }

    async fn perform(
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
                ErrorCode::RateLimited.as_str(),
                format!("tool `{tool_id}` is rate limited for this principal; retry in {ms} ms"),
                json!({"toolName": tool_id, "retryAfterMs": ms}),
            ));
            events.push(returned(ToolStatus::RateLimited, None, &r, false, None));
            return r;
        }

        let remaining = site.deadline.saturating_duration_since(Instant::now());
        let mut call = ToolCall {
            tool_id: tool_id.to_owned(),
            arguments: arguments.clone(),
            idempotency_key: None,
            principal: site.principal.clone(),
            context: site.context.clone(),
            timeout: tool.timeout.min(remaining),
            depth: site.depth,
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
            let r = self.bounded(tool.provider.call(call).await);
            let status = if r.is_ok() {
                ToolStatus::Ok
            } else {
                ToolStatus::Error
            };
            events.push(returned(status, Some(started.elapsed()), &r, false, None));
            return r;
        }

        // 4. Effects: identity, durable claim, perform, record.
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
                    ErrorCode::InternalError.as_str(),
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
                let outcome = tool.provider.call(call).await;
                let duration = started.elapsed();
                let r = self.record(&claimed, outcome, idempotent, resend).await;
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
                    ErrorCode::IdempotencyKeyMismatch.as_str(),
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
                    ErrorCode::IdempotencyInFlight.as_str(),
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
        events: &mut Vec<Event>,
    ) -> Result<(), GateError> {
        let Some(m) = &site.meter else {
            return Ok(());
        };
        match m
            .meter
            .charge_tool_call(&m.run_id, &m.node_id, tool_id)
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
                    ErrorCode::BudgetExhausted.as_str(),
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
                ErrorCode::InternalError.as_str(),
                format!(
                    "the run's budget could not be checked, so the call was not performed: {e}"
                ),
                json!({"toolName": tool_id}),
            )),
        }
    }

    /// Applies the result-size cap.
    fn bounded(&self, r: Result<Value, ToolFailure>) -> Result<Value, GateError> {
        match r {
            Ok(v) => {
                let n = v.to_string().len() as u64;
                if n > self.cfg.max_result_bytes {
                    return Err(GateError::new(
                        GateErrorKind::Failed,
                        ErrorCode::ToolResultTooLarge.as_str(),
                        format!(
                            "the tool's result is {n} bytes; the cap is {} (policy effects.maxResultBytes)",
                            self.cfg.max_result_bytes
                        ),
                        json!({"limit": self.cfg.max_result_bytes, "observed": n}),
                    ));
                }
                Ok(v)
            }
            Err(f) => Err(GateError::new(
                GateErrorKind::Failed,
                &f.code,
                f.message,
                f.details.unwrap_or(Value::Null),
            )),
        }
    }

    /// Records what happened to a performed effect and returns the call's result.
    async fn record(
        &self,
        claimed: &EffectRecord,
        outcome: Result<Value, ToolFailure>,
        idempotent: bool,
        _resend: bool,
    ) -> Result<Value, GateError> {
        let id = &claimed.effect_id;
        let stored = match &outcome {
            Ok(_) => match self.bounded(outcome.clone()) {
                Ok(v) => self.effects.complete(claimed, Ok(v)).await.map(|_| ()),
                Err(e) => self
                    .effects
                    .complete(claimed, Err(e.as_json()))
                    .await
                    .map(|_| ()),
            },
            Err(f) if !f.sent => self.effects.release(claimed).await.map(|_| ()),
            Err(f) if f.definite => {
                let e = json!({"code": f.code, "message": f.message, "details": f.details});
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
                self.effects.escape(claimed, e).await.map(|_| ())
            }
        };
        if let Err(e) = stored {
            tracing::error!(effect = %id, error = %e, "cannot record an effect outcome");
        }
        match outcome {
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
        }
    }
}

/// The pairing data for `agent.tool-returned`.
struct Returned {
    agent: String,
    tool: String,
    call_id: String,
}

impl Returned {
    fn event(
        &self,
        status: ToolStatus,
        duration: Option<Duration>,
        r: &Result<Value, GateError>,
        replayed: bool,
        effect_id: Option<String>,
    ) -> Event {
        Event::ToolReturned {
            agent_id: self.agent.clone(),
            tool_name: self.tool.clone(),
            call_id: self.call_id.clone(),
            status,
            duration_ms: duration.map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
            outcome: r.as_ref().ok().map(preview),
            error: r.as_ref().err().map(GateError::as_json),
            replayed,
            effect_id,
            untrusted: true,
        }
    }
}

fn unreachable_error() -> GateError {
    GateError::new(
        GateErrorKind::Failed,
        ErrorCode::InternalError.as_str(),
        "internal error",
        Value::Null,
    )
}

fn not_found(tool_id: &str) -> GateError {
    GateError::new(
        GateErrorKind::NotFound,
        ErrorCode::NotFound.as_str(),
        format!("no tool `{tool_id}` is available to this caller"),
        json!({"toolName": tool_id}),
    )
}

fn denial_error(tool_id: &str, d: Denial) -> (ToolStatus, GateError) {
    let forbidden = |reason: &str, message: String, required: Vec<String>| {
        (
            ToolStatus::Forbidden,
            GateError::new(
                GateErrorKind::Forbidden,
                ErrorCode::Forbidden.as_str(),
                message,
                json!({"scope": "tool", "toolName": tool_id, "requiredScopes": required, "reason": reason}),
            ),
        )
    };
    match d {
        Denial::NotDeclared => forbidden(
            "not-declared",
            format!(
                "tool `{tool_id}` is not declared in this pack's manifest (add it to pack.json `x-wop.tools`)"
            ),
            Vec::new(),
        ),
        Denial::NotGranted => forbidden(
            "not-granted",
            format!(
                "tool `{tool_id}` is not granted to this pack (operator policy [packs.<name>] tools)"
            ),
            Vec::new(),
        ),
        Denial::MissingScopes { required, missing } => forbidden(
            "missing-scopes",
            format!(
                "the principal lacks scope(s) {} required by tool `{tool_id}`",
                missing.join(", ")
            ),
            required,
        ),
        Denial::PolicyError(e) => forbidden(
            "policy-error",
            format!(
                "the authorization decision for `{tool_id}` could not be evaluated, so it was denied: {e}"
            ),
            Vec::new(),
        ),
        Denial::NotFound => (ToolStatus::Error, not_found(tool_id)),
    }
}

fn recorded_error(e: &Value, effect_id: &str) -> GateError {
    let code = e["code"]
        .as_str()
        .unwrap_or(ErrorCode::UpstreamUnavailable.as_str());
    let message = e["message"].as_str().unwrap_or("the tool failed");
    GateError::new(
        GateErrorKind::Failed,
        code,
        message.to_owned(),
        json!({"effectId": effect_id, "replayed": true, "details": e["details"]}),
    )
}

fn unknown_outcome(rec: &EffectRecord) -> GateError {
    GateError::new(
        GateErrorKind::Failed,
        ErrorCode::EffectOutcomeUnknown.as_str(),
        format!(
            "the outcome of effect {} on tool `{}` is unknown (the call was sent but never answered, or its executor died); it will not be re-fired automatically. Check the provider, then run `wop effects resolve {} --as completed|released`",
            rec.effect_id, rec.tool_id, rec.effect_id
        ),
        json!({"effectId": rec.effect_id, "toolName": rec.tool_id, "state": rec.state, "cause": rec.error}),
    )
}
