//! The guarded client's host-side face: a plain `GET` for the host's own
//! requests (the registry client), with every guard of a pack's fetch —
//! the allow-list, names resolved once and every address judged, redirects
//! re-validated, the body capped while it streams, the timeouts — and no
//! pack, gate, tool call or credential.

use super::{Carried, FetchPlan, GuardedFetch};
use crate::egress::{Egress, PackEgress};
use crate::tools::ToolFailure;
use std::sync::Arc;
use wop_core::egress::{AllowList, Denial, EgressSettings, check_url};

/// Why a host-side `GET` returned no body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GetError {
    /// The body was larger than the cap (`settings.max_response_bytes`);
    /// callers usually give this its own error code.
    pub too_large: bool,
    /// For people; starts with the URL.
    pub message: String,
}

impl std::fmt::Display for GetError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for GetError {}

impl GuardedFetch {
    /// GETs `url` from the host's side: the body of a `200`, at most
    /// `settings.max_response_bytes` of it, within `settings.timeout`,
    /// following at most `settings.max_redirects` redirects; every
    /// destination must be in `allow` (names resolved by the system
    /// resolver, loopback only where `settings.allow_loopback` says so).
    /// Any other status is an error.
    pub async fn get(
        url: &reqwest::Url,
        settings: EgressSettings,
        allow: Arc<AllowList>,
    ) -> Result<Vec<u8>, GetError> {
        let refused = |d: Denial| GetError {
            too_large: false,
            message: format!("{url}: {} ({})", d.message, d.reason),
        };
        let cap = settings.max_response_bytes;
        let failed = |f: ToolFailure| {
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
        };
        let engine = Arc::new(Egress::new(settings, None));
        let target = check_url(url, &allow, settings.allow_loopback).map_err(refused)?;
        let addrs = engine
            .resolve_checked(&target, settings.connect_timeout)
            .await
            .map_err(refused)?;
        let fetch = GuardedFetch::new(
            PackEgress { engine, allow },
            FetchPlan {
                target,
                addrs,
                method: reqwest::Method::GET,
                headers: Vec::new(),
                body: None,
                credentials: Vec::new(),
                redact: Default::default(),
            },
        );
        let (resp, hop) = fetch
            .follow(&Carried::default(), settings.timeout)
            .await
            .map_err(failed)?;
        let read = fetch.read(&hop);
        read.check_length(&resp).map_err(failed)?;
        let status = resp.status().as_u16();
        let body = read.body(resp).await.map_err(failed)?;
        if status != 200 {
            return Err(GetError {
                too_large: false,
                message: format!("{url}: HTTP {status}"),
            });
        }
        Ok(body)
    }
}
