//! The store data of a component invocation: the shared sandbox plus WASI
//! (no ambient authority), the resource table and the gate session.
//! Dropped with the store after every invocation.

use super::host::wasi_ctx::Wasi;
use crate::sandbox::{Sandbox, SandboxState};
use wasmtime::component::ResourceTable;
use wasmtime_wasi::{WasiCtxView, WasiView};
use wop_gate::GateSession;

/// Store data of a component invocation.
pub(crate) struct HostState {
    /// The sandbox every pack kind shares.
    pub sb: Sandbox,
    /// WASI, built on the pack's first WASI call.
    pub wasi: Wasi,
    pub table: ResourceTable,
    /// The gate, bound to this invocation: every side-effecting host call
    /// goes through it.
    pub session: GateSession,
    /// A JavaScript pack's host services, as mapped to tools.
    pub services: std::sync::Arc<super::services::Services>,
    /// The run's trigger payload (JSON text), for `run.triggerData`.
    pub trigger_data: Option<String>,
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

impl WasiView for HostState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: self.wasi.get(),
            table: &mut self.table,
        }
    }
}
