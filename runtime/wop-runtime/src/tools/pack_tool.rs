//! Node-pack tools: a node of another loaded pack exposed as a tool. Each
//! call runs in its own fresh sandbox with that pack's own limits, one
//! level deeper; past the depth limit the call is refused.

use crate::invoke::{InvokeRequest, Outcome};
use crate::tools::{ToolCall, ToolFailure, ToolProvider};
use serde_json::Value;
use std::sync::{Arc, OnceLock, Weak};

/// Refused because node-pack tools nest too deeply.
pub const TOOL_DEPTH_EXCEEDED: &str = "tool_depth_exceeded";

/// A node type of a loaded pack, callable as a tool.
pub struct PackTool {
    type_id: String,
    max_depth: u32,
    runtime: Arc<OnceLock<Weak<crate::runtime::Inner>>>,
}

impl PackTool {
    pub(crate) fn new(
        type_id: String,
        max_depth: u32,
        runtime: Arc<OnceLock<Weak<crate::runtime::Inner>>>,
    ) -> Self {
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
                TOOL_DEPTH_EXCEEDED,
                format!(
                    "node-pack tool `{}` would nest {depth} levels deep; the limit is {} (policy effects.maxToolDepth)",
                    call.tool_id, self.max_depth
                ),
            ));
        }
        let Some(rt) = self.runtime.get().and_then(Weak::upgrade) else {
            return Err(ToolFailure::not_sent(
                "internal_error",
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
            context: ctx,
            principal: call.principal,
            // Same run: its ledger (budget, run clock) already exists.
            budget: None,
            bounds: None,
        };
        let report = crate::runtime::Runtime::from_inner(rt)
            .invoke_at_depth(req, depth)
            .await;
        match report.outcome {
            Ok(Outcome::Completed { output }) => Ok(output),
            Ok(Outcome::Suspended { .. }) => Err(ToolFailure::answered(
                "validation_error",
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
