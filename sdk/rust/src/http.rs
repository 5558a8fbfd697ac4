//! SSRF-guarded HTTP egress.

use std::marker::PhantomData;

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::bindings::openwop::node_pack::http as wit;
use crate::ctx::Ctx;
use crate::error::NodeError;

/// HTTP egress ("safe-fetch"), from [`Ctx::http`]: the only network a pack
/// gets.
#[derive(Debug, Clone, Copy)]
pub struct Http<'a> {
    _ctx: PhantomData<&'a Ctx>,
}

impl Http<'_> {
    pub(crate) fn new() -> Self {
        Self { _ctx: PhantomData }
    }

    /// Perform `request` and read the whole response body (up to the host's
    /// cap).
    ///
    /// The host checks the destination against the pack's allow-list and
    /// refuses private, loopback, link-local and metadata addresses
    /// (`egress_denied`). A non-2xx status is a successful fetch; check
    /// [`HttpResponse::status`].
    pub fn fetch(&self, request: HttpRequest) -> Result<HttpResponse, NodeError> {
        let request = wit::Request {
            method: request.method,
            url: request.url,
            headers: request
                .headers
                .into_iter()
                .map(|(name, value)| wit::Header { name, value })
                .collect(),
            body: request.body,
            idempotency_key: request.idempotency_key,
        };
        match wit::safe_fetch(&request) {
            Ok(response) => Ok(HttpResponse {
                status: response.status,
                headers: response
                    .headers
                    .into_iter()
                    .map(|h| (h.name, h.value))
                    .collect(),
                body: response.body,
            }),
            Err(error) => Err(NodeError::from_wit(error)),
        }
    }
}

/// An outgoing HTTP request; build it with [`HttpRequest::get`] or
/// [`HttpRequest::new`] and the builder methods.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpRequest {
    /// HTTP method, e.g. `GET`.
    pub method: String,
    /// Absolute URL; https unless the operator allows http for the host.
    pub url: String,
    /// Request headers as (name, value). Hop-by-hop headers, `Host` and
    /// `Proxy-*` are refused by the host.
    pub headers: Vec<(String, String)>,
    /// Request body.
    pub body: Option<Vec<u8>>,
    /// Idempotency key for non-GET/HEAD methods (see
    /// [`Tools::call`](crate::Tools::call)).
    pub idempotency_key: Option<String>,
}

impl HttpRequest {
    /// A request with `method` to `url`, no headers and no body.
    pub fn new(method: impl Into<String>, url: impl Into<String>) -> Self {
        Self {
            method: method.into(),
            url: url.into(),
            headers: Vec::new(),
            body: None,
            idempotency_key: None,
        }
    }

    /// A `GET` request to `url`.
    pub fn get(url: impl Into<String>) -> Self {
        Self::new("GET", url)
    }

    /// A `POST` request to `url`.
    pub fn post(url: impl Into<String>) -> Self {
        Self::new("POST", url)
    }

    /// Add a header.
    #[must_use]
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// Set the body.
    #[must_use]
    pub fn body(mut self, body: impl Into<Vec<u8>>) -> Self {
        self.body = Some(body.into());
        self
    }

    /// Set a JSON body and `content-type: application/json`.
    #[must_use]
    pub fn json(self, body: &Value) -> Self {
        self.header("content-type", "application/json")
            .body(body.to_string())
    }

    /// Set the idempotency key (for effects: non-GET/HEAD methods).
    #[must_use]
    pub fn idempotency_key(mut self, key: impl Into<String>) -> Self {
        self.idempotency_key = Some(key.into());
        self
    }

    /// Require the host credential `id` on this request (the
    /// `x-wop-credential` header, removed by the host before sending).
    ///
    /// You never need this to get a credential: the host attaches every
    /// credential your node declares (`requiresSecrets` in `pack.json`) to
    /// requests inside its audience. Naming one makes a request to a
    /// destination outside that audience fail (`egress_denied`,
    /// `out-of-audience`) instead of going out unauthenticated. The value
    /// never reaches the pack; echoes of it come back as `[redacted:<id>]`.
    #[must_use]
    pub fn credential(self, id: impl Into<String>) -> Self {
        self.header("x-wop-credential", id)
    }
}

/// An HTTP response with its body read completely.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpResponse {
    /// Status code.
    pub status: u16,
    /// Response headers as (name, value).
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: Vec<u8>,
}

impl HttpResponse {
    /// Whether the status is 2xx.
    pub fn is_success(&self) -> bool {
        (200..300).contains(&self.status)
    }

    /// The first header named `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The body as UTF-8 text; invalid UTF-8 is a `validation_error`.
    pub fn text(&self) -> Result<&str, NodeError> {
        std::str::from_utf8(&self.body)
            .map_err(|e| NodeError::validation(format!("response body is not UTF-8: {e}")))
    }

    /// The body deserialized from JSON; a mismatch is a `validation_error`.
    pub fn json<T: DeserializeOwned>(&self) -> Result<T, NodeError> {
        serde_json::from_slice(&self.body).map_err(|e| {
            NodeError::validation(format!("response body is not the expected JSON: {e}"))
        })
    }
}
