//! Component packs on the shared sandbox core: builds the store data
//! (WASI with no ambient authority, the resource table, the gate session)
//! and calls `describe` or `invoke` on a fresh instance.

use super::bindings::{NodePackPre, node, types};
use super::state::{HostState, InvocationScope};
use crate::sandbox::{self, Sandbox, Spec};
use std::sync::Arc;
use std::time::{Duration, Instant};
use wasmtime::Engine;
use wop_core::admission::Binding;
use wop_core::limits::Limits;
use wop_core::model::Usage;
use wop_core::policy::FsGrant;
use wop_gate::{CallSite, Gate, GateSession, PackEgress};

/// What to call on the fresh instance.
pub(crate) enum Call {
    Describe,
    Invoke(node::Request),
}

pub(crate) enum Returned {
    Describe(node::PackInfo),
    Invoke(Result<node::Outcome, types::ErrorInfo>),
}

/// The result of one component execution.
pub(crate) type Execution = sandbox::Execution<Returned>;

pub(crate) struct ExecParams<'a> {
    pub engine: &'a Engine,
    pub pre: &'a NodePackPre<HostState>,
    pub scope: InvocationScope,
    pub limits: Limits,
    pub fs: Option<&'a FsGrant>,
    pub instantiations: Option<&'a std::sync::atomic::AtomicU64>,
    pub gate: Arc<Gate>,
    /// Who calls through the gate (its deadline is set at the start).
    pub site: CallSite,
    /// What safe-fetch may reach (`None`: nothing, e.g. during describe()).
    pub egress: Option<PackEgress>,
    /// What `ctx.mcp` may use (`None`: nothing, e.g. during describe()).
    pub mcp: Option<wop_gate::mcp::PackMcp>,
    pub bounds: wop_core::budget::RunBounds,
    /// Record the per-host-call breakdown (installs the call hook).
    pub breakdown: bool,
    /// What a fuel or deadline stop means: the invocation's own limit, or
    /// the run's budget / run timeout (then classified as such).
    pub binding: Binding,
    /// Receives the invocation's events as they happen (`None` at load).
    pub tap: Option<wop_core::logbuf::Tap>,
}

/// Runs `call` in a fresh store and instance, then drops both.
pub(crate) async fn execute(p: ExecParams<'_>, call: Call) -> Execution {
    let seed = HostState::seed(&p.scope);
    let sb = Sandbox::new(p.limits, &seed);
    let spec = Spec {
        node_id: p.scope.node_id.clone(),
        binding: p.binding,
        breakdown: p.breakdown,
        instantiations: p.instantiations,
        untyped: "invalid-abi",
        tap: p.tap.clone(),
        usage: Usage {
            tenant_id: p.scope.tenant_id.clone(),
            run_id: p.scope.run_id.clone(),
            node_id: p.scope.node_id.clone(),
            attempt: p.scope.attempt,
            type_id: p.scope.type_id.clone(),
            ..Default::default()
        },
    };
    let wasi = match super::host::wasi::ctx(&seed, &sb.log, p.fs) {
        Ok(w) => w,
        Err(e) => {
            return sandbox::failed(format!("cannot prepare the sandbox: {e:#}"), sb.log, spec);
        }
    };
    let mut site = p.site;
    site.deadline = Instant::now() + Duration::from_millis(p.limits.wall_clock_ms);
    let mut session = GateSession::new(p.gate, site, p.egress, sb.log.clone());
    session.set_mcp(p.mcp);
    let mut table = wasmtime::component::ResourceTable::new();
    table.set_max_capacity(usize::try_from(p.limits.resource_entries).unwrap_or(usize::MAX));
    let state = HostState {
        sb,
        wasi,
        table,
        scope: p.scope,
        session,
        bounds: p.bounds,
    };
    let mut armed = match sandbox::arm(p.engine, state, spec) {
        Ok(a) => a,
        Err(failed) => return *failed,
    };
    let deadline = armed.deadline();
    let store = &mut armed.store;
    let pre = p.pre;
    let run = async {
        let pack = pre.instantiate_async(&mut *store).await?;
        sandbox::instantiated(store);
        let n = pack.openwop_node_pack_node();
        match call {
            Call::Describe => n.call_describe(&mut *store).await.map(Returned::Describe),
            Call::Invoke(req) => n.call_invoke(&mut *store, &req).await.map(Returned::Invoke),
        }
    };
    let outcome = tokio::time::timeout(deadline, run).await;
    armed.finish(outcome)
}

/// What a component's `invoke` returned, for [`wop_core::outcome::interpret`].
pub(crate) fn pack_return(
    r: Result<node::Outcome, types::ErrorInfo>,
) -> wop_core::outcome::PackReturn {
    use wop_core::outcome::PackReturn;
    match r {
        Ok(node::Outcome::Completed(j)) => PackReturn::Completed(j),
        Ok(node::Outcome::Suspended(j)) => PackReturn::Suspended(j),
        Err(e) => PackReturn::Failed {
            code: e.code,
            message: e.message,
            details: e.details,
        },
    }
}
