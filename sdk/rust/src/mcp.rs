//! A client for the MCP servers the operator attached.

use std::marker::PhantomData;

use serde_json::Value;

use crate::bindings::openwop::node_pack::mcp as wit;
use crate::bindings::openwop::node_pack::types::ErrorInfo;
use crate::ctx::Ctx;
use crate::error::{NodeError, parse_lenient};

/// MCP client, from [`Ctx::mcp`].
///
/// Results are the MCP server's JSON, unaltered; an MCP result with
/// `isError: true` is a success value (the server answered).
#[derive(Debug, Clone, Copy)]
pub struct Mcp<'a> {
    _ctx: PhantomData<&'a Ctx>,
}

fn convert(result: Result<String, ErrorInfo>) -> Result<Value, NodeError> {
    result
        .map(|json| parse_lenient(&json))
        .map_err(NodeError::from_wit)
}

impl Mcp<'_> {
    pub(crate) fn new() -> Self {
        Self { _ctx: PhantomData }
    }

    /// `tools/call` `name` with `arguments` on `server_id`. Effects are
    /// claimed like [`Tools::call`](crate::Tools::call), including the
    /// meaning of `idempotency_key`.
    pub fn call_tool(
        &self,
        server_id: &str,
        name: &str,
        arguments: &Value,
        idempotency_key: Option<&str>,
    ) -> Result<Value, NodeError> {
        convert(wit::call_tool(
            server_id,
            name,
            &arguments.to_string(),
            idempotency_key,
        ))
    }

    /// `tools/list` on `server_id`, one page at a time (pass the previous
    /// page's `nextCursor` as `cursor`).
    pub fn list_tools(&self, server_id: &str, cursor: Option<&str>) -> Result<Value, NodeError> {
        convert(wit::list_tools(server_id, cursor))
    }

    /// `resources/read` of `uri` on `server_id`.
    pub fn read_resource(&self, server_id: &str, uri: &str) -> Result<Value, NodeError> {
        convert(wit::read_resource(server_id, uri))
    }

    /// The host's health document for `server_id`.
    pub fn server_health(&self, server_id: &str) -> Result<Value, NodeError> {
        convert(wit::server_health(server_id))
    }
}
