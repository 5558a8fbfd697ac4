//! The invoke path, in three named steps:
//!
//! 1. **admit**: find the pack; check the node's schemas; its credentials
//!    (the secret store's `for_node`); open the run's ledger (its budget is
//!    reserved at its first invocation); admission (budget left, run clock,
//!    input-scaled fuel → limits and what binds them). From here on the
//!    sink sees events as they happen.
//! 2. **`pack.invoke`**: the pack's kind runs the node in a fresh sandbox
//!    with the admitted [`RunEnv`].
//! 3. **settle**: the usage attributed to the pack and costed, the usage
//!    record (and the budget events it raises), a sandbox's budget breach
//!    after the ledger's `budget.exhausted`, the report.

use super::Runtime;
use super::live::Live;
use crate::env::RunEnv;
use crate::kind::PackKind;
use std::sync::Arc;
use wop_core::admission::{AdmissionInput, Binding, admit};
use wop_core::breach::BreachKind;
use wop_core::budget::{Ledger, RunBounds, RunBudget};
use wop_core::classify::{Fault, classify};
use wop_core::error::{ErrorCode, NodeError};
use wop_core::events::{Event, EventSink};
use wop_core::limits::Limits;
use wop_core::model::{InvocationReport, InvokeRequest, Usage};

/// An admitted invocation: the pack and what it may spend.
struct Admitted {
    pack: Arc<PackKind>,
    limits: Limits,
    binding: Binding,
    bounds: RunBounds,
    /// The run has a budget: tool calls are charged to it.
    metered: bool,
    /// Events raised before the sandbox (the run's budget reserved).
    events: Vec<Event>,
    /// The live view of this invocation's sink, if it has one.
    live: Option<Arc<Live>>,
    /// The node's credentials, resolved for its tenant.
    credentials: wop_core::secrets::Credentials,
}

/// Two sinks, each receiving every event.
struct Both(Arc<dyn EventSink>, Arc<dyn EventSink>);

impl EventSink for Both {
    fn emit(&self, run_id: &str, node_id: &str, event: &Event) {
        self.0.emit(run_id, node_id, event);
        self.1.emit(run_id, node_id, event);
    }
}

impl Runtime {
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

    /// Runs `req` nested `depth` deep, its events to `sink`.
    pub(crate) async fn invoke_at_depth(
        &self,
        req: InvokeRequest,
        depth: u32,
        sink: Option<Arc<dyn EventSink>>,
    ) -> InvocationReport {
        let span = self
            .inner
            .tracer
            .as_ref()
            .map(|t| super::trace::NodeSpan::start(&req, t.sampler()));
        let admitted = match self.admit(&req, &sink).await {
            Ok(a) => a,
            Err(refused) => return self.traced(&req, span, report(&sink, &req, refused)),
        };
        let mut env = self.env(&req, depth, &admitted);
        env.trace = span.as_ref().map(|s| s.site.clone());
        let ran = admitted.pack.invoke(&req, &env).await;
        let done = self.settle(&req, &sink, admitted, ran).await;
        self.traced(&req, span, done)
    }

    /// Hands the invocation's spans to the exporter, if traces are on.
    fn traced(
        &self,
        req: &InvokeRequest,
        span: Option<super::trace::NodeSpan>,
        report: InvocationReport,
    ) -> InvocationReport {
        if let (Some(t), Some(s)) = (&self.inner.tracer, span)
            && s.site.ctx.sampled
        {
            t.export(s.end(req, &report));
        }
        report
    }

    /// Step 1: the pack, the node's schemas, its credentials, the run's
    /// budget and ledger, admission; or the report of a refusal (nothing
    /// ran).
    async fn admit(
        &self,
        req: &InvokeRequest,
        sink: &Option<Arc<dyn EventSink>>,
    ) -> Result<Admitted, InvocationReport> {
        let refused = |error: NodeError, events: Vec<Event>| InvocationReport {
            outcome: Err(error),
            events,
            usage: Usage::default(),
        };
        let before = |error: NodeError| refused(error, Vec::new());
        let pack = self.find_pack(req).map_err(before)?;
        // The node's own schemas for its config and inputs, before
        // anything is reserved or runs.
        if let Some(s) = pack.schemas(&req.type_id) {
            s.check(&req.inputs, &req.config).map_err(before)?;
        }
        let credentials = self
            .inner
            .secrets
            .for_node(
                &pack.inspection().manifest,
                &req.type_id,
                &self.inner.policy,
                &req.context.tenant_id,
            )
            .map_err(|u| before(credential_unavailable(u)))?;
        let (budget, bounds) = self.run_limits(req).map_err(before)?;
        let (ledger, mut events) = self
            .open_ledger(req, &budget, &bounds)
            .await
            .map_err(before)?;
        let a = match self.admission(&pack, req, &ledger, &bounds) {
            Ok(a) => a,
            Err(fault) => {
                let c = classify(&fault, &req.context.node_id);
                events.extend(c.breach);
                return Err(refused(c.error, events));
            }
        };
        let live = sink.clone().map(|s| Live::new(s, &req.context));
        if let Some(l) = &live {
            l.deliver(&events);
        }
        Ok(Admitted {
            pack,
            limits: a.limits,
            binding: a.binding,
            bounds,
            metered: !ledger.budget.is_empty(),
            events,
            live,
            credentials,
        })
    }

    /// Admission: the budget left, the run clock and the input-scaled fuel
    /// give the invocation's limits and what binds them; or the fault that
    /// refuses it.
    fn admission(
        &self,
        pack: &PackKind,
        req: &InvokeRequest,
        ledger: &Ledger,
        bounds: &RunBounds,
    ) -> Result<wop_core::admission::Admitted, Fault> {
        let inspection = pack.inspection();
        admit(AdmissionInput {
            ledger,
            bounds,
            limits: inspection.limits,
            request: &inspection.manifest.wop.limits,
            fuel_ceiling: self.inner.policy.limits().fuel,
            inputs: &req.inputs,
            now_ms: wop_core::time::now_ms(),
        })
    }

    /// The loaded pack that implements the node type `req` runs.
    fn find_pack(&self, req: &InvokeRequest) -> Result<Arc<PackKind>, NodeError> {
        self.inner.registry.get(&req.type_id).ok_or_else(|| {
            let message = format!(
                "no loaded pack implements node type `{}`; load its pack first",
                req.type_id
            );
            let details = wop_core::details! {"typeId" => req.type_id};
            NodeError::runtime(ErrorCode::NotFound, message, details)
        })
    }

    /// The run's budget and bounds: the request's, else the policy's
    /// defaults; an invalid budget is refused.
    fn run_limits(&self, req: &InvokeRequest) -> Result<(RunBudget, RunBounds), NodeError> {
        let runs = &self.inner.policy.runs;
        let budget = req.budget.unwrap_or_else(|| runs.budget());
        let bounds = req.bounds.unwrap_or_else(|| runs.bounds());
        if let Err(e) = budget.validate() {
            let message = format!("invalid run budget: {e}");
            return Err(NodeError::runtime(
                ErrorCode::ValidationError,
                message,
                Default::default(),
            ));
        }
        Ok((budget, bounds))
    }

    /// Opens the run's ledger (its budget is reserved at its first
    /// invocation), with the events that raised.
    async fn open_ledger(
        &self,
        req: &InvokeRequest,
        budget: &RunBudget,
        bounds: &RunBounds,
    ) -> Result<(Ledger, Vec<Event>), NodeError> {
        let timed = bounds.run_timeout_ms.is_some();
        let (tenant, run_id) = (&req.context.tenant_id, &req.context.run_id);
        let opened = self.inner.meter.open_run(tenant, run_id, budget, timed);
        opened.await.map_err(|e| {
            // The run's ledger is read here (and created for a run with a
            // budget or a run clock): say so, not "budget", which the
            // caller of a run without one would not recognise.
            let message = format!(
                "the run's ledger (its budget, bounds and usage so far) could not be opened in the usage store, so the node did not run: {e}"
            );
            let code = match e.is_store_full() {
                true => ErrorCode::EffectStoreFull,
                false => ErrorCode::InternalError,
            };
            NodeError::runtime(code, message, Default::default())
        })
    }

    /// What step 2 runs with.
    fn env<'a>(&'a self, req: &'a InvokeRequest, depth: u32, a: &Admitted) -> RunEnv<'a> {
        RunEnv {
            context: &req.context,
            principal: &req.principal,
            type_id: &req.type_id,
            depth,
            limits: a.limits,
            binding: a.binding,
            bounds: a.bounds,
            metered: a.metered,
            breakdown: self.breakdown(),
            tap: a.live.as_ref().map(Live::tap),
            instantiations: Some(&self.inner.instantiations),
            credentials: a.credentials.clone(),
            trace: None,
        }
    }

    /// Step 3: cost, the usage record and its budget events, the report.
    async fn settle(
        &self,
        req: &InvokeRequest,
        sink: &Option<Arc<dyn EventSink>>,
        a: Admitted,
        ran: InvocationReport,
    ) -> InvocationReport {
        let InvocationReport {
            outcome,
            events: ran_events,
            mut usage,
        } = ran;
        // Usually nothing came before the sandbox: take its events whole
        // rather than moving each one.
        let mut events = a.events;
        if events.is_empty() {
            events = ran_events;
        } else {
            events.extend(ran_events);
        }
        let m = &a.pack.inspection().manifest;
        usage.pack = m.name.clone();
        usage.pack_version = m.version.clone();
        let prices = self.inner.meter.prices();
        usage.currency = prices.currency.clone();
        usage.cost = prices.invocation_cost(&usage) + prices.tool_call_total(&usage);
        // A budget breach reported by the sandbox (fuel budget) follows the
        // ledger's `budget.exhausted`: exhausted → cap.breached.
        let breaches = take_budget_breaches(&mut events);
        let recorded = self
            .inner
            .meter
            .record_with(&usage, &req.context.node_id, Some(a.metered));
        match recorded.await {
            Ok(ev) => events.extend(ev),
            Err(e) => tracing::error!(run = %usage.run_id, error = %e, "cannot persist usage"),
        }
        events.extend(breaches);
        let report = InvocationReport {
            outcome,
            events,
            usage,
        };
        match a.live {
            Some(l) => {
                l.finish(&report.events);
                report
            }
            None => self::report(sink, req, report),
        }
    }
}

/// Delivers a report's events to the sink (when they were not delivered
/// live) and returns it.
fn report(
    sink: &Option<Arc<dyn EventSink>>,
    req: &InvokeRequest,
    report: InvocationReport,
) -> InvocationReport {
    if let Some(sink) = sink {
        for e in &report.events {
            sink.emit(&req.context.run_id, &req.context.node_id, e);
        }
    }
    report
}

/// `credential_unavailable`: a secret the node needs is not available
/// (before anything ran).
fn credential_unavailable(u: wop_gate::secrets::Unavailable) -> NodeError {
    let details = wop_core::details! {"secretId" => u.secret};
    NodeError::runtime(ErrorCode::CredentialUnavailable, u.message, details)
}

/// Takes the sandbox's budget breaches out of `events`, in order. Rare:
/// only then are the events split (a pack can log thousands).
fn take_budget_breaches(events: &mut Vec<Event>) -> Vec<Event> {
    let is_budget_breach =
        |e: &Event| matches!(e, Event::CapBreached { kind, .. } if *kind == BreachKind::BudgetFuel);
    if !events.iter().any(is_budget_breach) {
        return Vec::new();
    }
    let (breaches, rest) = std::mem::take(events)
        .into_iter()
        .partition(is_budget_breach);
    *events = rest;
    breaches
}
