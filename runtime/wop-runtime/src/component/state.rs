//! Per-invocation store state: WASI context, resource table, limiter, the
//! bounded log, replayable clock/random and usage counters. Dropped with
//! the store after every invocation.

use crate::sandbox::{Sandbox, SandboxState};
use std::collections::BTreeSet;
use wasmtime::component::ResourceTable;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};
use wop_core::capability::Capability;
use wop_core::classify::Fault;
use wop_core::replay::Seed;
use wop_gate::GateSession;

/// Who and what this invocation is for (bound to every host call).
#[derive(Debug, Clone)]
pub(crate) struct InvocationScope {
    pub run_id: String,
    pub node_id: String,
    pub tenant_id: String,
    pub attempt: u32,
    pub type_id: String,
    pub capabilities: BTreeSet<Capability>,
}

/// Store data of a component invocation: the shared sandbox plus WASI,
/// the resource table, the invocation's scope and its gate session.
pub(crate) struct HostState {
    /// The sandbox every pack kind shares.
    pub sb: Sandbox,
    pub wasi: WasiCtx,
    pub table: ResourceTable,
    pub scope: InvocationScope,
    /// The gate, bound to this invocation: every side-effecting host call
    /// goes through it.
    pub session: GateSession,
    /// Loop and run bounds.
    pub bounds: wop_core::budget::RunBounds,
}

impl SandboxState for HostState {
    fn sandbox(&self) -> &Sandbox {
        &self.sb
    }
    fn sandbox_mut(&mut self) -> &mut Sandbox {
        &mut self.sb
    }
    fn harvest(&self, usage: &mut wop_core::model::Usage) {
        let g = self.session.usage();
        usage.tool_calls = g.tool_calls_by_id.values().sum();
        usage.tool_calls_by_id = g.tool_calls_by_id.clone();
        usage.effect_claims = g.effect_claims;
        usage.egress_bytes_in = g.egress_bytes_in;
        usage.egress_bytes_out = g.egress_bytes_out;
    }
    fn verdicts(&self) -> std::collections::BTreeSet<String> {
        self.session.usage().verdicts.clone()
    }
}

impl HostState {
    pub(crate) fn count(&mut self, iface: &'static str) {
        self.sb.count(iface);
    }

    /// One round of the pack's own agent loop (a tools/http/mcp call).
    /// Past `maxLoopIterations` the invocation fails with
    /// `loop_limit_exceeded`.
    pub(crate) fn loop_tick(&mut self) -> wasmtime::Result<()> {
        self.sb.meter.loop_iterations += 1;
        let observed = self.sb.meter.loop_iterations;
        if let Some(limit) = self.bounds.max_loop_iterations
            && observed > u64::from(limit)
        {
            return Err(self.sb.fault(Fault::LoopLimit {
                limit: u64::from(limit),
                observed,
            }));
        }
        Ok(())
    }

    /// Records a host-cap breach and returns the trap to raise.
    pub(crate) fn host_cap(
        &mut self,
        kind: &'static str,
        limit: u64,
        observed: u64,
    ) -> wasmtime::Error {
        self.sb.host_cap(kind, limit, observed)
    }

    /// Fails closed if the invocation lacks `cap`. The import gate already
    /// refuses such packs at load; this is the second line of defense.
    pub(crate) fn require(&mut self, cap: Capability) -> wasmtime::Result<()> {
        if self.scope.capabilities.contains(&cap) {
            return Ok(());
        }
        Err(self.sb.fault(Fault::CapabilityDenied {
            capability: cap.as_str().to_owned(),
        }))
    }

    /// Checks the size of data a pack passes into a host call.
    pub(crate) fn check_arg(&mut self, len: usize) -> wasmtime::Result<()> {
        self.sb.check_arg(len)
    }

    pub(crate) fn seed(scope: &InvocationScope) -> Seed {
        Seed::new(&scope.run_id, &scope.node_id, scope.attempt)
    }
}

impl WasiView for HostState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}
