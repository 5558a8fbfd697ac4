//! One execution of a component on the shared sandbox core: builds the
//! store data (WASI with no ambient authority, the resource table, the
//! gate session) and calls `describe` or `invoke` on a fresh instance.

use super::Reach;
use super::bindings::{NodePackPre, node, types};
use super::state::HostState;
use crate::env::RunEnv;
use crate::sandbox::{self, Sandbox};
use std::time::{Duration, Instant};
use wop_core::events::Transport;
use wop_gate::{CallSite, GateSession, MeterSite};

/// What to call on the fresh instance.
pub(crate) enum Call {
    Describe,
    /// The request, and the run's trigger payload as JSON text (answered
    /// to the host service `run.triggerData`).
    Invoke(node::Request, Option<String>),
}

pub(crate) enum Returned {
    Describe(node::PackInfo),
    Invoke(Result<node::Outcome, types::ErrorInfo>),
}

/// The result of one component execution.
pub(crate) type Execution = sandbox::Execution<Returned>;

/// Runs `call` on a fresh store and instance of `pre`, its host calls
/// reaching what `reach` allows, then drops both.
pub(crate) async fn execute(
    pre: &NodePackPre<HostState>,
    reach: &Reach,
    env: &RunEnv<'_>,
    call: Call,
) -> Execution {
    let seed = env.seed();
    let sb = Sandbox::new(env, &seed, reach.grants);
    let wasi = match super::host::wasi_ctx::Wasi::new(&seed, &sb.log, reach.fs.as_ref()) {
        Ok(w) => w,
        Err(e) => {
            return sandbox::failed(format!("cannot prepare the sandbox: {e:#}"), sb.log, env);
        }
    };
    let site = CallSite {
        principal: env.principal.clone(),
        context: env.context.clone(),
        pack: reach.pack.clone(),
        declared: reach.declared.clone(),
        granted: reach.granted.clone(),
        deadline: Instant::now() + Duration::from_millis(env.limits.wall_clock_ms),
        depth: env.depth,
        transport: Transport::Native,
        // Tool calls are charged to the run only when it has a budget.
        meter: env.metered.then(|| MeterSite {
            meter: reach.meter.clone(),
            tenant_id: env.context.tenant_id.clone(),
            run_id: env.context.run_id.clone(),
            node_id: env.context.node_id.clone(),
        }),
        credentials: env.credentials.clone(),
        trace: env.trace.clone(),
    };
    let mut session = GateSession::new(
        reach.gate.clone(),
        site,
        reach.egress.clone(),
        sb.log.clone(),
    );
    session.set_mcp(reach.mcp.clone());
    let mut table = wasmtime::component::ResourceTable::new();
    table.set_max_capacity(usize::try_from(env.limits.resource_entries).unwrap_or(usize::MAX));
    let (call, trigger_data) = match call {
        Call::Invoke(req, trigger) => (Call::Invoke(req, None), trigger),
        Call::Describe => (Call::Describe, None),
    };
    let state = HostState {
        sb,
        wasi,
        table,
        session,
        services: reach.services.clone(),
        trigger_data,
    };
    let mut armed = match sandbox::arm(pre.engine(), state, env, "invalid-abi") {
        Ok(a) => a,
        Err(failed) => return *failed,
    };
    let deadline = armed.deadline();
    let store = &mut armed.store;
    // Built in place, pinned (see `sandbox::within`), and dropped before
    // the store is finished.
    let outcome = {
        let run = std::pin::pin!(async {
            let pack = pre.instantiate_async(&mut *store).await?;
            sandbox::instantiated(store);
            let n = pack.openwop_node_pack_node();
            match call {
                Call::Describe => n.call_describe(&mut *store).await.map(Returned::Describe),
                Call::Invoke(req, _) => {
                    n.call_invoke(&mut *store, &req).await.map(Returned::Invoke)
                }
            }
        });
        sandbox::within(deadline, run).await
    };
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
