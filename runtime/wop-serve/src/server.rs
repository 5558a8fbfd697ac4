//! Start-up (runtime, store, packs), the accept loop and graceful drain.

use crate::config::{ServeConfig, valid_tenant};
use crate::state::{NodeInfo, Shared};
pub use crate::store_choice::StoreChoice;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use wop_runtime::metering::UsageCommit;
use wop_runtime::tools::RegisteredTool;
use wop_runtime::{Policy, Principal, Runtime, RuntimeConfig};

/// Everything [`serve`] needs. Builder setters document their defaults.
#[derive(Clone)]
pub struct ServeOptions {
    listen: SocketAddr,
    policy: Policy,
    packs_dir: Option<PathBuf>,
    store: StoreChoice,
    cache_dir: Option<PathBuf>,
    config: ServeConfig,
    executor_id: Option<String>,
    tools: Vec<RegisteredTool>,
}

impl ServeOptions {
    /// Options listening on `listen`, with the default policy, no packs,
    /// an in-memory store and the default [`ServeConfig`] (no tokens).
    pub fn new(listen: SocketAddr) -> Self {
        Self {
            listen,
            policy: Policy::default(),
            packs_dir: None,
            store: StoreChoice::Memory,
            cache_dir: None,
            config: ServeConfig::default(),
            executor_id: None,
            tools: Vec::new(),
        }
    }

    /// The operator policy. Default: `Policy::default()`.
    pub fn policy(&mut self, policy: Policy) -> &mut Self {
        self.policy = policy;
        self
    }

    /// Loads every pack under `dir` at start (each subdirectory, and each
    /// bare `.wasm` file). Default: none.
    pub fn packs_dir(&mut self, dir: impl Into<PathBuf>) -> &mut Self {
        self.packs_dir = Some(dir.into());
        self
    }

    /// The effect store. Default: in memory.
    pub fn store(&mut self, store: StoreChoice) -> &mut Self {
        self.store = store;
        self
    }

    /// Shorthand for [`StoreChoice::Memory`].
    pub fn memory_store(&mut self) -> &mut Self {
        self.store = StoreChoice::Memory;
        self
    }

    /// The compile cache directory. Default: none (memory only).
    pub fn cache_dir(&mut self, dir: impl Into<PathBuf>) -> &mut Self {
        self.cache_dir = Some(dir.into());
        self
    }

    /// Server settings. Default: [`ServeConfig::default`].
    pub fn config(&mut self, config: ServeConfig) -> &mut Self {
        self.config = config;
        self
    }

    /// This executor's id in effect claims. Default: the runtime's.
    pub fn executor_id(&mut self, id: impl Into<String>) -> &mut Self {
        self.executor_id = Some(id.into());
        self
    }

    /// Registers an embedder tool (`host-extension`). Default: none.
    pub fn tool(&mut self, tool: RegisteredTool) -> &mut Self {
        self.tools.push(tool);
        self
    }
}

/// Why the server could not start or run.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// Invalid settings (anonymous mode on a non-loopback address, ...).
    #[error("configuration: {0}")]
    Config(String),
    /// The runtime could not be built.
    #[error("runtime: {0}")]
    Runtime(String),
    /// The effect store could not be opened.
    #[error("store: {0}")]
    Store(String),
    /// The listen address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
}

/// A bound server, not yet accepting. [`Server::local_addr`] gives the
/// port when listening on port 0.
pub struct Server {
    listener: TcpListener,
    state: crate::state::AppState,
}

/// Starts the server and runs it until `shutdown` completes, then stops
/// accepting, lets in-flight requests finish (up to `drainTimeoutMs`) and
/// returns.
pub async fn serve(
    opts: ServeOptions,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), ServeError> {
    Server::bind(opts).await?.run(shutdown).await
}

fn node_infos(
    policy: &Policy,
    dirs: &[(PathBuf, Vec<String>, String)],
) -> BTreeMap<String, NodeInfo> {
    let mut out = BTreeMap::new();
    for (dir, type_ids, pack) in dirs {
        // The bounded, no-follow reader, as at load (a bare module has none).
        let manifest: Value = wop_runtime::pack::read_manifest_bytes(dir)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or(Value::Null);
        for t in type_ids {
            let decl = manifest
                .get("nodes")
                .and_then(Value::as_array)
                .and_then(|n| {
                    n.iter()
                        .find(|n| n.get("typeId").and_then(Value::as_str) == Some(t))
                });
            let text = |k: &str| {
                decl.and_then(|d| d.get(k))
                    .and_then(Value::as_str)
                    .map(str::to_owned)
            };
            let mut info = NodeInfo {
                pack: pack.clone(),
                title: text("title"),
                description: text("description"),
                input_schema: decl
                    .and_then(|d| d.get("inputSchema"))
                    .filter(|s| s.is_object())
                    .cloned()
                    .unwrap_or_else(|| json!({"type": "object"})),
                tier: None,
                scopes: Vec::new(),
                tenants: None,
            };
            // The operator's record of this node type, if any.
            if let Some(spec) = policy
                .tools
                .iter()
                .find(|s| s.pack_type.as_deref() == Some(t))
            {
                info.tier = Some(spec.safety_tier);
                info.scopes = spec.scopes.clone();
                info.tenants = spec.tenants.clone();
                if spec.title.is_some() {
                    info.title = spec.title.clone();
                }
                if spec.description.is_some() {
                    info.description = spec.description.clone();
                }
                if let Some(s) = spec.input_schema.as_ref().filter(|s| s.is_object()) {
                    info.input_schema = s.clone();
                }
            }
            out.insert(t.clone(), info);
        }
    }
    out
}

/// Refusals in progress at once (each lasts at most [`REFUSE_LINGER`]);
/// beyond this many, an over-cap connection is closed without an answer.
const REFUSING_MAX: usize = 256;

/// The longest `usageDeferMs` (the most usage a crash may lose).
const MAX_USAGE_DEFER_MS: u64 = 1000;

/// How long a refused connection may take to receive its `503` and close.
const REFUSE_LINGER: Duration = Duration::from_secs(1);
/// How much of a refused connection's request is read (and discarded) so
/// closing does not reset the connection before the client reads the `503`.
const REFUSE_DRAIN_BYTES: usize = 64 * 1024;

/// The fixed answer to a connection over `maxConnections`.
fn busy_response(retry_after: u64, max_connections: usize) -> bytes::Bytes {
    let body = json!({
        "error": "service_unavailable",
        "message": "too many open connections; retry later",
        "details": {"maxConnections": max_connections},
    })
    .to_string();
    bytes::Bytes::from(format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nretry-after: {retry_after}\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    ))
}

/// Answers an over-cap connection `503` and closes it, off the accept loop.
/// The request is not parsed: the answer is written at once, the write side
/// shut, and up to [`REFUSE_DRAIN_BYTES`] of input discarded until the
/// client closes, all within [`REFUSE_LINGER`]. When `refusing` has no
/// permit left (a flood), the connection is dropped without an answer.
fn refuse(mut stream: TcpStream, busy: bytes::Bytes, refusing: &Arc<Semaphore>) {
    let Ok(permit) = refusing.clone().try_acquire_owned() else {
        tracing::debug!("connection cap reached and refusals saturated: closing");
        return;
    };
    tracing::debug!("connection cap reached: 503");
    tokio::spawn(async move {
        let _permit = permit;
        let _ = tokio::time::timeout(REFUSE_LINGER, async {
            stream.write_all(&busy).await?;
            stream.shutdown().await?;
            let mut sink = [0u8; 4096];
            let mut total = 0;
            while total < REFUSE_DRAIN_BYTES {
                match stream.read(&mut sink).await? {
                    0 => break,
                    n => total += n,
                }
            }
            Ok::<(), std::io::Error>(())
        })
        .await;
    });
}

impl Server {
    /// Builds the runtime, opens the store, loads the packs and binds.
    pub async fn bind(opts: ServeOptions) -> Result<Server, ServeError> {
        let cfg = opts.config.clone();
        cfg.validate().map_err(ServeError::Config)?;
        if cfg.anonymous_loopback {
            if !opts.listen.ip().is_loopback() {
                return Err(ServeError::Config(format!(
                    "anonymousLoopback is only allowed on a loopback listen address, not {}",
                    opts.listen
                )));
            }
            tracing::warn!(listen = %opts.listen, "ANONYMOUS LOOPBACK MODE: requests without a token are served as principal `anonymous` (tenant `anon:local`); never expose this port");
        }
        if cfg.tokens.is_empty() && !cfg.anonymous_loopback {
            tracing::warn!("no tokens configured: every route but discovery answers 401");
        }
        let mut tokens = HashMap::new();
        for t in &cfg.tokens {
            if !valid_tenant(&t.tenant) {
                return Err(ServeError::Config(format!("invalid tenant `{}`", t.tenant)));
            }
            tokens.insert(
                t.sha256.to_ascii_lowercase(),
                Principal {
                    id: t.principal.clone(),
                    tenant: t.tenant.clone(),
                    scopes: t.scopes.clone(),
                },
            );
        }
        let (store, share) = opts.store.open(&cfg).await.map_err(ServeError::Store)?;
        let mut rc = RuntimeConfig::new();
        rc.policy(opts.policy.clone()).effect_store(store.clone());
        if let StoreChoice::Memory = &opts.store {
            // Nothing purges it and nothing else reads it: keep its usage
            // bounded, as the library does on its own in-memory store.
            rc.usage_entries(Some(wop_runtime::metering::USAGE_ENTRIES_IN_MEMORY));
        }
        let defer_ms = cfg
            .usage_defer_ms
            .unwrap_or_else(|| opts.store.usage_defer_ms());
        if defer_ms > MAX_USAGE_DEFER_MS {
            return Err(ServeError::Config(format!(
                "usageDeferMs = {defer_ms} is more than {MAX_USAGE_DEFER_MS}: a crash loses up \
                 to this window of usage records; choose 0 (durable) to {MAX_USAGE_DEFER_MS}"
            )));
        }
        if defer_ms > 0 {
            rc.usage_commit(UsageCommit::Deferred {
                window: Duration::from_millis(defer_ms),
                max_records: 1000,
            });
        }
        if let Some(d) = &opts.cache_dir {
            rc.cache_dir(d);
        }
        if let Some(id) = &opts.executor_id {
            rc.executor_id(id.clone());
        }
        for t in &opts.tools {
            rc.tool(t.clone());
        }
        // Traces: the standard OTEL_EXPORTER_OTLP_* variables (off unless set).
        let (otlp, warning) = wop_runtime::gate::telemetry::otlp::Config::from_env();
        if let Some(w) = warning {
            tracing::warn!("{w}");
        }
        if let Some(c) = otlp {
            tracing::info!(endpoint = %c.endpoint, "exporting traces (OTLP/HTTP JSON)");
            rc.otlp(c);
        }
        let rt = Runtime::new(&rc).map_err(|e| ServeError::Runtime(e.to_string()))?;
        for w in rt.secret_warnings() {
            tracing::warn!("{w}");
        }
        let mut loaded = Vec::new();
        let mut refused = Vec::new();
        let mut provenance = BTreeMap::new();
        if let Some(dir) = &opts.packs_dir {
            // Every pack, then their declared names: two packs of one name
            // are both refused (`Runtime::load_packs_dir`).
            let report = rt.load_packs_dir(dir).await.map_err(|e| {
                ServeError::Config(format!("cannot read packs dir {}: {e}", dir.display()))
            })?;
            for (entry, s) in report.loaded {
                tracing::info!(pack = %s.name, version = %s.version, types = ?s.type_ids, "loaded pack");
                provenance.insert(s.name.clone(), provenance_of(&entry, &opts.policy));
                loaded.push((entry, s.type_ids, s.name));
            }
            for (entry, e) in report.refused {
                let code = e.code().as_str();
                tracing::warn!(dir = %entry.display(), code, error = %e, "refused pack");
                refused.push(json!({"dir": entry.display().to_string(), "code": code, "message": e.to_string(), "details": e.details()}));
            }
        }
        let nodes = node_infos(&opts.policy, &loaded);
        // The catalog's tool ids: the only tool ids that become metric labels.
        let rt_tools: Vec<String> = rt
            .gate()
            .registry()
            .all()
            .map(|t| t.descriptor.tool_id.clone())
            .collect();
        // Every metric label value: from the configuration, never traffic.
        let vocab = crate::observe::metrics::Vocab {
            tools: rt_tools.into_iter().collect(),
            mcp_servers: rt.mcp_servers().into_iter().map(|(id, _)| id).collect(),
            packs: loaded.iter().map(|(_, _, name)| name.clone()).collect(),
            node_types: nodes.keys().cloned().collect(),
            tenants: tokens
                .values()
                .map(|p| p.tenant.clone())
                .chain([crate::state::ANON_TENANT.to_owned()])
                .collect(),
        };
        let refreshed_at = crate::wire::rfc3339(wop_runtime::effects::now_ms());
        let capability_doc = crate::routes::capability_doc(&rt, &refreshed_at);
        let etag = {
            use sha2::Digest as _;
            let h = sha2::Sha256::digest(capability_doc.to_string().as_bytes());
            format!("\"{}\"", &hex::encode(h)[..32])
        };
        let listener = TcpListener::bind(opts.listen)
            .await
            .map_err(|source| ServeError::Bind {
                addr: opts.listen,
                source,
            })?;
        let permits = Arc::new(Semaphore::new(cfg.max_in_flight));
        let per_tenant = cfg.max_in_flight_per_tenant.unwrap_or_else(|| {
            let tenants = cfg.tenants().len();
            crate::config::tenant_default(cfg.max_in_flight as u64, tenants) as usize
        });
        let state = Arc::new(Shared {
            store,
            share,
            slots: crate::slots::Slots::new(permits.clone(), per_tenant),
            listings: crate::slots::Slots::new(
                Arc::new(Semaphore::new(crate::slots::LISTINGS)),
                crate::slots::LISTINGS_PER_TENANT,
            ),
            permits,
            admitted: AtomicU64::new(0),
            conns: Arc::new(Semaphore::new(cfg.max_connections)),
            conns_refused: AtomicU64::new(0),
            origins: cfg
                .allowed_origins
                .iter()
                .filter_map(|o| crate::config::normalize_origin(o))
                .collect(),
            proxies: cfg
                .trusted_proxies
                .iter()
                .filter_map(|p| crate::config::Net::parse(p))
                .collect(),
            rt,
            cfg,
            tokens,
            nodes,
            capability_doc,
            etag,
            refused,
            provenance,
            claims: Default::default(),
            observers: crate::observe::Observers::new(vocab),
            sessions: Default::default(),
        });
        Ok(Server { listener, state })
    }

    /// The bound address.
    pub fn local_addr(&self) -> Result<SocketAddr, ServeError> {
        self.listener
            .local_addr()
            .map_err(|e| ServeError::Config(format!("no local address: {e}")))
    }

    /// The node types served (MCP tools).
    pub fn node_types(&self) -> Vec<String> {
        self.state.nodes.keys().cloned().collect()
    }

    /// Packs refused at start: `{dir, code, message, details}`.
    pub fn refused(&self) -> &[Value] {
        &self.state.refused
    }

    /// Accepts until `shutdown` completes, then drains.
    pub async fn run(self, shutdown: impl Future<Output = ()> + Send) -> Result<(), ServeError> {
        let Server { listener, state } = self;
        let addr = listener.local_addr().ok();
        let header_timeout = Duration::from_millis(state.cfg.header_timeout_ms);
        let write_timeout = Duration::from_millis(state.cfg.write_timeout_ms);
        let drain = Duration::from_millis(state.cfg.drain_timeout_ms);
        let app = crate::router::router(state.clone());
        let graceful = GracefulShutdown::new();
        let busy = busy_response(state.cfg.retry_after_secs, state.cfg.max_connections);
        let refusing = Arc::new(Semaphore::new(REFUSING_MAX));
        crate::idle::spawn_release(&state);
        crate::retention::spawn_purge(&state);
        tracing::info!(addr = ?addr, "wop-serve accepting");
        tokio::pin!(shutdown);
        loop {
            tokio::select! {
                accepted = listener.accept() => {
                    let (stream, peer) = match accepted {
                        Ok(a) => a,
                        Err(e) => {
                            // EMFILE and friends: back off instead of spinning.
                            tracing::warn!(error = %e, "accept failed");
                            tokio::time::sleep(Duration::from_millis(50)).await;
                            continue;
                        }
                    };
                    let _ = stream.set_nodelay(true);
                    if state.cfg.send_buffer_bytes > 0 {
                        let _ = socket2::SockRef::from(&stream)
                            .set_send_buffer_size(state.cfg.send_buffer_bytes);
                    }
                    // One permit per open connection, released when the
                    // connection task ends (client close, idle/header
                    // timeout, error or drain).
                    let Ok(conn_permit) = state.conns.clone().try_acquire_owned() else {
                        state.conns_refused.fetch_add(1, Ordering::Relaxed);
                        refuse(stream, busy.clone(), &refusing);
                        continue;
                    };
                    let svc = WithPeer {
                        inner: TowerToHyperService::new(app.clone()),
                        peer: crate::state::Peer(peer),
                    };
                    let conn = hyper::server::conn::http1::Builder::new()
                        .timer(TokioTimer::new())
                        .header_read_timeout(header_timeout)
                        .keep_alive(true)
                        .serve_connection(
                            TokioIo::new(crate::io::WriteTimeout::new(stream, write_timeout)),
                            svc,
                        );
                    let watched = graceful.watch(conn);
                    tokio::spawn(crate::inline_wake::connection(async move {
                        let _conn_permit = conn_permit;
                        if let Err(e) = watched.await {
                            tracing::debug!(error = %e, "connection ended with an error");
                        }
                    }));
                }
                () = &mut shutdown => break,
            }
        }
        drop(listener);
        let in_flight = state.in_flight();
        tracing::info!(
            in_flight,
            drain_ms = drain.as_millis() as u64,
            "shutting down: no new connections; draining"
        );
        match tokio::time::timeout(drain, graceful.shutdown()).await {
            Ok(()) => tracing::info!("drained"),
            Err(_) => tracing::warn!("drain deadline passed; closing remaining connections"),
        }
        // Invocations still running hold permits; wait for them within the
        // same deadline so their outcomes are recorded.
        let all = u32::try_from(state.cfg.max_in_flight).unwrap_or(u32::MAX);
        if tokio::time::timeout(drain, state.permits.acquire_many(all))
            .await
            .is_err()
        {
            tracing::warn!("invocations still running at exit");
            crate::idem::release_cut(&state).await;
        }
        // Usage held back by `usageDeferMs` (nothing with the default).
        if let Err(e) = state.rt.flush_usage().await {
            tracing::error!(error = %e, "cannot persist the deferred usage records at exit");
        }
        // Every store write is durable before it returns (sled flushes per
        // write, group-committed); dropping the runtime closes the store.
        drop(app);
        drop(state);
        Ok(())
    }
}

/// The router with each request's [`crate::state::Peer`] set.
struct WithPeer<S> {
    inner: S,
    peer: crate::state::Peer,
}

impl<S, B> hyper::service::Service<hyper::Request<B>> for WithPeer<S>
where
    S: hyper::service::Service<hyper::Request<B>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn call(&self, mut req: hyper::Request<B>) -> Self::Future {
        req.extensions_mut().insert(self.peer);
        self.inner.call(req)
    }
}

/// A loaded pack's provenance as the console shows it: the verdict of
/// the pack's signature under the policy (it loaded, so the verdict
/// passed), or that a bare module carries none.
fn provenance_of(entry: &std::path::Path, policy: &wop_runtime::Policy) -> String {
    if !entry.is_dir() {
        return "unsigned (a bare module has no manifest to sign)".to_owned();
    }
    match wop_runtime::pack::trust_verdict(entry, policy) {
        Ok(v) => v.to_string(),
        // Changed on disk since it loaded: say so rather than guess.
        Err(e) => format!("no longer verifiable on disk: {}", e.code().as_str()),
    }
}
