//! What a node declares it needs (`nodes[].requiresSecrets[]` and the
//! older `nodes[].requiredCredentials[]`), read from `pack.json`.

use crate::error::LoadError;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Most secrets one node may declare.
pub const MAX_PER_NODE: usize = 32;

/// `requiresSecrets[].kind`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SecretKind {
    /// A model provider's key.
    AiProvider,
    /// An API key.
    ApiKey,
    /// An OAuth access token.
    OauthToken,
    /// Anything else.
    Custom,
}

/// `requiresSecrets[].scope`: whose value it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SecretScope {
    /// One value per tenant (`[secrets.<id>.tenants]`).
    Tenant,
    /// One value per user (not provided by this host).
    User,
    /// One value per run (not provided by this host).
    Run,
}

impl SecretScope {
    /// `tenant`, `user`, `run`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Tenant => "tenant",
            Self::User => "user",
            Self::Run => "run",
        }
    }
}

/// One declared secret.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SecretRequirement {
    /// The secret id the operator provides it under (`[secrets.<id>]`).
    pub id: String,
    /// What kind of credential it is.
    pub kind: SecretKind,
    /// The provider it is for (informational), e.g. `openai`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// Whose value it is (default: the operator's, one for everyone).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<SecretScope>,
}

impl SecretRequirement {
    /// A requirement of secret `id` that no manifest declared: a
    /// JavaScript pack's, from the operator's grant (kind `custom`, the
    /// operator's value).
    pub fn granted(id: &str) -> Self {
        Self {
            id: id.to_owned(),
            kind: SecretKind::Custom,
            provider: None,
            scope: None,
        }
    }
}

fn err(path: String, message: impl Into<String>) -> LoadError {
    LoadError::validation(path, message)
}

fn opt_str<'a>(v: &'a Value, key: &str, path: &str) -> Result<Option<&'a str>, LoadError> {
    match v.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if !s.trim().is_empty() => Ok(Some(s)),
        Some(_) => Err(err(format!("{path}.{key}"), "must be a non-empty string")),
    }
}

fn scope(v: &Value, path: &str) -> Result<Option<SecretScope>, LoadError> {
    Ok(match opt_str(v, "scope", path)? {
        None => None,
        Some("tenant") => Some(SecretScope::Tenant),
        Some("user") => Some(SecretScope::User),
        Some("run") => Some(SecretScope::Run),
        Some(other) => {
            return Err(err(
                format!("{path}.scope"),
                format!("`{other}` is not one of tenant, user, run"),
            ));
        }
    })
}

fn id(v: &Value, key: &str, path: &str) -> Result<String, LoadError> {
    let p = format!("{path}.{key}");
    match opt_str(v, key, path)? {
        None => Err(err(p, "is required")),
        Some(s) if super::valid_id(s) => Ok(s.to_owned()),
        Some(s) => Err(err(
            p,
            format!(
                "`{}` must be 1-{} of letters, digits, `.`, `_`, `-`",
                &s[..s.floor_char_boundary(80)],
                super::MAX_ID_LEN
            ),
        )),
    }
}

fn array<'a>(node: &'a Value, key: &str, path: &str) -> Result<&'a [Value], LoadError> {
    match node.get(key) {
        None | Some(Value::Null) => Ok(&[]),
        Some(Value::Array(a)) => Ok(a),
        Some(_) => Err(err(format!("{path}.{key}"), "must be an array")),
    }
}

/// The secrets one node (`$.nodes[i]` at `path`) declares.
pub fn parse_node(node: &Value, path: &str) -> Result<Vec<SecretRequirement>, LoadError> {
    let mut out: Vec<SecretRequirement> = Vec::new();
    for (i, s) in array(node, "requiresSecrets", path)?.iter().enumerate() {
        let p = format!("{path}.requiresSecrets[{i}]");
        if !s.is_object() {
            return Err(err(p, "must be an object"));
        }
        let kind = match opt_str(s, "kind", &p)? {
            Some("ai-provider") => SecretKind::AiProvider,
            Some("api-key") => SecretKind::ApiKey,
            Some("oauth-token") => SecretKind::OauthToken,
            Some("custom") => SecretKind::Custom,
            Some(other) => {
                return Err(err(
                    format!("{p}.kind"),
                    format!("`{other}` is not one of ai-provider, api-key, oauth-token, custom"),
                ));
            }
            None => return Err(err(format!("{p}.kind"), "is required")),
        };
        let r = SecretRequirement {
            id: id(s, "id", &p)?,
            kind,
            provider: opt_str(s, "provider", &p)?.map(str::to_owned),
            scope: scope(s, &p)?,
        };
        push(&mut out, r, &p)?;
    }
    for (i, c) in array(node, "requiredCredentials", path)?.iter().enumerate() {
        let p = format!("{path}.requiredCredentials[{i}]");
        if !c.is_object() {
            return Err(err(p, "must be an object"));
        }
        let r = SecretRequirement {
            id: id(c, "key", &p)?,
            kind: SecretKind::Custom,
            provider: None,
            scope: scope(c, &p)?,
        };
        push(&mut out, r, &p)?;
    }
    Ok(out)
}

fn push(out: &mut Vec<SecretRequirement>, r: SecretRequirement, p: &str) -> Result<(), LoadError> {
    if out.iter().any(|o| o.id == r.id) {
        return Err(err(
            p.to_owned(),
            format!("secret `{}` is declared twice", r.id),
        ));
    }
    if out.len() >= MAX_PER_NODE {
        return Err(err(
            p.to_owned(),
            format!("a node may declare at most {MAX_PER_NODE} secrets"),
        ));
    }
    out.push(r);
    Ok(())
}
