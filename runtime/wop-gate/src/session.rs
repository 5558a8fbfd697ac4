//! One invocation's view of the gate: who calls, the per-invocation
//! counters, where audit events go, and the usage the calls produced.
//!
//! Host adapters (one per WIT interface, in the runtime) call the session
//! and convert the result; they never copy counters, clone the gate or
//! re-read events. Usage comes from the [`CallReceipt`] each call returns.

use crate::fetch::{FetchRequest, FetchResponse};
use crate::{
    CallCounters, CallReceipt, CallScope, CallSite, Gate, GateError, LogAudit, PackEgress,
};
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Arc;
use wop_core::limits;
use wop_core::logbuf::SharedLog;
use wop_core::secrets::handle::Handles;
use wop_core::tools::ToolDescriptor;

/// What an invocation's gate calls consumed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionUsage {
    /// Performed calls by tool id (not refused, not replayed).
    pub tool_calls_by_id: BTreeMap<String, u64>,
    /// Calls performed under an effect claim they won.
    pub effect_claims: u64,
    /// Safe-fetch response bytes received.
    pub egress_bytes_in: u64,
    /// Safe-fetch request bytes sent (performed fetches only).
    pub egress_bytes_out: u64,
    /// Error codes the gate returned to the pack. A pack may relay one of
    /// these as its own failure even when the runtime reserves the code
    /// (`wop_core::outcome`): it relays a verdict, it does not invent one.
    pub verdicts: std::collections::BTreeSet<String>,
}

impl SessionUsage {
    fn count(&mut self, tool_id: &str, r: &CallReceipt) {
        if r.performed {
            *self.tool_calls_by_id.entry(tool_id.to_owned()).or_insert(0) += 1;
            if r.claimed {
                self.effect_claims += 1;
            }
        }
    }
}

/// The gate, bound to one invocation.
pub struct GateSession {
    gate: Arc<Gate>,
    site: CallSite,
    egress: Option<PackEgress>,
    counters: CallCounters,
    usage: SessionUsage,
    log: SharedLog,
    mcp: Option<crate::mcp::PackMcp>,
    /// The secret handles `ctx.secrets.resolve` gave this invocation.
    handles: Handles,
}

impl std::fmt::Debug for GateSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GateSession")
            .field("site", &self.site)
            .field("usage", &self.usage)
            .finish_non_exhaustive()
    }
}

impl GateSession {
    /// A session for the invocation at `site`; audit events are recorded
    /// in `log` (the invocation's bounded log) in call order. `egress` is
    /// what safe-fetch may reach (`None`: nothing).
    pub fn new(
        gate: Arc<Gate>,
        site: CallSite,
        egress: Option<PackEgress>,
        log: SharedLog,
    ) -> Self {
        Self {
            gate,
            site,
            egress,
            counters: CallCounters::default(),
            usage: SessionUsage::default(),
            log,
            mcp: None,
            handles: Handles::default(),
        }
    }

    /// Attaches what `ctx.mcp` may use (`None`, the default: no server is
    /// visible, every MCP call is `not_found`).
    pub fn set_mcp(&mut self, mcp: Option<crate::mcp::PackMcp>) {
        self.mcp = mcp;
    }

    /// Who is calling.
    pub fn site(&self) -> &CallSite {
        &self.site
    }

    /// What the calls so far consumed.
    pub fn usage(&self) -> &SessionUsage {
        &self.usage
    }

    /// The tools this invocation may call, sorted by `toolId`.
    pub fn list(&self) -> Vec<ToolDescriptor> {
        self.gate.list_for(&self.site)
    }

    /// `tools.call`: one call through the gate.
    pub async fn call(
        &mut self,
        tool_id: &str,
        arguments: Value,
        idempotency_key: Option<&str>,
    ) -> Result<Value, GateError> {
        check_id("tool id", tool_id, limits::MAX_TOOL_ID_BYTES)?;
        let mut scope = CallScope {
            site: &self.site,
            counters: &mut self.counters,
            events: &mut LogAudit(&self.log),
        };
        let (r, receipt) = self
            .gate
            .call(&mut scope, tool_id, arguments, idempotency_key)
            .await;
        self.usage.count(tool_id, &receipt);
        self.note(&r);
        r
    }

    /// `http.safe-fetch`: the egress checks, then the gate as the tool
    /// `http:<host>` (see [`crate::fetch`]).
    pub async fn fetch(&mut self, request: FetchRequest) -> Result<FetchResponse, GateError> {
        check_id("URL", &request.url, limits::MAX_URL_BYTES)?;
        for h in &request.headers {
            check_id("header name", &h.name, limits::MAX_HEADER_NAME_BYTES)?;
        }
        let out = request.body.as_ref().map_or(0, Vec::len) as u64;
        let mut site = self.site.clone();
        site.deadline = crate::fetch::fetch_deadline(site.deadline);
        site.transport = wop_core::events::Transport::Http;
        let mut scope = CallScope {
            site: &site,
            counters: &mut self.counters,
            events: &mut LogAudit(&self.log),
        };
        let (r, done) = crate::fetch::fetch(
            &self.gate,
            self.egress.as_ref(),
            &mut scope,
            request,
            &self.handles,
        )
        .await;
        if let Some((tool_id, receipt)) = &done {
            self.usage.count(tool_id, receipt);
            if receipt.performed {
                self.usage.egress_bytes_out += out;
            }
        }
        if let Ok(resp) = &r {
            self.usage.egress_bytes_in += resp.body.len() as u64;
        }
        self.note(&r);
        r
    }

    /// `ctx.secrets.resolve` of a JavaScript pack (`[{ref, purpose?}]` or
    /// `[ref]`): an opaque handle for the credential `ref` of this
    /// invocation (its node's, granted to its pack), never the value.
    /// Safe-fetch swaps it for the credential in the header the operator
    /// attaches it as, and only in its audience
    /// (`wop_core::secrets::handle`). `{plaintext, handle, ref}`, where
    /// `plaintext` is the handle, so the protocol's packs need no change.
    pub fn resolve_secret(&mut self, args: &Value) -> Result<Value, GateError> {
        let r = self.mint_handle(args);
        self.note(&r);
        r
    }

    fn mint_handle(&mut self, args: &Value) -> Result<Value, GateError> {
        use crate::GateErrorKind;
        use wop_core::error::ErrorCode;
        let first = args.get(0).unwrap_or(args);
        let id = match first {
            Value::String(s) => Some(s.as_str()),
            Value::Object(o) => o.get("ref").and_then(Value::as_str),
            _ => None,
        };
        let Some(id) = id else {
            return Err(GateError::new(
                GateErrorKind::Failed,
                ErrorCode::ValidationError,
                "ctx.secrets.resolve needs {ref: \"<secret id>\"} (or the id as a string)",
                serde_json::json!({"field": "ref"}),
            ));
        };
        check_id("secret ref", id, wop_core::secrets::MAX_ID_LEN)?;
        if self.site.credentials.get(id).is_none() {
            let pack = &self.site.pack;
            return Err(GateError::new(
                GateErrorKind::NotFound,
                ErrorCode::CredentialUnavailable,
                format!(
                    "secret `{id}` is not a credential of this node: the operator provides it as [secrets.{id}] and grants it with secrets = [\"{id}\"] in {}",
                    wop_core::error::packs_table(pack)
                ),
                serde_json::json!({"secretId": id}),
            ));
        }
        let mut nonce = [0u8; 16];
        getrandom::fill(&mut nonce).map_err(|e| {
            GateError::new(
                GateErrorKind::Failed,
                ErrorCode::InternalError,
                format!("no randomness for a secret handle: {e}"),
                Value::Null,
            )
        })?;
        let Some(handle) = self.handles.mint(id, nonce) else {
            return Err(GateError::new(
                GateErrorKind::Failed,
                ErrorCode::ValidationError,
                format!(
                    "an invocation may hold at most {} secret handles",
                    wop_core::secrets::handle::MAX_HANDLES
                ),
                Value::Null,
            ));
        };
        Ok(serde_json::json!({"plaintext": handle, "handle": handle, "ref": id}))
    }

    /// `mcp.call-tool`: the gate tool `mcp:<server>/<name>` (see
    /// [`crate::mcp`]). The result is the server's JSON, unaltered.
    pub async fn mcp_call_tool(
        &mut self,
        server: &str,
        name: &str,
        arguments: Value,
        idempotency_key: Option<&str>,
    ) -> Result<Value, GateError> {
        check_id("MCP tool name", name, limits::MAX_MCP_NAME_BYTES)?;
        let op = crate::mcp::Op::Call {
            name,
            arguments,
            idempotency_key,
        };
        self.mcp_op(server, op).await
    }

    /// `mcp.list-tools`: one page, keeping only tools this pack may call;
    /// through the gate like a call (see [`crate::mcp`]).
    pub async fn mcp_list_tools(
        &mut self,
        server: &str,
        cursor: Option<String>,
    ) -> Result<Value, GateError> {
        if let Some(c) = &cursor {
            check_id("MCP cursor", c, limits::MAX_URL_BYTES)?;
        }
        self.mcp_op(server, crate::mcp::Op::Tools(cursor)).await
    }

    /// `mcp.read-resource`, unaltered; needs a resource grant, and goes
    /// through the gate like a call (see [`crate::mcp`]).
    pub async fn mcp_read_resource(&mut self, server: &str, uri: &str) -> Result<Value, GateError> {
        check_id("MCP resource URI", uri, limits::MAX_URL_BYTES)?;
        self.mcp_op(server, crate::mcp::Op::Resource(uri)).await
    }

    /// `mcp.server-health`: the host's health document for the server;
    /// through the gate like a read (see [`crate::mcp`]).
    pub async fn mcp_server_health(&mut self, server: &str) -> Result<Value, GateError> {
        self.mcp_op(server, crate::mcp::Op::Health).await
    }

    /// One `ctx.mcp` operation through the gate (transport `mcp`, the
    /// invocation's deadline as safe-fetch bounds it), counted from its
    /// receipt.
    async fn mcp_op(&mut self, server: &str, op: crate::mcp::Op<'_>) -> Result<Value, GateError> {
        check_id("MCP server id", server, limits::MAX_MCP_NAME_BYTES)?;
        let mut site = self.site.clone();
        site.deadline = crate::fetch::fetch_deadline(site.deadline);
        site.transport = wop_core::events::Transport::Mcp;
        let mut scope = CallScope {
            site: &site,
            counters: &mut self.counters,
            events: &mut LogAudit(&self.log),
        };
        let (r, done) =
            crate::mcp::run(&self.gate, self.mcp.as_ref(), &mut scope, server, op).await;
        if let Some((tool_id, receipt)) = &done {
            self.usage.count(tool_id, receipt);
        }
        self.note(&r);
        r
    }

    fn note<T>(&mut self, r: &Result<T, GateError>) {
        if let Err(e) = r
            && !self.usage.verdicts.contains(e.code.as_str())
            && self.usage.verdicts.len() < 32
        {
            self.usage.verdicts.insert(e.code.as_str().to_owned());
        }
    }
}

/// Refuses an over-long pack-supplied identifier with `validation_error`
/// before it is stored, echoed into an event or hashed (no event, no
/// usage entry: the call never reaches the gate).
fn check_id(what: &str, value: &str, cap: usize) -> Result<(), GateError> {
    limits::check_identifier(what, value, cap).map_err(|message| {
        GateError::new(
            crate::GateErrorKind::Failed,
            wop_core::error::ErrorCode::ValidationError,
            message,
            serde_json::json!({"field": what, "limit": cap, "observed": value.len()}),
        )
    })
}
