//! The grant model of `ctx.mcp`: what a pack requests (`x-wop.mcp`) ∩ what
//! the operator grants (`[packs.<name>] mcp` for tools, `[packs.<name>]
//! mcpResources` for resources). Pure, fail closed.
//!
//! Tools and resources are granted separately (decision 0017): a grant of
//! tools on a server allows `tools/call` of those tools and `tools/list`;
//! reading a resource needs a URI pattern of that server in **both** the
//! manifest's `x-wop.mcp.resources` and the operator's `mcpResources`.
//! Nothing is readable by default.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{McpServerConfig, is_valid_server_id};

/// `x-wop.mcp` in a pack's manifest: the servers (and optionally the
/// tools) the pack asks to use. Only what the operator also grants
/// (`[packs.<name>] mcp`) is usable.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct McpRequest {
    /// Server ids the pack uses.
    #[serde(default)]
    pub servers: Vec<String>,
    /// `<server>/<tool>` names (or `<server>/*`, `<server>/<prefix>*`) the
    /// pack calls. Empty: every tool of the requested servers.
    #[serde(default)]
    pub tools: Vec<String>,
    /// Resource URIs the pack reads, per server: exact URIs or
    /// `<prefix>*` patterns (see [`uri_matches`]). Empty: no resource.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub resources: BTreeMap<String, Vec<String>>,
}

impl McpRequest {
    /// The request of a pack whose manifest cannot make one (the
    /// protocol's JavaScript packs name servers at run time): exactly
    /// what the operator grants — its servers, and its resource patterns
    /// (tools: all of the granted servers', narrowed by the grant).
    pub fn from_grant(grant: &McpGrant) -> Self {
        let mut servers: Vec<String> = Vec::new();
        for g in &grant.tools {
            let server = g.split_once('/').map_or(g.as_str(), |(s, _)| s);
            if !servers.iter().any(|s| s == server) {
                servers.push(server.to_owned());
            }
        }
        for server in grant.resources.keys() {
            if !servers.contains(server) {
                servers.push(server.clone());
            }
        }
        Self {
            servers,
            tools: Vec::new(),
            resources: grant.resources.clone(),
        }
    }

    /// Whether the manifest asks for nothing.
    pub fn is_empty(&self) -> bool {
        self.servers.is_empty() && self.tools.is_empty() && self.resources.is_empty()
    }

    /// Checks the request; `Err((path, message))` with the path relative to
    /// `x-wop.mcp` (e.g. `tools[1]`).
    pub fn validate(&self) -> Result<(), (String, String)> {
        for (i, s) in self.servers.iter().enumerate() {
            if !is_valid_server_id(s) {
                return Err((
                    format!("servers[{i}]"),
                    format!("`{s}` is not a server id (^[a-z0-9][a-z0-9._-]{{0,63}}$)"),
                ));
            }
        }
        for (i, t) in self.tools.iter().enumerate() {
            let at = format!("tools[{i}]");
            let Some((server, tool)) = t.split_once('/') else {
                return Err((at, format!("`{t}` must be `<server>/<tool>`")));
            };
            if !self.servers.iter().any(|s| s == server) {
                return Err((
                    at,
                    format!("`{t}` names server `{server}`, which is not in `servers`"),
                ));
            }
            crate::tools::authz::pattern_matches(tool, "x").map_err(|e| (at.clone(), e))?;
            if tool.is_empty() {
                return Err((at, format!("`{t}` has an empty tool name")));
            }
        }
        for (server, patterns) in &self.resources {
            let at = |i: usize| format!("resources.{server}[{i}]");
            if !self.servers.iter().any(|s| s == server) {
                return Err((
                    format!("resources.{server}"),
                    format!("names server `{server}`, which is not in `servers`"),
                ));
            }
            for (i, p) in patterns.iter().enumerate() {
                validate_uri_pattern(p).map_err(|e| (at(i), e))?;
            }
        }
        Ok(())
    }
}

/// Longest accepted resource URI pattern (and URI: [`crate::limits::MAX_URL_BYTES`]).
pub const MAX_URI_PATTERN_BYTES: usize = 2048;

/// Checks a resource URI pattern: an exact URI, or a prefix ending in `*`
/// (`*` alone: every URI of the server); no other `*`, no whitespace or
/// control characters, at most [`MAX_URI_PATTERN_BYTES`].
pub fn validate_uri_pattern(p: &str) -> Result<(), String> {
    if p.is_empty() {
        return Err("a resource URI pattern must not be empty".to_owned());
    }
    if p.len() > MAX_URI_PATTERN_BYTES {
        return Err(format!(
            "a resource URI pattern is at most {MAX_URI_PATTERN_BYTES} bytes"
        ));
    }
    if p.trim_end_matches('*').contains('*') || p.ends_with("**") {
        return Err(format!(
            "`{p}` is malformed: `*` may only end a resource URI pattern (`prefix*`)"
        ));
    }
    if p.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(format!("`{p}` contains whitespace or control characters"));
    }
    Ok(())
}

/// Checks an operator resource grant (`[packs.<name>] mcpResources`):
/// server ids and URI patterns.
pub fn validate_resource_grants(grants: &BTreeMap<String, Vec<String>>) -> Result<(), String> {
    for (server, patterns) in grants {
        if !is_valid_server_id(server) {
            return Err(format!(".{server}: `{server}` is not a server id"));
        }
        for (i, p) in patterns.iter().enumerate() {
            validate_uri_pattern(p).map_err(|e| format!(".{server}[{i}]: {e}"))?;
        }
    }
    Ok(())
}

/// Whether a URI may be matched by a prefix pattern: plain in the sense
/// of [`crate::egress::plain`] (no `.` or `..` segment, no percent-encoded
/// `.`, `/`, `\`, `%` or `;`, no `\`, no `;` parameters, no whitespace or
/// control characters), as credential audiences require of paths. A
/// server that resolves such a URI could reach outside the prefix
/// (`file:///srv/data/../../etc/shadow`, `…/..;/…`, `…/%252e%252e/…`), so
/// only an exact pattern can allow one.
pub fn uri_is_plain(uri: &str) -> bool {
    crate::egress::plain::is_plain(uri)
}

/// How a resource URI fares against a list of patterns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UriMatch {
    /// A pattern allows it.
    Allowed,
    /// No pattern covers it.
    NotCovered,
    /// Only a prefix pattern would cover it, and the URI is not plain
    /// ([`uri_is_plain`]).
    NotPlain,
}

/// Matches `uri` against `patterns`: exact patterns byte for byte, prefix
/// patterns (`prefix*`) only for plain URIs ([`uri_is_plain`]). The URI is
/// sent to the server exactly as matched.
pub fn uri_matches(patterns: &[String], uri: &str) -> UriMatch {
    let mut out = UriMatch::NotCovered;
    for p in patterns {
        match p.strip_suffix('*') {
            None if p == uri => return UriMatch::Allowed,
            None => {}
            Some(prefix) if uri.starts_with(prefix) => {
                if uri_is_plain(uri) {
                    return UriMatch::Allowed;
                }
                out = UriMatch::NotPlain;
            }
            Some(_) => {}
        }
    }
    out
}

/// Checks an operator grant list (`[packs.<name>] mcp`): entries are a
/// server id (every tool), `<server>/<tool>`, `<server>/*` or
/// `<server>/<prefix>*`.
pub fn validate_grants(grants: &[String]) -> Result<(), String> {
    for (i, g) in grants.iter().enumerate() {
        let (server, tool) = g.split_once('/').unwrap_or((g.as_str(), "*"));
        if !is_valid_server_id(server) {
            return Err(format!("[{i}]: `{g}` does not start with a server id"));
        }
        if tool.is_empty() {
            return Err(format!("[{i}]: `{g}` has an empty tool name"));
        }
        crate::tools::authz::pattern_matches(tool, "x").map_err(|e| format!("[{i}]: {e}"))?;
    }
    Ok(())
}

/// The gate's tool id of an MCP tool: `mcp:<server>/<tool>`.
pub fn tool_id(server: &str, tool: &str) -> String {
    format!("mcp:{server}/{tool}")
}

/// The gate's tool id of a read on an MCP server, `mcp:<server>#<method>`
/// (`tools/list`, `resources/read`): audited, rate limited and budgeted
/// like a call. `#` cannot occur in a tool name, so no tool id collides.
pub fn read_id(server: &str, method: &str) -> String {
    format!("mcp:{server}#{method}")
}

/// Why an MCP operation was refused before reaching the server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum McpDenial {
    /// The server is unknown, or this invocation may not see it (its pack
    /// did not request it): `not_found`.
    NotFound,
    /// The manifest does not request this tool: `forbidden`.
    NotDeclared,
    /// The operator did not grant the server or tool: `forbidden`.
    NotGranted,
    /// The principal lacks scopes the server requires: `forbidden`.
    MissingScopes {
        /// All scopes required.
        required: Vec<String>,
        /// The ones missing.
        missing: Vec<String>,
    },
    /// A pattern could not be evaluated: `forbidden` (fail closed).
    PolicyError(String),
    /// A resource URI that only a prefix pattern would allow is not plain
    /// (dot segments, encoded separators): `forbidden`.
    UriNotPlain,
}

fn grant_matches(grant: &str, server: &str, tool: Option<&str>) -> Result<bool, String> {
    let (gs, gt) = grant.split_once('/').unwrap_or((grant, "*"));
    if gs != server {
        return Ok(false);
    }
    match tool {
        None => Ok(true),
        Some(t) => crate::tools::authz::pattern_matches(gt, t),
    }
}

/// Whether the operator grants any tool of `server` (`tools/list` needs
/// one).
fn tools_granted(grants: &[String], server: &str) -> Result<bool, McpDenial> {
    let mut granted = false;
    for g in grants {
        granted |= grant_matches(g, server, None).map_err(McpDenial::PolicyError)?;
    }
    Ok(granted)
}

/// The server layer: the pack requests it (else `NotFound`: the invocation
/// may not see it), the operator granted something on it (`granted`, else
/// `NotGranted`), it is configured (else `NotFound`) and the principal
/// holds its scopes.
fn server_layer<'a>(
    request: &McpRequest,
    granted: bool,
    servers: &'a BTreeMap<String, McpServerConfig>,
    server: &str,
    scopes: &[String],
) -> Result<&'a McpServerConfig, McpDenial> {
    if !request.servers.iter().any(|s| s == server) {
        return Err(McpDenial::NotFound);
    }
    if !granted {
        return Err(McpDenial::NotGranted);
    }
    let cfg = servers.get(server).ok_or(McpDenial::NotFound)?;
    let missing: Vec<String> = cfg
        .scopes
        .iter()
        .filter(|r| !scopes.contains(r))
        .cloned()
        .collect();
    if !missing.is_empty() {
        return Err(McpDenial::MissingScopes {
            required: cfg.scopes.clone(),
            missing,
        });
    }
    Ok(cfg)
}

/// Whether an invocation may use `server`'s tools at all (`tools/list`,
/// and the first layer of [`authorize_tool`]): the server layer, with a
/// tool grant on the server. Fail closed.
pub fn authorize_server<'a>(
    request: &McpRequest,
    grants: &[String],
    servers: &'a BTreeMap<String, McpServerConfig>,
    server: &str,
    scopes: &[String],
) -> Result<&'a McpServerConfig, McpDenial> {
    let granted = tools_granted(grants, server)?;
    server_layer(request, granted, servers, server, scopes)
}

/// Whether an invocation may see `server` for the host's health document:
/// the server layer, with a tool **or** resource grant on it.
pub fn authorize_health<'a>(
    request: &McpRequest,
    grants: &McpGrant,
    servers: &'a BTreeMap<String, McpServerConfig>,
    server: &str,
    scopes: &[String],
) -> Result<&'a McpServerConfig, McpDenial> {
    let granted = tools_granted(&grants.tools, server)?
        || grants.resources.get(server).is_some_and(|p| !p.is_empty());
    server_layer(request, granted, servers, server, scopes)
}

/// The full decision for `resources/read` of `uri` on `server`: the server
/// layer (with a resource grant on it), then the manifest's
/// `x-wop.mcp.resources` (else `NotDeclared`) and the operator's
/// `mcpResources` (else `NotGranted`) must both allow the URI
/// ([`uri_matches`]; a URI only a prefix would allow and that is not plain
/// is `UriNotPlain`). Fail closed; nothing is readable by default.
pub fn authorize_resource<'a>(
    request: &McpRequest,
    grants: &BTreeMap<String, Vec<String>>,
    servers: &'a BTreeMap<String, McpServerConfig>,
    server: &str,
    uri: &str,
    scopes: &[String],
) -> Result<&'a McpServerConfig, McpDenial> {
    let granted = grants.get(server).map(Vec::as_slice).unwrap_or_default();
    let cfg = server_layer(request, !granted.is_empty(), servers, server, scopes)?;
    let declared = request
        .resources
        .get(server)
        .map(Vec::as_slice)
        .unwrap_or_default();
    for (patterns, otherwise) in [
        (declared, McpDenial::NotDeclared),
        (granted, McpDenial::NotGranted),
    ] {
        match uri_matches(patterns, uri) {
            UriMatch::Allowed => {}
            UriMatch::NotPlain => return Err(McpDenial::UriNotPlain),
            UriMatch::NotCovered => return Err(otherwise),
        }
    }
    Ok(cfg)
}

/// What the operator grants one pack on MCP servers (`[packs.<name>] mcp`
/// and `mcpResources`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct McpGrant {
    /// Tool grants: a server id (every tool), `<server>/<tool>`,
    /// `<server>/*` or `<server>/<prefix>*`.
    pub tools: Vec<String>,
    /// Resource URI patterns per server.
    pub resources: BTreeMap<String, Vec<String>>,
}

/// The full decision for `tools/call` of `tool` on `server`:
/// [`authorize_server`], then the manifest's tool list (when not empty)
/// and the operator's grant must both match the tool.
pub fn authorize_tool<'a>(
    request: &McpRequest,
    grants: &[String],
    servers: &'a BTreeMap<String, McpServerConfig>,
    server: &str,
    tool: &str,
    scopes: &[String],
) -> Result<&'a McpServerConfig, McpDenial> {
    let cfg = authorize_server(request, grants, servers, server, scopes)?;
    tool_allowed(request, grants, server, tool)?;
    Ok(cfg)
}

/// The tool layer alone (also used to filter `tools/list`).
pub fn tool_allowed(
    request: &McpRequest,
    grants: &[String],
    server: &str,
    tool: &str,
) -> Result<(), McpDenial> {
    if !request.tools.is_empty() {
        let mut declared = false;
        for t in &request.tools {
            declared |= grant_matches(t, server, Some(tool)).map_err(McpDenial::PolicyError)?;
        }
        if !declared {
            return Err(McpDenial::NotDeclared);
        }
    }
    for g in grants {
        if grant_matches(g, server, Some(tool)).map_err(McpDenial::PolicyError)? {
            return Ok(());
        }
    }
    Err(McpDenial::NotGranted)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfgs() -> BTreeMap<String, McpServerConfig> {
        let mut m = BTreeMap::new();
        m.insert("ev".to_string(), McpServerConfig::stdio("node", vec![]));
        let mut scoped = McpServerConfig::stdio("node", vec![]);
        scoped.scopes = vec!["mcp.read".into()];
        m.insert("sc".to_string(), scoped);
        m
    }

    /// (request, grants, server, tool, principal scopes, expected).
    type Case<'a> = (
        McpRequest,
        Vec<String>,
        &'a str,
        &'a str,
        Vec<String>,
        Result<(), McpDenial>,
    );

    #[test]
    fn authorization_table() {
        let servers = cfgs();
        let req = |s: &[&str], t: &[&str]| McpRequest {
            servers: s.iter().map(|x| x.to_string()).collect(),
            tools: t.iter().map(|x| x.to_string()).collect(),
            resources: BTreeMap::new(),
        };
        let g = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        use McpDenial as D;
        let cases: Vec<Case<'_>> = vec![
            (req(&["ev"], &[]), g(&["ev"]), "ev", "echo", vec![], Ok(())),
            (
                req(&["ev"], &[]),
                g(&["ev/*"]),
                "ev",
                "echo",
                vec![],
                Ok(()),
            ),
            (
                req(&["ev"], &[]),
                g(&["ev/echo"]),
                "ev",
                "echo",
                vec![],
                Ok(()),
            ),
            (
                req(&["ev"], &[]),
                g(&["ev/echo"]),
                "ev",
                "add",
                vec![],
                Err(D::NotGranted),
            ),
            (
                req(&["ev"], &["ev/echo"]),
                g(&["ev"]),
                "ev",
                "add",
                vec![],
                Err(D::NotDeclared),
            ),
            (
                req(&["ev"], &["ev/e*"]),
                g(&["ev"]),
                "ev",
                "echo",
                vec![],
                Ok(()),
            ),
            (
                req(&[], &[]),
                g(&["ev"]),
                "ev",
                "echo",
                vec![],
                Err(D::NotFound),
            ),
            (
                req(&["ev"], &[]),
                g(&[]),
                "ev",
                "echo",
                vec![],
                Err(D::NotGranted),
            ),
            (
                req(&["ev"], &[]),
                g(&["other"]),
                "ev",
                "echo",
                vec![],
                Err(D::NotGranted),
            ),
            (
                req(&["nope"], &[]),
                g(&["nope"]),
                "nope",
                "echo",
                vec![],
                Err(D::NotFound),
            ),
            (
                req(&["sc"], &[]),
                g(&["sc"]),
                "sc",
                "x",
                vec![],
                Err(D::MissingScopes {
                    required: vec!["mcp.read".into()],
                    missing: vec!["mcp.read".into()],
                }),
            ),
            (
                req(&["sc"], &[]),
                g(&["sc"]),
                "sc",
                "x",
                vec!["mcp.read".into()],
                Ok(()),
            ),
            (
                req(&["ev"], &[]),
                g(&["ev/*x*"]),
                "ev",
                "echo",
                vec![],
                Err(D::PolicyError(
                    "grant pattern `*x*` is malformed: `*` may only end a pattern".into(),
                )),
            ),
        ];
        for (i, (r, grants, server, tool, scopes, want)) in cases.into_iter().enumerate() {
            let got = authorize_tool(&r, &grants, &servers, server, tool, &scopes).map(|_| ());
            assert_eq!(got, want, "case {i}");
        }
    }

    #[test]
    fn request_and_grant_validation() {
        let r = McpRequest {
            servers: vec!["ev".into()],
            tools: vec!["ev/echo".into(), "other/x".into()],
            resources: BTreeMap::new(),
        };
        assert!(matches!(r.validate(), Err((p, _)) if p == "tools[1]"));
        let r = McpRequest {
            servers: vec!["Bad".into()],
            tools: vec![],
            resources: BTreeMap::new(),
        };
        assert!(matches!(r.validate(), Err((p, _)) if p == "servers[0]"));
        let r = McpRequest {
            servers: vec!["ev".into()],
            tools: vec!["echo".into()],
            resources: BTreeMap::new(),
        };
        assert!(matches!(r.validate(), Err((p, _)) if p == "tools[0]"));
        assert!(validate_grants(&["ev".into(), "ev/echo".into(), "ev/*".into()]).is_ok());
        assert!(validate_grants(&["ev/".into()]).is_err());
        assert!(validate_grants(&["Bad".into()]).is_err());
        assert_eq!(tool_id("ev", "echo"), "mcp:ev/echo");
    }

    #[test]
    fn resource_authorization_table() {
        let servers = cfgs();
        let req = |res: &[(&str, &[&str])]| McpRequest {
            servers: vec!["ev".into(), "sc".into()],
            tools: vec![],
            resources: res
                .iter()
                .map(|(s, p)| (s.to_string(), p.iter().map(|x| x.to_string()).collect()))
                .collect(),
        };
        let grant = |res: &[(&str, &[&str])]| -> BTreeMap<String, Vec<String>> {
            res.iter()
                .map(|(s, p)| (s.to_string(), p.iter().map(|x| x.to_string()).collect()))
                .collect()
        };
        use McpDenial as D;
        let data: &[&str] = &["file:///srv/data/*"];
        let exact: &[&str] = &["test://static/1"];
        /// (request, operator resource grant, server, URI, expected).
        type ResourceCase<'a> = (
            McpRequest,
            BTreeMap<String, Vec<String>>,
            &'a str,
            &'a str,
            Result<(), McpDenial>,
        );
        let cases: Vec<ResourceCase<'_>> = vec![
            // Tools granted, nothing asked or granted for resources: denied.
            (
                req(&[]),
                grant(&[]),
                "ev",
                "file:///etc/shadow",
                Err(D::NotGranted),
            ),
            (
                req(&[("ev", data)]),
                grant(&[]),
                "ev",
                "file:///srv/data/a",
                Err(D::NotGranted),
            ),
            (
                req(&[]),
                grant(&[("ev", data)]),
                "ev",
                "file:///srv/data/a",
                Err(D::NotDeclared),
            ),
            (
                req(&[("ev", data)]),
                grant(&[("ev", data)]),
                "ev",
                "file:///srv/data/a",
                Ok(()),
            ),
            (
                req(&[("ev", data)]),
                grant(&[("ev", data)]),
                "ev",
                "file:///srv/data/sub/b?x=1",
                Ok(()),
            ),
            (
                req(&[("ev", data)]),
                grant(&[("ev", data)]),
                "ev",
                "file:///etc/shadow",
                Err(D::NotDeclared),
            ),
            (
                req(&[("ev", &["file:///*"])]),
                grant(&[("ev", data)]),
                "ev",
                "file:///etc/shadow",
                Err(D::NotGranted),
            ),
            // Escapes from a prefix.
            (
                req(&[("ev", data)]),
                grant(&[("ev", data)]),
                "ev",
                "file:///srv/data/../../etc/shadow",
                Err(D::UriNotPlain),
            ),
            (
                req(&[("ev", data)]),
                grant(&[("ev", data)]),
                "ev",
                "file:///srv/data/%2E%2E/x",
                Err(D::UriNotPlain),
            ),
            (
                req(&[("ev", data)]),
                grant(&[("ev", data)]),
                "ev",
                "file:///srv/data/..%2fx",
                Err(D::UriNotPlain),
            ),
            (
                req(&[("ev", data)]),
                grant(&[("ev", data)]),
                "ev",
                "file:///srv/data/a\\..\\b",
                Err(D::UriNotPlain),
            ),
            (
                req(&[("ev", data)]),
                grant(&[("ev", data)]),
                "ev",
                "file:///srv/data/a b",
                Err(D::UriNotPlain),
            ),
            // Siblings a decoding or parameter-dropping server resolves
            // outside the prefix: `..;/`, double-encoded dots, `%3B`.
            (
                req(&[("ev", data)]),
                grant(&[("ev", data)]),
                "ev",
                "file:///srv/data/..;/..;/etc/shadow",
                Err(D::UriNotPlain),
            ),
            (
                req(&[("ev", data)]),
                grant(&[("ev", data)]),
                "ev",
                "file:///srv/data/%252e%252e/%252e%252e/etc/shadow",
                Err(D::UriNotPlain),
            ),
            (
                req(&[("ev", data)]),
                grant(&[("ev", data)]),
                "ev",
                "file:///srv/data/..%3B/x",
                Err(D::UriNotPlain),
            ),
            // Exact patterns match byte for byte, plain or not.
            (
                req(&[("ev", exact)]),
                grant(&[("ev", exact)]),
                "ev",
                "test://static/1",
                Ok(()),
            ),
            (
                req(&[("ev", exact)]),
                grant(&[("ev", exact)]),
                "ev",
                "test://static/10",
                Err(D::NotDeclared),
            ),
            (
                req(&[("ev", &["a/./b"])]),
                grant(&[("ev", &["a/./b"])]),
                "ev",
                "a/./b",
                Ok(()),
            ),
            // A grant on another server grants nothing here.
            (
                req(&[("ev", data)]),
                grant(&[("sc", data)]),
                "ev",
                "file:///srv/data/a",
                Err(D::NotGranted),
            ),
            // Server layer first: not requested, unknown, scopes.
            (
                req(&[("ev", data)]),
                grant(&[("nope", data)]),
                "nope",
                "file:///srv/data/a",
                Err(D::NotFound),
            ),
            (
                req(&[("sc", data)]),
                grant(&[("sc", data)]),
                "sc",
                "file:///srv/data/a",
                Err(D::MissingScopes {
                    required: vec!["mcp.read".into()],
                    missing: vec!["mcp.read".into()],
                }),
            ),
        ];
        for (i, (r, g, server, uri, want)) in cases.into_iter().enumerate() {
            let got = authorize_resource(&r, &g, &servers, server, uri, &[]).map(|_| ());
            assert_eq!(got, want, "case {i}: {uri}");
        }
        // Health: a tool or a resource grant makes the server visible.
        let g = McpGrant {
            tools: vec![],
            resources: grant(&[("ev", data)]),
        };
        assert!(authorize_health(&req(&[]), &g, &servers, "ev", &[]).is_ok());
        assert_eq!(
            authorize_health(&req(&[]), &McpGrant::default(), &servers, "ev", &[]).map(|_| ()),
            Err(D::NotGranted)
        );
        // Listing tools needs a tool grant, a resource grant is not one.
        assert_eq!(
            authorize_server(&req(&[]), &[], &servers, "ev", &[]).map(|_| ()),
            Err(D::NotGranted)
        );
    }

    #[test]
    fn resource_patterns_are_validated() {
        for ok in ["*", "test://x", "file:///srv/*", "a*"] {
            assert!(validate_uri_pattern(ok).is_ok(), "{ok}");
        }
        for bad in ["", "a*b", "**", "a**", "file:///a b", "x\u{0}"] {
            assert!(validate_uri_pattern(bad).is_err(), "{bad:?}");
        }
        let r = McpRequest {
            servers: vec!["ev".into()],
            tools: vec![],
            resources: [("other".to_string(), vec!["x".to_string()])].into(),
        };
        assert!(matches!(r.validate(), Err((p, _)) if p == "resources.other"));
        let r = McpRequest {
            servers: vec!["ev".into()],
            tools: vec![],
            resources: [("ev".to_string(), vec!["a*b".to_string()])].into(),
        };
        assert!(matches!(r.validate(), Err((p, _)) if p == "resources.ev[0]"));
        let g: BTreeMap<String, Vec<String>> = [("Bad".to_string(), vec!["x".to_string()])].into();
        assert!(validate_resource_grants(&g).is_err());
    }
}
