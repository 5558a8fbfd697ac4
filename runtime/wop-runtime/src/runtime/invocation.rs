//! The invoke path: admission, the run's ledger, a fresh sandbox, metering.

use super::Runtime;
use super::live::Live;
use crate::bindings::{node, types};
use crate::invoke::{Call, ExecParams, Returned, execute};
use crate::registry::{ComponentPack, PackKind};
use crate::state::InvocationScope;
use std::sync::Arc;
use std::time::Instant;
use wop_core::admission::{AdmissionInput, Binding, admit};
use wop_core::budget::RunBounds;
use wop_core::classify::{Fault, classify};
use wop_core::error::{ErrorCode, NodeError};
use wop_core::events::EventSink;
use wop_core::events::{Event, Transport};
use wop_core::limits::Limits;
use wop_core::model::{InvocationReport, InvokeRequest, Outcome, Usage};
use wop_gate::{CallSite, MeterSite, PackEgress};

/// Two sinks, each receiving every event.
struct Both(Arc<dyn EventSink>, Arc<dyn EventSink>);

impl EventSink for Both {
    fn emit(&self, run_id: &str, node_id: &str, event: &Event) {
        self.0.emit(run_id, node_id, event);
        self.1.emit(run_id, node_id, event);
    }
}

/// What one component invocation runs with, after admission.
struct ComponentRun {
    scope: InvocationScope,
    site: CallSite,
    egress: PackEgress,
    limits: Limits,
    bounds: RunBounds,
    binding: Binding,
    /// Receives the sandbox's events as they happen.
    tap: Option<wop_core::logbuf::Tap>,
}

impl Runtime {
    pub(super) fn params<'a>(
        &'a self,
        pack: &'a ComponentPack,
        scope: InvocationScope,
        site: CallSite,
    ) -> ExecParams<'a> {
        ExecParams {
            engine: self.inner.engine,
            pre: &pack.pre,
            scope,
            limits: pack.inspection.limits,
            fs: pack.inspection.filesystem.as_ref(),
            instantiations: &self.inner.instantiations,
            gate: self.inner.gate.clone(),
            site,
            egress: None,
            mcp: None,
            bounds: RunBounds::default(),
            binding: Binding::default(),
            breakdown: self.breakdown(),
            tap: None,
        }
    }

    /// Whether the per-host-call breakdown is recorded (policy
    /// `[metering] hostCallBreakdown`, on by default).
    fn breakdown(&self) -> bool {
        self.inner
            .policy
            .metering
            .host_call_breakdown
            .unwrap_or(true)
    }

    /// Runs one node invocation in a fresh sandbox. Never panics on
    /// anything the pack does; every failure is in the report's outcome.
    pub async fn invoke(&self, req: InvokeRequest) -> InvocationReport {
        self.invoke_at_depth(req, 0, self.inner.sink.clone()).await
    }

    /// Like [`invoke`](Self::invoke), and `sink` receives this invocation's
    /// events — and only this invocation's — as they happen (then the rest
    /// when it ends), in the report's order, each once. The runtime's own
    /// sink ([`RuntimeConfig::event_sink`](crate::RuntimeConfig::event_sink)),
    /// if any, still receives them too. This is how a service streams one
    /// caller's invocation to that caller: nothing is routed by run or node
    /// id, which callers choose and may share.
    pub async fn invoke_streaming(
        &self,
        req: InvokeRequest,
        sink: Arc<dyn EventSink>,
    ) -> InvocationReport {
        let sink: Arc<dyn EventSink> = match &self.inner.sink {
            Some(global) => Arc::new(Both(sink, global.clone())),
            None => sink,
        };
        self.invoke_at_depth(req, 0, Some(sink)).await
    }

    pub(crate) async fn invoke_at_depth(
        &self,
        req: InvokeRequest,
        depth: u32,
        sink: Option<Arc<dyn EventSink>>,
    ) -> InvocationReport {
        // The pack: a component, or an ABI v1 core module (its own
        // execution path; the same metering, budgets and bounds below).
        let Some(pack) = self.inner.registry.get(&req.type_id) else {
            return InvocationReport {
                outcome: Err(NodeError::runtime(
                    ErrorCode::NotFound,
                    format!(
                        "no loaded pack implements node type `{}`; load its pack first",
                        req.type_id
                    ),
                    wop_core::details! {"typeId" => req.type_id},
                )),
                events: Vec::new(),
                usage: Default::default(),
            };
        };
        let inspection = pack.inspection();
        let policy = &self.inner.policy;
        let node_id = req.context.node_id.clone();
        let budget = req.budget.unwrap_or_else(|| policy.runs.budget());
        let bounds = req.bounds.unwrap_or_else(|| policy.runs.bounds());

        // The run's ledger: budget reserved at its first invocation.
        let mut events = Vec::new();
        let refuse = |events: Vec<Event>, fault: Fault| {
            let c = classify(&fault, &node_id);
            let mut events = events;
            events.extend(c.breach);
            (Err(c.error), events)
        };
        let ledger = match budget.validate() {
            Err(e) => {
                return report(
                    &sink,
                    &req,
                    Err(NodeError::runtime(
                        ErrorCode::ValidationError,
                        format!("invalid run budget: {e}"),
                        Default::default(),
                    )),
                    events,
                    Usage::default(),
                );
            }
            Ok(()) => {
                match self
                    .inner
                    .meter
                    .open_run(
                        &req.context.tenant_id,
                        &req.context.run_id,
                        &budget,
                        bounds.run_timeout_ms.is_some(),
                    )
                    .await
                {
                    Ok((l, ev)) => {
                        events.extend(ev);
                        l
                    }
                    Err(e) => {
                        return report(
                            &sink,
                            &req,
                            Err(NodeError::runtime(
                                ErrorCode::InternalError,
                                format!(
                                    "the run's budget could not be read, so the node did not run: {e}"
                                ),
                                Default::default(),
                            )),
                            events,
                            Usage::default(),
                        );
                    }
                }
            }
        };
        let admitted = admit(AdmissionInput {
            ledger: &ledger,
            bounds: &bounds,
            limits: inspection.limits,
            request: &inspection.manifest.wop.limits,
            fuel_ceiling: policy.limits().fuel,
            inputs: &req.inputs,
            now_ms: wop_core::time::now_ms(),
        });
        let (limits, binding) = match admitted {
            Ok(a) => (a.limits, a.binding),
            Err(fault) => {
                let (outcome, events) = refuse(events, fault);
                return report(&sink, &req, outcome, events, Usage::default());
            }
        };
        // From here on the sink sees events as they happen.
        let live = sink.clone().map(|s| Live::new(s, &req.context));
        if let Some(l) = &live {
            l.deliver(&events);
        }
        let tap = live.as_ref().map(Live::tap);

        let (outcome, exec_events, mut usage) = match pack.as_ref() {
            PackKind::AbiV1(core) => {
                let r = core
                    .invoke(
                        &req,
                        &self.inner.instantiations,
                        limits,
                        binding,
                        self.breakdown(),
                        tap,
                    )
                    .await;
                (r.outcome, r.events, r.usage)
            }
            PackKind::Component(pack) => {
                let m = &pack.inspection.manifest;
                let scope = InvocationScope {
                    run_id: req.context.run_id.clone(),
                    node_id: req.context.node_id.clone(),
                    tenant_id: req.context.tenant_id.clone(),
                    attempt: req.context.attempt,
                    type_id: req.type_id.clone(),
                    capabilities: pack.inspection.effective.clone(),
                };
                let site = CallSite {
                    principal: req.principal.clone(),
                    context: req.context.clone(),
                    pack: m.name.clone(),
                    declared: m.wop.tools.clone(),
                    granted: policy.grant(&m.name).tools,
                    // Set when the invocation starts.
                    deadline: Instant::now(),
                    depth,
                    transport: Transport::Native,
                    // Tool calls are charged to the run only when it has a budget.
                    meter: (!ledger.budget.is_empty()).then(|| MeterSite {
                        meter: self.inner.meter.clone(),
                        tenant_id: req.context.tenant_id.clone(),
                        run_id: req.context.run_id.clone(),
                        node_id: node_id.clone(),
                    }),
                };
                let egress = PackEgress {
                    engine: self.inner.egress.clone(),
                    allow: pack.inspection.egress.allow.clone(),
                };
                let run = ComponentRun {
                    scope,
                    site,
                    egress,
                    limits,
                    bounds,
                    binding,
                    tap,
                };
                self.run_component(pack, &req, run).await
            }
        };
        // Usually nothing came before the sandbox: take its events whole
        // rather than moving each one.
        if events.is_empty() {
            events = exec_events;
        } else {
            events.extend(exec_events);
        }

        // Cost, persistence and the budget's view of this invocation.
        let prices = self.inner.meter.prices();
        usage.currency = prices.currency.clone();
        usage.cost = prices.invocation_cost(&usage) + prices.tool_call_total(&usage);
        // A budget breach reported by the sandbox (fuel budget) follows the
        // ledger's `budget.exhausted`: exhausted → cap.breached.
        let is_budget_breach =
            |e: &Event| matches!(e, Event::CapBreached { kind, .. } if kind == "budget-fuel");
        // Rare: only then are the events split (a pack can log thousands).
        let budget_breaches: Vec<Event> = if events.iter().any(is_budget_breach) {
            let (breaches, rest) = std::mem::take(&mut events)
                .into_iter()
                .partition(is_budget_breach);
            events = rest;
            breaches
        } else {
            Vec::new()
        };
        match self.inner.meter.record(&usage, &node_id).await {
            Ok(ev) => events.extend(ev),
            Err(e) => tracing::error!(run = %usage.run_id, error = %e, "cannot persist usage"),
        }
        events.extend(budget_breaches);
        match live {
            Some(l) => {
                l.finish(&events);
                InvocationReport {
                    outcome,
                    events,
                    usage,
                }
            }
            None => report(&sink, &req, outcome, events, usage),
        }
    }

    /// Runs a component pack's `invoke` in a fresh sandbox.
    async fn run_component(
        &self,
        pack: &ComponentPack,
        req: &InvokeRequest,
        run: ComponentRun,
    ) -> (Result<Outcome, NodeError>, Vec<Event>, Usage) {
        let ComponentRun {
            scope,
            site,
            egress,
            limits,
            bounds,
            binding,
            tap,
        } = run;
        let m = &pack.inspection.manifest;
        let wit_req = node::Request {
            context: types::NodeContext {
                run_id: req.context.run_id.clone(),
                node_id: req.context.node_id.clone(),
                tenant_id: req.context.tenant_id.clone(),
                attempt: req.context.attempt,
                type_id: req.type_id.clone(),
            },
            inputs: req.inputs.to_string(),
            config: req.config.to_string(),
            resume: req.resume.as_ref().map(|v| v.to_string()),
        };
        let mut params = self.params(pack, scope, site);
        params.limits = limits;
        params.bounds = bounds;
        params.egress = Some(egress);
        params.mcp = Some(
            self.inner
                .mcp
                .for_pack(m.wop.mcp.clone(), self.inner.policy.mcp_grant(&m.name)),
        );
        params.binding = binding;
        params.tap = tap;
        let exec = execute(params, Call::Invoke(wit_req)).await;
        let mut usage = exec.usage;
        usage.pack = m.name.clone();
        usage.pack_version = m.version.clone();
        let mut events = exec.events;
        let outcome = match exec.result {
            Ok(Returned::Invoke(r)) => crate::sandbox::interpret_return(
                crate::invoke::pack_return(r),
                limits.output_bytes,
                true,
                &exec.verdicts,
                &req.context.node_id,
                &mut usage,
                &mut events,
            ),
            Ok(Returned::Describe(_)) => Err(NodeError::runtime(
                ErrorCode::InternalError,
                "invoke returned a describe result",
                Default::default(),
            )),
            Err(c) => Err(c.error),
        };
        (outcome, events, usage)
    }
}

/// Delivers events to the sink and builds the report.
fn report(
    sink: &Option<Arc<dyn EventSink>>,
    req: &InvokeRequest,
    outcome: Result<Outcome, NodeError>,
    events: Vec<Event>,
    usage: Usage,
) -> InvocationReport {
    if let Some(sink) = sink {
        for e in &events {
            sink.emit(&req.context.run_id, &req.context.node_id, e);
        }
    }
    InvocationReport {
        outcome,
        events,
        usage,
    }
}
