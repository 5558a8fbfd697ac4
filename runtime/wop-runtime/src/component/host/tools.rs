//! `openwop:node-pack/tools`: every call goes through the invocation's
//! gate session. Converts; never decides.

use crate::component::bindings::tools::{
    Host, SafetyTier as WitTier, ToolDescriptor as WitTool, ToolError,
};
use crate::component::host::{error_info, gate_error_info};
use crate::component::services;
use crate::component::state::HostState;
use crate::sandbox::Loop;
use serde_json::json;
use wop_core::capability::Capability;
use wop_core::error::ErrorCode;
use wop_core::limits::MAX_TOOL_ID_BYTES;
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
        let key_len = idempotency_key.as_ref().map_or(0, String::len);
        let size = tool_id.len() + arguments.len() + key_len;
        if tool_id == services::SECRETS_RESOLVE {
            // Not a tool: the node's own credentials, as opaque handles
            // (its grant is the operator's `secrets` line).
            self.sb.enter("secrets", None, size, Loop::Round)?;
            let args: serde_json::Value =
                serde_json::from_str(&arguments).unwrap_or(serde_json::Value::Null);
            let r = self.session.resolve_secret(&args);
            return Ok(r.map(|v| v.to_string()).map_err(to_wit));
        }
        if tool_id == services::RUN_SERVICES {
            // Not a tool: which host services this pack's ctx has.
            self.sb.enter("run", None, size, Loop::Outside)?;
            let names = self.services.names_json().to_owned();
            self.sb.charge(names.len());
            return Ok(Ok(names));
        }
        if tool_id == services::RUN_TRIGGER_DATA {
            // Not a tool: the invocation's own data, no capability.
            self.sb.enter("run", None, size, Loop::Outside)?;
            let data = self
                .trigger_data
                .clone()
                .unwrap_or_else(|| "null".to_owned());
            self.sb.charge(data.len());
            return Ok(Ok(data));
        }
        self.sb
            .enter("tools", Some(Capability::Tools), size, Loop::Round)?;
        // The gate session refuses an over-long tool id before it is
        // stored, echoed or hashed; until then it is only cut.
        self.sb.meter.target(&tool_id);
        let args: serde_json::Value = match serde_json::from_str(&arguments) {
            Ok(v) => v,
            Err(e) => {
                let shown = wop_core::logbuf::cut(&tool_id, MAX_TOOL_ID_BYTES);
                return Ok(Err(ToolError::Failed(error_info(
                    ErrorCode::ValidationError,
                    format!("the arguments for `{shown}` are not valid JSON: {e}"),
                    json!({"toolName": shown}),
                ))));
            }
        };
        // A JavaScript pack's host service: the tool the operator mapped.
        let (tool_id, args) = match tool_id.strip_prefix(services::PREFIX) {
            Some(service) => match self.services.resolve(service) {
                Ok(t) => (t.to_owned(), services::arguments(args)),
                Err(message) => {
                    let shown = wop_core::logbuf::cut(service, 64);
                    return Ok(Err(ToolError::NotFound(error_info(
                        ErrorCode::NotFound,
                        message,
                        json!({"service": shown}),
                    ))));
                }
            },
            None => (tool_id, args),
        };
        let r = self
            .session
            .call(&tool_id, args, idempotency_key.as_deref())
            .await;
        Ok(r.map(|v| v.to_string()).map_err(to_wit))
    }

    async fn list(&mut self) -> wasmtime::Result<Vec<WitTool>> {
        self.sb
            .enter("tools", Some(Capability::Tools), 0, Loop::Outside)?;
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
