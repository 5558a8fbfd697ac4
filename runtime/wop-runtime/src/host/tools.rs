//! `openwop:node-pack/tools`.
//!
//! Deny by default: until tool sources are registered with the gate, no
//! tool is granted to any pack, so every call is refused with the typed
//! `forbidden` error (never performed) and the catalog is empty.

use crate::bindings::tools::{Host, ToolDescriptor, ToolError};
use crate::capability::Capability;
use crate::error::ErrorCode;
use crate::host::error_info;
use crate::state::HostState;
use serde_json::json;

impl Host for HostState {
    async fn call(
        &mut self,
        tool_id: String,
        arguments: String,
        idempotency_key: Option<String>,
    ) -> wasmtime::Result<Result<String, ToolError>> {
        self.count("tools");
        self.require(Capability::Tools)?;
        self.check_arg(tool_id.len() + arguments.len() + idempotency_key.map_or(0, |k| k.len()))?;
        Ok(Err(ToolError::Forbidden(error_info(
            ErrorCode::Forbidden,
            format!(
                "tool `{tool_id}` is not granted to this pack: declare it in pack.json `x-wop.tools` and have the operator grant it"
            ),
            json!({"scope": "tool", "toolName": tool_id, "requiredScopes": []}),
        ))))
    }

    async fn list(&mut self) -> wasmtime::Result<Vec<ToolDescriptor>> {
        self.count("tools");
        self.require(Capability::Tools)?;
        Ok(Vec::new())
    }
}
