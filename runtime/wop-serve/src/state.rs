//! Shared server state and node-type metadata.

use crate::config::{Net, ServeConfig};
use crate::console::sessions::Sessions;
use crate::observe::Observers;
use crate::observe::metrics::Scrape;
use crate::slots::{Refused, Slot, Slots};
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::Semaphore;
use wop_runtime::effects::EffectRecord;
use wop_runtime::tools::SafetyTier;
use wop_runtime::{Principal, Runtime};

pub(crate) use crate::config::ANON_TENANT;

/// What the MCP mount and the invoke API know about one node type.
#[derive(Debug, Clone)]
pub(crate) struct NodeInfo {
    pub pack: String,
    pub title: Option<String>,
    pub description: Option<String>,
    pub input_schema: Value,
    /// The operator's tier for this node type (a policy `[[tools]]` entry
    /// with `packType` = the typeId), if any.
    pub tier: Option<SafetyTier>,
    /// Scopes and tenants that entry requires (empty / None: no restriction).
    pub scopes: Vec<String>,
    pub tenants: Option<Vec<String>>,
}

impl NodeInfo {
    /// Whether `p` may see and invoke this node type.
    pub(crate) fn allows(&self, p: &Principal) -> bool {
        self.tenants
            .as_ref()
            .is_none_or(|t| t.iter().any(|t| t == &p.tenant))
            && self.scopes.iter().all(|s| p.scopes.contains(s))
    }
}

/// Everything the handlers share.
pub(crate) struct Shared {
    pub rt: Runtime,
    /// The effect store the runtime was given (for its room in
    /// `/metrics` and `/healthz`).
    pub store: Arc<dyn wop_runtime::store::KvStore>,
    /// Each tenant's share of the store (`maxStoreBytesPerTenant`), when
    /// there is one: asked before an invocation that claims nothing starts
    /// (`invoke::run`).
    pub share: Option<Arc<wop_runtime::store::TenantShare>>,
    pub cfg: ServeConfig,
    /// `cfg.allowed_origins`, normalized (see `guard`).
    pub origins: Vec<String>,
    /// `cfg.trusted_proxies`, parsed.
    pub proxies: Vec<Net>,
    /// sha256(token) → principal.
    pub tokens: HashMap<String, Principal>,
    pub permits: Arc<Semaphore>,
    /// The same slots, with each tenant's share (`maxInFlightPerTenant`).
    pub slots: Slots,
    /// Listing slots (`slots::LISTINGS`, `LISTINGS_PER_TENANT`).
    pub listings: Slots,
    /// Invocations admitted since start (see [`Shared::admit`]); the idle
    /// release watches it (`idle.rs`).
    pub admitted: AtomicU64,
    /// One permit per open client connection (`maxConnections`).
    pub conns: Arc<Semaphore>,
    /// Connections answered `503` at the connection cap since start.
    pub conns_refused: AtomicU64,
    pub nodes: BTreeMap<String, NodeInfo>,
    /// The capability document and its ETag (packs are fixed after start).
    pub capability_doc: Value,
    pub etag: String,
    /// Packs refused at start: `{dir, code, message}`.
    pub refused: Vec<Value>,
    /// Loaded pack name → its provenance (signature verdict), for the console.
    pub provenance: BTreeMap<String, String>,
    /// Node invocations this process runs under an idempotency key, by
    /// effect id (`idem::Held`): released at shutdown if a drain cuts them
    /// (`idem::release_cut`), so a retry runs them again at once instead
    /// of waiting for the lease.
    pub claims: Mutex<HashMap<String, EffectRecord>>,
    /// What `/metrics` and the console show of finished invocations.
    pub observers: Observers,
    /// The console's sign-in sessions.
    pub sessions: Sessions,
}

/// Cheap to clone.
pub(crate) type AppState = Arc<Shared>;

/// The address of the peer a request came from (a request extension set
/// by the accept loop).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Peer(pub std::net::SocketAddr);

impl Shared {
    /// One of the `maxInFlight` invocation slots for one of `tenant`'s
    /// invocations, or why not (the caller answers `503` when all are
    /// taken, `429` when the tenant holds its share:
    /// `ApiError::no_slot`). Counted in [`Shared::admitted`].
    pub(crate) fn admit(&self, tenant: &str) -> Result<Slot, Refused> {
        let slot = self.slots.admit(tenant)?;
        self.admitted.fetch_add(1, Ordering::Relaxed);
        Ok(slot)
    }

    /// Invocations running now.
    pub(crate) fn in_flight(&self) -> usize {
        self.cfg.max_in_flight - self.permits.available_permits()
    }

    /// Whether the request was served over HTTPS as its client sees it:
    /// `behindTls`, or `X-Forwarded-Proto: https` from a trusted proxy (the
    /// last value of the last such header: the one the nearest proxy set).
    pub(crate) fn over_tls(
        &self,
        headers: &axum::http::HeaderMap,
        extensions: &axum::http::Extensions,
    ) -> bool {
        if self.cfg.behind_tls {
            return true;
        }
        let Some(Peer(peer)) = extensions.get::<Peer>() else {
            return false;
        };
        if !self.proxies.iter().any(|n| n.contains(peer.ip())) {
            return false;
        }
        headers
            .get_all("x-forwarded-proto")
            .iter()
            .next_back()
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.rsplit(',').next())
            .is_some_and(|v| v.trim().eq_ignore_ascii_case("https"))
    }

    /// The node type if it exists and `p` may use it.
    pub(crate) fn node_for(&self, type_id: &str, p: &Principal) -> Option<&NodeInfo> {
        self.nodes.get(type_id).filter(|n| n.allows(p))
    }

    /// The `/metrics` exposition now.
    pub(crate) fn metrics_text(&self) -> String {
        let stats = self.rt.stats();
        let n = |v: usize| i64::try_from(v).unwrap_or(i64::MAX);
        let m = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
        let (spans_dropped, exports_failed) = self.rt.trace_export_losses();
        self.observers.metrics.encode(&Scrape {
            in_flight: n(self.in_flight()),
            max_in_flight: n(self.cfg.max_in_flight),
            connections: n(self.cfg.max_connections - self.conns.available_permits()),
            max_connections: n(self.cfg.max_connections),
            connections_refused: m(self.conns_refused.load(Ordering::Relaxed)),
            refused_packs: n(self.refused.len()),
            cache_hits: m(stats.cache.memory_hits + stats.cache.disk_hits),
            cache_misses: m(stats.cache.compilations),
            compiles: m(stats.cache.compilations),
            instantiations: m(stats.instantiations),
            idle_releases: m(stats.idle_releases),
            idle_released_bytes: m(stats.idle_released_bytes),
            trace_spans_dropped: m(spans_dropped),
            trace_exports_failed: m(exports_failed),
            mcp: self.rt.mcp_servers(),
            store: crate::observe::store::StoreScrape {
                backend: self.store.backend(),
                room: self.store.room(),
                share: self.share.as_ref().map(|s| (s.share(), s.tenants())),
                failed: self.store.failure().is_some(),
            },
        })
    }

    /// `/healthz`: `(healthy, body)`. Unhealthy only when the effect
    /// store has failed for good (decision 0056): then only a restart
    /// helps, so a supervisor's probe should see it.
    pub(crate) fn health(&self) -> (bool, Value) {
        let failed = self.store.failure().is_some();
        let body = json!({
            "status": if failed { "failing" } else { "ok" },
            "packs": self.rt.packs().len(),
            "nodeTypes": self.nodes.len(),
            "refusedPacks": self.refused.len(),
            "inFlight": self.in_flight(),
            "maxInFlight": self.cfg.max_in_flight,
            "maxInFlightPerTenant": self.slots.per_tenant(),
            "tenantsInFlight": self.slots.tenants_in_flight(),
            "connections": self.cfg.max_connections - self.conns.available_permits(),
            "maxConnections": self.cfg.max_connections,
            "connectionsRefused": self.conns_refused.load(Ordering::Relaxed),
            "idleReleases": self.rt.stats().idle_releases,
            // `low`: new claims are refused for want of room (decision
            // 0053); not a reason to restart, so the status stays `ok`.
            // `failed`: nothing is served until a restart (decision 0056).
            "store": match self.store.room() {
                _ if failed => "failed",
                Some(r) if r.is_low() => "low",
                _ => "ok",
            },
        });
        (!failed, body)
    }
}
