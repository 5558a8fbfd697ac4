//! The runtime-wide egress engine (settings + resolver) and what one pack
//! may reach. The checks themselves are pure: `wop_core::egress`.

use serde_json::json;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;
use wop_core::egress::host::HostName;
use wop_core::egress::{AllowList, Denial, EgressSettings, Target, check_answer};
use wop_core::error::ErrorCode;

/// Resolves host names for safe-fetch. The default is [`SystemResolver`];
/// tests inject fakes through `RuntimeConfig::resolver`.
#[async_trait::async_trait]
pub trait Resolver: Send + Sync {
    /// Every address `name` (lowercase ASCII, no trailing dot) resolves to.
    async fn resolve(&self, name: &str) -> Result<Vec<IpAddr>, String>;
}

/// The operating system's resolver (`getaddrinfo` via tokio).
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemResolver;

#[async_trait::async_trait]
impl Resolver for SystemResolver {
    async fn resolve(&self, name: &str) -> Result<Vec<IpAddr>, String> {
        tokio::net::lookup_host((name, 0))
            .await
            .map(|it| it.map(|sa| sa.ip()).collect())
            .map_err(|e| e.to_string())
    }
}

/// The runtime-wide egress engine: settings and the resolver.
pub struct Egress {
    settings: EgressSettings,
    resolver: Arc<dyn Resolver>,
}

impl std::fmt::Debug for Egress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Egress")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl Egress {
    /// The engine for `policy`, resolving through `resolver` (default: the
    /// system resolver).
    pub fn new(settings: EgressSettings, resolver: Option<Arc<dyn Resolver>>) -> Self {
        Self {
            settings,
            resolver: resolver.unwrap_or_else(|| Arc::new(SystemResolver)),
        }
    }

    /// The settings in force.
    pub fn settings(&self) -> &EgressSettings {
        &self.settings
    }

    /// Resolves a target's name once and validates the whole answer. An IP
    /// literal never reaches the resolver (it was judged by [`wop_core::egress::check_url`]);
    /// the result is empty for it.
    pub async fn resolve_checked(
        &self,
        target: &Target,
        within: Duration,
    ) -> Result<Vec<IpAddr>, Denial> {
        let HostName::Name(name) = &target.host else {
            return Ok(Vec::new());
        };
        let wait = within.min(self.settings.connect_timeout);
        let addrs = match tokio::time::timeout(wait, self.resolver.resolve(name)).await {
            Ok(Ok(a)) => a,
            Ok(Err(e)) => {
                return Err(Denial {
                    code: ErrorCode::UpstreamUnavailable,
                    reason: "dns",
                    message: format!("`{name}` could not be resolved: {e}"),
                    extra: json!({"retryable": true}),
                });
            }
            Err(_) => {
                return Err(Denial {
                    code: ErrorCode::UpstreamUnavailable,
                    reason: "dns",
                    message: format!("resolving `{name}` timed out"),
                    extra: json!({"retryable": true}),
                });
            }
        };
        check_answer(name, &addrs, self.settings.allow_loopback)?;
        Ok(addrs)
    }
}

/// What one pack may reach: the runtime's engine plus the pack's
/// allow-list. Cheap to clone.
#[derive(Debug, Clone)]
pub struct PackEgress {
    /// The engine.
    pub engine: Arc<Egress>,
    /// requested ∩ granted.
    pub allow: Arc<AllowList>,
}
