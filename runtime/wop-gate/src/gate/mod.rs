//! The gate: the one code path every side-effecting host call goes through.
//!
//! For each call: `agent.tool-called` → authorization (pack, then tool
//! visibility, then principal scopes; fail closed) → rate limit → effect
//! claim for world-changing tools (durable before the call fires) →
//! perform → record → `agent.tool-returned`. A denied call is never
//! performed. `tools.call` uses it now; safe-fetch and the MCP client must
//! use it too rather than growing their own copy.

use crate::tools::{Catalogued, RegisteredTool, ToolDescriptor, ToolRegistry};
use serde_json::{Value, json};
use std::time::{Duration, Instant};
use wop_core::authz;
use wop_core::events::{Event, ToolStatus, Transport};
use wop_core::model::{Principal, RunContext};
use wop_core::ratelimit::RateLimiter;
use wop_effects::effects::{EffectTimings, Effects};

mod effect;
mod errors;
mod perform;

pub use errors::{GateError, GateErrorKind};
use errors::{denial_error, not_found, unreachable_error};

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
    /// The credentials this invocation may have attached (its node's
    /// declared secrets, granted and resolved for its tenant).
    pub credentials: wop_core::secrets::Credentials,
    /// The invocation's trace, when traces are exported: each host call
    /// is a child span, and carries its `traceparent` on.
    pub trace: Option<crate::telemetry::TraceSite>,
}

/// The run whose budget pays for calls at a call site.
#[derive(Clone)]
pub struct MeterSite {
    /// The meter.
    pub meter: wop_effects::Meter,
    /// The run's tenant (a run id is only unique within its tenant).
    pub tenant_id: String,
    /// The run.
    pub run_id: String,
    /// The node (for `cap.breached`).
    pub node_id: String,
}

impl std::fmt::Debug for MeterSite {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MeterSite")
            .field("tenant_id", &self.tenant_id)
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
    /// Effectful calls so far, business-keyed ones included (bounded by
    /// [`GateConfig::max_records_per_invocation`]).
    pub records: u32,
    /// Result bytes of the effect records this invocation wrote or
    /// replayed so far (bounded by
    /// [`GateConfig::max_record_bytes_per_invocation`]).
    pub record_bytes: u64,
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
    /// The call's audit events go here, in order, as they happen.
    pub events: &'a mut dyn crate::audit::Audit,
}

/// Gate settings.
#[derive(Debug, Clone, Copy)]
pub struct GateConfig {
    /// Claim timings.
    pub timings: EffectTimings,
    /// Largest tool result accepted and recorded, in bytes.
    pub max_result_bytes: u64,
    /// Most effectful calls one invocation may make (each writes at most
    /// one effect record of at most `max_result_bytes`).
    pub max_records_per_invocation: u32,
    /// Most result bytes one invocation's effect records may hold together:
    /// an effectful call is refused before it is sent when the bytes
    /// recorded so far plus `max_result_bytes` would pass it.
    pub max_record_bytes_per_invocation: u64,
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
    let (attempt, seq) = (ctx.attempt.to_string(), seq.to_string());
    let parts = [&ctx.tenant_id, &ctx.run_id, &ctx.node_id, &attempt, &seq].map(|s| s.as_bytes());
    let h = wop_core::digest::tagged("wop:call:v1", &parts);
    format!("call_{}", hex::encode(&h[..12]))
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
            let (status, err) = denial_error(tool_id, &site.pack, d);
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
            span: site.trace.as_ref().map(crate::telemetry::Started::begin),
        }
    }
}

/// The pairing data for `agent.tool-returned`, and the call's span.
struct Returned {
    agent: String,
    tool: String,
    call_id: String,
    span: Option<crate::telemetry::Started>,
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
        if let Some(span) = &self.span {
            use wop_core::trace::Attr;
            let mut attrs = vec![
                (
                    "openwop.tool_status",
                    Attr::str(
                        serde_json::to_value(status)
                            .ok()
                            .as_ref()
                            .and_then(Value::as_str)
                            .unwrap_or("error"),
                    ),
                ),
                ("openwop.replayed", Attr::Bool(replayed)),
            ];
            if let Some(e) = &effect_id {
                attrs.push(("openwop.effect_id", Attr::str(e)));
            }
            let error = r.as_ref().err().map(|e| e.code.as_str().to_owned());
            span.end(&self.tool, &self.call_id, attrs, error);
        }
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
