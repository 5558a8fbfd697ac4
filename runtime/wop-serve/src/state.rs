//! Shared server state, the event router and node-type metadata.

use crate::config::ServeConfig;
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::{Semaphore, mpsc};
use wop_runtime::tools::SafetyTier;
use wop_runtime::{Event, EventSink, Principal, Runtime};

/// The anonymous loopback principal's tenant.
pub(crate) const ANON_TENANT: &str = "anon:local";

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

type Subscriber = (u64, mpsc::UnboundedSender<Event>);

/// Forwards the runtime's events to the request that is waiting for them
/// (by run id and node id), so `text/event-stream` callers see them.
#[derive(Default)]
pub(crate) struct EventRouter {
    next: AtomicU64,
    subs: Mutex<HashMap<(String, String), Vec<Subscriber>>>,
}

/// Unsubscribes on drop.
pub(crate) struct Subscription {
    router: Arc<EventRouter>,
    key: (String, String),
    id: u64,
    /// The request's receiving end.
    pub rx: mpsc::UnboundedReceiver<Event>,
}

impl EventRouter {
    pub(crate) fn subscribe(self: &Arc<Self>, run: &str, node: &str) -> Subscription {
        let (tx, rx) = mpsc::unbounded_channel();
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let key = (run.to_owned(), node.to_owned());
        if let Ok(mut s) = self.subs.lock() {
            s.entry(key.clone()).or_default().push((id, tx));
        }
        Subscription {
            router: self.clone(),
            key,
            id,
            rx,
        }
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        if let Ok(mut s) = self.router.subs.lock()
            && let Some(v) = s.get_mut(&self.key)
        {
            v.retain(|(id, _)| *id != self.id);
            if v.is_empty() {
                s.remove(&self.key);
            }
        }
    }
}

impl EventSink for EventRouter {
    fn emit(&self, run_id: &str, node_id: &str, event: &Event) {
        let Ok(s) = self.subs.lock() else { return };
        if s.is_empty() {
            return;
        }
        if let Some(v) = s.get(&(run_id.to_owned(), node_id.to_owned())) {
            for (_, tx) in v {
                let _ = tx.send(event.clone());
            }
        }
    }
}

/// Everything the handlers share.
pub(crate) struct Shared {
    pub rt: Runtime,
    pub cfg: ServeConfig,
    /// `cfg.allowed_origins`, normalized (see `guard`).
    pub origins: Vec<String>,
    /// sha256(token) → principal.
    pub tokens: HashMap<String, Principal>,
    pub permits: Arc<Semaphore>,
    /// One permit per open client connection (`maxConnections`).
    pub conns: Arc<Semaphore>,
    /// Connections answered `503` at the connection cap since start.
    pub conns_refused: AtomicU64,
    pub events: Arc<EventRouter>,
    pub nodes: BTreeMap<String, NodeInfo>,
    /// The capability document and its ETag (packs are fixed after start).
    pub capability_doc: Value,
    pub etag: String,
    /// Packs refused at start: `{dir, code, message}`.
    pub refused: Vec<Value>,
}

/// Cheap to clone.
pub(crate) type AppState = Arc<Shared>;

impl Shared {
    /// The node type if it exists and `p` may use it.
    pub(crate) fn node_for(&self, type_id: &str, p: &Principal) -> Option<&NodeInfo> {
        self.nodes.get(type_id).filter(|n| n.allows(p))
    }

    /// `{code, message}` of a refused pack for logs and health.
    pub(crate) fn health(&self) -> Value {
        json!({
            "status": "ok",
            "packs": self.rt.packs().len(),
            "nodeTypes": self.nodes.len(),
            "refusedPacks": self.refused.len(),
            "inFlight": self.cfg.max_in_flight - self.permits.available_permits(),
            "maxInFlight": self.cfg.max_in_flight,
            "connections": self.cfg.max_connections - self.conns.available_permits(),
            "maxConnections": self.cfg.max_connections,
            "connectionsRefused": self.conns_refused.load(Ordering::Relaxed),
        })
    }
}
