//! Node-pack tools: a node of another loaded pack exposed as a tool. Each
//! call runs in its own fresh sandbox with that pack's own limits, one
//! level deeper; past the depth limit the call is refused.

use crate::tools::{ToolCall, ToolFailure, ToolProvider};
use serde_json::Value;
use std::sync::{Arc, OnceLock, Weak};
use wop_core::ErrorCode;
use wop_core::model::{InvocationReport, InvokeRequest, Outcome};

/// Runs a node invocation one level deeper: implemented by the runtime,
/// called by node-pack tools. The gate crate never sees wasmtime.
#[async_trait::async_trait]
pub trait NodeInvoker: Send + Sync {
    /// Runs `req` at nesting `depth` (1 for a tool called by a top-level node).
    async fn invoke_nested(&self, req: InvokeRequest, depth: u32) -> InvocationReport;
}

/// Where node-pack tools find the runtime: set once the runtime exists
/// (it owns the gate that owns the tools, hence the late, weak link).
pub type InvokerSlot = Arc<OnceLock<Weak<dyn NodeInvoker>>>;

/// A node type of a loaded pack, callable as a tool.
pub struct PackTool {
    type_id: String,
    max_depth: u32,
    runtime: InvokerSlot,
}

impl PackTool {
    /// The node type `type_id` as a tool, refusing calls nested deeper than
    /// `max_depth`.
    pub fn new(type_id: String, max_depth: u32, runtime: InvokerSlot) -> Self {
        Self {
            type_id,
            max_depth,
            runtime,
        }
    }
}

#[async_trait::async_trait]
impl ToolProvider for PackTool {
    async fn call(&self, call: ToolCall) -> Result<Value, ToolFailure> {
        let depth = call.depth + 1;
        if depth > self.max_depth {
            return Err(ToolFailure::not_sent(
                ErrorCode::ToolDepthExceeded.as_str(),
                format!(
                    "node-pack tool `{}` would nest {depth} levels deep; the limit is {} (policy effects.maxToolDepth)",
                    call.tool_id, self.max_depth
                ),
            ));
        }
        let Some(rt) = self.runtime.get().and_then(Weak::upgrade) else {
            return Err(ToolFailure::not_sent(
                ErrorCode::InternalError.as_str(),
                "the runtime is shutting down",
            ));
        };
        let mut ctx = call.context.clone();
        ctx.node_id = format!("{}/{}", ctx.node_id, call.tool_id);
        let req = InvokeRequest {
            type_id: self.type_id.clone(),
            inputs: call.arguments,
            config: Value::Object(Default::default()),
            resume: None,
            // A tool's node sees its own arguments, not the run's trigger.
            trigger_data: None,
            context: ctx,
            principal: call.principal,
            // Same run: its ledger (budget, run clock) already exists.
            budget: None,
            bounds: None,
            // The nested node's span is the child of this call's.
            traceparent: call.traceparent,
        };
        let report = rt.invoke_nested(req, depth).await;
        match report.outcome {
            Ok(Outcome::Completed { output }) => Ok(output),
            Ok(Outcome::Suspended { .. }) => Err(ToolFailure::answered(
                ErrorCode::ValidationError.as_str(),
                format!(
                    "node-pack tool `{}` suspended; tools must complete",
                    call.tool_id
                ),
                None,
            )),
            Err(e) => Err(ToolFailure::answered(&e.code, e.message, e.details)),
        }
    }
}
