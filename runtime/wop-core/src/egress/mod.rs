//! Safe-fetch: SSRF-guarded HTTP egress for packs.
//!
//! The pure pieces: [`addr`] (which IP addresses are forbidden), [`host`]
//! (host normalization and forbidden names) and [`allow`] (the pack's
//! allow-list: manifest request ∩ operator grant), plus the request checks
//! in this module. The guarded HTTP client (`wop_gate::fetch_client`)
//! resolves every name once through a `Resolver`, rejects the whole answer
//! if any address is forbidden, and connects only to the validated
//! addresses.
//!
//! Every fetch passes the gate (see `host/http.rs`): a refused destination
//! is a `Gate::deny` with `egress_denied`; an allowed one is a
//! `Gate::call_authorized` of the tool `http:<host>`, whose provider is the
//! guarded client.

pub mod addr;
pub mod allow;
pub mod decision;
pub mod host;
pub mod plain;

pub use allow::{AllowList, Pattern, Scheme};
pub use decision::Decision;

use crate::error::ErrorCode;
use crate::ratelimit::RateSpec;
use host::{HostError, HostName};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::net::IpAddr;
use std::time::Duration;

/// `[egress]` in the operator policy: settings for every pack's fetches.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EgressSection {
    /// **Test-only**: let packs reach loopback addresses (`127/8`, `::1`)
    /// when the allow-list permits the destination. Names like `localhost`
    /// stay refused. Off by default; `wop inspect` and `wop run` warn
    /// loudly when it is on.
    #[serde(default)]
    pub allow_loopback: bool,
    /// Redirects followed per fetch, each re-validated against the
    /// allow-list and the address rules (default 0: a 3xx is returned to
    /// the pack as it is). At most 10.
    pub max_redirects: Option<u32>,
    /// Largest request body, in bytes (default 1 MiB).
    pub max_request_bytes: Option<u64>,
    /// Largest response body, in bytes (default 512 KiB). Must fit the
    /// gate's result cap (`effects.maxResultBytes`) once base64-encoded.
    pub max_response_bytes: Option<u64>,
    /// Connect timeout per attempt, in ms (default 5000).
    pub connect_timeout_ms: Option<u64>,
    /// Longest wait for the next bytes of a response, in ms (default 10 000).
    pub read_timeout_ms: Option<u64>,
    /// Total time for one fetch including redirects, in ms (default
    /// 30 000). All timeouts are clamped to the invocation's remaining
    /// wall clock.
    pub timeout_ms: Option<u64>,
    /// Rate limit per (principal, destination `http:<host>`).
    pub rate_limit: Option<RateSpec>,
}

/// Most redirects an operator may allow.
pub const MAX_REDIRECTS_CEILING: u32 = 10;

/// The effective settings (defaults applied).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EgressSettings {
    /// See [`EgressSection::allow_loopback`].
    pub allow_loopback: bool,
    /// See [`EgressSection::max_redirects`].
    pub max_redirects: u32,
    /// See [`EgressSection::max_request_bytes`].
    pub max_request_bytes: u64,
    /// See [`EgressSection::max_response_bytes`].
    pub max_response_bytes: u64,
    /// See [`EgressSection::connect_timeout_ms`].
    #[serde(skip)]
    pub connect_timeout: Duration,
    /// See [`EgressSection::read_timeout_ms`].
    #[serde(skip)]
    pub read_timeout: Duration,
    /// See [`EgressSection::timeout_ms`].
    #[serde(skip)]
    pub timeout: Duration,
    /// See [`EgressSection::rate_limit`].
    #[serde(skip)]
    pub rate: Option<RateSpec>,
}

impl EgressSection {
    /// The effective settings.
    pub fn settings(&self) -> EgressSettings {
        EgressSettings {
            allow_loopback: self.allow_loopback,
            max_redirects: self.max_redirects.unwrap_or(0),
            max_request_bytes: self.max_request_bytes.unwrap_or(1 << 20),
            max_response_bytes: self.max_response_bytes.unwrap_or(512 << 10),
            connect_timeout: Duration::from_millis(self.connect_timeout_ms.unwrap_or(5_000)),
            read_timeout: Duration::from_millis(self.read_timeout_ms.unwrap_or(10_000)),
            timeout: Duration::from_millis(self.timeout_ms.unwrap_or(30_000)),
            rate: self.rate_limit,
        }
    }

    /// Checks the section against the rest of the policy.
    pub fn validate(&self, max_result_bytes: u64) -> Result<(), String> {
        let s = self.settings();
        if s.max_redirects > MAX_REDIRECTS_CEILING {
            return Err(format!(
                "egress.maxRedirects = {} is above the maximum {MAX_REDIRECTS_CEILING}",
                s.max_redirects
            ));
        }
        for (k, v) in [
            ("connectTimeoutMs", self.connect_timeout_ms),
            ("readTimeoutMs", self.read_timeout_ms),
            ("timeoutMs", self.timeout_ms),
            ("maxResponseBytes", self.max_response_bytes),
        ] {
            if v == Some(0) {
                return Err(format!("egress.{k} must be greater than 0"));
            }
        }
        // base64 (4/3) plus room for the status and headers.
        let encoded = s.max_response_bytes.div_ceil(3) * 4 + (64 << 10);
        if encoded > max_result_bytes {
            return Err(format!(
                "egress.maxResponseBytes = {} does not fit effects.maxResultBytes = {max_result_bytes} once base64-encoded (needs {encoded}); raise effects.maxResultBytes or lower egress.maxResponseBytes",
                s.max_response_bytes
            ));
        }
        if let Some(r) = &self.rate_limit {
            r.validate().map_err(|e| format!("egress.rateLimit: {e}"))?;
        }
        Ok(())
    }
}

/// The protocol code of a refused fetch.
pub const EGRESS_DENIED: &str = "egress_denied";
/// The protocol code of an unreachable destination (502, retryable).
pub const UPSTREAM_UNAVAILABLE: &str = "upstream_unavailable";

/// Why a fetch was refused or failed before it was sent.
#[derive(Debug, Clone, PartialEq)]
pub struct Denial {
    /// `egress_denied` for policy refusals; `upstream_unavailable` for a
    /// name that does not resolve.
    pub code: ErrorCode,
    /// `details.reason`: `not-allowed`, `ssrf-blocked`, `scheme`,
    /// `invalid-url`, `method`, `header`, `body-too-large`, `redirect`,
    /// `upgrade`, `dns`.
    pub reason: &'static str,
    /// For people.
    pub message: String,
    /// Extra details (merged into the error's details object).
    pub extra: Value,
}

impl Denial {
    /// An `egress_denied` denial.
    pub fn denied(reason: &'static str, message: impl Into<String>) -> Self {
        Self {
            code: ErrorCode::EgressDenied,
            reason,
            message: message.into(),
            extra: Value::Null,
        }
    }

    /// Adds details to the denial.
    pub fn with(mut self, extra: Value) -> Self {
        self.extra = extra;
        self
    }

    /// The error details: `{reason, destination, ...extra}`.
    pub fn details(&self, destination: &str) -> Value {
        let mut d = json!({"reason": self.reason, "destination": destination});
        if let (Value::Object(m), Value::Object(x)) = (&mut d, &self.extra) {
            for (k, v) in x {
                m.insert(k.clone(), v.clone());
            }
        }
        d
    }
}

/// A destination that passed the scheme, name/literal and allow-list
/// checks (a name still has to resolve to acceptable addresses).
#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    /// The parsed URL (userinfo kept: reqwest turns it into basic auth).
    pub url: url::Url,
    /// The scheme.
    pub scheme: Scheme,
    /// The normalized host.
    pub host: HostName,
    /// The effective port.
    pub port: u16,
}

impl Target {
    /// `host[:port]` (the port only when not the scheme's default): the
    /// `destination` of events and errors. Never userinfo or path.
    pub fn authority(&self) -> String {
        if self.port == self.scheme.default_port() {
            self.host.canonical()
        } else {
            format!("{}:{}", self.host.canonical(), self.port)
        }
    }

    /// The gate's tool id for this destination: `http:<host>`.
    pub fn tool_id(&self) -> String {
        format!("http:{}", self.host.canonical())
    }

    /// What allow-lists and audiences match against.
    pub fn dest(&self) -> allow::Dest<'_> {
        allow::Dest {
            scheme: self.scheme,
            host: &self.host,
            port: self.port,
        }
    }
}

/// The authority of a URL for events, as far as it can be read (used when
/// the URL was refused before a [`Target`] existed).
pub fn rough_authority(url: &url::Url) -> String {
    match (url.host_str(), url.port()) {
        (Some(h), Some(p)) => format!("{h}:{p}"),
        (Some(h), None) => h.to_owned(),
        (None, _) => String::new(),
    }
}

/// Parses an absolute URL.
pub fn parse_url(text: &str) -> Result<url::Url, Denial> {
    url::Url::parse(text).map_err(|e| {
        Denial::denied(
            "invalid-url",
            format!("`{}` is not an absolute URL: {e}", cut(text)),
        )
    })
}

fn cut(s: &str) -> &str {
    &s[..s.floor_char_boundary(200)]
}

/// Judges one URL: scheme, host (forbidden names, IP literals judged by
/// address), then the allow-list. Used for the first request and for
/// every redirect hop.
pub fn check_url(
    url: &url::Url,
    allow: &AllowList,
    allow_loopback: bool,
) -> Result<Target, Denial> {
    let scheme = match url.scheme() {
        "https" => Scheme::Https,
        "http" => Scheme::Http,
        other => {
            return Err(Denial::denied(
                "scheme",
                format!(
                    "scheme `{other}` is not allowed; only https (and http where the operator allows it)"
                ),
            ));
        }
    };
    let host = match url.host() {
        Some(url::Host::Ipv4(v4)) => HostName::Ip(IpAddr::V4(v4)),
        Some(url::Host::Ipv6(v6)) => HostName::Ip(IpAddr::V6(v6)),
        Some(url::Host::Domain(d)) => match host::normalize(d) {
            Ok(h) => h,
            Err(HostError::Invalid(m)) => return Err(Denial::denied("invalid-url", m)),
            Err(HostError::Forbidden(m)) => return Err(Denial::denied("ssrf-blocked", m)),
        },
        None => return Err(Denial::denied("invalid-url", "the URL has no host")),
    };
    match &host {
        HostName::Name(n) => {
            if let Err(e) = host::judge_name(n) {
                let why = match e {
                    HostError::Forbidden(w) => w.to_owned(),
                    HostError::Invalid(w) => w,
                };
                return Err(
                    Denial::denied("ssrf-blocked", format!("`{n}` is refused: {why}"))
                        .with(json!({"blocked": "name"})),
                );
            }
        }
        HostName::Ip(ip) => {
            if let Err(f) = addr::permitted(*ip, allow_loopback) {
                return Err(Denial::denied(
                    "ssrf-blocked",
                    format!("{ip} is a {} address; packs may not reach it", f.as_str()),
                )
                .with(json!({"blocked": f.as_str()})));
            }
        }
    }
    let port = url.port_or_known_default().unwrap_or(scheme.default_port());
    let target = Target {
        url: url.clone(),
        scheme,
        host,
        port,
    };
    let dest = allow::Dest {
        scheme,
        host: &target.host,
        port,
    };
    if allow.allows(&dest) {
        return Ok(target);
    }
    if scheme == Scheme::Http {
        let https_port = if port == 80 { 443 } else { port };
        let as_https = allow::Dest {
            scheme: Scheme::Https,
            host: &target.host,
            port: https_port,
        };
        if allow.allows(&as_https) {
            return Err(Denial::denied(
                "scheme",
                format!(
                    "{} is allowed over https only (the operator may allow http for it with an `http://` pattern)",
                    target.authority()
                ),
            ));
        }
    }
    Err(Denial::denied(
        "not-allowed",
        format!(
            "{}://{} is not in this pack's egress allow-list (pack.json `x-wop.egress` ∩ the `egress` the operator policy, given with `--policy`, grants this pack)",
            scheme.as_str(),
            target.authority()
        ),
    ))
}

/// Judges a resolver answer: the whole answer is refused if any address is
/// forbidden (a mixed answer is a rebinding trick); an empty answer is a
/// resolution failure.
pub fn check_answer(name: &str, addrs: &[IpAddr], allow_loopback: bool) -> Result<(), Denial> {
    if addrs.is_empty() {
        return Err(Denial {
            code: ErrorCode::UpstreamUnavailable,
            reason: "dns",
            message: format!("`{name}` did not resolve to any address"),
            extra: json!({"retryable": true}),
        });
    }
    for ip in addrs {
        if let Err(f) = addr::permitted(*ip, allow_loopback) {
            return Err(Denial::denied(
                "ssrf-blocked",
                format!(
                    "`{name}` resolves to {ip}, a {} address; the whole answer is refused",
                    f.as_str()
                ),
            )
            .with(json!({"blocked": f.as_str()})));
        }
    }
    Ok(())
}

/// Methods a pack may use. GET and HEAD are reads; the rest are effects.
const METHODS: &[&str] = &["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"];

/// Checks a method; returns it uppercased.
pub fn check_method(method: &str) -> Result<http::Method, Denial> {
    let m = method.to_ascii_uppercase();
    if !METHODS.contains(&m.as_str()) {
        return Err(Denial::denied(
            "method",
            format!(
                "method `{}` is not allowed (use one of {})",
                cut(method),
                METHODS.join(", ")
            ),
        ));
    }
    http::Method::from_bytes(m.as_bytes())
        .map_err(|_| Denial::denied("method", format!("method `{}` is invalid", cut(method))))
}

/// Whether a method is a read (not claimed as an effect).
pub fn is_read(method: &http::Method) -> bool {
    matches!(*method, http::Method::GET | http::Method::HEAD)
}

/// Headers a pack may not set: hop-by-hop headers, `Host`, framing headers
/// the client computes, `Proxy-*`, and `Idempotency-Key` (use the
/// request's `idempotency-key` field; the host sends the effect id).
const REFUSED_HEADERS: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "host",
    "content-length",
    "expect",
    "http2-settings",
    "idempotency-key",
];

/// Trace-context headers a pack may not set: the host carries the call's
/// own context on (W3C `traceparent`/`tracestate`, when traces are on),
/// and a context the pack chose — in these or in another tracer's
/// propagation format (B3, Jaeger, Datadog, Google, AWS X-Ray, gRPC) —
/// would make the destination's tracer parent its work under a trace of
/// the pack's choosing. `baggage` parents nothing and stays allowed.
const TRACE_HEADERS: &[&str] = &[
    "traceparent",
    "tracestate",
    "b3",
    "uber-trace-id",
    "x-cloud-trace-context",
    "grpc-trace-bin",
    "x-amzn-trace-id",
];

/// Prefixes of trace-context header families ([`TRACE_HEADERS`]).
const TRACE_HEADER_PREFIXES: &[&str] = &["x-b3-", "x-datadog-"];

/// Whether `name` (lowercase) is a trace-context header.
pub fn is_trace_header(name: &str) -> bool {
    TRACE_HEADERS.contains(&name) || TRACE_HEADER_PREFIXES.iter().any(|p| name.starts_with(p))
}

/// Checked request headers.
pub type Headers = Vec<(http::header::HeaderName, http::header::HeaderValue)>;

/// Checks the pack's headers; any refused or malformed header refuses the
/// whole request (`reason: header`; a trace-context header,
/// `reason: trace-context`).
pub fn check_headers(headers: &[(String, String)]) -> Result<Headers, Denial> {
    if headers.len() > 64 {
        return Err(Denial::denied("header", "more than 64 request headers"));
    }
    let mut out = Vec::with_capacity(headers.len());
    for (name, value) in headers {
        let lower = name.to_ascii_lowercase();
        if REFUSED_HEADERS.contains(&lower.as_str()) || lower.starts_with("proxy-") {
            return Err(Denial::denied(
                "header",
                format!("header `{}` may not be set by a pack", cut(name)),
            )
            .with(json!({"header": lower})));
        }
        if is_trace_header(&lower) {
            return Err(Denial::denied(
                "trace-context",
                format!(
                    "header `{}` may not be set by a pack: the host sends the call's own trace \
                     context (`traceparent`) itself",
                    cut(name)
                ),
            )
            .with(json!({"header": lower})));
        }
        let n = http::header::HeaderName::from_bytes(name.as_bytes()).map_err(|_| {
            Denial::denied(
                "header",
                format!("`{}` is not a valid header name", cut(name)),
            )
        })?;
        let v = http::header::HeaderValue::from_str(value).map_err(|_| {
            Denial::denied(
                "header",
                format!("the value of header `{}` is invalid", cut(name)),
            )
            .with(json!({"header": lower}))
        })?;
        out.push((n, v));
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
