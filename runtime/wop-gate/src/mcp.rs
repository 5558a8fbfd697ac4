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
//! - `list-tools` and `read-resource` are gate calls too, of the read
//!   tools `mcp:<server>#tools/list` and `mcp:<server>#resources/read`
//!   (decision 0017): authorized here (`tools/list` needs a tool grant on
//!   the server, `resources/read` a resource grant whose URI pattern, like
//!   the manifest's, allows the URI), then [`Gate::call_authorized`] —
//!   the same rate limit (the server's `rateLimit`, per principal and
//!   operation), run budget, loop bound and audit pair as a call, counted
//!   in usage. `list-tools` keeps only the tools the pack may call.
//! - `server-health` is the host's own document (it may start and ping the
//!   server), a gate call too, of the read tool `mcp:<server>#server-health`:
//!   authorized here (the server must be visible and granted: a tool or a
//!   resource grant), then [`Gate::call_authorized`] — the server's rate
//!   limit, the run budget, the audit pair, usage — like the other reads.
//!
//! Results are the server's JSON unaltered (an `isError: true` result is
//! a success). [`McpError`]s keep their codes and `details`.

use crate::tools::{RegisteredTool, SafetyTier, ToolCall, ToolDescriptor, ToolFailure, ToolSource};
use crate::{CallReceipt, CallScope, Gate, GateError, GateErrorKind};
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use wop_core::error::ErrorCode;
use wop_core::policy::mcp::{
    McpDenial, McpGrant, McpRequest, McpServerConfig, ToolTier, authorize_health,
    authorize_resource, authorize_server, authorize_tool, read_id, tool_allowed, tool_id,
};
use wop_mcp::{McpError, McpFailure, McpHub};
pub use wop_mcp::{ServerState, ServerStatus};

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
    pub fn for_pack(self: &Arc<Self>, request: McpRequest, grant: McpGrant) -> PackMcp {
        PackMcp {
            gateway: self.clone(),
            request,
            grant,
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

/// The catalog-style descriptor of a read on `server` (`method` is
/// `tools/list` or `resources/read`): the gate tool
/// `mcp:<server>#<method>`, tier `read`, the server's scopes.
fn read_descriptor(server: &str, method: &str, cfg: &McpServerConfig) -> ToolDescriptor {
    let mut d = ToolDescriptor::new(read_id(server, method), ToolSource::Mcp, SafetyTier::Read);
    d.title = Some(format!("MCP {server} {method}"));
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
    grant: McpGrant,
}

impl std::fmt::Debug for PackMcp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PackMcp")
            .field("request", &self.request)
            .field("grant", &self.grant)
            .finish()
    }
}

/// What an MCP denial is about.
#[derive(Clone, Copy)]
enum Target<'a> {
    /// The server itself (listing, health).
    Server,
    /// A tool.
    Tool(&'a str),
    /// A resource URI.
    Resource(&'a str),
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
fn denial_error(server: &str, target: Target<'_>, d: McpDenial) -> GateError {
    let (what, tool_name, uri, request_key, grant_key) = match target {
        Target::Tool(t) => (
            format!("MCP tool `{server}/{t}`"),
            Some(tool_id(server, t)),
            None,
            "`x-wop.mcp.tools`",
            "[packs.<name>] mcp",
        ),
        Target::Resource(u) => (
            format!("MCP resource `{u}` on server `{server}`"),
            Some(read_id(server, "resources/read")),
            Some(u),
            "`x-wop.mcp.resources`",
            "[packs.<name>] mcpResources; a tool grant does not allow reads",
        ),
        Target::Server => (
            format!("MCP server `{server}`"),
            None,
            None,
            "`x-wop.mcp`",
            "[packs.<name>] mcp",
        ),
    };
    let forbidden = |reason: &str, message: String, required: Vec<String>| {
        let mut d = json!({"scope": "mcp", "serverId": server, "toolName": tool_name, "reason": reason, "requiredScopes": required});
        if let (Some(u), Some(o)) = (uri, d.as_object_mut()) {
            o.insert("uri".to_owned(), Value::String(u.to_owned()));
        }
        gate_error(
            GateErrorKind::Forbidden,
            ErrorCode::Forbidden.as_str(),
            message,
            d,
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
            format!("{what} is not requested in this pack's manifest ({request_key})"),
            Vec::new(),
        ),
        McpDenial::NotGranted => forbidden(
            "not-granted",
            format!("{what} is not granted to this pack (operator policy {grant_key})"),
            Vec::new(),
        ),
        McpDenial::UriNotPlain => forbidden(
            "uri-not-plain",
            format!(
                "{what} has `.`/`..` segments, percent-encoded `.`, `/` or `\\`, a `\\` or whitespace; only an exact URI pattern allows such a URI, never a prefix: request the URI in its plain form"
            ),
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

/// An [`McpError`] as a provider failure, telling the gate whether
/// anything reached the server.
fn failure(e: &McpError) -> ToolFailure {
    classify(&McpFailure {
        error: e.clone(),
        sent: !matches!(
            e,
            McpError::NotFound { .. } | McpError::VersionUnsupported { .. }
        ),
    })
}

/// A failed `tools/call` as a provider failure (decision 0007): refused
/// before the request was written — unknown server, no common revision, a
/// connect or handshake that failed or timed out — is `not_sent`, so the
/// gate releases the effect claim and a retry reaches the server; the
/// server's answer (an error, or too much) is the outcome; sent and never
/// answered is unknown.
fn classify(f: &McpFailure) -> ToolFailure {
    let e = &f.error;
    let code = code_of(e).as_str();
    let mut out = if !f.sent {
        ToolFailure::not_sent(code, e.to_string())
    } else {
        match e {
            McpError::Rpc { .. } | McpError::TooLarge { .. } => {
                ToolFailure::answered(code, e.to_string(), None)
            }
            McpError::NotFound { .. } | McpError::VersionUnsupported { .. } => {
                ToolFailure::not_sent(code, e.to_string())
            }
            McpError::Unavailable { .. } => ToolFailure::unknown(code, e.to_string()),
        }
    };
    out.details = Some(e.details());
    out
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
        // The hub keeps the deadline itself, so a connect or handshake that
        // runs out of time is known not to have sent the call.
        if let Some(tp) = &call.traceparent {
            meta.insert("traceparent".to_owned(), Value::String(tp.clone()));
        }
        let by = tokio::time::Instant::now() + call.timeout;
        let headers: reqwest::header::HeaderMap =
            call.credentials.iter().filter_map(|c| c.header()).collect();
        self.hub
            .call_tool_with(
                &self.server,
                &self.name,
                call.arguments,
                meta,
                Some(by),
                headers,
            )
            .await
            .map_err(|f| classify(&f))
    }

    fn destination(&self) -> Option<String> {
        let url = self.hub.config(&self.server)?.url.as_deref()?;
        let u = reqwest::Url::parse(url).ok()?;
        let host = u.host_str()?;
        Some(match u.port() {
            Some(p) => format!("{host}:{p}"),
            None => host.to_owned(),
        })
    }
}

/// What [`run`] did at the gate, when the operation reached it.
pub(crate) type Performed = Option<(String, CallReceipt)>;

/// One `ctx.mcp` operation that passes the gate.
pub(crate) enum Op<'a> {
    /// `tools/call` of a tool, with the pack's idempotency key if any.
    Call {
        /// The tool.
        name: &'a str,
        /// Its arguments.
        arguments: Value,
        /// The pack's business key.
        idempotency_key: Option<&'a str>,
    },
    /// `tools/list` (one page).
    Tools(Option<String>),
    /// `resources/read`.
    Resource(&'a str),
    /// The host's health document for the server.
    Health,
}

/// Performs a read for the gate (`tools/list` or `resources/read`).
struct McpRead {
    hub: Arc<McpHub>,
    server: String,
    method: &'static str,
}

#[async_trait::async_trait]
impl crate::ToolProvider for McpRead {
    async fn call(&self, call: ToolCall) -> Result<Value, ToolFailure> {
        let arg = |k: &str| {
            call.arguments
                .get(k)
                .and_then(Value::as_str)
                .map(str::to_owned)
        };
        let hub = &self.hub;
        let fut = async {
            match self.method {
                "tools/list" => hub.list_tools(&self.server, arg("cursor")).await,
                "server-health" => hub.server_health(&self.server).await,
                _ => {
                    let uri = arg("uri").unwrap_or_default();
                    hub.read_resource(&self.server, &uri).await
                }
            }
        };
        match tokio::time::timeout(call.timeout, fut).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(failure(&e)),
            Err(_) => Err(failure(&timed_out(call.timeout.as_millis()))),
        }
    }
}

/// `call-tool`, `list-tools`, `read-resource`, `server-health`:
/// authorization here (fail closed), then the gate — `mcp:<server>/<tool>`,
/// or the read tools `mcp:<server>#tools/list` / `#resources/read` /
/// `#server-health` — for the rate limit,
/// budget, effect claim (calls of `write`/`exec` tools), audit pair and
/// usage. A denial is audited and never sent.
pub(crate) async fn run(
    gate: &Gate,
    mcp: Option<&PackMcp>,
    scope: &mut CallScope<'_>,
    server: &str,
    op: Op<'_>,
) -> (Result<Value, GateError>, Performed) {
    let scopes = &scope.site.principal.scopes;
    let (tid, target, arguments, key) = match &op {
        Op::Call {
            name,
            arguments,
            idempotency_key,
        } => (
            tool_id(server, name),
            Target::Tool(name),
            arguments.clone(),
            *idempotency_key,
        ),
        Op::Tools(cursor) => (
            read_id(server, "tools/list"),
            Target::Server,
            cursor
                .as_ref()
                .map_or_else(|| json!({}), |c| json!({"cursor": c})),
            None,
        ),
        Op::Resource(uri) => (
            read_id(server, "resources/read"),
            Target::Resource(uri),
            json!({"uri": uri}),
            None,
        ),
        Op::Health => (
            read_id(server, "server-health"),
            Target::Server,
            json!({}),
            None,
        ),
    };
    let decided = mcp.ok_or(McpDenial::NotFound).and_then(|m| {
        let servers = &m.gateway.servers;
        match &op {
            Op::Call { name, .. } => {
                authorize_tool(&m.request, &m.grant.tools, servers, server, name, scopes)
            }
            Op::Tools(_) => authorize_server(&m.request, &m.grant.tools, servers, server, scopes),
            Op::Resource(uri) => {
                authorize_resource(&m.request, &m.grant.resources, servers, server, uri, scopes)
            }
            Op::Health => authorize_health(&m.request, &m.grant, servers, server, scopes),
        }
        .map(|cfg| (m, cfg))
    });
    let (m, cfg) = match decided {
        Ok(x) => x,
        Err(d) => {
            let e = denial_error(server, target, d);
            return (Err(gate.deny(scope, &tid, &arguments, e)), None);
        }
    };
    let hub = m.gateway.hub.clone();
    let (descriptor, provider): (ToolDescriptor, Arc<dyn crate::ToolProvider>) = match &op {
        Op::Call { name, .. } => (
            descriptor(server, name, cfg),
            Arc::new(McpTool {
                hub,
                server: server.to_owned(),
                name: (*name).to_owned(),
            }),
        ),
        Op::Tools(_) | Op::Resource(_) | Op::Health => {
            let method = match op {
                Op::Tools(_) => "tools/list",
                Op::Health => "server-health",
                _ => "resources/read",
            };
            (
                read_descriptor(server, method, cfg),
                Arc::new(McpRead {
                    hub,
                    server: server.to_owned(),
                    method,
                }),
            )
        }
    };
    let tool = RegisteredTool {
        descriptor,
        tenants: None,
        rate: cfg.rate_limit,
        timeout: Duration::from_millis(cfg.timeout_ms),
        provider,
    };
    let (r, receipt) = gate.call_authorized(scope, &tool, arguments, key).await;
    let r = r.map(|mut v| {
        if let (Op::Tools(_), Some(Value::Array(tools))) = (&op, v.get_mut("tools")) {
            tools.retain(|t| {
                t.get("name")
                    .and_then(Value::as_str)
                    .is_some_and(|n| tool_allowed(&m.request, &m.grant.tools, server, n).is_ok())
            });
        }
        v
    });
    (r, Some((tid, receipt)))
}
