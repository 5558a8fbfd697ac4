//! `wop.samples.tool-call`: calls one tool through the host's gate.
//!
//! Input `{"tool": "<scope>:<id>", "arguments": {...}?, "idempotencyKey": "..."?}`
//! → `{"tool": "<scope>:<id>", "result": <the tool's JSON result>}`. A refused
//! or failed call fails the node with the tool error's code, message and
//! details. Input `{"list": true}` → `{"tools": [<ToolDescriptor>, ...]}`,
//! the tools this invocation may call. `"repeat": n` calls the tool `n` times
//! in a loop (a minimal agent loop) and returns `{"tool", "results": [...]}`.
//! `"then": {"tool": ..., "arguments": ...}` makes a second call after the
//! first (say, write then read back) and adds its result as `"then"`.

use serde::Deserialize;
use serde_json::{Value, json};
use wop_sdk::{Ctx, NodeError, Outcome, Pack, PackInfo, Request};

/// The pack.
struct ToolCall;

/// The node's inputs.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Inputs {
    /// List the callable tools instead of calling one.
    #[serde(default)]
    list: bool,
    /// The tool to call (required unless `list` is true).
    #[serde(default)]
    tool: Option<String>,
    /// The tool's arguments; `{}` when absent.
    #[serde(default)]
    arguments: Option<Value>,
    /// Names the business operation so the effect fires at most once.
    #[serde(default)]
    idempotency_key: Option<String>,
    /// Call the tool this many times in a loop (default: once).
    #[serde(default)]
    repeat: Option<u32>,
    /// A second call, made after the first.
    #[serde(default)]
    then: Option<Step>,
}

/// One more tool call.
#[derive(Deserialize)]
struct Step {
    tool: String,
    #[serde(default)]
    arguments: Option<Value>,
}

impl Pack for ToolCall {
    fn describe() -> PackInfo {
        PackInfo::new("tool-call", "0.1.0").node("wop.samples.tool-call", "0.1.0")
    }

    fn invoke(ctx: &Ctx, request: Request) -> Result<Outcome, NodeError> {
        let inputs: Inputs = request.inputs_as()?;
        if inputs.list {
            let tools = ctx.tools().list();
            ctx.log()
                .info_with("listed tools", &json!({ "count": tools.len() }));
            return Outcome::completed(json!({ "tools": tools }));
        }
        let tool = inputs.tool.ok_or_else(|| {
            NodeError::validation("inputs.tool is required unless inputs.list is true")
        })?;
        let arguments = inputs.arguments.unwrap_or_else(|| json!({}));
        ctx.log()
            .info_with("calling tool", &json!({ "tool": tool }));
        // A ToolError converts into a NodeError with the same code, message
        // and details, so `?` fails the node with the tool's error.
        if let Some(n) = inputs.repeat {
            let mut results = Vec::new();
            for _ in 0..n {
                results.push(ctx.tools().call(&tool, &arguments, None)?);
            }
            return Outcome::completed(json!({ "tool": tool, "results": results }));
        }
        let result = ctx
            .tools()
            .call(&tool, &arguments, inputs.idempotency_key.as_deref())?;
        let Some(then) = inputs.then else {
            return Outcome::completed(json!({ "tool": tool, "result": result }));
        };
        let args = then.arguments.unwrap_or_else(|| json!({}));
        let second = ctx.tools().call(&then.tool, &args, None)?;
        Outcome::completed(json!({ "tool": tool, "result": result, "then": second }))
    }
}

wop_sdk::export_pack!(ToolCall);
