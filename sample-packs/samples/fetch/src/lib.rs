//! `wop.samples.fetch`: fetches one URL through the host's safe-fetch.
//!
//! Input `{"url": "...", "method": "GET"?, "headers": {"name": "value"}?,
//! "body": "text"?, "idempotencyKey": "..."?, "showBody": false?}` →
//! `{"status": 200, "headers": {"content-type": ..., ...}, "bodyLength": n,
//! "body": "..."?}`. A refused fetch fails the node with the host's error
//! (`egress_denied` with `details.reason`, `upstream_unavailable`, ...), so
//! operators can probe their egress policy from the CLI.

use serde::Deserialize;
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;
use wop_sdk::{Ctx, HttpRequest, NodeError, Outcome, Pack, PackInfo, Request};

/// The pack.
struct Fetch;

/// The node's inputs.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Inputs {
    /// Absolute URL.
    url: String,
    /// HTTP method (default GET).
    #[serde(default)]
    method: Option<String>,
    /// Request headers.
    #[serde(default)]
    headers: BTreeMap<String, String>,
    /// Request body (UTF-8 text).
    #[serde(default)]
    body: Option<String>,
    /// Names the business operation so a non-GET fetch fires at most once.
    #[serde(default)]
    idempotency_key: Option<String>,
    /// Include the body (as text, lossy) in the output.
    #[serde(default)]
    show_body: bool,
}

/// Response headers worth showing.
const SHOWN: &[&str] = &[
    "content-type",
    "content-length",
    "location",
    "etag",
    "last-modified",
    "server",
];

impl Pack for Fetch {
    fn describe() -> PackInfo {
        PackInfo::new("fetch", "0.1.0").node("wop.samples.fetch", "0.1.0")
    }

    fn invoke(ctx: &Ctx, request: Request) -> Result<Outcome, NodeError> {
        let inputs: Inputs = request.inputs_as()?;
        let method = inputs.method.unwrap_or_else(|| "GET".to_owned());
        let mut req = HttpRequest::new(method.clone(), inputs.url);
        for (name, value) in inputs.headers {
            req = req.header(name, value);
        }
        if let Some(body) = inputs.body {
            req = req.body(body);
        }
        if let Some(key) = inputs.idempotency_key {
            req = req.idempotency_key(key);
        }
        ctx.log()
            .info_with("fetching", &json!({ "method": method }));
        // A refused or failed fetch fails the node with the host's error.
        let resp = ctx.http().fetch(req)?;
        let mut headers = Map::new();
        for (name, value) in &resp.headers {
            let lower = name.to_ascii_lowercase();
            if SHOWN.contains(&lower.as_str()) && !headers.contains_key(&lower) {
                headers.insert(lower, Value::String(value.clone()));
            }
        }
        let mut out = json!({
            "status": resp.status,
            "headers": headers,
            "bodyLength": resp.body.len(),
        });
        if inputs.show_body {
            out["body"] = Value::String(String::from_utf8_lossy(&resp.body).into_owned());
        }
        Outcome::completed(out)
    }
}

wop_sdk::export_pack!(Fetch);
