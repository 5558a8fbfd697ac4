//! [`McpHub`]: the host's MCP client over all configured servers.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Map, Value};

use crate::config::{McpServerConfig, validate_servers};
use crate::error::{McpError, McpFailure};
use crate::server::{Server, ServerStatus};
pub use crate::session::ExtraHeaders;

/// The host-side MCP client for a fixed set of configured servers.
///
/// `Send + Sync`; share it with `Arc<McpHub>`. Stdio servers start lazily on
/// first use (a call, a listing, a read or a health check) and are restarted
/// on the next use after they die, no sooner than an exponential backoff
/// (200 ms doubling to 30 s). Every operation, including any start and
/// handshake it triggers, finishes within the server's `timeoutMs`.
pub struct McpHub {
    servers: BTreeMap<String, Arc<Server>>,
}

impl std::fmt::Debug for McpHub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpHub")
            .field("servers", &self.servers.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl McpHub {
    /// A hub over `servers` (validated; the message names the offending key).
    /// Starts nothing.
    pub fn new(servers: BTreeMap<String, McpServerConfig>) -> Result<Self, String> {
        validate_servers(&servers)?;
        let mut built = BTreeMap::new();
        for (id, cfg) in servers {
            let server = Server::new(id.clone(), cfg)?;
            built.insert(id, Arc::new(server));
        }
        Ok(McpHub { servers: built })
    }

    /// The configured server ids.
    pub fn server_ids(&self) -> impl Iterator<Item = &str> {
        self.servers.keys().map(String::as_str)
    }

    /// The configuration of `server` (e.g. for its operator `tiers`).
    pub fn config(&self, server: &str) -> Option<&McpServerConfig> {
        self.servers.get(server).map(|s| s.config())
    }

    fn server(&self, server: &str) -> Result<&Arc<Server>, McpError> {
        self.servers.get(server).ok_or_else(|| McpError::NotFound {
            server: server.to_owned(),
        })
    }

    /// `tools/call`. `meta` goes into `params._meta` (e.g.
    /// `dev.openwop/idempotencyKey`). Returns the server's `CallToolResult`
    /// JSON as received; an `isError: true` result is `Ok`.
    pub async fn call_tool(
        &self,
        server: &str,
        name: &str,
        arguments: Value,
        meta: Map<String, Value>,
    ) -> Result<Value, McpError> {
        self.call_tool_by(server, name, arguments, meta, None)
            .await
            .map_err(|f| f.error)
    }

    /// [`McpHub::call_tool`], finished by `by` (besides the server's own
    /// `timeoutMs`), telling on failure whether the request may have
    /// reached the server ([`McpFailure::sent`]): a connect or handshake
    /// that fails or times out never sends it, so a caller holding an
    /// effect claim can give the claim back.
    pub async fn call_tool_by(
        &self,
        server: &str,
        name: &str,
        arguments: Value,
        meta: Map<String, Value>,
        by: Option<tokio::time::Instant>,
    ) -> Result<Value, McpFailure> {
        self.call_tool_with(server, name, arguments, meta, by, ExtraHeaders::new())
            .await
    }

    /// [`McpHub::call_tool_by`] with `headers` added to the request (the
    /// credentials the host attaches; HTTP servers only: a stdio server
    /// refuses them before sending).
    pub async fn call_tool_with(
        &self,
        server: &str,
        name: &str,
        arguments: Value,
        meta: Map<String, Value>,
        by: Option<tokio::time::Instant>,
        headers: ExtraHeaders,
    ) -> Result<Value, McpFailure> {
        let srv = self.server(server).map_err(McpFailure::not_sent)?;
        let mut base = Map::new();
        base.insert("name".into(), Value::String(name.to_owned()));
        if !arguments.is_null() {
            base.insert("arguments".into(), arguments);
        }
        srv.request("tools/call", base, meta, by, &headers).await
    }

    /// One page of `tools/list` as received (including `nextCursor`).
    pub async fn list_tools(
        &self,
        server: &str,
        cursor: Option<String>,
    ) -> Result<Value, McpError> {
        let srv = self.server(server)?;
        let mut base = Map::new();
        if let Some(c) = cursor {
            base.insert("cursor".into(), Value::String(c));
        }
        srv.request("tools/list", base, Map::new(), None, &Default::default())
            .await
            .map_err(|f| f.error)
    }

    /// `resources/read` as received.
    pub async fn read_resource(&self, server: &str, uri: &str) -> Result<Value, McpError> {
        let srv = self.server(server)?;
        let mut base = Map::new();
        base.insert("uri".into(), Value::String(uri.to_owned()));
        srv.request(
            "resources/read",
            base,
            Map::new(),
            None,
            &Default::default(),
        )
        .await
        .map_err(|f| f.error)
    }

    /// The host's health document: `{serverId, transport, protocolVersion,
    /// state: "ready"|"starting"|"down", restarts, lastError?}`. Starts the
    /// server if needed and pings it; a failure is reported in the document
    /// (`state: "down"`), not as an error. `starting` means another task is
    /// starting or restarting it right now. `restarts` counts child restarts
    /// (stdio) or new sessions after the first (HTTP).
    pub async fn server_health(&self, server: &str) -> Result<Value, McpError> {
        Ok(self.server(server)?.health().await)
    }

    /// Every configured server's state and counters, by id, without
    /// starting, pinging or waiting on any of them.
    pub fn statuses(&self) -> Vec<(String, ServerStatus)> {
        self.servers
            .iter()
            .map(|(id, s)| (id.clone(), s.status()))
            .collect()
    }

    /// The revision negotiated with `server` (recorded at its last connect).
    pub fn protocol_version(&self, server: &str) -> Option<String> {
        self.servers.get(server)?.protocol_version()
    }

    /// Stops every running stdio server now (dropping the hub does too).
    pub async fn shutdown(&self) {
        for s in self.servers.values() {
            s.shutdown().await;
        }
    }
}
