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
mod js;
pub use js::{JsBuild, build_javascript_pack};
mod loader;
mod services;
mod state;

pub use host::wasi_ctx::GUEST_DATA_DIR;
pub(crate) use loader::{Components, inspect, load};

use crate::env::RunEnv;
use crate::sandbox::Grants;
use bindings::{NodePackPre, node, types};
use execute::{Call, Returned, execute};
use state::HostState;
use std::sync::Arc;
use wop_core::capability::Capability;
use wop_core::error::{ErrorCode, NodeError};
use wop_core::model::{InvocationReport, InvokeRequest};
use wop_core::pack::Inspection;
use wop_core::policy::FsGrant;
use wop_effects::Meter;
use wop_gate::mcp::PackMcp;
use wop_gate::{Gate, PackEgress};

/// A loaded component pack, ready to instantiate.
pub(crate) struct ComponentPack {
    /// The load-time inspection (manifest, grants, limits).
    pub inspection: Inspection,
    pre: NodePackPre<HostState>,
    /// What its host calls may reach when it runs a node.
    reach: Reach,
    /// Its nodes' config and input schemas, by type id (checked at
    /// admission).
    pub schemas: std::collections::BTreeMap<String, wop_core::schema::NodeSchemas>,
}

/// What one pack's host calls may reach, fixed when it is loaded: its
/// capabilities and directory, the gate with the tools it declares and is
/// granted, its egress allow-list, its MCP view, and the meter that
/// charges tool calls to a run's budget.
pub(crate) struct Reach {
    /// The pack's name (the gate's call site).
    pub pack: String,
    pub grants: Grants,
    pub fs: Option<FsGrant>,
    pub gate: Arc<Gate>,
    pub declared: Vec<String>,
    pub granted: Vec<String>,
    /// What safe-fetch may reach (`None`: nothing).
    pub egress: Option<PackEgress>,
    /// What `ctx.mcp` may use (`None`: nothing).
    pub mcp: Option<PackMcp>,
    pub meter: Meter,
    /// A JavaScript pack's host services, as mapped to tools (empty for
    /// other packs).
    pub services: Arc<services::Services>,
}

impl Reach {
    /// What `describe()` may reach: the base capabilities only (no tools,
    /// no egress, no MCP, no filesystem).
    fn base(&self) -> Reach {
        Reach {
            pack: self.pack.clone(),
            grants: Grants::of(&Capability::BASE),
            fs: None,
            gate: self.gate.clone(),
            declared: Vec::new(),
            granted: Vec::new(),
            egress: None,
            mcp: None,
            meter: self.meter.clone(),
            services: Arc::new(services::Services::default()),
        }
    }
}

impl ComponentPack {
    /// Runs one node invocation in a fresh sandbox.
    pub(crate) async fn invoke(&self, req: &InvokeRequest, env: &RunEnv<'_>) -> InvocationReport {
        let ctx = env.context;
        let wit_req = node::Request {
            context: types::NodeContext {
                run_id: ctx.run_id.clone(),
                node_id: ctx.node_id.clone(),
                tenant_id: ctx.tenant_id.clone(),
                attempt: ctx.attempt,
                type_id: req.type_id.clone(),
            },
            inputs: json_text(&req.inputs),
            config: json_text(&req.config),
            resume: req.resume.as_ref().map(json_text),
        };
        let trigger = req.trigger_data.as_ref().map(json_text);
        let call = Call::Invoke(wit_req, trigger);
        let exec = execute(&self.pre, &self.reach, env, call).await;
        exec.report(env, |r| match r {
            Returned::Invoke(r) => Ok((execute::pack_return(r), true)),
            Returned::Describe(_) => Err(NodeError::runtime(
                ErrorCode::InternalError,
                "invoke returned a describe result",
                Default::default(),
            )),
        })
    }
}

/// `v` as JSON text, written straight into one buffer (`Value`'s
/// `Display` goes through a formatter adapter, ~2× slower; this is on
/// every invocation). Serializing a `Value` cannot fail (its map keys are
/// strings); `Display` is kept as the fallback all the same.
fn json_text(v: &serde_json::Value) -> String {
    serde_json::to_string(v).unwrap_or_else(|_| v.to_string())
}
