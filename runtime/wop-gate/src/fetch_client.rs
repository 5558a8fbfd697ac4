//! The guarded HTTP client behind `http.safe-fetch`.
//!
//! - Names are resolved **once**, through a [`crate::Resolver`], by
//!   [`super::Egress::resolve_checked`]; the whole answer is refused if any
//!   address is forbidden. The validated addresses are *pinned* for the
//!   request, and reqwest's DNS hook ([`Pinned`]) returns only pinned
//!   addresses: a name that was not validated fails to connect, and no
//!   second lookup can rebind it.
//! - IP-literal URLs never reach a resolver, so they are judged from the
//!   parsed URL ([`super::check_url`]) before sending, and again for every
//!   redirect hop.
//! - No proxy (a proxy would resolve names itself), no automatic
//!   redirects: hops are followed here, at most `maxRedirects`, each
//!   re-validated like the first request.
//! - `101 Switching Protocols` is refused; bodies are capped while they
//!   stream; every timeout is clamped to the invocation's remaining time.

use crate::PackEgress;
use crate::tools::{ToolCall, ToolFailure, ToolProvider};
use base64::Engine as _;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use wop_core::egress::{Decision, Denial, Target, UPSTREAM_UNAVAILABLE, check_url};
use wop_core::error::ErrorCode;
use wop_core::secrets::{Credential, Credentials, decide, redact};

/// reqwest's DNS hook: answers only with addresses validated for this
/// request, keyed by the URL's host text.
#[derive(Clone, Default)]
struct Pinned(Arc<Mutex<HashMap<String, Vec<IpAddr>>>>);

impl Pinned {
    fn pin(&self, target: &Target, addrs: &[IpAddr]) {
        if let Some(h) = target.url.host_str() {
            let mut g = match self.0.lock() {
                Ok(g) => g,
                Err(p) => p.into_inner(),
            };
            g.insert(h.to_owned(), addrs.to_vec());
        }
    }
}

impl reqwest::dns::Resolve for Pinned {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let found = {
            let g = match self.0.lock() {
                Ok(g) => g,
                Err(p) => p.into_inner(),
            };
            g.get(name.as_str()).cloned()
        };
        let name = name.as_str().to_owned();
        Box::pin(async move {
            match found {
                Some(a) if !a.is_empty() => {
                    let addrs: reqwest::dns::Addrs =
                        Box::new(a.into_iter().map(|ip| SocketAddr::new(ip, 0)));
                    Ok(addrs)
                }
                _ => Err(format!("`{name}` was not validated by the egress guard").into()),
            }
        })
    }
}

/// A request that passed every check before the gate.
#[derive(Debug, Clone)]
pub struct FetchPlan {
    /// The first destination.
    pub target: Target,
    /// Its validated addresses (empty for an IP literal).
    pub addrs: Vec<IpAddr>,
    /// The method.
    pub method: reqwest::Method,
    /// The pack's headers (checked).
    pub headers: wop_core::egress::Headers,
    /// The body.
    pub body: Option<Vec<u8>>,
    /// The credentials attached to the first request (in its audience).
    pub credentials: Vec<Arc<Credential>>,
    /// Every credential of the invocation: taken out of the response.
    pub redact: Credentials,
}

/// The provider of one `http:<host>` call: performs the plan, following
/// redirects only as allowed. Decisions on redirect hops are kept for the
/// `egress.decided` events.
pub struct GuardedFetch {
    egress: PackEgress,
    plan: FetchPlan,
    decisions: Mutex<Vec<Decision>>,
}

impl GuardedFetch {
    /// A provider for `plan` under `egress`.
    pub fn new(egress: PackEgress, plan: FetchPlan) -> Self {
        Self {
            egress,
            plan,
            decisions: Mutex::new(Vec::new()),
        }
    }

    /// The decisions taken on redirect hops, in order.
    pub fn take_decisions(&self) -> Vec<Decision> {
        let mut g = match self.decisions.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        std::mem::take(&mut *g)
    }

    fn decide(&self, d: Decision) {
        let mut g = match self.decisions.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        g.push(d);
    }

    fn client(&self, pinned: Pinned, total: Duration) -> Result<reqwest::Client, ToolFailure> {
        let s = self.egress.engine.settings();
        reqwest::Client::builder()
            .no_proxy()
            .redirect(reqwest::redirect::Policy::none())
            .dns_resolver(Arc::new(pinned))
            .connect_timeout(s.connect_timeout.min(total))
            .read_timeout(s.read_timeout.min(total))
            .pool_max_idle_per_host(0)
            .referer(false)
            .user_agent(concat!("wop-safe-fetch/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| {
                ToolFailure::not_sent(
                    ErrorCode::InternalError.as_str(),
                    format!("cannot build the HTTP client: {e}"),
                )
            })
    }
}

/// A failure the provider answered with after something was sent.
fn answered(d: &Denial, destination: &str, hop: u32) -> ToolFailure {
    let mut details = d.details(destination);
    if hop > 0
        && let Value::Object(m) = &mut details
    {
        m.insert("redirectHop".to_owned(), json!(hop));
    }
    ToolFailure::answered(d.code.as_str(), d.message.clone(), Some(details))
}

fn send_failure(e: &reqwest::Error, destination: &str, after_redirect: bool) -> ToolFailure {
    let (reason, msg) = if e.is_timeout() {
        ("timeout", format!("{destination} did not answer in time"))
    } else if e.is_connect() {
        ("connect", format!("cannot connect to {destination}"))
    } else {
        ("transport", format!("the request to {destination} failed"))
    };
    let details = json!({"reason": reason, "destination": destination, "retryable": true, "cause": e.to_string()});
    let mut f = ToolFailure {
        code: UPSTREAM_UNAVAILABLE.to_owned(),
        message: msg,
        details: Some(details),
        sent: true,
        definite: false,
    };
    if e.is_connect() && !after_redirect {
        // Nothing reached the destination: the effect (if any) is released.
        f.sent = false;
        f.definite = true;
    } else if after_redirect {
        // An earlier hop answered (with a redirect): that is the outcome.
        f.definite = true;
    }
    f
}

/// Whether two targets share scheme, host and port.
fn same_origin(a: &Target, b: &Target) -> bool {
    a.scheme == b.scheme && a.host == b.host && a.port == b.port
}

#[async_trait::async_trait]
impl ToolProvider for GuardedFetch {
    async fn call(&self, call: ToolCall) -> Result<Value, ToolFailure> {
        let started = Instant::now();
        let s = *self.egress.engine.settings();
        let total = call.timeout.min(s.timeout);
        let pinned = Pinned::default();
        pinned.pin(&self.plan.target, &self.plan.addrs);
        let client = self.client(pinned.clone(), total)?;

        let mut target = self.plan.target.clone();
        let mut method = self.plan.method.clone();
        let mut headers = self.plan.headers.clone();
        let mut body = self.plan.body.clone();
        let mut attached = self.plan.credentials.clone();
        let mut hop: u32 = 0;
        loop {
            let destination = target.authority();
            let remaining = total.saturating_sub(started.elapsed());
            if remaining.is_zero() {
                return Err(ToolFailure {
                    code: UPSTREAM_UNAVAILABLE.to_owned(),
                    message: format!("the fetch ran out of time before reaching {destination}"),
                    details: Some(
                        json!({"reason": "timeout", "destination": destination, "retryable": true}),
                    ),
                    sent: hop > 0,
                    definite: true,
                });
            }
            let mut rb = client
                .request(method.clone(), target.url.clone())
                .timeout(remaining);
            rb = rb.headers(with_credentials(&headers, &attached));
            if let Some(k) = &call.idempotency_key {
                rb = rb.header("idempotency-key", k);
            }
            if let Some(tp) = &call.traceparent {
                rb = rb.header("traceparent", tp);
            }
            if let Some(b) = &body {
                rb = rb.body(b.clone());
            }
            let resp = match rb.send().await {
                Ok(r) => r,
                Err(e) => return Err(send_failure(&e, &destination, hop > 0)),
            };
            let status = resp.status();
            if status == reqwest::StatusCode::SWITCHING_PROTOCOLS {
                return Err(answered(
                    &Denial::denied(
                        "upgrade",
                        format!(
                            "{destination} answered 101 Switching Protocols; protocol upgrades are refused"
                        ),
                    ),
                    &destination,
                    hop,
                ));
            }
            let location = resp.headers().get(reqwest::header::LOCATION).cloned();
            if status.is_redirection() && s.max_redirects > 0 && location.is_some() {
                hop += 1;
                let next = location
                    .as_ref()
                    .and_then(|l| l.to_str().ok())
                    .and_then(|l| target.url.join(l).ok());
                drop(resp);
                if hop > s.max_redirects {
                    let d = Denial::denied(
                        "redirect",
                        format!("more than {} redirects", s.max_redirects),
                    );
                    self.decide(Decision::denied(destination.clone(), &d));
                    return Err(answered(&d, &destination, hop));
                }
                let Some(next) = next else {
                    let d = Denial::denied(
                        "redirect",
                        format!("{destination} redirected to an invalid Location"),
                    );
                    self.decide(Decision::denied(destination.clone(), &d));
                    return Err(answered(&d, &destination, hop));
                };
                let checked = match check_url(&next, &self.egress.allow, s.allow_loopback) {
                    Ok(t) => {
                        let within = total.saturating_sub(started.elapsed());
                        self.egress
                            .engine
                            .resolve_checked(&t, within)
                            .await
                            .map(|a| (t, a))
                    }
                    Err(d) => Err(d),
                };
                let (t, addrs) = match checked {
                    Ok(x) => x,
                    Err(d) => {
                        let dest = wop_core::egress::rough_authority(&next);
                        self.decide(Decision::denied(dest.clone(), &d));
                        return Err(answered(&d, &dest, hop));
                    }
                };
                self.decide(Decision::allowed(t.authority(), Some("redirect")));
                if !attached.is_empty() {
                    let plan = decide::hop(
                        &attached,
                        same_origin(&target, &t),
                        &t.dest(),
                        t.url.path(),
                        wop_core::time::now_ms(),
                    );
                    for d in &plan.decisions {
                        self.decide(Decision::credential(t.authority(), d));
                    }
                    let reason = plan.refusal_reason();
                    if let Some(message) = plan.refused {
                        let d = Denial::denied(reason, message);
                        return Err(answered(&d, &t.authority(), hop));
                    }
                    attached = plan.attach;
                }
                pinned.pin(&t, &addrs);
                let to_get = (status == reqwest::StatusCode::SEE_OTHER
                    && method != reqwest::Method::HEAD)
                    || (matches!(status.as_u16(), 301 | 302) && method == reqwest::Method::POST);
                if to_get {
                    method = reqwest::Method::GET;
                    body = None;
                    headers.retain(|(n, _)| !n.as_str().starts_with("content-"));
                }
                if !same_origin(&target, &t) {
                    headers.retain(|(n, _)| {
                        !matches!(n.as_str(), "authorization" | "cookie" | "www-authenticate")
                    });
                }
                target = t;
                continue;
            }
            let read = Read {
                cap: s.max_response_bytes,
                destination: &destination,
                hop,
                credentialed: !attached.is_empty(),
                head: method == reqwest::Method::HEAD,
                redact: &self.plan.redact,
            };
            return read_response(resp, read).await;
        }
    }
}

/// The pack's headers with the credentials attached: a credential replaces
/// a header of the same name; a credentialed request asks for an unencoded
/// whole response (no `Accept-Encoding`, no `Range`), so nothing the
/// destination echoes can come back in a form redaction cannot see.
fn with_credentials(
    headers: &wop_core::egress::Headers,
    attached: &[Arc<Credential>],
) -> reqwest::header::HeaderMap {
    let mut out = reqwest::header::HeaderMap::new();
    let taken: Vec<(http::HeaderName, http::HeaderValue)> =
        attached.iter().filter_map(|c| c.header()).collect();
    for (n, v) in headers {
        let replaced = taken.iter().any(|(t, _)| t == n);
        let unsafe_with_credentials =
            !attached.is_empty() && matches!(n.as_str(), "accept-encoding" | "range" | "if-range");
        if !replaced && !unsafe_with_credentials {
            out.append(n.clone(), v.clone());
        }
    }
    if !attached.is_empty() {
        out.insert(
            reqwest::header::ACCEPT_ENCODING,
            http::HeaderValue::from_static("identity"),
        );
    }
    for (n, v) in taken {
        out.insert(n, v);
    }
    out
}

/// The header of a credentialed answer whose body is encoded in a way
/// redaction cannot see through: a `Content-Encoding` other than
/// `identity`, or a `Transfer-Encoding` coding other than `chunked` (the
/// framing, undone by the client) — in **any** instance of either header
/// and any element of a list (`identity` then `gzip`; `gzip, chunked`).
fn encoded(headers: &reqwest::header::HeaderMap) -> Option<&'static str> {
    let checks: [(reqwest::header::HeaderName, &'static str, &[&str]); 2] = [
        (
            reqwest::header::CONTENT_ENCODING,
            "Content-Encoding",
            &["identity"],
        ),
        (
            reqwest::header::TRANSFER_ENCODING,
            "Transfer-Encoding",
            &["chunked", "identity"],
        ),
    ];
    for (name, shown, plain) in checks {
        for v in headers.get_all(&name) {
            let Ok(text) = v.to_str() else {
                return Some(shown);
            };
            for coding in text.split(',') {
                // Parameters (`;q=…`) do not change the coding.
                let coding = coding.split(';').next().unwrap_or("").trim();
                if !coding.is_empty() && !plain.iter().any(|p| p.eq_ignore_ascii_case(coding)) {
                    return Some(shown);
                }
            }
        }
    }
    None
}

/// Headers of a credentialed (or redacted) answer that describe a body
/// other than the one returned — its length or a digest of it — are taken
/// out, so neither tells the pack a credential's length or lets it test a
/// guess: `Content-Length` stays only if it is the returned body's length
/// (a `HEAD` answer's goes), `Content-Range` and the digests
/// (`Content-MD5`, `Digest`, `Content-Digest`, `Repr-Digest`) always go,
/// and `ETag` goes when the body was redacted or not returned (`HEAD`).
fn describes_only_what_is_returned(headers: &mut Vec<Value>, len: usize, altered: bool) {
    let len = len.to_string();
    headers.retain(|h| match h[0].as_str().unwrap_or("") {
        "content-length" => h[1].as_str() == Some(len.as_str()),
        "content-range" | "content-md5" | "digest" | "content-digest" | "repr-digest" => false,
        "etag" => !altered,
        _ => true,
    });
}

/// How to read one response.
struct Read<'a> {
    cap: u64,
    destination: &'a str,
    hop: u32,
    /// A credential went with the request.
    credentialed: bool,
    /// The request was a `HEAD`: the headers describe a body not returned.
    head: bool,
    /// Taken out of the status line's headers and the body.
    redact: &'a Credentials,
}

async fn read_response(mut resp: reqwest::Response, r: Read<'_>) -> Result<Value, ToolFailure> {
    let Read {
        cap,
        destination,
        hop,
        ..
    } = r;
    let too_large = |observed: u64| {
        let d = Denial::denied(
            "body-too-large",
            format!("the response from {destination} exceeds the {cap}-byte cap (egress.maxResponseBytes)"),
        )
        .with(json!({"direction": "response", "limit": cap, "observed": observed}));
        answered(&d, destination, hop)
    };
    if let Some(n) = resp.content_length()
        && n > cap
    {
        return Err(too_large(n));
    }
    let status = resp.status().as_u16();
    if r.credentialed
        && let Some(header) = encoded(resp.headers())
    {
        let d = Denial::denied(
            "encoded-response",
            format!(
                "{destination} answered a credentialed request with an encoded body \
                 ({header} other than identity); the host cannot check it for the credential, \
                 so it is not returned"
            ),
        )
        .with(json!({"header": header}));
        return Err(answered(&d, destination, hop));
    }
    let mut headers: Vec<Value> = resp
        .headers()
        .iter()
        .map(|(n, v)| json!([n.as_str(), String::from_utf8_lossy(v.as_bytes())]))
        .collect();
    let mut body: Vec<u8> = Vec::new();
    loop {
        match resp.chunk().await {
            Ok(Some(c)) => {
                let n = (body.len() + c.len()) as u64;
                if n > cap {
                    return Err(too_large(n));
                }
                body.extend_from_slice(&c);
            }
            Ok(None) => break,
            Err(e) => {
                let mut f = send_failure(&e, destination, hop > 0);
                // The status and headers arrived: the destination answered.
                f.sent = true;
                f.definite = true;
                return Err(f);
            }
        }
    }
    let mut redacted = false;
    if !r.redact.is_empty()
        && let Some(clean) = redact::bytes(r.redact, &body)
    {
        body = clean;
        redacted = true;
        // The original length would tell the pack the value's length.
        for h in &mut headers {
            if h[0] == "content-length" {
                h[1] = Value::String(body.len().to_string());
            }
        }
    }
    if r.credentialed || redacted {
        describes_only_what_is_returned(&mut headers, body.len(), redacted || r.head);
    }
    for h in &mut headers {
        redact::value(r.redact, h);
    }
    Ok(json!({
        "status": status,
        "headers": headers,
        "body": base64::engine::general_purpose::STANDARD.encode(&body),
    }))
}
