//! `openwop:node-pack/tools`: every call goes through [`crate::gate`].

use crate::bindings::tools::{Host, SafetyTier as WitTier, ToolDescriptor as WitTool, ToolError};
use crate::capability::Capability;
use crate::error::ErrorCode;
use crate::events::Transport;
use crate::gate::{GateError, GateErrorKind};
use crate::host::error_info;
use crate::state::{HostState, with_log};
use crate::tools::SafetyTier;
use serde_json::json;

fn to_wit(e: GateError) -> ToolError {
    let info = crate::bindings::types::ErrorInfo {
        code: e.code,
        message: e.message,
        details: if e.details.is_null() {
            None
        } else {
            Some(e.details.to_string())
        },
    };
    match e.kind {
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
        self.require(Capability::Tools)?;
        self.check_arg(
            tool_id.len() + arguments.len() + idempotency_key.as_ref().map_or(0, String::len),
        )?;
        self.loop_tick()?;
        self.meter.target(&tool_id);
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
        let site = self.call_site(Transport::Native);
        let gate = self.gate.clone();
        let mut events = Vec::new();
        let mut counters = self.counters;
        let r = gate
            .call(
                &site,
                &mut counters,
                &tool_id,
                args,
                idempotency_key.as_deref(),
                &mut events,
            )
            .await;
        self.counters = counters;
        self.meter.absorb(&events);
        with_log(&self.log, |l| events.into_iter().for_each(|e| l.record(e)));
        Ok(r.map(|v| v.to_string()).map_err(to_wit))
    }

    async fn list(&mut self) -> wasmtime::Result<Vec<WitTool>> {
        self.count("tools");
        self.require(Capability::Tools)?;
        let site = self.call_site(Transport::Native);
        Ok(self
            .gate
            .list_for(&site)
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
