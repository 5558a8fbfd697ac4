//! Component packs (`runtime.language: "wasm-component"`): WebAssembly
//! components built against the `openwop:node-pack@0.1.0` world (`wit/`),
//! on the shared sandbox core.
//!
//! - `loader`: compile (cached), judge the imports before anything runs,
//!   link, check `describe()` against the manifest;
//! - `execute`: one `describe` or `invoke` in a fresh store and instance;
//! - `state`: the store data (the sandbox, WASI with no ambient authority,
//!   the resource table, the gate session);
//! - `host`: one adapter per imported interface (`host/<interface>.rs`).

mod bindings;
mod execute;
mod host;
mod loader;
mod state;

pub use host::wasi::GUEST_DATA_DIR;
pub(crate) use loader::{Components, inspect, load};

use crate::env::RunEnv;
use bindings::{NodePackPre, node, types};
use execute::{Call, Returned, execute};
use state::{HostState, InvocationScope};
use std::sync::Arc;
use std::time::Instant;
use wop_core::error::{ErrorCode, NodeError};
use wop_core::events::Transport;
use wop_core::model::{InvocationReport, InvokeRequest};
use wop_core::pack::Inspection;
use wop_effects::Meter;
use wop_gate::mcp::PackMcp;
use wop_gate::{CallSite, Gate, MeterSite, PackEgress};

/// A loaded component pack, ready to instantiate.
pub(crate) struct ComponentPack {
    /// The load-time inspection (manifest, grants, limits).
    pub inspection: Inspection,
    pre: NodePackPre<HostState>,
    /// What its host calls may reach (fixed at load).
    reach: Reach,
}

/// What one pack's host calls may reach, fixed when it is loaded: the
/// gate, the tools it declares and is granted, its egress allow-list, its
/// MCP view, and the meter that charges tool calls to a run's budget.
pub(crate) struct Reach {
    pub gate: Arc<Gate>,
    pub declared: Vec<String>,
    pub granted: Vec<String>,
    pub egress: PackEgress,
    pub mcp: PackMcp,
    pub meter: Meter,
}

impl ComponentPack {
    /// Runs one node invocation in a fresh sandbox.
    pub(crate) async fn invoke(&self, req: &InvokeRequest, env: &RunEnv<'_>) -> InvocationReport {
        let m = &self.inspection.manifest;
        let ctx = env.context;
        let scope = InvocationScope {
            run_id: ctx.run_id.clone(),
            node_id: ctx.node_id.clone(),
            tenant_id: ctx.tenant_id.clone(),
            attempt: ctx.attempt,
            type_id: env.type_id.to_owned(),
            capabilities: self.inspection.effective.clone(),
        };
        let reach = &self.reach;
        let site = CallSite {
            principal: env.principal.clone(),
            context: ctx.clone(),
            pack: m.name.clone(),
            declared: reach.declared.clone(),
            granted: reach.granted.clone(),
            // Set when the invocation starts.
            deadline: Instant::now(),
            depth: env.depth,
            transport: Transport::Native,
            meter: env.metered.then(|| MeterSite {
                meter: reach.meter.clone(),
                run_id: ctx.run_id.clone(),
                node_id: ctx.node_id.clone(),
            }),
        };
        let wit_req = node::Request {
            context: types::NodeContext {
                run_id: ctx.run_id.clone(),
                node_id: ctx.node_id.clone(),
                tenant_id: ctx.tenant_id.clone(),
                attempt: ctx.attempt,
                type_id: req.type_id.clone(),
            },
            inputs: req.inputs.to_string(),
            config: req.config.to_string(),
            resume: req.resume.as_ref().map(|v| v.to_string()),
        };
        let params = execute::ExecParams {
            engine: self.pre.engine(),
            pre: &self.pre,
            scope,
            limits: env.limits,
            fs: self.inspection.filesystem.as_ref(),
            instantiations: env.instantiations,
            gate: reach.gate.clone(),
            site,
            egress: Some(reach.egress.clone()),
            mcp: Some(reach.mcp.clone()),
            bounds: env.bounds,
            binding: env.binding,
            breakdown: env.breakdown,
            tap: env.tap.clone(),
        };
        let exec = execute(params, Call::Invoke(wit_req)).await;
        let mut usage = exec.usage;
        usage.pack = m.name.clone();
        usage.pack_version = m.version.clone();
        let mut events = exec.events;
        let outcome = match exec.result {
            Ok(Returned::Invoke(r)) => crate::sandbox::interpret_return(
                execute::pack_return(r),
                env.limits.output_bytes,
                true,
                &exec.verdicts,
                &ctx.node_id,
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
        InvocationReport {
            outcome,
            events,
            usage,
        }
    }
}
