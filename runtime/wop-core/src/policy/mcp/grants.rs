//! The grant model of `ctx.mcp`: what a pack requests (`x-wop.mcp`) ∩ what
//! the operator grants (`[packs.<name>] mcp`). Pure, fail closed.

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
}

impl McpRequest {
    /// Whether the manifest asks for nothing.
    pub fn is_empty(&self) -> bool {
        self.servers.is_empty() && self.tools.is_empty()
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
            crate::authz::pattern_matches(tool, "x").map_err(|e| (at.clone(), e))?;
            if tool.is_empty() {
                return Err((at, format!("`{t}` has an empty tool name")));
            }
        }
        Ok(())
    }
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
        crate::authz::pattern_matches(tool, "x").map_err(|e| format!("[{i}]: {e}"))?;
    }
    Ok(())
}

/// The gate's tool id of an MCP tool: `mcp:<server>/<tool>`.
pub fn tool_id(server: &str, tool: &str) -> String {
    format!("mcp:{server}/{tool}")
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
}

fn grant_matches(grant: &str, server: &str, tool: Option<&str>) -> Result<bool, String> {
    let (gs, gt) = grant.split_once('/').unwrap_or((grant, "*"));
    if gs != server {
        return Ok(false);
    }
    match tool {
        None => Ok(true),
        Some(t) => crate::authz::pattern_matches(gt, t),
    }
}

/// Whether an invocation may use `server` at all: the pack requests it
/// (else `NotFound`: the invocation may not see it), the operator grants
/// something on it (else `NotGranted`), it is configured (else `NotFound`)
/// and the principal holds its scopes. Fail closed.
pub fn authorize_server<'a>(
    request: &McpRequest,
    grants: &[String],
    servers: &'a BTreeMap<String, McpServerConfig>,
    server: &str,
    scopes: &[String],
) -> Result<&'a McpServerConfig, McpDenial> {
    if !request.servers.iter().any(|s| s == server) {
        return Err(McpDenial::NotFound);
    }
    let mut granted = false;
    for g in grants {
        granted |= grant_matches(g, server, None).map_err(McpDenial::PolicyError)?;
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
        };
        assert!(matches!(r.validate(), Err((p, _)) if p == "tools[1]"));
        let r = McpRequest {
            servers: vec!["Bad".into()],
            tools: vec![],
        };
        assert!(matches!(r.validate(), Err((p, _)) if p == "servers[0]"));
        let r = McpRequest {
            servers: vec!["ev".into()],
            tools: vec!["echo".into()],
        };
        assert!(matches!(r.validate(), Err((p, _)) if p == "tools[0]"));
        assert!(validate_grants(&["ev".into(), "ev/echo".into(), "ev/*".into()]).is_ok());
        assert!(validate_grants(&["ev/".into()]).is_err());
        assert!(validate_grants(&["Bad".into()]).is_err());
        assert_eq!(tool_id("ev", "echo"), "mcp:ev/echo");
    }
}
