//! Registry HTTP through the same SSRF-guarded client as a pack's
//! safe-fetch, by its host-side face (`GuardedFetch::get`): the registry's
//! origin is the only destination granted, names are resolved once and
//! every address judged
//! (loopback only where the policy's test-only `[egress] allowLoopback`
//! says so), redirects are re-validated, bodies capped while they stream,
//! everything within a timeout.

use std::sync::Arc;
use std::time::Duration;
use wop_runtime::egress::{AllowList, EgressSettings, Pattern};
use wop_runtime::gate::fetch_client::GuardedFetch;

/// Largest registry document (discovery, index, key) read.
pub(crate) const MAX_DOC_BYTES: u64 = 4 << 20;
/// Largest pack archive downloaded.
pub(crate) const MAX_TARBALL_BYTES: u64 = 64 << 20;

/// Why a GET failed: `too_large` when the body passed the cap (its own
/// code for the caller: `registry_document_too_large` for a document,
/// `pack_too_large` for an archive), else anything else (unreachable, an
/// HTTP status, a refused destination).
pub(crate) use wop_runtime::gate::fetch_client::GetError;

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
        GuardedFetch::get(url, settings, self.allow.clone()).await
    }

    /// GETs and parses a JSON document (at most [`MAX_DOC_BYTES`]).
    pub(crate) async fn json(&self, url: &url::Url) -> Result<serde_json::Value, GetError> {
        let bytes = self.get(url, MAX_DOC_BYTES).await?;
        serde_json::from_slice(&bytes).map_err(|e| GetError {
            too_large: false,
            message: format!("{url}: not JSON: {e}"),
        })
    }
}
