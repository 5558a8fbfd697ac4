//! The embedder API: [`Runtime`], built from a [`RuntimeConfig`].

use crate::bindings::{NodePackPre, node, types};
use crate::cache::{CacheStats, CompileCache};
use crate::capability::Capability;
use crate::classify::{Fault, classify};
use crate::effects::{EffectError, EffectState, EffectSummary, EffectTimings, Effects};
use crate::error::{ConfigError, ErrorCode, LoadError, NodeError};
use crate::events::Event;
use crate::events::EventSink;
use crate::gate::{Gate, GateConfig, MeterSite};
use crate::invoke::{Binding, Outcome, Usage};
use crate::invoke::{
    Call, ExecParams, InvocationReport, InvokeRequest, Principal, Returned, execute, interpret,
};
use crate::limits::Limits;
use crate::manifest::Manifest;
use crate::metering::{Ledger, Meter, MeterError, Rollup, RunBounds};
use crate::pack::{Inspection, judge_imports, read_pack, require_component, resolve};
use crate::policy::{FsGrant, Policy};
use crate::state::{HostState, InvocationScope};
use crate::store::KvStore;
use crate::tools::http_tool::HttpTool;
use crate::tools::pack_tool::PackTool;
use crate::tools::{
    Egress, RegisteredTool, ToolAuth, ToolDescriptor, ToolProvider, ToolRegistry, ToolSource,
};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::sync::{OnceLock, Weak};
use std::time::Duration;
use wasmtime::Engine;
use wasmtime::component::{Component, Linker};

/// How to build a [`Runtime`].
#[derive(Clone, Default)]
pub struct RuntimeConfig {
    policy: Policy,
    cache_dir: Option<PathBuf>,
    sink: Option<Arc<dyn EventSink>>,
    effect_store: Option<Arc<dyn KvStore>>,
    executor_id: Option<String>,
    tools: Vec<RegisteredTool>,
    resolver: Option<Arc<dyn crate::egress::Resolver>>,
}

impl RuntimeConfig {
    /// A configuration with the default policy, no disk cache and no sink.
    pub fn new() -> Self {
        Self::default()
    }

    /// The operator policy. By default: default limits, no grants beyond
    /// the base capabilities.
    pub fn policy(&mut self, policy: Policy) -> &mut Self {
        self.policy = policy;
        self
    }

    /// Where compiled packs are cached on disk. By default nothing is
    /// written to disk (compilation is still cached in memory).
    pub fn cache_dir(&mut self, dir: impl Into<PathBuf>) -> &mut Self {
        self.cache_dir = Some(dir.into());
        self
    }

    /// Receives every event. By default events are only returned in reports.
    pub fn event_sink(&mut self, sink: Arc<dyn EventSink>) -> &mut Self {
        self.sink = Some(sink);
        self
    }

    /// Where effect claims are stored. By default an in-memory store, which
    /// does **not** survive a restart; use a [`crate::store::SledStore`]
    /// (the embedded durable default of the CLI) or share one store between
    /// executors so duplicates across processes are caught.
    pub fn effect_store(&mut self, store: Arc<dyn KvStore>) -> &mut Self {
        self.effect_store = Some(store);
        self
    }

    /// This executor's identity in effect claims. By default
    /// `wop-<pid>-<start time>`.
    pub fn executor_id(&mut self, id: impl Into<String>) -> &mut Self {
        self.executor_id = Some(id.into());
        self
    }

    /// How safe-fetch resolves host names. By default the system resolver
    /// ([`crate::egress::SystemResolver`]). Every answer is still judged
    /// whole by the egress guard; tests inject fakes here.
    pub fn resolver(&mut self, resolver: Arc<dyn crate::egress::Resolver>) -> &mut Self {
        self.resolver = Some(resolver);
        self
    }

    /// Registers a tool implemented by the embedder (`host-extension`).
    /// By default there are none.
    pub fn tool(&mut self, tool: RegisteredTool) -> &mut Self {
        self.tools.push(tool);
        self
    }
}

/// A loaded pack, ready to invoke.
pub(crate) struct LoadedPack {
    pub inspection: Inspection,
    pub pre: NodePackPre<HostState>,
}

/// A summary of a loaded pack.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PackSummary {
    /// Pack name.
    pub name: String,
    /// Pack version.
    pub version: String,
    /// The node types it registered.
    pub type_ids: Vec<String>,
    /// Effective capabilities.
    pub capabilities: BTreeSet<Capability>,
    /// Effective limits.
    pub limits: Limits,
}

/// Counters proving what the runtime did (for tests and operators).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RuntimeStats {
    /// Compile cache counters.
    pub cache: CacheStats,
    /// Component instances created (one per invocation and per describe()).
    pub instantiations: u64,
}

pub(crate) struct Inner {
    gate: Arc<Gate>,
    egress: Arc<crate::egress::Egress>,
    meter: Meter,
    engine: &'static Engine,
    fingerprint: String,
    linker: Linker<HostState>,
    cache: CompileCache,
    policy: Policy,
    sink: Option<Arc<dyn EventSink>>,
    /// typeId → pack.
    packs: RwLock<BTreeMap<String, Arc<LoadedPack>>>,
    instantiations: AtomicU64,
    /// ABI v1 core-module packs (see `abi_v1`).
    core: crate::abi_v1::Registry,
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

fn build_gate(
    config: &RuntimeConfig,
    me: &Arc<OnceLock<Weak<Inner>>>,
) -> Result<Gate, ConfigError> {
    let policy = &config.policy;
    let e = &policy.effects;
    let max_result_bytes = e.max_result_bytes.unwrap_or(1 << 20);
    let mut registry = ToolRegistry::default();
    for t in &policy.tools {
        let provider: Arc<dyn ToolProvider> = match (&t.url, &t.pack_type) {
            (Some(url), None) => Arc::new(
                HttpTool::new(url, t.method.as_deref().unwrap_or("POST"), max_result_bytes)
                    .map_err(|m| ConfigError::Policy(format!("tools `{}`: {m}", t.id)))?,
            ),
            (None, Some(ty)) => Arc::new(PackTool::new(
                ty.clone(),
                e.max_tool_depth.unwrap_or(3),
                me.clone(),
            )),
            _ => {
                return Err(ConfigError::Policy(format!(
                    "tools `{}`: set exactly one of url or packType",
                    t.id
                )));
            }
        };
        let mut d = ToolDescriptor::new(
            t.id.clone(),
            if t.url.is_some() {
                ToolSource::Connector
            } else {
                ToolSource::NodePack
            },
            t.safety_tier,
        );
        d.title = t.title.clone();
        d.description = t.description.clone();
        d.input_schema = t.input_schema.clone();
        d.replay_policy = t.replay_policy;
        d.auth = (!t.scopes.is_empty()).then(|| ToolAuth {
            scopes: t.scopes.clone(),
            credential_ref: false,
        });
        d.egress = Some(if t.url.is_some() {
            Egress::HostOwned
        } else {
            Egress::None
        });
        registry
            .register(RegisteredTool {
                descriptor: d,
                tenants: t.tenants.clone(),
                rate: t.rate_limit,
                timeout: Duration::from_millis(t.timeout_ms.unwrap_or(10_000)),
                provider,
            })
            .map_err(ConfigError::Policy)?;
    }
    for t in &config.tools {
        registry.register(t.clone()).map_err(ConfigError::Policy)?;
    }
    let kv = config
        .effect_store
        .clone()
        .unwrap_or_else(|| Arc::new(crate::store::MemoryStore::new()));
    let executor = config
        .executor_id
        .clone()
        .unwrap_or_else(|| format!("wop-{}-{}", std::process::id(), crate::effects::now_ms()));
    let lease_ms = e
        .lease_ms
        .unwrap_or_else(|| policy.limits().wall_clock_ms.saturating_add(5_000));
    Ok(Gate::new(
        registry,
        Effects::new(kv, executor),
        GateConfig {
            timings: EffectTimings {
                lease: Duration::from_millis(lease_ms),
                in_flight_wait: Duration::from_millis(e.in_flight_wait_ms.unwrap_or(2_000)),
                poll: Duration::from_millis(25),
            },
            max_result_bytes,
        },
    ))
}

impl Runtime {
    pub(crate) fn from_inner(inner: Arc<Inner>) -> Self {
        Self { inner }
    }

    /// The gate (tool catalog and effect store).
    pub fn gate(&self) -> &Gate {
        &self.inner.gate
    }

    /// The tool catalog a principal may see in a tenant, sorted by `toolId`.
    pub fn catalog(&self, principal: &Principal, tenant: &str) -> Vec<ToolDescriptor> {
        self.inner.gate.catalog(principal, tenant)
    }

    /// A run's effects: `{effectId, nodeId, attempt, keying, state, at}`.
    pub async fn effects(&self, run_id: &str) -> Result<Vec<EffectSummary>, EffectError> {
        self.inner.gate.effects().list_run(run_id).await
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
        let days = self
            .inner
            .policy
            .effects
            .retention_days
            .unwrap_or(14)
            .max(14);
        let cutoff = crate::effects::now_ms().saturating_sub(days * 86_400_000);
        self.inner.gate.effects().purge(cutoff).await
    }

    /// Builds a runtime. The wasm engine is created once per process and
    /// shared by every runtime.
    pub fn new(config: &RuntimeConfig) -> Result<Runtime, ConfigError> {
        let engine = crate::engine::engine()?;
        let linker = crate::host::linker(engine)
            .map_err(|e| ConfigError::Engine(format!("cannot link host interfaces: {e:#}")))?;
        if let Some(d) = &config.cache_dir {
            std::fs::create_dir_all(d).map_err(|e| {
                ConfigError::Io(format!("cannot create cache dir {}: {e}", d.display()))
            })?;
        }
        let me = Arc::new(OnceLock::new());
        let gate = Arc::new(build_gate(config, &me)?);
        let meter = Meter::new(gate.effects().kv().clone(), config.policy.prices.clone());
        let rt = Runtime {
            inner: Arc::new(Inner {
                gate,
                egress: Arc::new(crate::egress::Egress::new(
                    &config.policy,
                    config.resolver.clone(),
                )),
                meter,
                engine,
                fingerprint: crate::engine::fingerprint(engine),
                linker,
                cache: CompileCache::new(config.cache_dir.clone()),
                policy: config.policy.clone(),
                sink: config.sink.clone(),
                packs: RwLock::new(BTreeMap::new()),
                instantiations: AtomicU64::new(0),
                core: Default::default(),
            }),
        };
        let _ = me.set(Arc::downgrade(&rt.inner));
        Ok(rt)
    }

    /// The operator policy in force.
    pub fn policy(&self) -> &Policy {
        &self.inner.policy
    }

    /// Counters: compilations, cache hits, instantiations.
    pub fn stats(&self) -> RuntimeStats {
        RuntimeStats {
            cache: self.inner.cache.stats(),
            instantiations: self.inner.instantiations.load(Ordering::Relaxed),
        }
    }

    /// The on-disk cache file for an entry sha256 (for operators and tests).
    pub fn cache_path(&self, entry_sha256: &str) -> Option<PathBuf> {
        self.inner
            .cache
            .path_for(entry_sha256, &self.inner.fingerprint)
    }

    async fn compile(&self, sha: &str, wasm: Vec<u8>) -> Result<Component, LoadError> {
        let inner = self.inner.clone();
        let sha = sha.to_owned();
        let res = tokio::task::spawn_blocking(move || {
            inner
                .cache
                .get_or_compile(inner.engine, &inner.fingerprint, &sha, &wasm)
        })
        .await
        .map_err(|e| LoadError::Io(format!("compile task failed: {e}")))?;
        res.map_err(|e| LoadError::Component {
            code: ErrorCode::PackValidationFailed,
            message: format!(
                "the entry is not a valid WebAssembly component ({e:#}); build it with `cargo build --target wasm32-wasip2` or another component toolchain"
            ),
        })
    }

    /// Validates a pack and judges its imports without running any of its
    /// code. A pack that would be refused still yields an inspection, with
    /// the reason in [`Inspection::refusal`].
    pub async fn inspect_pack(&self, dir: &Path) -> Result<Inspection, LoadError> {
        // ABI v1 core modules (pack.json `language: "wasm"`, or a bare .wasm).
        if crate::abi_v1::is_core_pack(dir) {
            return crate::abi_v1::inspect(dir, &self.inner.policy).await;
        }
        Ok(self.inspect_inner(dir).await?.0)
    }

    async fn inspect_inner(&self, dir: &Path) -> Result<(Inspection, Component), LoadError> {
        let (manifest, wasm, sha) = read_pack(dir)?;
        require_component(&manifest)?;
        let component = self.compile(&sha, wasm).await?;
        let r = resolve(&self.inner.policy, &manifest);
        let ty = component.component_type();
        let (imports, refusal) = judge_imports(
            ty.imports(self.inner.engine).map(|(name, _)| name),
            &r.effective,
        );
        Ok((
            Inspection {
                dir: dir.to_path_buf(),
                requested: manifest.wop.capabilities.clone(),
                manifest,
                sha256: sha,
                imports,
                granted: r.granted,
                effective: r.effective,
                limits: r.limits,
                clamps: r.clamps,
                filesystem: r.filesystem,
                egress: r.egress,
                refusal: refusal.map(|e| e.to_node_error()),
            },
            component,
        ))
    }

    /// Loads a pack directory: validates `pack.json`, verifies the entry's
    /// sha256, compiles (once; cached), refuses forbidden or ungranted
    /// imports before any code runs, checks `describe()` against the
    /// manifest, and registers the pack's node types.
    pub async fn load_pack(&self, dir: &Path) -> Result<PackSummary, LoadError> {
        // ABI v1 core modules (pack.json `language: "wasm"`, or a bare .wasm).
        if crate::abi_v1::is_core_pack(dir) {
            let pack =
                crate::abi_v1::load(dir, &self.inner.policy, &self.inner.instantiations).await?;
            return self.inner.core.register(pack, |t| {
                self.pack_for(t).map(|p| p.inspection.manifest.name.clone())
            });
        }
        let (insp, component) = self.inspect_inner(dir).await?;
        if let Some(refusal) = &insp.refusal {
            // Re-derive the typed error from the first offending import.
            let (_, err) = judge_imports(
                insp.imports.iter().map(|i| i.name.as_str()),
                &insp.effective,
            );
            return Err(err.unwrap_or_else(|| LoadError::Component {
                code: ErrorCode::SandboxCapabilityDenied,
                message: refusal.message.clone(),
            }));
        }
        let pre = self
            .inner
            .linker
            .instantiate_pre(&component)
            .and_then(NodePackPre::new)
            .map_err(|e| LoadError::Component {
                code: ErrorCode::PackValidationFailed,
                message: format!(
                    "the component does not fit the openwop:node-pack@0.1.0 world: {e:#}"
                ),
            })?;
        let pack = LoadedPack {
            inspection: insp,
            pre,
        };
        self.check_describe(&pack).await?;
        let summary = summary(&pack);
        let pack = Arc::new(pack);
        let mut packs = match self.inner.packs.write() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        for t in &summary.type_ids {
            if let Some(owner) = self.inner.core.owner(t) {
                return Err(LoadError::validation(
                    "$.nodes",
                    format!("typeId `{t}` is already registered by pack `{owner}`"),
                ));
            }
            if let Some(other) = packs.get(t)
                && other.inspection.manifest.name != summary.name
            {
                return Err(LoadError::validation(
                    "$.nodes",
                    format!(
                        "typeId `{t}` is already registered by pack `{}`",
                        other.inspection.manifest.name
                    ),
                ));
            }
        }
        packs.retain(|_, p| p.inspection.manifest.name != summary.name);
        for t in &summary.type_ids {
            packs.insert(t.clone(), pack.clone());
        }
        Ok(summary)
    }

    async fn check_describe(&self, pack: &LoadedPack) -> Result<(), LoadError> {
        let m = &pack.inspection.manifest;
        let scope = InvocationScope {
            run_id: "wop:load".to_owned(),
            node_id: "describe".to_owned(),
            tenant_id: "wop:load".to_owned(),
            attempt: 1,
            type_id: String::new(),
            capabilities: Capability::BASE.into_iter().collect(),
            principal: Principal::default(),
            pack: m.name.clone(),
            declared_tools: Vec::new(),
            granted_tools: Vec::new(),
            egress: None,
            depth: 0,
        };
        let exec = execute(self.params(pack, scope), Call::Describe).await;
        let info = match exec.result {
            Ok(Returned::Describe(info)) => info,
            Ok(Returned::Invoke(_)) => {
                return Err(LoadError::Io(
                    "describe returned an invoke result".to_owned(),
                ));
            }
            Err(c) => {
                return Err(LoadError::Component {
                    code: c.error.code.parse_code(),
                    message: format!("describe() failed at load: {}", c.error.message),
                });
            }
        };
        check_description(m, &info)
    }

    fn params<'a>(&'a self, pack: &'a LoadedPack, scope: InvocationScope) -> ExecParams<'a> {
        ExecParams {
            engine: self.inner.engine,
            pre: &pack.pre,
            scope,
            limits: pack.inspection.limits,
            fs: pack.inspection.filesystem.as_ref(),
            instantiations: &self.inner.instantiations,
            gate: self.inner.gate.clone(),
            bounds: RunBounds::default(),
            run_meter: None,
            binding: Binding::default(),
            breakdown: self
                .inner
                .policy
                .metering
                .host_call_breakdown
                .unwrap_or(true),
        }
    }

    /// The loaded packs (component and ABI v1 core-module packs).
    pub fn packs(&self) -> Vec<PackSummary> {
        let packs = match self.inner.packs.read() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        let mut seen = BTreeSet::new();
        let mut out: Vec<PackSummary> = packs
            .values()
            .filter(|p| seen.insert(p.inspection.manifest.name.clone()))
            .map(|p| summary(p))
            .collect();
        out.extend(self.inner.core.summaries());
        out
    }

    /// The registry of loaded ABI v1 core-module packs.
    pub(crate) fn core_packs(&self) -> &crate::abi_v1::Registry {
        &self.inner.core
    }

    fn pack_for(&self, type_id: &str) -> Option<Arc<LoadedPack>> {
        let packs = match self.inner.packs.read() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        packs.get(type_id).cloned()
    }

    /// Runs one node invocation in a fresh sandbox. Never panics on
    /// anything the pack does; every failure is in the report's outcome.
    pub async fn invoke(&self, req: InvokeRequest) -> InvocationReport {
        self.invoke_at_depth(req, 0).await
    }

    pub(crate) async fn invoke_at_depth(&self, req: InvokeRequest, depth: u32) -> InvocationReport {
        // The pack: a component, or an ABI v1 core module (its own
        // execution path; the same metering, budgets and bounds below).
        let core = self.inner.core.get(&req.type_id);
        let component = if core.is_none() {
            self.pack_for(&req.type_id)
        } else {
            None
        };
        let inspection = match (&core, &component) {
            (Some(c), _) => &c.inspection,
            (None, Some(p)) => &p.inspection,
            (None, None) => {
                return InvocationReport {
                    outcome: Err(NodeError::runtime(
                        ErrorCode::NotFound,
                        format!(
                            "no loaded pack implements node type `{}`; load its pack first",
                            req.type_id
                        ),
                        crate::details! {"typeId" => req.type_id},
                    )),
                    events: Vec::new(),
                    usage: Default::default(),
                };
            }
        };
        let policy = &self.inner.policy;
        let node_id = req.context.node_id.clone();
        let budget = req.budget.unwrap_or_else(|| policy.runs.budget());
        let bounds = req.bounds.unwrap_or_else(|| policy.runs.bounds());

        // The run's ledger: budget reserved at its first invocation.
        let mut events = Vec::new();
        let refuse = |events: Vec<Event>, fault: Fault| {
            let c = classify(&fault, &node_id);
            let mut events = events;
            events.extend(c.breach);
            (Err(c.error), events)
        };
        let ledger = match budget.validate() {
            Err(e) => {
                return self.report(
                    &req,
                    Err(NodeError::runtime(
                        ErrorCode::ValidationError,
                        format!("invalid run budget: {e}"),
                        Default::default(),
                    )),
                    events,
                    Usage::default(),
                );
            }
            Ok(()) => {
                match self
                    .inner
                    .meter
                    .open_run(
                        &req.context.run_id,
                        &budget,
                        bounds.run_timeout_ms.is_some(),
                    )
                    .await
                {
                    Ok((l, ev)) => {
                        events.extend(ev);
                        l
                    }
                    Err(e) => {
                        return self.report(&req, Err(NodeError::runtime(ErrorCode::InternalError, format!("the run's budget could not be read, so the node did not run: {e}"), Default::default())), events, Usage::default());
                    }
                }
            }
        };
        if let Some(d) = ledger.exhausted {
            let fault = Fault::Budget {
                kind: d.cap_kind(),
                dimension: d.as_str(),
                limit: ledger.limit_of(d).unwrap_or(0.0).ceil() as u64,
                observed: ledger.used_of(d).ceil() as u64,
            };
            let (outcome, events) = refuse(events, fault);
            return self.report(&req, outcome, events, Usage::default());
        }

        // Limits for this invocation: input-scaled fuel, the run's fuel
        // budget and the run's remaining wall clock.
        let mut limits = inspection.limits;
        let ceiling = policy.limits().fuel;
        if let Some(f) = inspection
            .manifest
            .wop
            .limits
            .scaled_fuel(ceiling, &req.inputs)
        {
            limits.fuel = f;
        }
        let mut binding = Binding::default();
        if let Some(left) = ledger.fuel_left() {
            if left == 0 {
                let fault = Fault::Budget {
                    kind: "budget-fuel",
                    dimension: "fuel",
                    limit: budget.max_fuel.unwrap_or(0),
                    observed: ledger.consumed.fuel,
                };
                let (outcome, events) = refuse(events, fault);
                return self.report(&req, outcome, events, Usage::default());
            }
            if left < limits.fuel {
                limits.fuel = left;
                binding.fuel_budget = Some(left);
            }
        }
        if let Some(run_ms) = bounds.run_timeout_ms {
            let elapsed = crate::effects::now_ms().saturating_sub(ledger.started_at_ms);
            let left = run_ms.saturating_sub(elapsed);
            if left == 0 {
                let (outcome, events) = refuse(
                    events,
                    Fault::RunTimeout {
                        limit_ms: run_ms,
                        elapsed_ms: elapsed,
                    },
                );
                return self.report(&req, outcome, events, Usage::default());
            }
            if left < limits.wall_clock_ms {
                limits.wall_clock_ms = left;
                binding.run_timeout = Some((run_ms, elapsed));
            }
        }

        let (outcome, exec_events, mut usage) = match (core, component) {
            (Some(core), _) => {
                let r = core
                    .invoke(&req, &self.inner.instantiations, limits, binding)
                    .await;
                (r.outcome, r.events, r.usage)
            }
            (None, Some(pack)) => {
                let m = &pack.inspection.manifest;
                let scope = InvocationScope {
                    run_id: req.context.run_id.clone(),
                    node_id: req.context.node_id.clone(),
                    tenant_id: req.context.tenant_id.clone(),
                    attempt: req.context.attempt,
                    type_id: req.type_id.clone(),
                    capabilities: pack.inspection.effective.clone(),
                    principal: req.principal.clone(),
                    pack: m.name.clone(),
                    declared_tools: m.wop.tools.clone(),
                    granted_tools: policy.grant(&m.name).tools,
                    egress: Some(crate::egress::PackEgress {
                        engine: self.inner.egress.clone(),
                        allow: pack.inspection.egress.allow.clone(),
                    }),
                    depth,
                };
                // Tool calls are charged to the run only when it has a budget.
                let run_meter = (!ledger.budget.is_empty()).then(|| MeterSite {
                    meter: self.inner.meter.clone(),
                    run_id: req.context.run_id.clone(),
                    node_id: node_id.clone(),
                });
                self.run_component(&pack, &req, scope, limits, bounds, run_meter, binding)
                    .await
            }
            (None, None) => {
                return self.report(
                    &req,
                    Err(NodeError::runtime(
                        ErrorCode::InternalError,
                        "the pack was unloaded during the call",
                        Default::default(),
                    )),
                    events,
                    Usage::default(),
                );
            }
        };
        events.extend(exec_events);

        // Cost, persistence and the budget's view of this invocation.
        let prices = self.inner.meter.prices();
        usage.currency = prices.currency.clone();
        usage.cost = prices.invocation_cost(&usage) + prices.tool_call_total(&usage);
        // A budget breach reported by the sandbox (fuel budget) follows the
        // ledger's `budget.exhausted`: exhausted → cap.breached.
        let (budget_breaches, rest): (Vec<Event>, Vec<Event>) = std::mem::take(&mut events)
            .into_iter()
            .partition(|e| matches!(e, Event::CapBreached { kind, .. } if kind == "budget-fuel"));
        events = rest;
        match self.inner.meter.record(&usage, &node_id).await {
            Ok(ev) => events.extend(ev),
            Err(e) => tracing::error!(run = %usage.run_id, error = %e, "cannot persist usage"),
        }
        events.extend(budget_breaches);
        self.report(&req, outcome, events, usage)
    }

    /// Runs a component pack's `invoke` in a fresh sandbox.
    #[allow(clippy::too_many_arguments)]
    async fn run_component(
        &self,
        pack: &LoadedPack,
        req: &InvokeRequest,
        scope: InvocationScope,
        limits: Limits,
        bounds: RunBounds,
        run_meter: Option<MeterSite>,
        binding: Binding,
    ) -> (Result<Outcome, NodeError>, Vec<Event>, Usage) {
        let m = &pack.inspection.manifest;
        let wit_req = node::Request {
            context: types::NodeContext {
                run_id: req.context.run_id.clone(),
                node_id: req.context.node_id.clone(),
                tenant_id: req.context.tenant_id.clone(),
                attempt: req.context.attempt,
                type_id: req.type_id.clone(),
            },
            inputs: req.inputs.to_string(),
            config: req.config.to_string(),
            resume: req.resume.as_ref().map(|v| v.to_string()),
        };
        let mut params = self.params(pack, scope);
        params.limits = limits;
        params.bounds = bounds;
        params.run_meter = run_meter;
        params.binding = binding;
        let exec = execute(params, Call::Invoke(wit_req)).await;
        let mut usage = exec.usage;
        usage.pack = m.name.clone();
        usage.pack_version = m.version.clone();
        let mut events = exec.events;
        let outcome = match exec.result {
            Ok(Returned::Invoke(r)) => {
                match interpret(r, &limits, &req.context.node_id, &mut usage) {
                    Ok(o) => Ok(o),
                    Err(c) => {
                        if let Some(b) = c.breach {
                            events.push(b);
                        }
                        Err(c.error)
                    }
                }
            }
            Ok(Returned::Describe(_)) => Err(NodeError::runtime(
                ErrorCode::InternalError,
                "invoke returned a describe result",
                Default::default(),
            )),
            Err(c) => Err(c.error),
        };
        (outcome, events, usage)
    }

    /// Delivers events to the sink and builds the report.
    fn report(
        &self,
        req: &InvokeRequest,
        outcome: Result<Outcome, NodeError>,
        events: Vec<Event>,
        usage: Usage,
    ) -> InvocationReport {
        if let Some(sink) = &self.inner.sink {
            for e in &events {
                sink.emit(&req.context.run_id, &req.context.node_id, e);
            }
        }
        InvocationReport {
            outcome,
            events,
            usage,
        }
    }

    /// Usage records, optionally of one run and/or one pack (persisted in
    /// the effect store, so they survive restarts with a durable store).
    pub async fn usage(
        &self,
        run: Option<&str>,
        pack: Option<&str>,
    ) -> Result<Vec<Usage>, MeterError> {
        self.inner.meter.usage(run, pack).await
    }

    /// Roll-ups per run and per pack (`pack@version`).
    pub async fn usage_rollup(
        &self,
        run: Option<&str>,
        pack: Option<&str>,
    ) -> Result<(BTreeMap<String, Rollup>, BTreeMap<String, Rollup>), MeterError> {
        self.inner.meter.rollup(run, pack).await
    }

    /// A run's budget ledger, if the run has started.
    pub async fn ledger(&self, run: &str) -> Result<Option<Ledger>, MeterError> {
        self.inner.meter.ledger(run).await
    }
}

fn summary(p: &LoadedPack) -> PackSummary {
    let m = &p.inspection.manifest;
    PackSummary {
        name: m.name.clone(),
        version: m.version.clone(),
        type_ids: m.nodes.iter().map(|n| n.type_id.clone()).collect(),
        capabilities: p.inspection.effective.clone(),
        limits: p.inspection.limits,
    }
}

/// The manifest and `describe()` must agree on name, version and node types.
fn check_description(m: &Manifest, info: &node::PackInfo) -> Result<(), LoadError> {
    if info.name != m.name {
        return Err(LoadError::validation(
            "$.name",
            format!(
                "pack.json says `{}` but describe() says `{}`",
                m.name, info.name
            ),
        ));
    }
    if info.version != m.version {
        return Err(LoadError::validation(
            "$.version",
            format!(
                "pack.json says `{}` but describe() says `{}`",
                m.version, info.version
            ),
        ));
    }
    let declared: BTreeSet<(&str, &str)> = m
        .nodes
        .iter()
        .map(|n| (n.type_id.as_str(), n.version.as_str()))
        .collect();
    let described: BTreeSet<(&str, &str)> = info
        .nodes
        .iter()
        .map(|n| (n.type_id.as_str(), n.version.as_str()))
        .collect();
    if declared != described {
        let fmt = |s: &BTreeSet<(&str, &str)>| {
            s.iter()
                .map(|(t, v)| format!("{t}@{v}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        return Err(LoadError::validation(
            "$.nodes",
            format!(
                "pack.json declares [{}] but describe() reports [{}]",
                fmt(&declared),
                fmt(&described)
            ),
        ));
    }
    Ok(())
}

/// Unused-field guard: the filesystem grant type is re-exported for hosts.
#[allow(dead_code)]
fn _fs(_: &FsGrant) {}

trait ParseCode {
    fn parse_code(&self) -> ErrorCode;
}

impl ParseCode for String {
    fn parse_code(&self) -> ErrorCode {
        serde_json::from_value(serde_json::Value::String(self.clone()))
            .unwrap_or(ErrorCode::SandboxInvocationError)
    }
}
