//! `openwop:node-pack/mcp`: every call goes through the invocation's gate
//! session (`wop_gate::mcp`). Converts; never decides. Arguments and
//! results are charged fuel per byte like every host call's.

use crate::component::bindings::mcp::Host;
use crate::component::bindings::types::ErrorInfo;
use crate::component::host::{error_info, gate_error_info};
use crate::component::state::HostState;
use crate::sandbox::Loop;
use serde_json::json;
use wop_core::capability::Capability;
use wop_core::error::ErrorCode;

impl HostState {
    /// Enters an MCP call with `arg_bytes` of arguments.
    fn enter_mcp(&mut self, arg_bytes: usize, round: Loop) -> wasmtime::Result<()> {
        self.sb
            .enter("mcp", Some(Capability::Mcp), arg_bytes, round)
    }

    /// A result as the JSON text handed to the pack, charged per byte.
    fn out(
        &mut self,
        r: Result<serde_json::Value, wop_gate::GateError>,
    ) -> Result<String, ErrorInfo> {
        let text = r.map(|v| v.to_string()).map_err(gate_error_info)?;
        self.sb.charge(text.len());
        Ok(text)
    }
}

impl Host for HostState {
    async fn call_tool(
        &mut self,
        server_id: String,
        name: String,
        arguments: String,
        idempotency_key: Option<String>,
    ) -> wasmtime::Result<Result<String, ErrorInfo>> {
        let key_len = idempotency_key.as_ref().map_or(0, String::len);
        let size = server_id.len() + name.len() + arguments.len() + key_len;
        self.enter_mcp(size, Loop::Round)?;
        let args: serde_json::Value = match serde_json::from_str(&arguments) {
            Ok(v) => v,
            Err(e) => {
                return Ok(Err(error_info(
                    ErrorCode::ValidationError,
                    format!(
                        "the arguments for MCP tool `{server_id}/{name}` are not valid JSON: {e}"
                    ),
                    json!({"serverId": server_id, "name": name}),
                )));
            }
        };
        let r = self
            .session
            .mcp_call_tool(&server_id, &name, args, idempotency_key.as_deref())
            .await;
        Ok(self.out(r))
    }

    async fn list_tools(
        &mut self,
        server_id: String,
        cursor: Option<String>,
    ) -> wasmtime::Result<Result<String, ErrorInfo>> {
        let size = server_id.len() + cursor.as_ref().map_or(0, String::len);
        // A read is a round of the pack's loop, like a call.
        self.enter_mcp(size, Loop::Round)?;
        let r = self.session.mcp_list_tools(&server_id, cursor).await;
        Ok(self.out(r))
    }

    async fn read_resource(
        &mut self,
        server_id: String,
        uri: String,
    ) -> wasmtime::Result<Result<String, ErrorInfo>> {
        self.enter_mcp(server_id.len() + uri.len(), Loop::Round)?;
        let r = self.session.mcp_read_resource(&server_id, &uri).await;
        Ok(self.out(r))
    }

    async fn server_health(
        &mut self,
        server_id: String,
    ) -> wasmtime::Result<Result<String, ErrorInfo>> {
        self.enter_mcp(server_id.len(), Loop::Outside)?;
        let r = self.session.mcp_server_health(&server_id).await;
        Ok(self.out(r))
    }
}
