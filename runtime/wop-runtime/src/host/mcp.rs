//! `openwop:node-pack/mcp`.
//!
//! Deny by default: no MCP server is attached for any pack yet, so every
//! call is refused with `forbidden` (`details.scope: "mcp"`) and nothing is
//! contacted.

use crate::bindings::mcp::Host;
use crate::bindings::types::ErrorInfo;
use crate::host::error_info;
use crate::state::HostState;
use serde_json::json;
use wop_core::capability::Capability;
use wop_core::error::ErrorCode;

fn denied(server_id: &str) -> ErrorInfo {
    error_info(
        ErrorCode::Forbidden,
        format!("MCP server `{server_id}` is not granted to this pack"),
        json!({"scope": "mcp", "serverId": server_id}),
    )
}

impl Host for HostState {
    async fn call_tool(
        &mut self,
        server_id: String,
        name: String,
        arguments: String,
        idempotency_key: Option<String>,
    ) -> wasmtime::Result<Result<String, ErrorInfo>> {
        self.count("mcp");
        self.require(Capability::Mcp)?;
        self.loop_tick()?;
        self.check_arg(
            server_id.len() + name.len() + arguments.len() + idempotency_key.map_or(0, |k| k.len()),
        )?;
        Ok(Err(denied(&server_id)))
    }

    async fn list_tools(
        &mut self,
        server_id: String,
        cursor: Option<String>,
    ) -> wasmtime::Result<Result<String, ErrorInfo>> {
        self.count("mcp");
        self.require(Capability::Mcp)?;
        self.check_arg(server_id.len() + cursor.map_or(0, |c| c.len()))?;
        Ok(Err(denied(&server_id)))
    }

    async fn read_resource(
        &mut self,
        server_id: String,
        uri: String,
    ) -> wasmtime::Result<Result<String, ErrorInfo>> {
        self.count("mcp");
        self.require(Capability::Mcp)?;
        self.check_arg(server_id.len() + uri.len())?;
        Ok(Err(denied(&server_id)))
    }

    async fn server_health(
        &mut self,
        server_id: String,
    ) -> wasmtime::Result<Result<String, ErrorInfo>> {
        self.count("mcp");
        self.require(Capability::Mcp)?;
        self.check_arg(server_id.len())?;
        Ok(Err(denied(&server_id)))
    }
}
