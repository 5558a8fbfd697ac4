//! The embedder API: [`Runtime`], built from a [`RuntimeConfig`]. This
//! file holds the facade's loading and read-only calls; the invoke path
//! (admit → `pack.invoke` → settle) is in `invoke.rs`.

use crate::cache::CacheStats;
use crate::capability_doc::CapabilityDocument;
use crate::env::LoadEnv;
use crate::kind::{Kinds, PackKind};
use crate::registry::{PackSummary, Registry};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use wop_core::budget::{Ledger, Rollup};
use wop_core::error::{ConfigError, ErrorCode, LoadError, NodeError};
use wop_core::events::EventSink;
use wop_core::model::{InvocationReport, InvokeRequest, Principal, Usage};
use wop_core::pack::Inspection;
use wop_core::policy::Policy;
use wop_effects::effects::{EffectError, EffectState, EffectSummary, RunEffects};
use wop_effects::{Meter, MeterError, UsageScope};
use wop_gate::Gate;
use wop_gate::pack_tool::NodeInvoker;
use wop_gate::tools::ToolDescriptor;

mod build;
mod invoke;
mod live;
mod trace;

pub use build::RuntimeConfig;

/// What [`Runtime::load_packs_dir`] did with each pack of a directory.
#[derive(Debug, Default)]
pub struct PacksDirLoad {
    /// Packs loaded, by path, in path order.
    pub loaded: Vec<(PathBuf, PackSummary)>,
    /// Packs refused, by path, in path order, each with its reason.
    pub refused: Vec<(PathBuf, wop_core::error::LoadError)>,
}

/// Counters proving what the runtime did (for tests and operators).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RuntimeStats {
    /// Compile cache counters.
    pub cache: CacheStats,
    /// Component instances created (one per invocation and per describe()).
    pub instantiations: u64,
    /// Times [`Runtime::release_idle_memory`] ran in this process.
    pub idle_releases: u64,
    /// Bytes those releases gave back to the OS.
    pub idle_released_bytes: u64,
}

/// What a runtime holds; shared by its clones.
pub(crate) struct Inner {
    gate: Arc<Gate>,
    egress: Arc<wop_gate::Egress>,
    meter: Meter,
    /// What each pack kind keeps between loads.
    kinds: Kinds,
    policy: Policy,
    sink: Option<Arc<dyn EventSink>>,
    /// typeId → pack, both pack kinds.
    registry: Registry,
    instantiations: AtomicU64,
    /// What node-pack tools call to run a nested invocation.
    nested: OnceLock<Arc<dyn NodeInvoker>>,
    /// The MCP client for `ctx.mcp` (one per runtime: stdio servers start
    /// once, not per invocation).
    mcp: Arc<wop_gate::mcp::McpGateway>,
    /// The operator's credentials (`[secrets]`), read once.
    secrets: wop_gate::secrets::SecretStore,
    /// Where traces go, if anywhere.
    tracer: Option<Arc<wop_gate::telemetry::otlp::Exporter>>,
}

/// Node-pack tools run nested invocations through the runtime.
struct Nested(Weak<Inner>);

#[async_trait::async_trait]
impl NodeInvoker for Nested {
    async fn invoke_nested(&self, req: InvokeRequest, depth: u32) -> InvocationReport {
        match self.0.upgrade() {
            Some(inner) => {
                let sink = inner.sink.clone();
                Runtime { inner }.invoke_at_depth(req, depth, sink).await
            }
            None => InvocationReport {
                outcome: Err(NodeError::runtime(
                    ErrorCode::InternalError,
                    "the runtime is shutting down",
                    Default::default(),
                )),
                events: Vec::new(),
                usage: Usage::default(),
            },
        }
    }
}

/// Runs OpenWOP node packs. Cheap to clone; share one per process.
///
/// ```no_run
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// use wop_runtime::{InvokeRequest, Runtime, RuntimeConfig};
/// let rt = Runtime::new(&RuntimeConfig::new())?;
/// rt.load_pack("sample-packs/samples/hello".as_ref()).await?;
/// let report = rt
///     .invoke(InvokeRequest::new("wop.samples.hello", serde_json::json!({"name": "Ada"})))
///     .await;
/// println!("{:?}", report.outcome);
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Runtime {
    inner: Arc<Inner>,
}

impl Runtime {
    /// Builds a runtime. The wasm engine is created once per process and
    /// shared by every runtime.
    pub fn new(config: &RuntimeConfig) -> Result<Runtime, ConfigError> {
        let (inner, slot) = build::inner(config)?;
        let rt = Runtime {
            inner: Arc::new(inner),
        };
        let invoker: Arc<dyn NodeInvoker> = Arc::new(Nested(Arc::downgrade(&rt.inner)));
        let _ = slot.set(Arc::downgrade(&invoker));
        // The slot holds a weak link; keep the invoker alive with the runtime.
        let _ = rt.inner.nested.set(invoker);
        Ok(rt)
    }

    fn load_env(&self) -> LoadEnv<'_> {
        let i = &self.inner;
        LoadEnv {
            policy: &i.policy,
            instantiations: &i.instantiations,
            gate: &i.gate,
            egress: &i.egress,
            mcp: &i.mcp,
            meter: &i.meter,
        }
    }

    /// Whether the per-host-call breakdown is recorded (policy
    /// `[metering] hostCallBreakdown`, on by default).
    fn breakdown(&self) -> bool {
        self.inner
            .policy
            .metering
            .host_call_breakdown
            .unwrap_or(true)
    }

    /// Validates a pack and judges its imports without running any of its
    /// code. A pack that would be refused still yields an inspection, with
    /// the reason in [`Inspection::refusal`].
    pub async fn inspect_pack(&self, dir: &Path) -> Result<Inspection, LoadError> {
        PackKind::inspect(dir, &self.load_env(), &self.inner.kinds).await
    }

    /// Loads a pack directory (or a bare ABI v1 `.wasm`): validates
    /// `pack.json`, verifies the entry's sha256, compiles (once; cached),
    /// refuses forbidden or ungranted imports before any code runs, checks
    /// the pack's own description against the manifest, and registers its
    /// node types.
    ///
    /// Loading a pack of a name already loaded replaces it (a reload); to
    /// load a directory of packs, where two packs of one name are an error,
    /// use [`Runtime::load_packs_dir`].
    pub async fn load_pack(&self, dir: &Path) -> Result<PackSummary, LoadError> {
        let pack = PackKind::load(dir, &self.load_env(), &self.inner.kinds).await?;
        self.inner.registry.register(pack)
    }

    /// Loads every pack in `dir` (its subdirectories and `.wasm` files,
    /// in path order). Each is prepared as [`Runtime::load_pack`] would;
    /// then packs are grouped by the name they **declare** (the manifest's
    /// `name`, or a bare module's `openwop_pack_name`): two or more packs
    /// declaring one name are all refused (`pack_validation_failed`,
    /// `details.reason: duplicate-name`), so none silently replaces
    /// another. A pack refused for its own reason is listed with it. `Err`
    /// only when `dir` cannot be listed.
    pub async fn load_packs_dir(&self, dir: &Path) -> Result<PacksDirLoad, LoadError> {
        let mut out = PacksDirLoad::default();
        let mut prepared = Vec::new();
        for entry in pack_entries(dir)? {
            match PackKind::load(&entry, &self.load_env(), &self.inner.kinds).await {
                Ok(p) => prepared.push((entry, p)),
                Err(e) => out.refused.push((entry, e)),
            }
        }
        let mut by_name: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (entry, p) in &prepared {
            by_name
                .entry(p.inspection().manifest.name.clone())
                .or_default()
                .push(entry.display().to_string());
        }
        for (entry, p) in prepared {
            let name = p.inspection().manifest.name.clone();
            match by_name.get(&name) {
                Some(paths) if paths.len() > 1 => out.refused.push((
                    entry,
                    LoadError::DuplicateName {
                        name,
                        paths: paths.clone(),
                    },
                )),
                _ => match self.inner.registry.register(p) {
                    Ok(s) => out.loaded.push((entry, s)),
                    Err(e) => out.refused.push((entry, e)),
                },
            }
        }
        out.refused.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(out)
    }

    /// The capability document: which pack runtimes this runtime runs,
    /// with what limits, which packs are loaded, and the sandbox contract.
    pub fn capabilities(&self) -> CapabilityDocument {
        crate::capability_doc::document(self.inner.policy.limits(), &self.inner.registry)
    }

    /// The gate (tool catalog and effect store).
    pub fn gate(&self) -> &Gate {
        &self.inner.gate
    }

    /// The tool catalog a principal may see in a tenant, sorted by `toolId`.
    pub fn catalog(&self, principal: &Principal, tenant: &str) -> Vec<ToolDescriptor> {
        self.inner.gate.catalog(principal, tenant)
    }

    /// The effects of `tenant`'s run `run_id`: `{effectId, nodeId,
    /// attempt, keying, state, at}`. A run id names a run within a tenant
    /// only: another tenant's run of the same id is not listed.
    pub async fn effects(
        &self,
        tenant: &str,
        run_id: &str,
    ) -> Result<Vec<EffectSummary>, EffectError> {
        self.inner.gate.effects().list_run(tenant, run_id).await
    }

    /// One page of [`effects`](Self::effects): up to `limit` (at most
    /// [`MAX_PAGE`](wop_effects::effects::MAX_PAGE)) effects after the
    /// effect id `after`, and where the next page starts. What a service
    /// answers per request: a run's listing is the tenant's to grow.
    pub async fn effects_page(
        &self,
        tenant: &str,
        run_id: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<RunEffects, EffectError> {
        let fx = self.inner.gate.effects();
        fx.list_run_page(tenant, run_id, after, limit).await
    }

    /// Operator resolution of an effect whose outcome is unknown.
    pub async fn resolve_effect(
        &self,
        effect_id: &str,
        to: EffectState,
    ) -> Result<EffectSummary, EffectError> {
        self.inner
            .gate
            .effects()
            .resolve(effect_id, to)
            .await
            .map(|r| EffectSummary::from(&r))
    }

    /// Deletes finished effect records older than the retention period
    /// (policy `effects.retentionDays`, at least 14 days).
    pub async fn purge_effects(&self) -> Result<usize, EffectError> {
        let cutoff = self.retention_cutoff_ms();
        self.inner.gate.effects().purge(cutoff).await
    }

    /// Deletes usage records older than the same retention period as
    /// effect records (policy `effects.retentionDays`, at least 14 days)
    /// and the roll-ups and ledgers of runs with no invocation since (a
    /// run invoked after that starts afresh: decision 0057); the packs'
    /// all-time roll-ups stay. Returns how many records went.
    pub async fn purge_usage(&self) -> Result<usize, MeterError> {
        let cutoff = self.retention_cutoff_ms();
        self.inner.meter.purge(cutoff).await
    }

    /// Now less the retention period, in ms since the Unix epoch.
    fn retention_cutoff_ms(&self) -> u64 {
        let days = self
            .inner
            .policy
            .effects
            .retention_days
            .unwrap_or(14)
            .max(14);
        wop_core::time::now_ms().saturating_sub(days.saturating_mul(86_400_000))
    }

    /// The operator policy in force.
    pub fn policy(&self) -> &Policy {
        &self.inner.policy
    }

    /// Sends every span queued so far to the OTLP collector (at most
    /// `within`); a no-op when traces are not exported. `wop run` calls it
    /// before it exits.
    pub async fn flush_traces(&self, within: std::time::Duration) {
        if let Some(t) = &self.inner.tracer {
            t.flush(within).await;
        }
    }

    /// Spans dropped (queue full) and export requests that failed.
    pub fn trace_export_losses(&self) -> (u64, u64) {
        self.inner
            .tracer
            .as_ref()
            .map_or((0, 0), |t| (t.dropped(), t.failed()))
    }

    /// What an operator should be told about `[secrets]` at start: values
    /// written into the policy file itself, and values that could not be
    /// read (nodes needing them fail with `credential_unavailable`).
    /// Never a value.
    pub fn secret_warnings(&self) -> Vec<String> {
        let mut out = self.inner.policy.secret_warnings().unwrap_or_default();
        out.extend(self.inner.secrets.problems());
        out
    }

    /// Counters: compilations, cache hits, instantiations.
    pub fn stats(&self) -> RuntimeStats {
        RuntimeStats {
            cache: self.inner.kinds.components.cache_stats(),
            instantiations: self.inner.instantiations.load(Ordering::Relaxed),
            idle_releases: crate::engine::idle_releases().0,
            idle_released_bytes: crate::engine::idle_releases().1,
        }
    }

    /// Gives back to the OS the memory the sandbox's instance pool keeps
    /// resident for idle slots (up to 8 MiB of each slot an instance
    /// dirtied, so that the next instance there does not page-fault it in
    /// again; decision 0028) and for idle fiber stacks (what the deepest
    /// guest on each touched, up to its 1 MiB of wasm stack and the host
    /// frames; decision 0042). Call it when load has dropped: the RSS of an
    /// idle host then falls back to what it holds besides the pool, and
    /// the next invocations pay their page faults once more. Process-wide
    /// (every runtime shares the engine); safe while invocations run.
    /// Returns the bytes released. `wop serve` calls it after
    /// `idleReleaseMs` without an invocation.
    pub fn release_idle_memory(&self) -> usize {
        crate::engine::release_idle_memory()
    }

    /// The on-disk cache file for an entry sha256 (for operators and tests).
    pub fn cache_path(&self, entry_sha256: &str) -> Option<PathBuf> {
        self.inner.kinds.components.cache_path(entry_sha256)
    }

    /// Every configured MCP server (`ctx.mcp`) by id: its state and
    /// counters as last seen. Passive: starts, pings and waits on nothing
    /// (a metrics scrape calls it).
    pub fn mcp_servers(&self) -> Vec<(String, wop_gate::mcp::ServerStatus)> {
        self.inner.mcp.hub().statuses()
    }

    /// The loaded packs (component and ABI v1 packs).
    pub fn packs(&self) -> Vec<PackSummary> {
        self.inner.registry.summaries()
    }

    /// Usage records in `scope` (every tenant's runs, one tenant's, or one
    /// tenant's run), optionally of one pack (persisted in the effect
    /// store, so they survive restarts with a durable store).
    pub async fn usage(
        &self,
        scope: UsageScope<'_>,
        pack: Option<&str>,
    ) -> Result<Vec<Usage>, MeterError> {
        self.inner.meter.usage(scope, pack).await
    }

    /// Roll-ups per run and per pack (`pack@version`) in `scope` (see
    /// [`Meter::rollup`](crate::metering::Meter::rollup) for the keys).
    pub async fn usage_rollup(
        &self,
        scope: UsageScope<'_>,
        pack: Option<&str>,
    ) -> Result<(BTreeMap<String, Rollup>, BTreeMap<String, Rollup>), MeterError> {
        self.inner.meter.rollup(scope, pack).await
    }

    /// One page of every tenant's runs' usage (operators): up to `limit`
    /// runs (at most [`MAX_ROLLUP_PAGE`](wop_effects::meter::MAX_ROLLUP_PAGE))
    /// after the cursor `after`, and the packs' all-time totals. What a
    /// service answers per request: the number of runs is the tenants'.
    pub async fn usage_rollup_page(
        &self,
        pack: Option<&str>,
        after: Option<&str>,
        limit: usize,
    ) -> Result<wop_effects::meter::RollupPage, MeterError> {
        self.inner.meter.rollup_page(pack, after, limit).await
    }

    /// Stores the usage that [`UsageCommit::Deferred`](wop_effects::UsageCommit::Deferred)
    /// is still holding; returns when it is durable. Call it at drain
    /// (`wop serve` does, after the last invocation). With durable usage
    /// it returns at once.
    pub async fn flush_usage(&self) -> Result<(), MeterError> {
        self.inner.meter.flush().await
    }

    /// The budget ledger of `tenant`'s run `run`, if the run has started.
    pub async fn ledger(&self, tenant: &str, run: &str) -> Result<Option<Ledger>, MeterError> {
        self.inner.meter.ledger(tenant, run).await
    }
}

/// The pack candidates under `dir`: subdirectories (symlinks to
/// directories included) and `.wasm` files (whatever their kind: the
/// bounded reader refuses those that are not regular files), sorted.
fn pack_entries(dir: &Path) -> Result<Vec<PathBuf>, LoadError> {
    let rd = std::fs::read_dir(dir)
        .map_err(|e| LoadError::Io(format!("cannot read packs dir {}: {e}", dir.display())))?;
    let mut v: Vec<PathBuf> = rd
        .filter_map(Result::ok)
        .map(|e| e.path())
        // Hidden entries are not packs: `wop install` keeps its archives
        // (`.archives/`) and staging directories there.
        .filter(|p| {
            !p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with('.'))
        })
        .filter(|p| p.is_dir() || p.extension().is_some_and(|x| x == "wasm"))
        .collect();
    v.sort();
    Ok(v)
}
