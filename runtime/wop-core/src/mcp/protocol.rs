//! The MCP protocol's names and numbers, defined once for both sides of
//! `wop`: the client (`wop-mcp`, `ctx.mcp`) and the server (`wop serve`'s
//! `POST /mcp`). Plain constants; no transport here.

/// MCP revision 2024-11-05 (served; the client does not speak it).
pub const REV_2024_11_05: &str = "2024-11-05";
/// MCP revision 2025-03-26.
pub const REV_2025_03_26: &str = "2025-03-26";
/// MCP revision 2025-06-18.
pub const REV_2025_06_18: &str = "2025-06-18";
/// MCP revision 2025-11-25 (newest with an `initialize` handshake).
pub const REV_2025_11_25: &str = "2025-11-25";
/// MCP revision 2026-07-28 (stateless: `server/discover` + per-request `_meta`).
pub const REV_2026_07_28: &str = "2026-07-28";

/// The revisions the client speaks, oldest first.
pub const CLIENT_REVISIONS: [&str; 4] = [
    REV_2025_03_26,
    REV_2025_06_18,
    REV_2025_11_25,
    REV_2026_07_28,
];
/// The revisions the server serves, oldest first.
pub const SERVED_REVISIONS: [&str; 5] = [
    REV_2024_11_05,
    REV_2025_03_26,
    REV_2025_06_18,
    REV_2025_11_25,
    REV_2026_07_28,
];
/// The revision the server prefers for new clients.
pub const PREFERRED_REVISION: &str = REV_2026_07_28;
/// The newest revision negotiated with `initialize`.
pub const LATEST_INITIALIZE: &str = REV_2025_11_25;
/// The first stateless revision.
pub const FIRST_STATELESS: &str = REV_2026_07_28;

/// HTTP header: the session id (Streamable HTTP before 2026-07-28).
pub const HEADER_SESSION_ID: &str = "mcp-session-id";
/// HTTP header: the protocol revision of a request.
pub const HEADER_PROTOCOL_VERSION: &str = "mcp-protocol-version";
/// HTTP header: the JSON-RPC method of a request (2026-07-28).
pub const HEADER_METHOD: &str = "mcp-method";
/// HTTP header: the tool or resource a request names (2026-07-28).
pub const HEADER_NAME: &str = "mcp-name";

/// `_meta` key: the protocol revision of a stateless request.
pub const META_PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
/// `_meta` key: the client's capabilities on a stateless request.
pub const META_CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
/// `_meta` key: the idempotency key (the effect id) of a tool call.
pub const META_IDEMPOTENCY_KEY: &str = "dev.openwop/idempotencyKey";
/// `_meta` key: the run of a tool call (`wop serve`).
pub const META_RUN_ID: &str = "dev.openwop/runId";
/// `_meta` key: the node of a tool call (`wop serve`).
pub const META_NODE_ID: &str = "dev.openwop/nodeId";
/// `_meta` key: the attempt of a tool call (`wop serve`).
pub const META_ATTEMPT: &str = "dev.openwop/attempt";

/// JSON-RPC error codes.
pub mod jsonrpc {
    /// The request is not JSON.
    pub const PARSE_ERROR: i64 = -32700;
    /// The JSON is not a request.
    pub const INVALID_REQUEST: i64 = -32600;
    /// No such method.
    pub const METHOD_NOT_FOUND: i64 = -32601;
    /// Bad parameters.
    pub const INVALID_PARAMS: i64 = -32602;
    /// An error inside the server.
    pub const INTERNAL_ERROR: i64 = -32603;
    /// 2026-07-28: the header and `_meta` revisions disagree.
    pub const HEADER_MISMATCH: i64 = -32020;
    /// 2026-07-28: the revision is not supported.
    pub const UNSUPPORTED_VERSION: i64 = -32022;
    /// `wop`'s own (the implementation-defined range): the server refused
    /// the request for a limit before running it (`data.error` says which:
    /// `rate_limited` for the tenant's share of the invocation slots,
    /// `service_unavailable` for all of them; `data.retryAfterSecs` says
    /// when to retry, as the `Retry-After` header does).
    pub const REFUSED: i64 = -32001;
}
