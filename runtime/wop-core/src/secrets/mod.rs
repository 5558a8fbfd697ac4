//! Host-held credentials (DESIGN.md §9): a node **declares** what it
//! needs (`requiresSecrets`, [`requirement`]), the operator **provides**
//! values and says where each may go (`[secrets.<id>]`, [`SecretSpec`]),
//! and the host **attaches** a credential on the way out, only to a
//! destination in its audience ([`audience`], [`decide`]), and takes it out
//! of whatever comes back ([`redact`]). The pack only ever names a
//! credential; its value never enters the sandbox.
//!
//! Pure: reading values (`env:`, `file:`) is `wop_gate::secrets`.
//!
//! ```toml
//! [secrets.stripe]
//! value = "env:STRIPE_KEY"            # or "file:/run/secrets/stripe"
//! audiences = ["api.stripe.com"]      # safe-fetch destinations (https)
//! tools = ["billing:charge"]          # operator HTTP tools
//! mcpServers = ["payments"]           # MCP servers over HTTP
//! attach = "bearer"                   # "basic" | "header:X-Api-Key"
//! outOfAudience = "deny"              # or "downgrade"
//! expiresAt = "2027-01-01T00:00:00Z"
//! tenants = { acme = "env:ACME_STRIPE_KEY" }
//!
//! [packs.payments]
//! secrets = ["stripe"]
//! ```

pub mod audience;
pub mod credential;
pub mod decide;
mod expiry;
pub mod handle;
pub mod redact;
pub mod requirement;

pub use audience::Audience;
pub use credential::{Attach, Credential, Credentials};
pub use decide::{CredentialDecision, Verdict};
pub use requirement::{SecretKind, SecretRequirement, SecretScope};

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Longest secret id.
pub const MAX_ID_LEN: usize = 64;

/// Whether `id` is a valid secret id: 1–64 of `[A-Za-z0-9._-]`, starting
/// with a letter or digit.
pub fn valid_id(id: &str) -> bool {
    id.len() <= MAX_ID_LEN
        && id.chars().next().is_some_and(|c| c.is_ascii_alphanumeric())
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

/// What happens when a credential would go to a destination outside its
/// audience (a pack named it for another host, or a redirect left its
/// origin).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OutOfAudience {
    /// The request is refused (`egress_denied`, `out-of-audience`).
    #[default]
    Deny,
    /// The request goes without the credential (`downgraded`).
    Downgrade,
}

/// `[secrets.<id>]`: one credential the operator holds for packs.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SecretSpec {
    /// Where the value comes from: `env:NAME` or `file:PATH`. Anything
    /// else is the value itself, accepted with a warning (a policy file
    /// gets committed; a value in it leaks).
    pub value: Option<String>,
    /// Per-tenant values (tenant id → `env:`/`file:` source). A tenant
    /// listed here gets its own value; a node that declares
    /// `scope: "tenant"` gets nothing else.
    #[serde(default)]
    pub tenants: BTreeMap<String, String>,
    /// Where safe-fetch may attach it: `host`, `*.domain`, with an optional
    /// `https://`/`http://` scheme, port and path prefix
    /// (`https://api.example.com/v1/`). Without a scheme, https only.
    #[serde(default)]
    pub audiences: Vec<String>,
    /// Operator HTTP tools (`[[tools]]` ids) whose calls carry it.
    #[serde(default)]
    pub tools: Vec<String>,
    /// MCP servers (`streamable-http` only) whose `tools/call` requests
    /// carry it.
    #[serde(default)]
    pub mcp_servers: Vec<String>,
    /// How it is attached: `bearer` (default: `Authorization: Bearer …`),
    /// `basic` (the value is `user:password`), or `header:<Name>`.
    pub attach: Option<String>,
    /// Outside the audience: `deny` (default) or `downgrade`.
    #[serde(default)]
    pub out_of_audience: OutOfAudience,
    /// RFC 3339 expiry; after it the credential is not attached
    /// (`denied`, `expired`).
    pub expires_at: Option<String>,
    /// The provenance issuer (default `host`).
    pub issuer: Option<String>,
}

/// Where a value comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source<'a> {
    /// An environment variable.
    Env(&'a str),
    /// A file (its whole content, one trailing newline removed).
    File(&'a str),
    /// The text itself (warned about).
    Inline(&'a str),
}

impl<'a> Source<'a> {
    /// Parses `env:NAME`, `file:PATH` or an inline value.
    pub fn parse(text: &'a str) -> Source<'a> {
        if let Some(n) = text.strip_prefix("env:") {
            Source::Env(n)
        } else if let Some(p) = text.strip_prefix("file:") {
            Source::File(p)
        } else {
            Source::Inline(text)
        }
    }
}

impl SecretSpec {
    /// The attach style.
    pub fn attach(&self) -> Result<Attach, String> {
        Attach::parse(self.attach.as_deref().unwrap_or("bearer"))
    }

    /// The parsed audiences.
    pub fn audiences(&self) -> Result<Vec<Audience>, String> {
        self.audiences
            .iter()
            .enumerate()
            .map(|(i, a)| Audience::parse(a).map_err(|e| format!("audiences[{i}]: {e}")))
            .collect()
    }

    /// `expiresAt` in ms since the epoch, if set.
    pub fn expires_at_ms(&self) -> Result<Option<u64>, String> {
        self.expires_at
            .as_deref()
            .map(|t| expiry::parse_rfc3339_ms(t).map_err(|e| format!("expiresAt: {e}")))
            .transpose()
    }

    /// Checks the entry; `servers` says which MCP servers exist and
    /// whether each speaks HTTP; `tools` are the declared HTTP tool ids.
    /// Returns the warnings (inline values).
    pub fn validate(
        &self,
        id: &str,
        http_tools: &[&str],
        mcp_http: &BTreeMap<&str, bool>,
    ) -> Result<Vec<String>, String> {
        let at = |e: String| format!("secrets.{id}.{e}");
        if !valid_id(id) {
            return Err(format!(
                "secrets.{id}: the id must be 1-{MAX_ID_LEN} of letters, digits, `.`, `_`, `-`"
            ));
        }
        self.attach().map_err(|e| at(format!("attach: {e}")))?;
        self.audiences().map_err(at)?;
        self.expires_at_ms().map_err(at)?;
        if self.value.is_none() && self.tenants.is_empty() {
            return Err(format!(
                "secrets.{id}: give `value` (env:NAME or file:PATH) or per-tenant values in `tenants`"
            ));
        }
        if self.audiences.is_empty() && self.tools.is_empty() && self.mcp_servers.is_empty() {
            return Err(format!(
                "secrets.{id}: the audience is empty; list where it may be sent in `audiences` \
                 (safe-fetch hosts), `tools` (HTTP tools) or `mcpServers`"
            ));
        }
        for (i, t) in self.tools.iter().enumerate() {
            if !http_tools.contains(&t.as_str()) {
                return Err(format!(
                    "secrets.{id}.tools[{i}]: `{t}` is not an HTTP tool of this policy ([[tools]] with a `url`)"
                ));
            }
        }
        for (i, s) in self.mcp_servers.iter().enumerate() {
            match mcp_http.get(s.as_str()) {
                Some(true) => {}
                Some(false) => {
                    return Err(format!(
                        "secrets.{id}.mcpServers[{i}]: `{s}` is a stdio server; a credential can be \
                         attached only to a streamable-http server (give a stdio server its \
                         secrets through its own `env`)"
                    ));
                }
                None => {
                    return Err(format!(
                        "secrets.{id}.mcpServers[{i}]: no [mcp.servers.{s}] in this policy"
                    ));
                }
            }
        }
        if let Some(issuer) = &self.issuer
            && issuer.trim().is_empty()
        {
            return Err(format!("secrets.{id}.issuer: must not be empty"));
        }
        let mut warnings = Vec::new();
        let sources = self.value.iter().map(|v| ("value".to_owned(), v)).chain(
            self.tenants
                .iter()
                .map(|(t, v)| (format!("tenants.{t}"), v)),
        );
        for (key, v) in sources {
            match Source::parse(v) {
                Source::Env("") => {
                    return Err(format!("secrets.{id}.{key}: `env:` needs a variable name"));
                }
                Source::File("") => {
                    return Err(format!("secrets.{id}.{key}: `file:` needs a path"));
                }
                Source::Inline(_) => warnings.push(format!(
                    "secrets.{id}.{key} holds the value itself; a policy file gets copied and \
                     committed: use `env:NAME` or `file:PATH` instead"
                )),
                _ => {}
            }
        }
        Ok(warnings)
    }
}

/// The canonical `requiresSecrets` list of a manifest's nodes, for
/// showing and diffing.
pub fn declared_ids(reqs: &[SecretRequirement]) -> Vec<String> {
    let mut ids: Vec<String> = reqs.iter().map(|r| r.id.clone()).collect();
    ids.sort();
    ids.dedup();
    ids
}

#[cfg(test)]
mod tests;
