//! `openwop:node-pack/tools`: every call goes through the invocation's
//! gate session. Converts; never decides.

use crate::component::bindings::tools::{
    Host, SafetyTier as WitTier, ToolDescriptor as WitTool, ToolError,
};
use crate::component::host::{error_info, gate_error_info};
use crate::component::state::HostState;
use serde_json::json;
use wop_core::capability::Capability;
use wop_core::error::ErrorCode;
use wop_core::tools::SafetyTier;
use wop_gate::{GateError, GateErrorKind};

fn to_wit(e: GateError) -> ToolError {
    let kind = e.kind;
    let info = gate_error_info(e);
    match kind {
        GateErrorKind::Forbidden => ToolError::Forbidden(info),
        GateErrorKind::NotFound => ToolError::NotFound(info),
        GateErrorKind::RateLimited => ToolError::RateLimited(info),
        GateErrorKind::BudgetExhausted => ToolError::BudgetExhausted(info),
        GateErrorKind::Conflict => ToolError::Conflict(info),
        GateErrorKind::Failed => ToolError::Failed(info),
    }
}

impl Host for HostState {
    async fn call(
        &mut self,
        tool_id: String,
        arguments: String,
        idempotency_key: Option<String>,
    ) -> wasmtime::Result<Result<String, ToolError>> {
        self.count("tools");
        self.sb.charge(
            tool_id.len() + arguments.len() + idempotency_key.as_ref().map_or(0, String::len),
        );
        self.require(Capability::Tools)?;
        self.check_arg(
            tool_id.len() + arguments.len() + idempotency_key.as_ref().map_or(0, String::len),
        )?;
        self.loop_tick()?;
        if let Err(message) = wop_core::limits::check_identifier(
            "tool id",
            &tool_id,
            wop_core::limits::MAX_TOOL_ID_BYTES,
        ) {
            // Refused before it is stored, echoed or hashed.
            return Ok(Err(ToolError::Failed(error_info(
                ErrorCode::ValidationError,
                message,
                json!({"field": "tool id", "limit": wop_core::limits::MAX_TOOL_ID_BYTES}),
            ))));
        }
        self.sb.meter.target(&tool_id);
        let args: serde_json::Value = match serde_json::from_str(&arguments) {
            Ok(v) => v,
            Err(e) => {
                return Ok(Err(ToolError::Failed(error_info(
                    ErrorCode::ValidationError,
                    format!("the arguments for `{tool_id}` are not valid JSON: {e}"),
                    json!({"toolName": tool_id}),
                ))));
            }
        };
        let r = self
            .session
            .call(&tool_id, args, idempotency_key.as_deref())
            .await;
        Ok(r.map(|v| v.to_string()).map_err(to_wit))
    }

    async fn list(&mut self) -> wasmtime::Result<Vec<WitTool>> {
        self.count("tools");
        self.require(Capability::Tools)?;
        Ok(self
            .session
            .list()
            .into_iter()
            .map(|d| WitTool {
                tool_id: d.tool_id,
                title: d.title,
                description: d.description,
                safety_tier: match d.safety_tier {
                    SafetyTier::Pure => WitTier::Pure,
                    SafetyTier::Read => WitTier::Read,
                    SafetyTier::Write => WitTier::Write,
                    SafetyTier::Exec => WitTier::Exec,
                },
                input_schema: d.input_schema.map(|v| v.to_string()),
                output_schema: d.output_schema.map(|v| v.to_string()),
            })
            .collect())
    }
}
