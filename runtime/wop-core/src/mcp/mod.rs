//! MCP (`ctx.mcp`): the protocol's names and numbers ([`protocol`]), the
//! operator's `[mcp]` servers, what a pack's manifest requests and the
//! grant model. The policy's `[mcp]` section is read from here (also at
//! its old path, `policy::mcp`).
//!
//! Plain serde data and pure checks (`wop-mcp` re-exports them as
//! `wop_mcp::config`):
//!
//! - [`McpSection`] / [`McpServerConfig`]: `[mcp.servers.<id>]` — transport,
//!   command or URL (operator-trusted, never from a pack), timeouts, caps,
//!   the operator's tool tiers (unclassified → `write`), required scopes
//!   and a rate limit per (principal, tool).
//! - [`McpRequest`]: what a pack's manifest asks for (`x-wop.mcp`).
//! - [`authorize_server`] / [`authorize_tool`]: request ∩ operator grant
//!   (`[packs.<name>] mcp`), fail closed.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::ratelimit::RateSpec;

mod grants;
pub mod protocol;

pub use grants::*;

/// Default per-call timeout in milliseconds.
pub const DEFAULT_TIMEOUT_MS: u64 = 10_000;
/// Default cap on one result message in bytes (1 MiB).
pub const DEFAULT_MAX_RESULT_BYTES: u64 = 1024 * 1024;
/// Longest accepted server id.
pub const MAX_SERVER_ID_LEN: usize = 64;

/// How the host reaches one MCP server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum McpTransportKind {
    /// A child process speaking newline-delimited JSON-RPC on stdin/stdout.
    /// Operator-trusted: the command runs with the host's privileges.
    #[serde(rename = "stdio")]
    Stdio,
    /// MCP Streamable HTTP.
    #[serde(rename = "streamable-http")]
    StreamableHttp,
}

impl McpTransportKind {
    /// The configuration spelling (`stdio` or `streamable-http`).
    pub fn as_str(self) -> &'static str {
        match self {
            McpTransportKind::Stdio => "stdio",
            McpTransportKind::StreamableHttp => "streamable-http",
        }
    }
}

/// The operator's safety classification of one tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolTier {
    /// No side effects, deterministic.
    Pure,
    /// Reads state, changes nothing.
    Read,
    /// Changes state (the default for unclassified tools).
    Write,
    /// Executes code or commands.
    Exec,
}

impl ToolTier {
    /// The protocol spelling (`pure`, `read`, `write`, `exec`).
    pub fn as_str(self) -> &'static str {
        match self {
            ToolTier::Pure => "pure",
            ToolTier::Read => "read",
            ToolTier::Write => "write",
            ToolTier::Exec => "exec",
        }
    }
}

/// Configuration of one MCP server id.
///
/// One flat record (so `deny_unknown_fields` holds): `command`, `args`, `env`
/// and `cwd` belong to `stdio`; `url` and `headers` to `streamable-http`;
/// [`McpServerConfig::validate`] refuses a key of the other transport.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct McpServerConfig {
    /// `stdio` or `streamable-http`.
    pub transport: McpTransportKind,
    /// stdio: program to run (looked up on the configured or host `PATH`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// stdio: arguments.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// stdio: the child's whole environment besides `PATH` (the host's is cleared).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// stdio: working directory; the host's when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// streamable-http: endpoint URL (`http` or `https`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// streamable-http: extra request headers (e.g. authorization).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// Per-call timeout in milliseconds (default 10000), covering connect,
    /// handshake and the response.
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u64,
    /// Largest accepted result message in bytes (default 1 MiB).
    #[serde(default = "default_max_result_bytes")]
    pub max_result_bytes: u64,
    /// Operator classification: tool name → tier. Unclassified tools are `write`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tiers: BTreeMap<String, ToolTier>,
    /// Scopes a principal must hold (all of them) to call this server's tools.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scopes: Vec<String>,
    /// Rate limit per (principal, tool) for `tools/call`; none by default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_limit: Option<RateSpec>,
}

fn default_timeout_ms() -> u64 {
    DEFAULT_TIMEOUT_MS
}

fn default_max_result_bytes() -> u64 {
    DEFAULT_MAX_RESULT_BYTES
}

impl McpServerConfig {
    /// A stdio server config with defaults.
    pub fn stdio(command: impl Into<String>, args: Vec<String>) -> Self {
        McpServerConfig {
            command: Some(command.into()),
            args,
            ..Self::empty(McpTransportKind::Stdio)
        }
    }

    /// A Streamable HTTP server config with defaults.
    pub fn streamable_http(url: impl Into<String>) -> Self {
        McpServerConfig {
            url: Some(url.into()),
            ..Self::empty(McpTransportKind::StreamableHttp)
        }
    }

    fn empty(transport: McpTransportKind) -> Self {
        McpServerConfig {
            transport,
            command: None,
            args: Vec::new(),
            env: BTreeMap::new(),
            cwd: None,
            url: None,
            headers: BTreeMap::new(),
            timeout_ms: DEFAULT_TIMEOUT_MS,
            max_result_bytes: DEFAULT_MAX_RESULT_BYTES,
            tiers: BTreeMap::new(),
            scopes: Vec::new(),
            rate_limit: None,
        }
    }

    /// The operator tier of tool `name`; unclassified tools are [`ToolTier::Write`]
    /// (server-provided annotations are untrusted and never consulted).
    pub fn tier_of(&self, name: &str) -> ToolTier {
        self.tiers.get(name).copied().unwrap_or(ToolTier::Write)
    }

    /// Checks values serde cannot; the message names the offending key.
    pub fn validate(&self) -> Result<(), String> {
        if self.timeout_ms == 0 {
            return Err("timeoutMs: must be greater than 0".into());
        }
        if self.max_result_bytes == 0 {
            return Err("maxResultBytes: must be greater than 0".into());
        }
        if self.tiers.keys().any(String::is_empty) {
            return Err("tiers: tool name must not be empty".into());
        }
        if let Some(r) = &self.rate_limit {
            r.validate().map_err(|e| format!("rateLimit: {e}"))?;
        }
        match self.transport {
            McpTransportKind::Stdio => self.validate_stdio(),
            McpTransportKind::StreamableHttp => self.validate_http(),
        }
    }

    fn validate_stdio(&self) -> Result<(), String> {
        if self.url.is_some() {
            return Err("url: not allowed for transport stdio".into());
        }
        if !self.headers.is_empty() {
            return Err("headers: not allowed for transport stdio".into());
        }
        match &self.command {
            Some(c) if !c.trim().is_empty() => {}
            _ => return Err("command: required (non-empty) for transport stdio".into()),
        }
        for key in self.env.keys() {
            if key.is_empty() || key.contains('=') || key.contains('\0') {
                return Err(format!("env: invalid variable name {key:?}"));
            }
        }
        Ok(())
    }

    fn validate_http(&self) -> Result<(), String> {
        for (key, present) in [
            ("command", self.command.is_some()),
            ("args", !self.args.is_empty()),
            ("env", !self.env.is_empty()),
            ("cwd", self.cwd.is_some()),
        ] {
            if present {
                return Err(format!("{key}: not allowed for transport streamable-http"));
            }
        }
        let url = self.url.as_deref().unwrap_or("");
        let lower = url.to_ascii_lowercase();
        let rest = lower
            .strip_prefix("http://")
            .or_else(|| lower.strip_prefix("https://"));
        match rest {
            Some(r) if !r.is_empty() && !r.starts_with('/') => {}
            _ => {
                return Err(format!(
                    "url: required http(s) URL with a host, got {url:?}"
                ));
            }
        }
        for (name, value) in &self.headers {
            let valid_name = !name.is_empty()
                && name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
            if !valid_name {
                return Err(format!("headers: invalid header name {name:?}"));
            }
            if value.bytes().any(|b| b == b'\r' || b == b'\n' || b == 0) {
                return Err(format!("headers.{name}: invalid header value"));
            }
        }
        Ok(())
    }
}

/// Whether `id` is a valid server id: `^[a-z0-9][a-z0-9._-]{0,63}$`.
pub fn is_valid_server_id(id: &str) -> bool {
    let bytes = id.as_bytes();
    match bytes.first() {
        Some(b) if b.is_ascii_lowercase() || b.is_ascii_digit() => {}
        _ => return false,
    }
    bytes.len() <= MAX_SERVER_ID_LEN
        && bytes.iter().all(|b| {
            b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'.' | b'_' | b'-')
        })
}

/// Validates a whole server map; the message names the server id and key.
pub fn validate_servers(servers: &BTreeMap<String, McpServerConfig>) -> Result<(), String> {
    for (id, config) in servers {
        if !is_valid_server_id(id) {
            return Err(format!(
                "mcp.servers: invalid server id {id:?} (must match ^[a-z0-9][a-z0-9._-]{{0,63}}$)"
            ));
        }
        config
            .validate()
            .map_err(|msg| format!("mcp.servers.{id}.{msg}"))?;
    }
    Ok(())
}

/// `[mcp]`: the MCP servers this host may reach.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpSection {
    /// Server id → configuration (`[mcp.servers.<id>]`).
    #[serde(default)]
    pub servers: BTreeMap<String, McpServerConfig>,
}

impl McpSection {
    /// Checks every server; the message names `mcp.servers.<id>.<key>`.
    pub fn validate(&self) -> Result<(), String> {
        validate_servers(&self.servers)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_stdio_with_defaults() -> Result<(), serde_json::Error> {
        let c: McpServerConfig = serde_json::from_value(serde_json::json!({
            "transport": "stdio", "command": "node", "args": ["x.js"],
            "tiers": {"echo": "pure"}
        }))?;
        assert_eq!(c.timeout_ms, DEFAULT_TIMEOUT_MS);
        assert_eq!(c.max_result_bytes, DEFAULT_MAX_RESULT_BYTES);
        assert_eq!(c.tier_of("echo"), ToolTier::Pure);
        assert_eq!(c.tier_of("other"), ToolTier::Write);
        assert_eq!(c.transport, McpTransportKind::Stdio);
        assert!(c.validate().is_ok());
        Ok(())
    }

    #[test]
    fn parses_http() -> Result<(), serde_json::Error> {
        let c: McpServerConfig = serde_json::from_value(serde_json::json!({
            "transport": "streamable-http", "url": "http://127.0.0.1:1/mcp",
            "headers": {"Authorization": "Bearer x"}, "timeoutMs": 500
        }))?;
        assert_eq!(c.timeout_ms, 500);
        assert_eq!(c.transport, McpTransportKind::StreamableHttp);
        assert!(c.validate().is_ok());
        Ok(())
    }

    #[test]
    fn rejects_unknown_keys_and_transports() {
        let bad = serde_json::from_value::<McpServerConfig>(serde_json::json!({
            "transport": "stdio", "command": "x", "bogus": 1
        }));
        assert!(bad.is_err());
        let bad = serde_json::from_value::<McpServerConfig>(serde_json::json!({
            "transport": "websocket", "url": "ws://x"
        }));
        assert!(bad.is_err());
        let bad = serde_json::from_value::<McpServerConfig>(serde_json::json!({
            "transport": "stdio", "command": "x", "tiers": {"a": "admin"}
        }));
        assert!(bad.is_err());
        let wrong_key = serde_json::from_value::<McpServerConfig>(serde_json::json!({
            "transport": "stdio", "command": "x", "url": "http://a/"
        }));
        assert!(matches!(wrong_key.map(|c| c.validate()), Ok(Err(m)) if m.starts_with("url")));
    }

    #[test]
    fn validate_names_the_key() {
        let mut c = McpServerConfig::stdio("", vec![]);
        assert!(matches!(c.validate(), Err(m) if m.starts_with("command")));
        c = McpServerConfig::streamable_http("ftp://x");
        assert!(matches!(c.validate(), Err(m) if m.starts_with("url")));
        c = McpServerConfig::stdio("node", vec![]);
        c.timeout_ms = 0;
        assert!(matches!(c.validate(), Err(m) if m.starts_with("timeoutMs")));
        let mut servers = BTreeMap::new();
        servers.insert("Bad".to_string(), McpServerConfig::stdio("node", vec![]));
        assert!(matches!(validate_servers(&servers), Err(m) if m.contains("\"Bad\"")));
    }

    #[test]
    fn server_ids() {
        assert!(is_valid_server_id("a"));
        assert!(is_valid_server_id("github.v2_x-1"));
        assert!(is_valid_server_id(&"a".repeat(64)));
        assert!(!is_valid_server_id(&"a".repeat(65)));
        assert!(!is_valid_server_id(""));
        assert!(!is_valid_server_id("-a"));
        assert!(!is_valid_server_id(".a"));
        assert!(!is_valid_server_id("A"));
        assert!(!is_valid_server_id("a/b"));
    }
}
