//! What the facade hands down to a pack kind: [`LoadEnv`], what loading
//! may use from the runtime, and [`RunEnv`], what one execution runs with
//! once it is admitted, built once by the facade (or by a load-time check)
//! and handed down to the pack kind and its sandbox unchanged.

use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use wop_core::admission::Binding;
use wop_core::budget::RunBounds;
use wop_core::limits::Limits;
use wop_core::logbuf::Tap;
use wop_core::model::{Principal, RunContext};
use wop_core::policy::Policy;
use wop_core::replay::Seed;
use wop_effects::Meter;
use wop_gate::mcp::McpGateway;
use wop_gate::{Egress, Gate};

/// What loading a pack may use from the runtime.
pub(crate) struct LoadEnv<'a> {
    /// The operator policy (grants, limits, trust).
    pub policy: &'a Policy,
    /// Counts instantiations (`describe()` and identification too).
    pub instantiations: &'a AtomicU64,
    /// The gate every side-effecting host call goes through.
    pub gate: &'a Arc<Gate>,
    /// The safe-fetch engine.
    pub egress: &'a Arc<Egress>,
    /// The MCP client.
    pub mcp: &'a Arc<McpGateway>,
    /// Charges tool calls to a run's budget.
    pub meter: &'a Meter,
}

/// The per-run values of one execution.
pub(crate) struct RunEnv<'a> {
    /// Run, node, tenant and attempt (also the replay seed).
    pub context: &'a RunContext,
    /// On whose behalf host calls are made.
    pub principal: &'a Principal,
    /// The node type (empty for load-time calls).
    pub type_id: &'a str,
    /// Nesting depth of node-pack tools (0 for a top-level node).
    pub depth: u32,
    /// The limits after admission.
    pub limits: Limits,
    /// Which run-level limit binds fuel and the wall clock.
    pub binding: Binding,
    /// Loop and run bounds.
    pub bounds: RunBounds,
    /// Whether tool calls are charged to the run's budget (it has one).
    pub metered: bool,
    /// Record the per-host-call breakdown (installs the call hook's
    /// attribution).
    pub breakdown: bool,
    /// Receives the sandbox's events as they are kept (live streaming).
    pub tap: Option<Tap>,
    /// Counts instantiations (for operators and tests).
    pub instantiations: Option<&'a AtomicU64>,
    /// The credentials host calls may attach (the node's declared
    /// secrets, resolved at admission).
    pub credentials: wop_core::secrets::Credentials,
    /// The invocation's trace, when traces are exported.
    pub trace: Option<wop_gate::telemetry::TraceSite>,
}

/// The context of the runtime's own executions (`describe()` and ABI v1
/// identification at load: `wop:load`/`describe`; probe mode:
/// `wop:probe`/`probe`), attempt 1; it seeds their clock and random like
/// any run's.
pub(crate) fn internal_context(run_id: &str, node_id: &str) -> RunContext {
    RunContext {
        run_id: run_id.to_owned(),
        node_id: node_id.to_owned(),
        tenant_id: run_id.to_owned(),
        attempt: 1,
    }
}

impl<'a> RunEnv<'a> {
    /// A run of the runtime's own (`describe()`, identification, probe):
    /// no budget, no bounds, no tap, no breakdown.
    pub(crate) fn internal(
        context: &'a RunContext,
        principal: &'a Principal,
        limits: Limits,
        instantiations: Option<&'a AtomicU64>,
    ) -> Self {
        Self {
            context,
            principal,
            type_id: "",
            depth: 0,
            limits,
            binding: Binding::default(),
            bounds: RunBounds::default(),
            metered: false,
            breakdown: false,
            tap: None,
            instantiations,
            credentials: Default::default(),
            trace: None,
        }
    }

    /// The replay seed of this execution: (run, node, attempt).
    pub(crate) fn seed(&self) -> Seed {
        Seed::new(
            &self.context.run_id,
            &self.context.node_id,
            self.context.attempt,
        )
    }
}
