//! The store data of a component invocation: the shared sandbox plus WASI
//! (no ambient authority), the resource table and the gate session.
//! Dropped with the store after every invocation.

use crate::sandbox::{Sandbox, SandboxState};
use wasmtime::component::ResourceTable;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};
use wop_core::capability::Capability;
use wop_gate::GateSession;

/// Store data of a component invocation.
pub(crate) struct HostState {
    /// The sandbox every pack kind shares.
    pub sb: Sandbox,
    pub wasi: WasiCtx,
    pub table: ResourceTable,
    /// The gate, bound to this invocation: every side-effecting host call
    /// goes through it.
    pub session: GateSession,
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

    /// One round of the pack's own agent loop (see [`Sandbox::loop_tick`]).
    pub(crate) fn loop_tick(&mut self) -> wasmtime::Result<()> {
        self.sb.loop_tick()
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

    /// Fails closed if the invocation lacks `cap` (see [`Sandbox::require`]).
    pub(crate) fn require(&mut self, cap: Capability) -> wasmtime::Result<()> {
        self.sb.require(cap)
    }

    /// Checks the size of data a pack passes into a host call.
    pub(crate) fn check_arg(&mut self, len: usize) -> wasmtime::Result<()> {
        self.sb.check_arg(len)
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
