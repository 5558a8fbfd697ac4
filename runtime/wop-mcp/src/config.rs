//! Operator configuration for MCP servers: plain serde data.
//!
//! Defined in the pure core (`wop_core::policy::mcp`, the policy's `[mcp]`
//! section) and re-exported here, so the policy and the client share one
//! type. The client ignores the gate-only fields (`scopes`, `rateLimit`).

pub use wop_core::policy::mcp::{
    DEFAULT_MAX_RESULT_BYTES, DEFAULT_TIMEOUT_MS, MAX_SERVER_ID_LEN, McpServerConfig,
    McpTransportKind, ToolTier, is_valid_server_id, validate_servers,
};
