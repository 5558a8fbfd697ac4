//! reqwest's DNS hook for the guarded client: it answers only with the
//! addresses the egress guard validated for this request, so no second
//! lookup can rebind a name.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use wop_core::egress::Target;

/// reqwest's DNS hook: answers only with addresses validated for this
/// request, keyed by the URL's host text.
#[derive(Clone, Default)]
pub(super) struct Pinned(Arc<Mutex<HashMap<String, Vec<IpAddr>>>>);

impl Pinned {
    /// Pins `addrs` for `target`'s host.
    pub(super) fn pin(&self, target: &Target, addrs: &[IpAddr]) {
        if let Some(h) = target.url.host_str() {
            let mut g = match self.0.lock() {
                Ok(g) => g,
                Err(p) => p.into_inner(),
            };
            g.insert(h.to_owned(), addrs.to_vec());
        }
    }
}

impl reqwest::dns::Resolve for Pinned {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let found = {
            let g = match self.0.lock() {
                Ok(g) => g,
                Err(p) => p.into_inner(),
            };
            g.get(name.as_str()).cloned()
        };
        let name = name.as_str().to_owned();
        Box::pin(async move {
            match found {
                Some(a) if !a.is_empty() => {
                    let addrs: reqwest::dns::Addrs =
                        Box::new(a.into_iter().map(|ip| SocketAddr::new(ip, 0)));
                    Ok(addrs)
                }
                _ => Err(format!("`{name}` was not validated by the egress guard").into()),
            }
        })
    }
}
