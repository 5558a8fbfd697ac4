//! Operator HTTP tools: the runtime POSTs (or PUTs, ...) the arguments as
//! JSON to an endpoint the operator configured and returns the JSON reply.
//! These endpoints are operator-trusted (loopback and private addresses are
//! allowed because the operator wrote them), unlike pack egress. For
//! effects the effect identity is sent as the `Idempotency-Key` header.

use crate::tools::{ToolCall, ToolFailure, ToolProvider};
use serde_json::Value;
use wop_core::error::ErrorCode;

/// One operator HTTP tool.
pub struct HttpTool {
    client: reqwest::Client,
    url: reqwest::Url,
    method: reqwest::Method,
    max_response_bytes: u64,
}

impl HttpTool {
    /// A tool calling `url` with `method`, reading at most
    /// `max_response_bytes` of the reply.
    pub fn new(url: &str, method: &str, max_response_bytes: u64) -> Result<Self, String> {
        let url = reqwest::Url::parse(url).map_err(|e| format!("url `{url}` is invalid: {e}"))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(format!("url `{url}` must be http or https"));
        }
        let method = match method.to_ascii_uppercase().as_str() {
            "POST" => reqwest::Method::POST,
            "PUT" => reqwest::Method::PUT,
            "PATCH" => reqwest::Method::PATCH,
            "DELETE" => reqwest::Method::DELETE,
            "GET" => reqwest::Method::GET,
            other => {
                return Err(format!(
                    "method `{other}` is not supported (POST, PUT, PATCH, DELETE, GET)"
                ));
            }
        };
        let client = reqwest::Client::builder()
            .no_proxy()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| format!("cannot build the HTTP client: {e}"))?;
        Ok(Self {
            client,
            url,
            method,
            max_response_bytes,
        })
    }
}

#[async_trait::async_trait]
impl ToolProvider for HttpTool {
    async fn call(&self, call: ToolCall) -> Result<Value, ToolFailure> {
        let mut req = self
            .client
            .request(self.method.clone(), self.url.clone())
            .timeout(call.timeout)
            .header("content-type", "application/json")
            .header("x-openwop-run-id", &call.context.run_id)
            .header("x-openwop-node-id", &call.context.node_id)
            .header("x-openwop-principal", &call.principal.id);
        if let Some(k) = &call.idempotency_key {
            req = req.header("idempotency-key", k);
        }
        // The host's credentials for this tool (the gate decided; it also
        // takes their values out of the reply).
        for (name, value) in call.credentials.iter().filter_map(|c| c.header()) {
            req = req.header(name, value);
        }
        if let Some(tp) = &call.traceparent {
            req = req.header("traceparent", tp);
        }
        let body = serde_json::to_vec(&call.arguments).unwrap_or_default();
        let resp = match req.body(body).send().await {
            Ok(r) => r,
            Err(e) if e.is_connect() => {
                return Err(ToolFailure::not_sent(
                    "upstream_unavailable",
                    format!("cannot connect to tool `{}`: {e}", call.tool_id),
                ));
            }
            Err(e) if e.is_builder() => {
                return Err(ToolFailure::not_sent(
                    "internal_error",
                    format!("cannot build the request for `{}`: {e}", call.tool_id),
                ));
            }
            Err(e) => {
                return Err(ToolFailure::unknown(
                    "upstream_unavailable",
                    format!("tool `{}` did not answer: {e}", call.tool_id),
                ));
            }
        };
        let status = resp.status();
        let cap = self.max_response_bytes;
        let bytes = read_capped(resp, cap).await.map_err(|e| match e {
            // The tool answered (its status is known): a definite outcome,
            // recorded as this error, so a retry gets the same answer
            // instead of an unknown outcome.
            Read::TooLarge => ToolFailure::answered(
                ErrorCode::ToolResultTooLarge.as_str(),
                format!(
                    "tool `{}` answered HTTP {} with more than {cap} bytes (egress.maxResponseBytes)",
                    call.tool_id,
                    status.as_u16()
                ),
                Some(serde_json::json!({"status": status.as_u16(), "limit": cap, "observed": cap.saturating_add(1)})),
            ),
            Read::Failed(m) => ToolFailure::unknown(
                "upstream_unavailable",
                format!("tool `{}`: {m}", call.tool_id),
            ),
        })?;
        let parsed: Result<Value, _> = serde_json::from_slice(&bytes);
        if status.is_success() {
            return parsed.map_err(|e| {
                ToolFailure::answered(
                    "upstream_unavailable",
                    format!("tool `{}` answered with invalid JSON: {e}", call.tool_id),
                    None,
                )
            });
        }
        let code = if status.is_client_error() {
            "validation_error"
        } else {
            "upstream_unavailable"
        };
        Err(ToolFailure::answered(
            code,
            format!("tool `{}` answered HTTP {}", call.tool_id, status.as_u16()),
            Some(serde_json::json!({"status": status.as_u16(), "body": parsed.ok()})),
        ))
    }

    fn destination(&self) -> Option<String> {
        let host = self.url.host_str()?;
        Some(match self.url.port() {
            Some(p) => format!("{host}:{p}"),
            None => host.to_owned(),
        })
    }
}

/// Why a reply body was not read whole.
enum Read {
    /// Longer than the cap.
    TooLarge,
    /// The connection failed mid-body.
    Failed(String),
}

async fn read_capped(mut resp: reqwest::Response, cap: u64) -> Result<Vec<u8>, Read> {
    let mut out = Vec::new();
    loop {
        match resp.chunk().await {
            Ok(Some(c)) => {
                if (out.len() + c.len()) as u64 > cap {
                    return Err(Read::TooLarge);
                }
                out.extend_from_slice(&c);
            }
            Ok(None) => return Ok(out),
            Err(e) => return Err(Read::Failed(format!("reading the reply failed: {e}"))),
        }
    }
}
