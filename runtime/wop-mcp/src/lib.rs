//! Host-side MCP client for wop: the transport/client layer behind
//! `ctx.mcp` (authorization, effects and events live above this crate).
//!
//! - [`config`]: operator configuration (plain serde data).
//! - [`McpHub`]: `call_tool`, `list_tools`, `read_resource`, `server_health`,
//!   `protocol_version` over stdio children and Streamable HTTP endpoints.
//! - [`McpError`]: typed failures with their protocol codes.
//!
//! Revisions: [`SUPPORTED_REVISIONS`]. The handshake probes `server/discover`
//! (2026-07-28) and falls back to `initialize` (2025-11-25 offered); the
//! revision a server answers is checked, and an unsupported one is
//! `interop_version_unsupported`.
//!
//! # Use of rmcp
//! Protocol vocabulary (revision constants, `initialize` params, the
//! SEP-2575 request `_meta` client context) comes from rmcp's model. The
//! wire is ours, because rmcp's client service and transports (3.11) do not
//! meet the hostile-server contract: results are re-typed (not returned
//! unaltered), the stdio codec drops lines over 16 MiB and keeps waiting,
//! the handshake does not check the answered `protocolVersion`, and stderr
//! handling is left to the caller.
//!
//! # Bounds (per server)
//! - time: every operation ends within `timeoutMs` (connect + handshake +
//!   answer); a stdio child's exit fails in-flight calls at once.
//! - memory: one incoming message (stdio line, HTTP JSON body, SSE event) is
//!   capped at `maxResultBytes` → `mcp_result_too_large`; stderr keeps the
//!   last 4 KiB; notifications are dropped as they arrive.
//! - identity: a response is taken only for its JSON-RPC id.

pub mod config;
mod error;
mod http;
mod hub;
mod lines;
mod protocol;
mod ring;
mod server;
mod session;
mod sse;
mod stdio;

pub use config::{McpServerConfig, McpTransportKind, ToolTier};
pub use error::{McpError, McpFailure};
pub use hub::{ExtraHeaders, McpHub};
pub use protocol::{
    REV_2025_03_26, REV_2025_06_18, REV_2025_11_25, REV_2026_07_28, SUPPORTED_REVISIONS,
};
pub use server::{ServerState, ServerStatus};

#[cfg(test)]
mod tests {
    #[test]
    fn hub_is_send_sync() {
        fn assert_send_sync<T: Send + Sync + 'static>() {}
        assert_send_sync::<super::McpHub>();
        assert_send_sync::<super::McpError>();
    }
}
