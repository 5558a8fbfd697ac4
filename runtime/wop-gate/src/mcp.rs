//! `ctx.mcp` through the gate.
//!
//! One [`McpGateway`] per runtime holds the [`McpHub`] (stdio servers are
//! started once per hub, not per invocation) and the operator's server
//! configuration. A [`PackMcp`] is one pack's view of it: what its manifest
//! requests (`x-wop.mcp`) and what the operator grants (`[packs.<name>]
//! mcp`); authorization is their intersection (`wop_core::policy::mcp`),
//! fail closed.
//!
//! - `call-tool` is the gate tool `mcp:<server>/<tool>` (transport `mcp`):
//!   authorization here, then [`Gate::call_authorized`] — rate limit,
//!   budget, the effect claim for `write`/`exec` tools (the effect id is
//!   sent in `params._meta["dev.openwop/idempotencyKey"]`), the audit
//!   pair, usage from the receipt. A denial is a [`Gate::deny`]: never
//!   sent, audited with status `forbidden` (or `error` for `not_found`).
//! - `list-tools`, `read-resource` and `server-health` are reads on the
//!   server: the server must be visible and granted; `list-tools` keeps
//!   only the tools the pack may call.
//!
//! Results are the server's JSON unaltered (an `isError: true` result is
//! a success). [`McpError`]s keep their codes and `details`.

use crate::tools::{RegisteredTool, SafetyTier, ToolCall, ToolDescriptor, ToolFailure, ToolSource};
use crate::{CallReceipt, CallScope, Gate, GateError, GateErrorKind};
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use wop_core::error::ErrorCode;
use wop_core::policy::mcp::{
    McpDenial, McpRequest, McpServerConfig, ToolTier, authorize_server, authorize_tool,
    tool_allowed, tool_id,
};
use wop_mcp::{McpError, McpHub};

/// The `params._meta` key that carries the effect id to the server.
pub const IDEMPOTENCY_META_KEY: &str = "dev.openwop/idempotencyKey";

/// The runtime's MCP client and server configuration (one per runtime).
pub struct McpGateway {
    hub: Arc<McpHub>,
    servers: BTreeMap<String, McpServerConfig>,
}

impl std::fmt::Debug for McpGateway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpGateway")
            .field("servers", &self.servers.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl McpGateway {
    /// A gateway over the operator's servers (validated; starts nothing).
    pub fn new(servers: BTreeMap<String, McpServerConfig>) -> Result<Self, String> {
        let hub = McpHub::new(servers.clone())?;
        Ok(Self {
            hub: Arc::new(hub),
            servers,
        })
    }

    /// The client (e.g. for operators and benchmarks).
    pub fn hub(&self) -> &Arc<McpHub> {
        &self.hub
    }

    /// The configured servers.
    pub fn servers(&self) -> &BTreeMap<String, McpServerConfig> {
        &self.servers
    }

    /// Every tool of every configured server that a principal holding
    /// `scopes` may see, as catalog descriptors (source `mcp`, operator
    /// tiers), sorted by `toolId`; plus the servers that could not be
    /// listed. Contacts the servers (at most 50 pages each).
    pub async fn catalog(
        &self,
        scopes: &[String],
    ) -> (Vec<ToolDescriptor>, Vec<(String, McpError)>) {
        let mut tools = Vec::new();
        let mut failed = Vec::new();
        for (id, cfg) in &self.servers {
            if cfg.scopes.iter().any(|s| !scopes.contains(s)) {
                continue;
            }
            let mut cursor = None;
            for _ in 0..50 {
                let page = match self.hub.list_tools(id, cursor.take()).await {
                    Ok(p) => p,
                    Err(e) => {
                        failed.push((id.clone(), e));
                        break;
                    }
                };
                for t in page
                    .get("tools")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    let Some(name) = t.get("name").and_then(Value::as_str) else {
                        continue;
                    };
                    let mut d = descriptor(id, name, cfg);
                    d.description = t
                        .get("description")
                        .and_then(Value::as_str)
                        .map(str::to_owned);
                    d.input_schema = t.get("inputSchema").filter(|v| v.is_object()).cloned();
                    tools.push(d);
                }
                cursor = page
                    .get("nextCursor")
                    .and_then(Value::as_str)
                    .map(str::to_owned);
                if cursor.is_none() {
                    break;
                }
            }
        }
        tools.sort_by(|a, b| a.tool_id.cmp(&b.tool_id));
        (tools, failed)
    }

    /// One pack's view: its manifest request and the operator's grant.
    pub fn for_pack(self: &Arc<Self>, request: McpRequest, grants: Vec<String>) -> PackMcp {
        PackMcp {
            gateway: self.clone(),
            request,
            grants,
        }
    }
}

/// The catalog descriptor of MCP tool `name` on `server`: source `mcp`, the
/// operator's tier (unclassified → `write`; server annotations are never
/// consulted), the server's scopes.
pub fn descriptor(server: &str, name: &str, cfg: &McpServerConfig) -> ToolDescriptor {
    let tier = match cfg.tier_of(name) {
        ToolTier::Pure => SafetyTier::Pure,
        ToolTier::Read => SafetyTier::Read,
        ToolTier::Write => SafetyTier::Write,
        ToolTier::Exec => SafetyTier::Exec,
    };
    let mut d = ToolDescriptor::new(tool_id(server, name), ToolSource::Mcp, tier);
    d.title = Some(format!("MCP {server}/{name}"));
    d.egress = Some(crate::tools::Egress::HostOwned);
    d.auth = (!cfg.scopes.is_empty()).then(|| crate::tools::ToolAuth {
        scopes: cfg.scopes.clone(),
        credential_ref: false,
    });
    d
}

/// One pack's MCP view (see the module docs).
#[derive(Clone)]
pub struct PackMcp {
    gateway: Arc<McpGateway>,
    request: McpRequest,
    grants: Vec<String>,
}

impl std::fmt::Debug for PackMcp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PackMcp")
            .field("request", &self.request)
            .field("grants", &self.grants)
            .finish()
    }
}

fn gate_error(kind: GateErrorKind, code: &str, message: String, details: Value) -> GateError {
    GateError {
        kind,
        code: ErrorCode::parse(code).unwrap_or(ErrorCode::InternalError),
        message,
        details,
    }
}

/// The gate error of a refusal before the server is contacted.
fn denial_error(server: &str, tool: Option<&str>, d: McpDenial) -> GateError {
    let what = match tool {
        Some(t) => format!("MCP tool `{server}/{t}`"),
        None => format!("MCP server `{server}`"),
    };
    let tool_name = tool.map(|t| tool_id(server, t));
    let forbidden = |reason: &str, message: String, required: Vec<String>| {
        gate_error(
            GateErrorKind::Forbidden,
            ErrorCode::Forbidden.as_str(),
            message,
            json!({"scope": "mcp", "serverId": server, "toolName": tool_name, "reason": reason, "requiredScopes": required}),
        )
    };
    match d {
        McpDenial::NotFound => gate_error(
            GateErrorKind::NotFound,
            ErrorCode::NotFound.as_str(),
            format!("no MCP server `{server}` is available to this pack"),
            json!({"service": "mcp", "serverId": server}),
        ),
        McpDenial::NotDeclared => forbidden(
            "not-declared",
            format!("{what} is not requested in this pack's manifest (`x-wop.mcp.tools`)"),
            Vec::new(),
        ),
        McpDenial::NotGranted => forbidden(
            "not-granted",
            format!("{what} is not granted to this pack (operator policy [packs.<name>] mcp)"),
            Vec::new(),
        ),
        McpDenial::MissingScopes { required, missing } => forbidden(
            "missing-scopes",
            format!(
                "the principal lacks scope(s) {} required by {what}",
                missing.join(", ")
            ),
            required,
        ),
        McpDenial::PolicyError(e) => forbidden(
            "policy-error",
            format!(
                "the authorization decision for {what} could not be evaluated, so it was denied: {e}"
            ),
            Vec::new(),
        ),
    }
}

fn code_of(e: &McpError) -> ErrorCode {
    match e {
        McpError::NotFound { .. } => ErrorCode::NotFound,
        McpError::Rpc { .. } => ErrorCode::McpError,
        McpError::Unavailable { .. } => ErrorCode::UpstreamUnavailable,
        McpError::VersionUnsupported { .. } => ErrorCode::InteropVersionUnsupported,
        McpError::TooLarge { .. } => ErrorCode::McpResultTooLarge,
    }
}

/// An [`McpError`] as the gate error a pack sees (reads).
pub fn mcp_gate_error(e: &McpError) -> GateError {
    let code = code_of(e);
    let kind = if code == ErrorCode::NotFound {
        GateErrorKind::NotFound
    } else {
        GateErrorKind::Failed
    };
    gate_error(kind, code.as_str(), e.to_string(), e.details())
}

/// An [`McpError`] as a provider failure (`tools/call`), telling the gate
/// whether anything reached the server.
fn failure(e: &McpError) -> ToolFailure {
    let code = code_of(e).as_str();
    let mut f = match e {
        // Refused before the request was written (unknown id, handshake).
        McpError::NotFound { .. } | McpError::VersionUnsupported { .. } => {
            ToolFailure::not_sent(code, e.to_string())
        }
        // The server answered (with an error, or too much).
        McpError::Rpc { .. } | McpError::TooLarge { .. } => {
            ToolFailure::answered(code, e.to_string(), None)
        }
        // Sent, maybe performed, no answer.
        McpError::Unavailable { .. } => ToolFailure::unknown(code, e.to_string()),
    };
    f.details = Some(e.details());
    f
}

fn timed_out(ms: u128) -> McpError {
    McpError::Unavailable {
        reason: format!("no answer within {ms} ms (the invocation's remaining time)"),
    }
}

/// Performs `tools/call` for the gate.
struct McpTool {
    hub: Arc<McpHub>,
    server: String,
    name: String,
}

#[async_trait::async_trait]
impl crate::ToolProvider for McpTool {
    async fn call(&self, call: ToolCall) -> Result<Value, ToolFailure> {
        let mut meta = Map::new();
        if let Some(k) = &call.idempotency_key {
            meta.insert(IDEMPOTENCY_META_KEY.to_owned(), Value::String(k.clone()));
        }
        let fut = self
            .hub
            .call_tool(&self.server, &self.name, call.arguments, meta);
        match tokio::time::timeout(call.timeout, fut).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(failure(&e)),
            Err(_) => Err(failure(&timed_out(call.timeout.as_millis()))),
        }
    }
}

/// What [`call_tool`] did at the gate, when the call reached it.
pub(crate) type Performed = Option<(String, CallReceipt)>;

/// `mcp.call-tool`: authorization, then the gate as `mcp:<server>/<name>`.
pub(crate) async fn call_tool(
    gate: &Gate,
    mcp: Option<&PackMcp>,
    scope: &mut CallScope<'_>,
    server: &str,
    name: &str,
    arguments: Value,
    idempotency_key: Option<&str>,
) -> (Result<Value, GateError>, Performed) {
    let tid = tool_id(server, name);
    let decided = match mcp {
        None => Err(McpDenial::NotFound),
        Some(m) => authorize_tool(
            &m.request,
            &m.grants,
            &m.gateway.servers,
            server,
            name,
            &scope.site.principal.scopes,
        )
        .map(|cfg| (m, cfg)),
    };
    let (m, cfg) = match decided {
        Ok(x) => x,
        Err(d) => {
            let e = denial_error(server, Some(name), d);
            return (Err(gate.deny(scope, &tid, &arguments, e)), None);
        }
    };
    let tool = RegisteredTool {
        descriptor: descriptor(server, name, cfg),
        tenants: None,
        rate: cfg.rate_limit,
        timeout: Duration::from_millis(cfg.timeout_ms),
        provider: Arc::new(McpTool {
            hub: m.gateway.hub.clone(),
            server: server.to_owned(),
            name: name.to_owned(),
        }),
    };
    let (r, receipt) = gate
        .call_authorized(scope, &tool, arguments, idempotency_key)
        .await;
    (r, Some((tid, receipt)))
}

/// A read on a server.
pub(crate) enum Read<'a> {
    /// `tools/list` (one page).
    Tools(Option<String>),
    /// `resources/read`.
    Resource(&'a str),
    /// The host's health document.
    Health,
}

/// `list-tools`, `read-resource`, `server-health`: the server must be
/// visible and granted; bounded by the invocation's deadline.
pub(crate) async fn read(
    mcp: Option<&PackMcp>,
    principal_scopes: &[String],
    deadline: Instant,
    server: &str,
    op: Read<'_>,
) -> Result<Value, GateError> {
    let Some(m) = mcp else {
        return Err(denial_error(server, None, McpDenial::NotFound));
    };
    authorize_server(
        &m.request,
        &m.grants,
        &m.gateway.servers,
        server,
        principal_scopes,
    )
    .map_err(|d| denial_error(server, None, d))?;
    let hub = &m.gateway.hub;
    let within = deadline.saturating_duration_since(Instant::now());
    let list = matches!(op, Read::Tools(_));
    let fut = async {
        match op {
            Read::Tools(cursor) => hub.list_tools(server, cursor).await,
            Read::Resource(uri) => hub.read_resource(server, uri).await,
            Read::Health => hub.server_health(server).await,
        }
    };
    let mut v = match tokio::time::timeout(within, fut).await {
        Ok(r) => r.map_err(|e| mcp_gate_error(&e))?,
        Err(_) => return Err(mcp_gate_error(&timed_out(within.as_millis()))),
    };
    if list && let Some(Value::Array(tools)) = v.get_mut("tools") {
        tools.retain(|t| {
            t.get("name")
                .and_then(Value::as_str)
                .is_some_and(|n| tool_allowed(&m.request, &m.grants, server, n).is_ok())
        });
    }
    Ok(v)
}
