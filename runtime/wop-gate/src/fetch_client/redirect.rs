//! One redirect, followed by hand: the next request is re-validated like
//! the first (allow-list, resolved addresses, the credentials' audiences)
//! and every decision is kept for its `egress.decided` event.

use super::pinned::Pinned;
use super::{GuardedFetch, Hop, answered};
use crate::tools::ToolFailure;
use reqwest::{Method, StatusCode};
use std::time::Duration;
use wop_core::egress::{Decision, Denial, Target, check_url, rough_authority};
use wop_core::secrets::decide;

impl GuardedFetch {
    /// The request that follows `hop`'s `status` answer to `location`, or
    /// why there is none: too many hops, an invalid `Location`, a
    /// destination the pack may not reach, a credential that may not go
    /// along. `within` is the time left, read when the next name is
    /// resolved.
    pub(super) async fn redirect(
        &self,
        mut hop: Hop,
        status: StatusCode,
        location: Option<reqwest::header::HeaderValue>,
        pinned: &Pinned,
        within: impl Fn() -> Duration,
    ) -> Result<Hop, ToolFailure> {
        let s = *self.egress.engine.settings();
        let destination = hop.target.authority();
        hop.n += 1;
        let next = location
            .as_ref()
            .and_then(|l| l.to_str().ok())
            .and_then(|l| hop.target.url.join(l).ok());
        if hop.n > s.max_redirects {
            let d = Denial::denied(
                "redirect",
                format!("more than {} redirects", s.max_redirects),
            );
            self.decide(Decision::denied(destination.clone(), &d));
            return Err(answered(&d, &destination, hop.n));
        }
        let Some(next) = next else {
            let d = Denial::denied(
                "redirect",
                format!("{destination} redirected to an invalid Location"),
            );
            self.decide(Decision::denied(destination.clone(), &d));
            return Err(answered(&d, &destination, hop.n));
        };
        let checked = match check_url(&next, &self.egress.allow, s.allow_loopback) {
            Ok(t) => self
                .egress
                .engine
                .resolve_checked(&t, within())
                .await
                .map(|a| (t, a)),
            Err(d) => Err(d),
        };
        let (t, addrs) = match checked {
            Ok(x) => x,
            Err(d) => {
                let dest = rough_authority(&next);
                self.decide(Decision::denied(dest.clone(), &d));
                return Err(answered(&d, &dest, hop.n));
            }
        };
        self.decide(Decision::allowed(t.authority(), Some("redirect")));
        if !hop.attached.is_empty() {
            let plan = decide::hop(
                &hop.attached,
                same_origin(&hop.target, &t),
                &t.dest(),
                t.url.path(),
                wop_core::time::now_ms(),
            );
            for d in &plan.decisions {
                self.decide(Decision::credential(t.authority(), d));
            }
            let reason = plan.refusal_reason();
            if let Some(message) = plan.refused {
                let d = Denial::denied(reason, message);
                return Err(answered(&d, &t.authority(), hop.n));
            }
            hop.attached = plan.attach;
        }
        pinned.pin(&t, &addrs);
        let to_get = (status == StatusCode::SEE_OTHER && hop.method != Method::HEAD)
            || (matches!(status.as_u16(), 301 | 302) && hop.method == Method::POST);
        if to_get {
            hop.method = Method::GET;
            hop.body = None;
            hop.headers
                .retain(|(n, _)| !n.as_str().starts_with("content-"));
        }
        if !same_origin(&hop.target, &t) {
            hop.headers.retain(|(n, _)| {
                !matches!(n.as_str(), "authorization" | "cookie" | "www-authenticate")
            });
        }
        hop.target = t;
        Ok(hop)
    }
}

/// Whether two targets share scheme, host and port.
fn same_origin(a: &Target, b: &Target) -> bool {
    a.scheme == b.scheme && a.host == b.host && a.port == b.port
}
