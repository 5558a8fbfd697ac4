//! A client for the MCP servers the operator attached.

use std::fmt;
use std::marker::PhantomData;

use serde_json::Value;

use crate::bindings::openwop::node_pack::mcp as wit;
use crate::bindings::openwop::node_pack::types::ErrorInfo;
use crate::ctx::Ctx;
use crate::error::{NodeError, parse_lenient};

/// MCP client, from [`Ctx::mcp`].
///
/// Every call goes through the host's gate. A server is usable when the
/// pack's manifest requests it (`x-wop.mcp.servers`, optionally narrowed to
/// `x-wop.mcp.tools`) and the operator grants it. Results are the MCP
/// server's JSON, unaltered; an MCP result with `isError: true` is a
/// success value (the server answered).
#[derive(Debug, Clone, Copy)]
pub struct Mcp<'a> {
    _ctx: PhantomData<&'a Ctx>,
}

fn convert(result: Result<String, ErrorInfo>) -> Result<Value, McpError> {
    result
        .map(|json| parse_lenient(&json))
        .map_err(McpError::from_wit)
}

impl Mcp<'_> {
    pub(crate) fn new() -> Self {
        Self { _ctx: PhantomData }
    }

    /// `tools/call` `name` with `arguments` on `server_id` (the gate tool
    /// `mcp:<server_id>/<name>`). Tools the operator classifies `write` or
    /// `exec` (and unclassified ones) are claimed as effects like
    /// [`Tools::call`](crate::Tools::call), including the meaning of
    /// `idempotency_key`; the server receives the effect id in
    /// `params._meta["dev.openwop/idempotencyKey"]`.
    pub fn call_tool(
        &self,
        server_id: &str,
        name: &str,
        arguments: &Value,
        idempotency_key: Option<&str>,
    ) -> Result<Value, McpError> {
        convert(wit::call_tool(
            server_id,
            name,
            &arguments.to_string(),
            idempotency_key,
        ))
    }

    /// `tools/list` on `server_id`, one page at a time (pass the previous
    /// page's `nextCursor` as `cursor`). Only tools this pack may call are
    /// listed.
    pub fn list_tools(&self, server_id: &str, cursor: Option<&str>) -> Result<Value, McpError> {
        convert(wit::list_tools(server_id, cursor))
    }

    /// `resources/read` of `uri` on `server_id`.
    pub fn read_resource(&self, server_id: &str, uri: &str) -> Result<Value, McpError> {
        convert(wit::read_resource(server_id, uri))
    }

    /// The host's health document for `server_id`: `{serverId, transport,
    /// protocolVersion, state, restarts, lastError?}`.
    pub fn server_health(&self, server_id: &str) -> Result<Value, McpError> {
        convert(wit::server_health(server_id))
    }
}

/// Why an MCP operation did not produce a result, by protocol code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum McpErrorKind {
    /// `not_found`: unknown server, or one this pack may not see. Not sent.
    NotFound,
    /// `forbidden`: the server or tool is not requested by the manifest,
    /// not granted by the operator, or the principal lacks a scope. Not sent.
    Forbidden,
    /// `rate_limited`: `details.retryAfterMs` says when. Not sent.
    RateLimited,
    /// `budget_exhausted`: `details.dimension` names the budget. Not sent.
    BudgetExhausted,
    /// `mcp_error`: the server answered with a JSON-RPC error
    /// (`details.code`, `details.message`, `details.data`).
    Mcp,
    /// `upstream_unavailable`: transport failure, crash or timeout
    /// (`details.service: "mcp"`). Retryable.
    Unavailable,
    /// `interop_version_unsupported`: no protocol revision in common.
    VersionUnsupported,
    /// `mcp_result_too_large` / `tool_result_too_large`: the result
    /// exceeded a cap.
    TooLarge,
    /// `idempotency_in_flight` or `idempotency_key_mismatch`.
    Conflict,
    /// Any other code (e.g. `effect_outcome_unknown`, `internal_error`).
    Other,
}

impl McpErrorKind {
    /// The kind of a protocol error code.
    pub fn of(code: &str) -> Self {
        match code {
            "not_found" => Self::NotFound,
            "forbidden" => Self::Forbidden,
            "rate_limited" => Self::RateLimited,
            "budget_exhausted" => Self::BudgetExhausted,
            "mcp_error" => Self::Mcp,
            "upstream_unavailable" => Self::Unavailable,
            "interop_version_unsupported" => Self::VersionUnsupported,
            "mcp_result_too_large" | "tool_result_too_large" => Self::TooLarge,
            "idempotency_in_flight" | "idempotency_key_mismatch" => Self::Conflict,
            _ => Self::Other,
        }
    }
}

/// A failed MCP operation: its kind plus the protocol error. Converts into
/// [`NodeError`] unchanged, so `?` fails the node with the same code.
#[derive(Debug, Clone, PartialEq)]
pub struct McpError {
    /// Which kind of failure.
    pub kind: McpErrorKind,
    /// OpenWOP error code, e.g. `mcp_error`.
    pub code: String,
    /// Human-readable message.
    pub message: String,
    /// Machine-readable details (a JSON object), if any.
    pub details: Option<Value>,
}

impl McpError {
    fn from_wit(info: ErrorInfo) -> Self {
        let NodeError {
            code,
            message,
            details,
        } = NodeError::from_wit(info);
        Self {
            kind: McpErrorKind::of(&code),
            code,
            message,
            details,
        }
    }

    /// Whether retrying later may succeed (`upstream_unavailable`,
    /// `rate_limited`, `idempotency_in_flight`).
    pub fn retryable(&self) -> bool {
        matches!(
            self.kind,
            McpErrorKind::Unavailable | McpErrorKind::RateLimited
        ) || self.code == "idempotency_in_flight"
    }
}

impl fmt::Display for McpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl std::error::Error for McpError {}

impl From<McpError> for NodeError {
    fn from(e: McpError) -> Self {
        Self {
            code: e.code,
            message: e.message,
            details: e.details,
        }
    }
}
