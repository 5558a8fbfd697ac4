//! `openwop:node-pack/http` (safe-fetch): translates WIT ⇄ the egress
//! checks and the gate. Every decision emits `egress.decided`; a refused
//! destination is a [`Gate::deny`] (`egress_denied`, audit pair with status
//! `forbidden`, never performed); an allowed one runs through
//! [`Gate::call_authorized`] as the tool `http:<host>` (GET/HEAD read tier,
//! other methods claimed as effects with the effect id as
//! `Idempotency-Key`), performed by the guarded client.

use crate::bindings::http::{Header, Host, Request, Response};
use crate::bindings::types::ErrorInfo;
use crate::capability::Capability;
use crate::egress::client::{FetchPlan, GuardedFetch};
use crate::egress::{self, Decision, Denial, PackEgress, Target};
use crate::error::ErrorCode;
use crate::events::{Event, Transport};
use crate::gate::{CallCounters, CallSite, Gate, GateError, GateErrorKind};
use crate::host::error_info;
use crate::state::{HostState, with_log};
use crate::tools::{RegisteredTool, SafetyTier, ToolDescriptor, ToolSource};
use base64::Engine as _;
use serde_json::{Map, Value, json};
use std::sync::Arc;
use std::time::{Duration, Instant};

impl Host for HostState {
    async fn safe_fetch(
        &mut self,
        request: Request,
    ) -> wasmtime::Result<Result<Response, ErrorInfo>> {
        self.count("http");
        self.require(Capability::Http)?;
        let size = request.url.len()
            + request.method.len()
            + request.idempotency_key.as_ref().map_or(0, String::len)
            + request.body.as_ref().map_or(0, Vec::len)
            + request
                .headers
                .iter()
                .map(|h| h.name.len() + h.value.len())
                .sum::<usize>();
        self.check_arg(size)?;
        self.loop_tick()?;
        if let Ok(u) = egress::parse_url(&request.url) {
            self.meter.target(&egress::rough_authority(&u));
        }
        let Some(egress) = self.scope.egress.clone() else {
            return Ok(Err(error_info(
                ErrorCode::EgressDenied,
                "no egress destination is granted to this pack",
                json!({"reason": "not-allowed"}),
            )));
        };
        let mut site = self.call_site(Transport::Http);
        site.deadline = fetch_deadline(self.deadline);
        let gate = self.gate.clone();
        let mut events = Vec::new();
        let mut counters = self.counters;
        let out = request.body.as_ref().map_or(0, Vec::len) as u64;
        let r = fetch(&gate, &egress, &site, &mut counters, request, &mut events).await;
        self.counters = counters;
        self.meter.absorb(&events);
        if performed(&events) {
            self.meter.egress_out += out;
        }
        if let Ok(resp) = &r {
            self.meter.egress_in += resp.body.len() as u64;
        }
        with_log(&self.log, |l| events.into_iter().for_each(|e| l.record(e)));
        Ok(r)
    }
}

/// Whether the gate performed the call (a `tool-returned` with a duration).
fn performed(events: &[Event]) -> bool {
    events.iter().any(|e| {
        matches!(
            e,
            Event::ToolReturned {
                duration_ms: Some(_),
                ..
            }
        )
    })
}

/// Leaves the invocation a margin after a fetch times out, so the pack can
/// still report the failure before its own wall clock runs out.
fn fetch_deadline(deadline: Instant) -> Instant {
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
fn arguments(r: &Request) -> Value {
    let mut headers: Map<String, Value> = Map::new();
    for h in &r.headers {
        let e = headers
            .entry(h.name.to_ascii_lowercase())
            .or_insert_with(|| Value::Array(Vec::new()));
        if let Value::Array(a) = e {
            a.push(Value::String(h.value.clone()));
        }
    }
    json!({
        "method": r.method.to_ascii_uppercase(),
        "url": r.url,
        "headers": headers,
        "body": r.body.as_ref().map(|b| base64::engine::general_purpose::STANDARD.encode(b)),
    })
}

fn to_error_info(e: GateError) -> ErrorInfo {
    ErrorInfo {
        code: e.code,
        message: e.message,
        details: if e.details.is_null() {
            None
        } else {
            Some(e.details.to_string())
        },
    }
}

/// A request that passed the checks before the gate.
type Planned = (Target, reqwest::Method, egress::Headers);

/// The checks before the gate: URL (scheme, name/literal, allow-list),
/// method, headers, body size.
fn plan_checks(egress: &PackEgress, r: &Request) -> Result<Planned, Denial> {
    let s = egress.engine.settings();
    let url = egress::parse_url(&r.url)?;
    let target = egress::check_url(&url, &egress.allow, s.allow_loopback)?;
    let method = egress::check_method(&r.method)?;
    let pairs: Vec<(String, String)> = r
        .headers
        .iter()
        .map(|h| (h.name.clone(), h.value.clone()))
        .collect();
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
    Ok((target, method, headers))
}

async fn fetch(
    gate: &Gate,
    egress: &PackEgress,
    site: &CallSite,
    counters: &mut CallCounters,
    request: Request,
    events: &mut Vec<Event>,
) -> Result<Response, ErrorInfo> {
    let args = arguments(&request);
    let rough = egress::parse_url(&request.url).ok();
    let deny = |d: Denial,
                destination: String,
                tool_id: String,
                counters: &mut CallCounters,
                events: &mut Vec<Event>| {
        events.push(
            Decision {
                allowed: false,
                destination: destination.clone(),
                reason: d.reason.to_owned(),
            }
            .event(),
        );
        let err = GateError {
            kind: if d.code == egress::EGRESS_DENIED {
                GateErrorKind::Forbidden
            } else {
                GateErrorKind::Failed
            },
            code: d.code.to_owned(),
            message: d.message.clone(),
            details: d.details(&destination),
        };
        to_error_info(gate.deny(site, counters, &tool_id, &args, err, events))
    };

    let (target, method, headers) = match plan_checks(egress, &request) {
        Ok(p) => p,
        Err(d) => {
            let (dest, tool) = match &rough {
                Some(u) => (
                    egress::rough_authority(u),
                    format!(
                        "http:{}",
                        u.host_str().filter(|h| !h.is_empty()).unwrap_or("invalid")
                    ),
                ),
                None => (String::new(), "http:invalid".to_owned()),
            };
            return Err(deny(d, dest, tool, counters, events));
        }
    };
    let within = site.deadline.saturating_duration_since(Instant::now());
    let addrs = match egress.engine.resolve_checked(&target, within).await {
        Ok(a) => a,
        Err(d) => {
            return Err(deny(
                d,
                target.authority(),
                target.tool_id(),
                counters,
                events,
            ));
        }
    };
    events.push(
        Decision {
            allowed: true,
            destination: target.authority(),
            reason: "allowed".to_owned(),
        }
        .event(),
    );

    let read = egress::is_read(&method);
    let mut descriptor = ToolDescriptor::new(
        target.tool_id(),
        ToolSource::HostExtension,
        if read {
            SafetyTier::Read
        } else {
            SafetyTier::Write
        },
    );
    descriptor.title = Some(format!("safe-fetch {}", target.authority()));
    descriptor.egress = Some(crate::tools::Egress::SafeFetch);
    let settings = *egress.engine.settings();
    let provider = Arc::new(GuardedFetch::new(
        egress.clone(),
        FetchPlan {
            target,
            addrs,
            method,
            headers,
            body: request.body,
        },
    ));
    let tool = RegisteredTool {
        descriptor,
        tenants: None,
        rate: settings.rate,
        timeout: settings.timeout,
        provider: provider.clone(),
    };
    let start = events.len();
    let r = gate
        .call_authorized(
            site,
            counters,
            &tool,
            args.clone(),
            request.idempotency_key.as_deref(),
            events,
        )
        .await;
    // Redirect-hop decisions go before the call's `agent.tool-returned`.
    let hops = provider.take_decisions();
    if !hops.is_empty() {
        let at = events.len().saturating_sub(1).max(start);
        for (i, d) in hops.iter().enumerate() {
            events.insert(at + i, d.event());
        }
    }
    match r {
        Ok(v) => response_of(&v).ok_or_else(|| {
            error_info(
                ErrorCode::InternalError,
                "the recorded response is malformed",
                Value::Null,
            )
        }),
        Err(e) => Err(to_error_info(e)),
    }
}

fn response_of(v: &Value) -> Option<Response> {
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
    Some(Response {
        status,
        headers,
        body,
    })
}
