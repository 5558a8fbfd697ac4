//! Reading an answer: the body capped while it streams, and for a
//! credentialed (or redacted) request the rules that keep a credential out
//! of what the pack sees: no encoded body, no header describing a body
//! other than the one returned, the credential values taken out.

use super::{answered, send_failure};
use crate::tools::ToolFailure;
use base64::Engine as _;
use serde_json::{Value, json};
use wop_core::egress::Denial;
use wop_core::secrets::{Credentials, redact};

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
pub(super) struct Read<'a> {
    /// Most body bytes read.
    pub(super) cap: u64,
    /// The answering destination (`host:port`).
    pub(super) destination: String,
    /// Which request of the chain answered (0: the first).
    pub(super) hop: u32,
    /// A credential went with the request.
    pub(super) credentialed: bool,
    /// The request was a `HEAD`: the headers describe a body not returned.
    pub(super) head: bool,
    /// Taken out of the status line's headers and the body.
    pub(super) redact: &'a Credentials,
}

impl Read<'_> {
    /// The failure of a body over the cap (`observed` bytes, or more).
    fn too_large(&self, observed: u64) -> ToolFailure {
        let (cap, destination) = (self.cap, &self.destination);
        let d = Denial::denied(
            "body-too-large",
            format!("the response from {destination} exceeds the {cap}-byte cap (egress.maxResponseBytes)"),
        )
        .with(json!({"direction": "response", "limit": cap, "observed": observed}));
        answered(&d, destination, self.hop)
    }

    /// Refuses an answer whose declared length is over the cap, before
    /// any of its body is read.
    pub(super) fn check_length(&self, resp: &reqwest::Response) -> Result<(), ToolFailure> {
        match resp.content_length() {
            Some(n) if n > self.cap => Err(self.too_large(n)),
            _ => Ok(()),
        }
    }

    /// Reads the body as it streams, stopping at the cap.
    pub(super) async fn body(&self, mut resp: reqwest::Response) -> Result<Vec<u8>, ToolFailure> {
        let mut body: Vec<u8> = Vec::new();
        loop {
            match resp.chunk().await {
                Ok(Some(c)) => {
                    let n = (body.len() + c.len()) as u64;
                    if n > self.cap {
                        return Err(self.too_large(n));
                    }
                    body.extend_from_slice(&c);
                }
                Ok(None) => return Ok(body),
                Err(e) => {
                    let mut f = send_failure(&e, &self.destination, self.hop > 0);
                    // The status and headers arrived: the destination answered.
                    f.sent = true;
                    f.definite = true;
                    return Err(f);
                }
            }
        }
    }
}

/// The answer as the pack sees it: `{status, headers, body}` (the body in
/// base64), checked and redacted.
pub(super) async fn read_response(
    resp: reqwest::Response,
    r: Read<'_>,
) -> Result<Value, ToolFailure> {
    r.check_length(&resp)?;
    let status = resp.status().as_u16();
    let destination = r.destination.as_str();
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
        return Err(answered(&d, destination, r.hop));
    }
    let mut headers: Vec<Value> = resp
        .headers()
        .iter()
        .map(|(n, v)| json!([n.as_str(), String::from_utf8_lossy(v.as_bytes())]))
        .collect();
    let mut body = r.body(resp).await?;
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
