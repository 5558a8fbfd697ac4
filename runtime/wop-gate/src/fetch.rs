//! safe-fetch orchestration: the egress checks before the gate, then the
//! gate as the tool `http:<host>`. Every decision emits `egress.decided`; a
//! refused destination is a [`Gate::deny`] (`egress_denied`, audit pair
//! with status `forbidden`, never performed); an allowed one runs through
//! [`Gate::call_authorized`] (GET/HEAD read tier, other methods claimed as
//! effects with the effect id as `Idempotency-Key`), performed by the
//! guarded client ([`crate::fetch_client`]).

use crate::fetch_client::{FetchPlan, GuardedFetch};
use crate::tools::{RegisteredTool, SafetyTier, ToolDescriptor, ToolSource};
use crate::{CallReceipt, CallScope, Gate, GateError, GateErrorKind, PackEgress};
use base64::Engine as _;
use serde_json::{Map, Value, json};
use std::sync::Arc;
use std::time::{Duration, Instant};
use wop_core::egress::{self, Decision, Denial, Target};
use wop_core::error::ErrorCode;
use wop_core::events::Event;
use wop_core::secrets::handle::{self, Handles};
use wop_core::secrets::{Credential, Credentials, decide};

/// One header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    /// Name, as the pack sent it.
    pub name: String,
    /// Value.
    pub value: String,
}

/// A pack's request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchRequest {
    /// `GET`, `POST`, ...
    pub method: String,
    /// The URL (untrusted).
    pub url: String,
    /// Request headers (untrusted).
    pub headers: Vec<Header>,
    /// Request body.
    pub body: Option<Vec<u8>>,
    /// A business idempotency key for effectful methods.
    pub idempotency_key: Option<String>,
}

/// The response handed back to the pack.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchResponse {
    /// HTTP status.
    pub status: u16,
    /// Response headers.
    pub headers: Vec<Header>,
    /// Response body (capped).
    pub body: Vec<u8>,
}

/// Leaves the invocation a margin after a fetch times out, so the pack can
/// still report the failure before its own wall clock runs out.
pub(crate) fn fetch_deadline(deadline: Instant) -> Instant {
    let remaining = deadline.saturating_duration_since(Instant::now());
    let margin = (remaining / 10).max(Duration::from_millis(100));
    deadline
        .checked_sub(margin)
        .unwrap_or(deadline)
        .max(Instant::now())
}

/// The arguments the gate hashes (`argsHash`) and digests (effect
/// identity): method, URL, headers by lowercase name (so secret-looking
/// names such as `authorization` are redacted in the hash), body.
/// A secret handle is random per invocation: it stands as
/// `wop-secret:<id>`, so a retry's request is the same effect.
fn arguments(r: &FetchRequest, handles: &Handles) -> Value {
    let mut headers: Map<String, Value> = Map::new();
    for h in &r.headers {
        let e = headers
            .entry(h.name.to_ascii_lowercase())
            .or_insert_with(|| Value::Array(Vec::new()));
        if let Value::Array(a) = e {
            a.push(Value::String(handles.stable(&h.value)));
        }
    }
    json!({
        "method": r.method.to_ascii_uppercase(),
        "url": r.url,
        "headers": headers,
        "body": r.body.as_ref().map(|b| base64::engine::general_purpose::STANDARD.encode(b)),
    })
}

/// A request that passed the checks before the gate, and the credentials
/// the pack named (`x-wop-credential`, removed from the headers).
type Planned = (Target, http::Method, egress::Headers, Vec<String>);

/// The checks before the gate: URL (scheme, name/literal, allow-list),
/// method, headers, body size.
fn plan_checks(
    egress: &PackEgress,
    r: &FetchRequest,
    handles: &Handles,
    creds: &Credentials,
) -> Result<Planned, Denial> {
    let s = egress.engine.settings();
    let url = egress::parse_url(&r.url)?;
    let target = egress::check_url(&url, &egress.allow, s.allow_loopback)?;
    let method = egress::check_method(&r.method)?;
    let (naming, pairs): (Vec<&Header>, Vec<&Header>) = r
        .headers
        .iter()
        .partition(|h| h.name.eq_ignore_ascii_case(decide::NAMING_HEADER));
    let mut named = decide::named_ids(&naming.iter().map(|h| h.value.as_str()).collect::<Vec<_>>());
    let pairs: Vec<(String, String)> = pairs
        .into_iter()
        .map(|h| (h.name.clone(), h.value.clone()))
        .collect();
    // Secret handles: only in their credential's header, which names it.
    let (pairs, by_handle) = handle::take(handles, creds, &r.url, &pairs, r.body.as_deref())?;
    for id in by_handle {
        if !named.contains(&id) {
            named.push(id);
        }
    }
    let headers = egress::check_headers(&pairs)?;
    let len = r.body.as_ref().map_or(0, Vec::len) as u64;
    if len > s.max_request_bytes {
        return Err(Denial::denied(
            "body-too-large",
            format!(
                "the request body is {len} bytes; the cap is {} (egress.maxRequestBytes)",
                s.max_request_bytes
            ),
        ));
    }
    Ok((target, method, headers, named))
}

/// What [`fetch`] did at the gate: the tool id and the receipt, when the
/// call reached [`Gate::call_authorized`].
pub(crate) type Performed = Option<(String, CallReceipt)>;

/// Runs one safe-fetch: the checks before the gate, each decision an
/// `egress.decided` (a refusal is a [`Gate::deny`]), then the gate.
pub(crate) async fn fetch(
    gate: &Gate,
    egress: Option<&PackEgress>,
    scope: &mut CallScope<'_>,
    request: FetchRequest,
    handles: &Handles,
) -> (Result<FetchResponse, GateError>, Performed) {
    let Some(egress) = egress else {
        let e = GateError {
            kind: GateErrorKind::Forbidden,
            code: ErrorCode::EgressDenied,
            message: "no egress destination is granted to this pack".to_owned(),
            details: json!({"reason": "not-allowed"}),
        };
        return (Err(e), None);
    };
    let args = arguments(&request, handles);
    let key = request.idempotency_key.clone();
    let plan = match admit(egress, scope, request, handles).await {
        Ok(plan) => plan,
        Err(Refused { tool_id, error }) => {
            return (Err(gate.deny(scope, &tool_id, &args, error)), None);
        }
    };
    let tool_id = plan.target.tool_id();
    let (r, receipt) = perform(gate, egress, scope, plan, args, key.as_deref()).await;
    let r = r.and_then(|v| {
        response_of(&v).ok_or_else(|| GateError {
            kind: GateErrorKind::Failed,
            code: ErrorCode::InternalError,
            message: "the recorded response is malformed".to_owned(),
            details: Value::Null,
        })
    });
    (r, Some((tool_id, receipt)))
}

/// A fetch refused before the gate: the tool id it is reported under and
/// the error for [`Gate::deny`].
struct Refused {
    tool_id: String,
    error: GateError,
}

impl Refused {
    /// A check's denial at `destination`, its `egress.decided` emitted.
    fn denied(
        d: Denial,
        destination: String,
        tool_id: String,
        events: &mut dyn crate::audit::Audit,
    ) -> Refused {
        events.push(Decision::denied(destination.clone(), &d).event());
        let error = GateError {
            kind: if d.code == ErrorCode::EgressDenied {
                GateErrorKind::Forbidden
            } else {
                GateErrorKind::Failed
            },
            code: d.code,
            message: d.message.clone(),
            details: d.details(&destination),
        };
        Refused { tool_id, error }
    }
}

/// The checks before the gate, in order: the request itself
/// ([`plan_checks`]), the destination's addresses (resolved once, every
/// one judged), then the credentials that go with it. The plan the
/// guarded client performs, or the refusal.
async fn admit(
    egress: &PackEgress,
    scope: &mut CallScope<'_>,
    request: FetchRequest,
    handles: &Handles,
) -> Result<FetchPlan, Refused> {
    let creds = &scope.site.credentials;
    let (target, method, headers, named) =
        plan_checks(egress, &request, handles, creds).map_err(|d| {
            let (dest, tool) = match egress::parse_url(&request.url) {
                Ok(u) => (
                    egress::rough_authority(&u),
                    format!(
                        "http:{}",
                        u.host_str().filter(|h| !h.is_empty()).unwrap_or("invalid")
                    ),
                ),
                Err(_) => (String::new(), "http:invalid".to_owned()),
            };
            Refused::denied(d, dest, tool, scope.events)
        })?;
    let within = scope
        .site
        .deadline
        .saturating_duration_since(Instant::now());
    let addrs = match egress.engine.resolve_checked(&target, within).await {
        Ok(a) => a,
        Err(d) => {
            let (dest, tool) = (target.authority(), target.tool_id());
            return Err(Refused::denied(d, dest, tool, scope.events));
        }
    };
    scope
        .events
        .push(Decision::allowed(target.authority(), None).event());
    let credentials = credentials(scope, &target, &named)?;
    Ok(FetchPlan {
        target,
        addrs,
        method,
        headers,
        body: request.body,
        credentials,
        redact: scope.site.credentials.clone(),
    })
}

/// The credentials that go with the first request (RFC 0079 §C), each
/// decision an `egress.decided`; or the refusal.
fn credentials(
    scope: &mut CallScope<'_>,
    target: &Target,
    named: &[String],
) -> Result<Vec<Arc<Credential>>, Refused> {
    let creds = &scope.site.credentials;
    let plan = if creds.is_empty() && named.is_empty() {
        decide::Plan::default()
    } else {
        decide::first_request(
            creds,
            named,
            &target.dest(),
            target.url.path(),
            wop_core::time::now_ms(),
        )
    };
    for d in &plan.decisions {
        scope
            .events
            .push(Decision::credential(target.authority(), d).event());
    }
    let reason = plan.refusal_reason();
    match plan.refused {
        None => Ok(plan.attach),
        Some(message) => Err(Refused {
            tool_id: target.tool_id(),
            error: GateError {
                kind: GateErrorKind::Forbidden,
                code: ErrorCode::EgressDenied,
                message,
                details: json!({"reason": reason, "destination": target.authority()}),
            },
        }),
    }
}

/// The gate's part: the checked request as the tool `http:<host>`,
/// through [`Gate::call_authorized`]. The call's events are held until it
/// ends: redirect-hop decisions, known only then, go before its
/// `agent.tool-returned`.
async fn perform(
    gate: &Gate,
    egress: &PackEgress,
    scope: &mut CallScope<'_>,
    plan: FetchPlan,
    args: Value,
    idempotency_key: Option<&str>,
) -> (Result<Value, GateError>, CallReceipt) {
    let (tool, provider) = tool_for(egress, plan);
    let mut held: Vec<Event> = Vec::new();
    let (r, receipt) = gate
        .call_authorized(
            &mut CallScope {
                site: scope.site,
                counters: &mut *scope.counters,
                events: &mut held,
            },
            &tool,
            args,
            idempotency_key,
        )
        .await;
    let hops = provider.take_decisions();
    if !hops.is_empty() {
        let at = held.len().saturating_sub(1);
        for (i, d) in hops.iter().enumerate() {
            held.insert(at + i, d.event());
        }
    }
    scope.events.extend(held);
    (r, receipt)
}

/// The gate tool `http:<host>` of a checked request (read tier for
/// GET/HEAD, else an effect), and its provider, the guarded client (kept
/// to read the redirect-hop decisions).
fn tool_for(egress: &PackEgress, plan: FetchPlan) -> (RegisteredTool, Arc<GuardedFetch>) {
    let tier = if egress::is_read(&plan.method) {
        SafetyTier::Read
    } else {
        SafetyTier::Write
    };
    let mut descriptor =
        ToolDescriptor::new(plan.target.tool_id(), ToolSource::HostExtension, tier);
    descriptor.title = Some(format!("safe-fetch {}", plan.target.authority()));
    descriptor.egress = Some(crate::tools::Egress::SafeFetch);
    let settings = *egress.engine.settings();
    let provider = Arc::new(GuardedFetch::new(egress.clone(), plan));
    let tool = RegisteredTool {
        descriptor,
        tenants: None,
        rate: settings.rate,
        timeout: settings.timeout,
        provider: provider.clone(),
    };
    (tool, provider)
}

fn response_of(v: &Value) -> Option<FetchResponse> {
    let status = u16::try_from(v.get("status")?.as_u64()?).ok()?;
    let headers = v
        .get("headers")?
        .as_array()?
        .iter()
        .filter_map(|h| {
            Some(Header {
                name: h.get(0)?.as_str()?.to_owned(),
                value: h.get(1)?.as_str()?.to_owned(),
            })
        })
        .collect();
    let body = base64::engine::general_purpose::STANDARD
        .decode(v.get("body")?.as_str()?)
        .ok()?;
    Some(FetchResponse {
        status,
        headers,
        body,
    })
}
