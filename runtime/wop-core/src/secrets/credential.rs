//! A resolved credential (value in hand) and the set one invocation may
//! use. The value lives in zeroed-on-drop memory, is never printed by
//! `Debug`, and leaves this type only as the header it is attached as.

use super::audience::{Audience, Fit};
use super::{OutOfAudience, SecretSpec};
use crate::egress::allow::Dest;
use base64::Engine as _;
use std::sync::Arc;
use zeroize::Zeroizing;

/// Shortest value accepted: anything shorter cannot be redacted from
/// responses without mangling them, and is not a credential anyway.
pub const MIN_VALUE_LEN: usize = 8;
/// Longest value accepted (a header value).
pub const MAX_VALUE_LEN: usize = 8 << 10;

/// How a credential is attached to a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Attach {
    /// `Authorization: Bearer <value>`.
    Bearer,
    /// `Authorization: Basic base64(<value>)`, the value `user:password`.
    Basic,
    /// `<name>: <value>` (the name lowercase).
    Header(String),
}

/// Header names a credential may not be attached as: framing and
/// hop-by-hop headers, `Host`, `Idempotency-Key`, trace context, content
/// negotiation the host controls for redaction, and the MCP transport's
/// own headers.
const NOT_AS: &[&str] = &[
    "host",
    "content-length",
    "content-type",
    "transfer-encoding",
    "connection",
    "keep-alive",
    "te",
    "trailer",
    "upgrade",
    "expect",
    "idempotency-key",
    "traceparent",
    "tracestate",
    "accept",
    "accept-encoding",
    "range",
    "if-range",
    "mcp-session-id",
    "mcp-protocol-version",
    "mcp-method",
    "mcp-name",
];

impl Attach {
    /// Parses `bearer`, `basic` or `header:<Name>`.
    pub fn parse(text: &str) -> Result<Attach, String> {
        match text {
            "bearer" => Ok(Attach::Bearer),
            "basic" => Ok(Attach::Basic),
            t => match t.strip_prefix("header:") {
                Some(name) => {
                    let lower = name.trim().to_ascii_lowercase();
                    if http::header::HeaderName::from_bytes(lower.as_bytes()).is_err() {
                        return Err(format!("`{name}` is not a valid header name"));
                    }
                    if NOT_AS.contains(&lower.as_str()) || lower.starts_with("proxy-") {
                        return Err(format!("a credential may not be attached as `{name}`"));
                    }
                    Ok(Attach::Header(lower))
                }
                None => Err(format!(
                    "`{t}` is not one of `bearer`, `basic`, `header:<Name>`"
                )),
            },
        }
    }

    /// The header it sets (lowercase).
    pub fn header_name(&self) -> &str {
        match self {
            Attach::Bearer | Attach::Basic => "authorization",
            Attach::Header(n) => n,
        }
    }
}

/// One credential, resolved for one tenant.
pub struct Credential {
    id: String,
    issuer: String,
    audiences: Vec<Audience>,
    tools: Vec<String>,
    mcp_servers: Vec<String>,
    attach: Attach,
    out_of_audience: OutOfAudience,
    expires_at_ms: Option<u64>,
    header_value: Zeroizing<String>,
    needles: Vec<Zeroizing<Vec<u8>>>,
    /// What a redacted occurrence reads as ([`marker_for`]).
    marker: String,
}

impl std::fmt::Debug for Credential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credential")
            .field("id", &self.id)
            .field("issuer", &self.issuer)
            .field("attach", &self.attach)
            .finish_non_exhaustive()
    }
}

impl Credential {
    /// The credential `id` of `spec` with `value`. The error never
    /// contains the value.
    pub fn new(id: &str, spec: &SecretSpec, value: Zeroizing<String>) -> Result<Self, String> {
        let attach = spec.attach()?;
        let audiences = spec.audiences()?;
        let expires_at_ms = spec.expires_at_ms()?;
        let v = value.as_str();
        if v.len() < MIN_VALUE_LEN {
            return Err(format!(
                "the value is shorter than {MIN_VALUE_LEN} bytes; it could not be redacted \
                 from responses safely"
            ));
        }
        if v.len() > MAX_VALUE_LEN {
            return Err(format!("the value is longer than {MAX_VALUE_LEN} bytes"));
        }
        if v.chars().any(char::is_control) || v.trim() != v {
            return Err(
                "the value has control characters or surrounding spaces; it cannot be sent \
                 as a header"
                    .to_owned(),
            );
        }
        let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
        let header_value = Zeroizing::new(match &attach {
            Attach::Bearer => format!("Bearer {v}"),
            Attach::Basic => {
                if !v.contains(':') {
                    return Err("a `basic` value must be `user:password`".to_owned());
                }
                format!("Basic {}", b64(v))
            }
            Attach::Header(_) => v.to_owned(),
        });
        let mut needles: Vec<Zeroizing<Vec<u8>>> = Vec::new();
        // Kept ASCII-lowercase: redaction matches in any ASCII case.
        let mut add = |s: String| {
            let s = Zeroizing::new(s.into_bytes());
            let s = Zeroizing::new(s.to_ascii_lowercase());
            if s.len() >= 6 && !needles.iter().any(|n| **n == *s) {
                needles.push(s);
            }
        };
        add(v.to_owned());
        add(b64(v));
        add(base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v));
        add(percent_encode(v));
        let json = serde_json::to_string(v)
            .map(|q| q.trim_matches('"').to_owned())
            .unwrap_or_default();
        // Some encoders also escape `/` as `\/`.
        add(json.replace('/', "\\/"));
        add(json);
        if let (Attach::Basic, Some((_, password))) = (&attach, v.split_once(':')) {
            add(password.to_owned());
        }
        // Longest first, so a longer form is replaced before a piece of it.
        needles.sort_by_key(|n| std::cmp::Reverse(n.len()));
        let marker = marker_for(id, &needles);
        Ok(Credential {
            id: id.to_owned(),
            issuer: spec.issuer.clone().unwrap_or_else(|| "host".to_owned()),
            audiences,
            tools: spec.tools.clone(),
            mcp_servers: spec.mcp_servers.clone(),
            attach,
            out_of_audience: spec.out_of_audience,
            expires_at_ms,
            header_value,
            needles,
            marker,
        })
    }

    /// The credential id (the `[secrets.<id>]` key).
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The provenance issuer.
    pub fn issuer(&self) -> &str {
        &self.issuer
    }

    /// How it is attached.
    pub fn attach(&self) -> &Attach {
        &self.attach
    }

    /// What happens outside its audience.
    pub fn out_of_audience(&self) -> OutOfAudience {
        self.out_of_audience
    }

    /// Whether it has expired at `now_ms`.
    pub fn expired(&self, now_ms: u64) -> bool {
        self.expires_at_ms.is_some_and(|e| now_ms >= e)
    }

    /// Whether a safe-fetch request to `dest` with URL path `path` is in
    /// its audience.
    pub fn in_audience(&self, dest: &Dest<'_>, path: &str) -> bool {
        self.audience_fit(dest, path) == Fit::In
    }

    /// How a safe-fetch request to `dest` with URL path `path` fits its
    /// audiences: [`Fit::In`] if one takes it; else [`Fit::NotPlain`] if one
    /// would but for a path that is not plain; else [`Fit::Out`].
    pub fn audience_fit(&self, dest: &Dest<'_>, path: &str) -> Fit {
        let mut fit = Fit::Out;
        for a in &self.audiences {
            match a.fit(dest, path) {
                Fit::In => return Fit::In,
                Fit::NotPlain => fit = Fit::NotPlain,
                Fit::Out => {}
            }
        }
        fit
    }

    /// Whether calls of `tool_id` carry it: an HTTP tool it lists, or a
    /// tool (`mcp:<server>/<tool>`) of an MCP server it lists.
    pub fn for_tool(&self, tool_id: &str) -> bool {
        if self.tools.iter().any(|t| t == tool_id) {
            return true;
        }
        tool_id
            .strip_prefix("mcp:")
            .and_then(|rest| rest.split_once('/'))
            .is_some_and(|(server, _)| self.mcp_servers.iter().any(|s| s == server))
    }

    /// The header to attach, marked sensitive (never logged by `http`).
    pub fn header(&self) -> Option<(http::HeaderName, http::HeaderValue)> {
        let name = http::HeaderName::from_bytes(self.attach.header_name().as_bytes()).ok()?;
        let mut value = http::HeaderValue::from_str(&self.header_value).ok()?;
        value.set_sensitive(true);
        Some((name, value))
    }

    /// The byte strings replaced in responses: the value and its common
    /// encodings (base64, base64url, percent- and JSON-escaped, the
    /// password of a basic credential), ASCII-lowercase (matched in any
    /// case), longest first.
    pub fn needles(&self) -> impl Iterator<Item = &[u8]> {
        self.needles.iter().map(|n| n.as_slice())
    }

    /// What a redacted occurrence reads as: `[redacted:<id>]`.
    pub fn marker(&self) -> &str {
        &self.marker
    }
}

/// `[redacted:<id>]`, unless it holds one of the credential's own forms
/// (a Basic password `redacted:k` is inside `[redacted:k]`, so a second
/// pass would redact the marker again): then `[redacted]`, and if even
/// that holds one, `[***]`, shorter than any needle (6 bytes or more).
fn marker_for(id: &str, needles: &[Zeroizing<Vec<u8>>]) -> String {
    let holds = |m: &str| {
        let m = m.to_ascii_lowercase();
        needles
            .iter()
            .any(|n| memchr::memmem::find(m.as_bytes(), n).is_some())
    };
    [format!("[redacted:{id}]"), "[redacted]".to_owned()]
        .into_iter()
        .find(|m| !holds(m))
        .unwrap_or_else(|| "[***]".to_owned())
}

fn percent_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The credentials one invocation may use: its node's declared secrets,
/// granted to its pack, resolved for its tenant. Cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct Credentials {
    list: Arc<[Arc<Credential>]>,
}

impl Credentials {
    /// A set of credentials.
    pub fn new(list: Vec<Arc<Credential>>) -> Self {
        Self { list: list.into() }
    }

    /// Whether there are none (the common case: nothing to attach or redact).
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// Every credential.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<Credential>> {
        self.list.iter()
    }

    /// The credential with this id.
    pub fn get(&self, id: &str) -> Option<&Arc<Credential>> {
        self.list.iter().find(|c| c.id == id)
    }

    /// Those carried by calls of `tool_id`.
    pub fn for_tool(&self, tool_id: &str) -> Vec<Arc<Credential>> {
        self.list
            .iter()
            .filter(|c| c.for_tool(tool_id))
            .cloned()
            .collect()
    }
}
