//! The guarded HTTP client: behind `http.safe-fetch` (the gate tool
//! `http:<host>`, a [`ToolProvider`]) and, for the host's own requests
//! (the registry client), [`GuardedFetch::get`].
//!
//! - Names are resolved **once**, through a [`crate::Resolver`], by
//!   [`crate::Egress::resolve_checked`]; the whole answer is refused if any
//!   address is forbidden. The validated addresses are *pinned* for the
//!   request, and reqwest's DNS hook (`pinned`) returns only pinned
//!   addresses: a name that was not validated fails to connect, and no
//!   second lookup can rebind it.
//! - IP-literal URLs never reach a resolver, so they are judged from the
//!   parsed URL (`wop_core::egress::check_url`) before sending, and again
//!   for every redirect hop.
//! - No proxy (a proxy would resolve names itself), no automatic
//!   redirects: hops are followed here (`redirect`), at most
//!   `maxRedirects`, each re-validated like the first request.
//! - `101 Switching Protocols` is refused; bodies are capped while they
//!   stream (`response`); every timeout is clamped to the invocation's
//!   remaining time.

mod get;
mod pinned;
mod redirect;
mod response;

use crate::PackEgress;
use crate::tools::{ToolCall, ToolFailure, ToolProvider};
pub use get::GetError;
use pinned::Pinned;
use response::{Read, read_response};
use serde_json::{Value, json};
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use wop_core::egress::{Decision, Denial, Target, UPSTREAM_UNAVAILABLE};
use wop_core::error::ErrorCode;
use wop_core::secrets::{Credential, Credentials};

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

/// One request of the chain the plan starts: where it goes and what it
/// carries (the first is the plan's; each redirect makes the next).
struct Hop {
    target: Target,
    method: reqwest::Method,
    headers: wop_core::egress::Headers,
    body: Option<Vec<u8>>,
    /// The credentials attached to it.
    attached: Vec<Arc<Credential>>,
    /// 0 for the first request, then 1, 2, ... per redirect followed.
    n: u32,
}

/// What every hop carries besides its own headers: the effect id as
/// `Idempotency-Key` and the call's `traceparent`.
#[derive(Default)]
struct Carried<'a> {
    idempotency_key: Option<&'a str>,
    traceparent: Option<&'a str>,
}

impl GuardedFetch {
    /// Sends the plan within `total`, following redirects as allowed
    /// (each re-validated): the final answer and the request it answers.
    async fn follow(
        &self,
        carried: &Carried<'_>,
        total: Duration,
    ) -> Result<(reqwest::Response, Hop), ToolFailure> {
        let started = Instant::now();
        let max_redirects = self.egress.engine.settings().max_redirects;
        let pinned = Pinned::default();
        pinned.pin(&self.plan.target, &self.plan.addrs);
        let client = self.client(pinned.clone(), total)?;
        let mut hop = Hop {
            target: self.plan.target.clone(),
            method: self.plan.method.clone(),
            headers: self.plan.headers.clone(),
            body: self.plan.body.clone(),
            attached: self.plan.credentials.clone(),
            n: 0,
        };
        loop {
            let remaining = total.saturating_sub(started.elapsed());
            let resp = hop.send(&client, remaining, carried).await?;
            let status = resp.status();
            let location = resp.headers().get(reqwest::header::LOCATION).cloned();
            if !(status.is_redirection() && max_redirects > 0 && location.is_some()) {
                return Ok((resp, hop));
            }
            drop(resp);
            let within = || total.saturating_sub(started.elapsed());
            hop = self
                .redirect(hop, status, location, &pinned, within)
                .await?;
        }
    }

    /// How to read the answer to `hop`.
    fn read<'a>(&'a self, hop: &Hop) -> Read<'a> {
        Read {
            cap: self.egress.engine.settings().max_response_bytes,
            destination: hop.target.authority(),
            hop: hop.n,
            credentialed: !hop.attached.is_empty(),
            head: hop.method == reqwest::Method::HEAD,
            redact: &self.plan.redact,
        }
    }
}

impl Hop {
    /// Sends this request with `remaining` time left; a
    /// `101 Switching Protocols` answer is refused.
    async fn send(
        &self,
        client: &reqwest::Client,
        remaining: Duration,
        carried: &Carried<'_>,
    ) -> Result<reqwest::Response, ToolFailure> {
        let destination = self.target.authority();
        if remaining.is_zero() {
            return Err(ToolFailure {
                code: UPSTREAM_UNAVAILABLE.to_owned(),
                message: format!("the fetch ran out of time before reaching {destination}"),
                details: Some(
                    json!({"reason": "timeout", "destination": destination, "retryable": true}),
                ),
                sent: self.n > 0,
                definite: true,
            });
        }
        let mut rb = client
            .request(self.method.clone(), self.target.url.clone())
            .timeout(remaining);
        rb = rb.headers(with_credentials(&self.headers, &self.attached));
        if let Some(k) = carried.idempotency_key {
            rb = rb.header("idempotency-key", k);
        }
        if let Some(tp) = carried.traceparent {
            rb = rb.header("traceparent", tp);
        }
        if let Some(b) = &self.body {
            rb = rb.body(b.clone());
        }
        let resp = match rb.send().await {
            Ok(r) => r,
            Err(e) => return Err(send_failure(&e, &destination, self.n > 0)),
        };
        if resp.status() == reqwest::StatusCode::SWITCHING_PROTOCOLS {
            return Err(answered(
                &Denial::denied(
                    "upgrade",
                    format!(
                        "{destination} answered 101 Switching Protocols; protocol upgrades are refused"
                    ),
                ),
                &destination,
                self.n,
            ));
        }
        Ok(resp)
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

#[async_trait::async_trait]
impl ToolProvider for GuardedFetch {
    async fn call(&self, call: ToolCall) -> Result<Value, ToolFailure> {
        let total = call.timeout.min(self.egress.engine.settings().timeout);
        let carried = Carried {
            idempotency_key: call.idempotency_key.as_deref(),
            traceparent: call.traceparent.as_deref(),
        };
        let (resp, hop) = self.follow(&carried, total).await?;
        read_response(resp, self.read(&hop)).await
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
