//! `wop.samples.mcp`: one `ctx.mcp` operation on an MCP server the operator
//! attached (see README.md).
//!
//! Inputs (`server` is always required):
//! - `{"server", "tool", "arguments"?, "idempotencyKey"?, "repeat"?}` → calls
//!   the tool: `{"result": <the server's CallToolResult, unaltered>}`, or with
//!   `repeat: n`, `{"results": [...]}` (n calls in a loop).
//! - `{"server", "list": true, "allPages"?}` → `{"tools": [<name>...],
//!   "pages": n, "first": <the first page, unaltered>}`; only the tools this
//!   pack may call are listed.
//! - `{"server", "resource": "<uri>", "repeat"?}` → `{"resource":
//!   <ReadResourceResult>}`, or with `repeat: n`, `{"resources": [...]}`
//!   (n reads in a loop).
//! - `{"server", "health": true}` → `{"health": <health document>}`.
//!
//! Any refusal or failure fails the node with the MCP error's code, message
//! and details (`McpError` converts into `NodeError`).

use serde::Deserialize;
use serde_json::{Value, json};
use wop_sdk::{Ctx, McpErrorKind, NodeError, Outcome, Pack, PackInfo, Request};

/// The pack.
struct McpSample;

/// The node's inputs.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Inputs {
    /// The server id.
    server: String,
    /// Tool to call.
    #[serde(default)]
    tool: Option<String>,
    /// The tool's arguments; `{}` when absent.
    #[serde(default)]
    arguments: Option<Value>,
    /// Names the business operation so the effect fires at most once.
    #[serde(default)]
    idempotency_key: Option<String>,
    /// Call the tool (or read the resource) this many times in a loop.
    #[serde(default)]
    repeat: Option<u32>,
    /// List the tools.
    #[serde(default)]
    list: bool,
    /// Follow `nextCursor` to the last page.
    #[serde(default)]
    all_pages: bool,
    /// Resource URI to read.
    #[serde(default)]
    resource: Option<String>,
    /// Return the server's health document.
    #[serde(default)]
    health: bool,
}

/// At most this many pages are followed (a server could cycle cursors).
const MAX_PAGES: u32 = 50;

fn list(ctx: &Ctx, server: &str, all_pages: bool) -> Result<Value, NodeError> {
    let mut names = Vec::new();
    let mut first = Value::Null;
    let mut cursor: Option<String> = None;
    let mut pages = 0;
    loop {
        let page = ctx.mcp().list_tools(server, cursor.as_deref())?;
        pages += 1;
        if let Some(tools) = page.get("tools").and_then(Value::as_array) {
            names.extend(
                tools
                    .iter()
                    .filter_map(|t| t.get("name").and_then(Value::as_str))
                    .map(str::to_owned),
            );
        }
        cursor = page
            .get("nextCursor")
            .and_then(Value::as_str)
            .map(str::to_owned);
        if first.is_null() {
            first = page;
        }
        if !all_pages || cursor.is_none() || pages >= MAX_PAGES {
            break;
        }
    }
    Ok(json!({ "tools": names, "pages": pages, "first": first }))
}

impl Pack for McpSample {
    fn describe() -> PackInfo {
        PackInfo::new("mcp", "0.1.0").node("wop.samples.mcp", "0.1.0")
    }

    fn invoke(ctx: &Ctx, request: Request) -> Result<Outcome, NodeError> {
        let inputs: Inputs = request.inputs_as()?;
        let server = inputs.server.as_str();
        if inputs.list {
            return Outcome::completed(list(ctx, server, inputs.all_pages)?);
        }
        if let Some(uri) = &inputs.resource {
            if let Some(n) = inputs.repeat {
                let mut reads = Vec::new();
                for _ in 0..n {
                    reads.push(ctx.mcp().read_resource(server, uri)?);
                }
                return Outcome::completed(json!({ "resources": reads }));
            }
            let r = ctx.mcp().read_resource(server, uri)?;
            return Outcome::completed(json!({ "resource": r }));
        }
        if inputs.health {
            let h = ctx.mcp().server_health(server)?;
            return Outcome::completed(json!({ "health": h }));
        }
        let tool = inputs.tool.ok_or_else(|| {
            NodeError::validation("inputs.tool is required unless list, resource or health is set")
        })?;
        let arguments = inputs.arguments.unwrap_or_else(|| json!({}));
        ctx.log().info_with(
            "calling MCP tool",
            &json!({ "server": server, "tool": tool }),
        );
        if let Some(n) = inputs.repeat {
            let mut results = Vec::new();
            for _ in 0..n {
                results.push(ctx.mcp().call_tool(server, &tool, &arguments, None)?);
            }
            return Outcome::completed(json!({ "results": results }));
        }
        match ctx
            .mcp()
            .call_tool(server, &tool, &arguments, inputs.idempotency_key.as_deref())
        {
            Ok(result) => Outcome::completed(json!({ "result": result })),
            Err(e) => {
                if e.kind == McpErrorKind::Unavailable {
                    ctx.log().warn_with(
                        "MCP server unavailable (retryable)",
                        &json!({ "server": server }),
                    );
                }
                Err(e.into())
            }
        }
    }
}

wop_sdk::export_pack!(McpSample);
