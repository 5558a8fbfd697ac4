//! `[packs.<name>]`: what the operator grants one pack.

use crate::capability::Capability;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// Grants for one pack.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PackGrant {
    /// Capabilities (openwop interfaces) granted beyond the base set. The
    /// pack gets those it also requests in its manifest.
    #[serde(default)]
    pub capabilities: Vec<Capability>,
    /// One host directory mounted as the pack's only preopen, at `/data`.
    pub filesystem: Option<FsGrant>,
    /// Tool ids (or `prefix:*` patterns) the pack may call, if its manifest
    /// also declares them.
    #[serde(default)]
    pub tools: Vec<String>,
    /// Destinations safe-fetch may reach, as `[scheme://]host[:port]`
    /// patterns (`api.example.com`, `*.example.com`, `http://host:8080`;
    /// see [`crate::egress::allow`]). Effective only for hosts the pack's
    /// manifest also requests (`x-wop.egress`).
    #[serde(default)]
    pub egress: Vec<String>,
    /// MCP servers and tools the pack may use, if its manifest also
    /// requests them (`x-wop.mcp`): a server id (every tool),
    /// `<server>/<tool>`, `<server>/*` or `<server>/<prefix>*`.
    #[serde(default)]
    pub mcp: Vec<String>,
    /// MCP resources the pack may read, per server: URI patterns (an exact
    /// URI, or `prefix*`), effective only for URIs its manifest also
    /// requests (`x-wop.mcp.resources`). A tool grant never allows a read;
    /// by default nothing is readable.
    #[serde(default)]
    pub mcp_resources: BTreeMap<String, Vec<String>>,
    /// Host services of the protocol's JavaScript `ctx` (`callAI`,
    /// `db.sql.query`, `storage.kv.get`, …) mapped to tool ids, for a
    /// JavaScript pack: `ctx.<service>(args)` becomes a gated call of that
    /// tool (this mapping declares and grants it for the pack; the `tools`
    /// capability is still needed). An unmapped service fails with
    /// `not_found`, naming the line that would map it.
    #[serde(default)]
    pub services: BTreeMap<String, String>,
    /// Secrets (`[secrets.<id>]`) the pack's nodes may use, if a node also
    /// declares them (`requiresSecrets`). The host attaches them; the
    /// pack never sees a value.
    #[serde(default)]
    pub secrets: Vec<String>,
    /// Require a trusted signature for this pack (overrides
    /// `[trust] requireSignature`).
    pub require_signature: Option<bool>,
    /// The approved version's `pack.json` (a file, or a pack directory
    /// holding one). A version that requests more than it is refused with
    /// `pack_capability_escalation` until this points at that version; a
    /// lower version is refused with `pack_version_rollback` unless
    /// `allowRollback` is set.
    pub approved: Option<PathBuf>,
    /// Load a version lower than the approved one (default `false`: a
    /// rollback is refused with `pack_version_rollback`).
    #[serde(default)]
    pub allow_rollback: bool,
}

/// A directory granted to a pack.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FsGrant {
    /// The host directory. It must exist.
    pub path: PathBuf,
    /// Read-only unless set to `false`.
    #[serde(default = "yes")]
    pub read_only: bool,
}

fn yes() -> bool {
    true
}
