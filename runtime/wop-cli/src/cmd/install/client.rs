//! Registry HTTP through the same SSRF-guarded client as a pack's
//! safe-fetch (`wop_gate::fetch_client`): the registry's origin is the only
//! destination granted, names are resolved once and every address judged
//! (loopback only where the policy's test-only `[egress] allowLoopback`
//! says so), redirects are re-validated, bodies capped while they stream,
//! everything within a timeout.

use base64::Engine as _;
use std::sync::Arc;
use std::time::Duration;
use wop_runtime::egress::{AllowList, Egress, EgressSettings, PackEgress, Pattern, check_url};
use wop_runtime::gate::fetch_client::{FetchPlan, GuardedFetch};
use wop_runtime::tools::{ToolCall, ToolProvider};

/// Largest registry document (discovery, index, key) read.
pub(crate) const MAX_DOC_BYTES: u64 = 4 << 20;
/// Largest pack archive downloaded.
pub(crate) const MAX_TARBALL_BYTES: u64 = 64 << 20;

/// Why a GET failed: `too_large` when the body passed the cap (its own
/// code for the caller: `registry_document_too_large` for a document,
/// `pack_too_large` for an archive), else anything else (unreachable, an
/// HTTP status, a refused destination).
#[derive(Debug)]
pub(crate) struct GetError {
    /// The body was larger than the cap.
    pub(crate) too_large: bool,
    /// For people.
    pub(crate) message: String,
}

impl std::fmt::Display for GetError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl From<String> for GetError {
    fn from(message: String) -> Self {
        GetError {
            too_large: false,
            message,
        }
    }
}

/// A client for one registry origin.
pub(crate) struct Client {
    base: url::Url,
    allow: Arc<AllowList>,
    settings: EgressSettings,
}

impl Client {
    /// A client for the registry at `base` (`https://…`, or `http://` for
    /// a registry the operator runs on a private network).
    pub(crate) fn new(base: &str, policy: &wop_runtime::Policy) -> Result<Client, String> {
        let mut base = url::Url::parse(base).map_err(|e| format!("--registry `{base}`: {e}"))?;
        if !base.path().ends_with('/') {
            let p = format!("{}/", base.path());
            base.set_path(&p);
        }
        let host = base
            .host_str()
            .ok_or_else(|| "--registry has no host".to_owned())?;
        let port = base
            .port_or_known_default()
            .ok_or_else(|| "--registry has no port".to_owned())?;
        let origin = format!("{}://{host}:{port}", base.scheme());
        let p = Pattern::parse(&origin).map_err(|e| format!("--registry: {e}"))?;
        let mut settings = policy.egress.settings();
        settings.max_redirects = settings.max_redirects.max(3);
        settings.timeout = Duration::from_secs(60);
        settings.read_timeout = Duration::from_secs(30);
        Ok(Client {
            base,
            allow: Arc::new(AllowList::new(vec![p.clone()], vec![p])),
            settings,
        })
    }

    /// A registry path or URL, resolved like a link in a document served
    /// from the registry's base: root-relative paths (what registries
    /// serve) against its origin, relative ones against the base.
    pub(crate) fn url(&self, path: &str) -> Result<url::Url, String> {
        self.base
            .join(path)
            .map_err(|e| format!("registry path `{path}`: {e}"))
    }

    /// GETs `url`, at most `cap` bytes; the body of a 200.
    pub(crate) async fn get(&self, url: &url::Url, cap: u64) -> Result<Vec<u8>, GetError> {
        let mut settings = self.settings;
        settings.max_response_bytes = cap;
        let engine = Arc::new(Egress::new(settings, None));
        let target = check_url(url, &self.allow, settings.allow_loopback)
            .map_err(|d| GetError::from(format!("{url}: {} ({})", d.message, d.reason)))?;
        let addrs = engine
            .resolve_checked(&target, settings.connect_timeout)
            .await
            .map_err(|d| GetError::from(format!("{url}: {} ({})", d.message, d.reason)))?;
        let fetch = GuardedFetch::new(
            PackEgress {
                engine,
                allow: self.allow.clone(),
            },
            FetchPlan {
                target: target.clone(),
                addrs,
                method: http::Method::GET,
                headers: Vec::new(),
                body: None,
                credentials: Vec::new(),
                redact: Default::default(),
            },
        );
        let call = ToolCall {
            tool_id: target.tool_id(),
            arguments: serde_json::Value::Null,
            idempotency_key: None,
            principal: Default::default(),
            context: Default::default(),
            timeout: settings.timeout,
            depth: 0,
            credentials: Vec::new(),
            traceparent: None,
        };
        let v = fetch.call(call).await.map_err(|f| {
            let too_large = f
                .details
                .as_ref()
                .is_some_and(|d| d["reason"] == "body-too-large");
            GetError {
                too_large,
                message: if too_large {
                    format!("{url}: larger than the {cap} bytes read ({})", f.message)
                } else {
                    format!("{url}: {} ({})", f.message, f.code)
                },
            }
        })?;
        let status = v["status"].as_u64().unwrap_or(0);
        if status != 200 {
            return Err(format!("{url}: HTTP {status}").into());
        }
        base64::engine::general_purpose::STANDARD
            .decode(v["body"].as_str().unwrap_or_default())
            .map_err(|_| format!("{url}: the response could not be decoded").into())
    }

    /// GETs and parses a JSON document (at most [`MAX_DOC_BYTES`]).
    pub(crate) async fn json(&self, url: &url::Url) -> Result<serde_json::Value, GetError> {
        let bytes = self.get(url, MAX_DOC_BYTES).await?;
        serde_json::from_slice(&bytes).map_err(|e| format!("{url}: not JSON: {e}").into())
    }
}
