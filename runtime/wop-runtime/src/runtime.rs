//! The embedder API: [`Runtime`], built from a [`RuntimeConfig`].

use crate::bindings::{NodePackPre, node, types};
use crate::cache::{CacheStats, CompileCache};
use crate::invoke::{Call, ExecParams, Returned, execute};
use crate::registry::{ComponentPack, PackKind, Registry};
use crate::state::{HostState, InvocationScope};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::time::{Duration, Instant};
use wasmtime::Engine;
use wasmtime::component::{Component, Linker};
use wop_core::admission::{AdmissionInput, Binding, admit};
use wop_core::budget::{Ledger, Rollup, RunBounds};
use wop_core::capability::Capability;
use wop_core::classify::{Fault, classify};
use wop_core::error::{ConfigError, ErrorCode, LoadError, NodeError};
use wop_core::events::{Event, EventSink, Transport};
use wop_core::limits::Limits;
use wop_core::manifest::Manifest;
use wop_core::model::{InvocationReport, InvokeRequest, Outcome, Principal, Usage};
use wop_core::pack::{Inspection, judge_imports, require_component, resolve};
use wop_core::policy::Policy;
use wop_effects::effects::{EffectError, EffectState, EffectSummary, EffectTimings, Effects};
use wop_effects::store::KvStore;
use wop_effects::{Meter, MeterError};
use wop_gate::http_tool::HttpTool;
use wop_gate::pack_tool::{InvokerSlot, NodeInvoker, PackTool};
use wop_gate::tools::{
    Egress, RegisteredTool, ToolAuth, ToolDescriptor, ToolProvider, ToolRegistry, ToolSource,
};
use wop_gate::{CallSite, Gate, GateConfig, MeterSite, PackEgress};

/// How to build a [`Runtime`].
#[derive(Clone, Default)]
pub struct RuntimeConfig {
    policy: Policy,
    cache_dir: Option<PathBuf>,
    sink: Option<Arc<dyn EventSink>>,
    effect_store: Option<Arc<dyn KvStore>>,
    executor_id: Option<String>,
    tools: Vec<RegisteredTool>,
    resolver: Option<Arc<dyn wop_gate::Resolver>>,
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
    pub fn resolver(&mut self, resolver: Arc<dyn wop_gate::Resolver>) -> &mut Self {
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

/// What one component invocation runs with, after admission.
struct ComponentRun {
    scope: InvocationScope,
    site: CallSite,
    egress: PackEgress,
    limits: Limits,
    bounds: RunBounds,
    binding: Binding,
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
    egress: Arc<wop_gate::Egress>,
    meter: Meter,
    engine: &'static Engine,
    fingerprint: String,
    linker: Linker<HostState>,
    cache: CompileCache,
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
}

/// Node-pack tools run nested invocations through the runtime.
struct Nested(Weak<Inner>);

#[async_trait::async_trait]
impl NodeInvoker for Nested {
    async fn invoke_nested(&self, req: InvokeRequest, depth: u32) -> InvocationReport {
        match self.0.upgrade() {
            Some(inner) => Runtime { inner }.invoke_at_depth(req, depth).await,
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

fn build_gate(config: &RuntimeConfig, me: &InvokerSlot) -> Result<Gate, ConfigError> {
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
        .unwrap_or_else(|| Arc::new(wop_effects::store::MemoryStore::new()));
    let executor = config
        .executor_id
        .clone()
        .unwrap_or_else(|| format!("wop-{}-{}", std::process::id(), wop_core::time::now_ms()));
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
        let cutoff = wop_core::time::now_ms().saturating_sub(days * 86_400_000);
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
        let me: InvokerSlot = Arc::new(OnceLock::new());
        let gate = Arc::new(build_gate(config, &me)?);
        let mcp = wop_gate::mcp::McpGateway::new(config.policy.mcp.servers.clone())
            .map_err(ConfigError::Policy)?;
        let meter = Meter::new(gate.effects().kv().clone(), config.policy.prices.clone());
        let rt = Runtime {
            inner: Arc::new(Inner {
                gate,
                egress: Arc::new(wop_gate::Egress::new(
                    config.policy.egress.settings(),
                    config.resolver.clone(),
                )),
                meter,
                engine,
                fingerprint: crate::engine::fingerprint(engine),
                linker,
                cache: CompileCache::new(config.cache_dir.clone()),
                policy: config.policy.clone(),
                sink: config.sink.clone(),
                registry: Registry::default(),
                instantiations: AtomicU64::new(0),
                nested: OnceLock::new(),
                mcp: Arc::new(mcp),
            }),
        };
        let invoker: Arc<dyn NodeInvoker> = Arc::new(Nested(Arc::downgrade(&rt.inner)));
        let _ = me.set(Arc::downgrade(&invoker));
        // The slot holds a weak link; keep the invoker alive with the runtime.
        let _ = rt.inner.nested.set(invoker);
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
        // Signature and escalation are judged before the entry is read
        // or compiled (decision 0009).
        let (manifest, wasm, sha) = wop_core::pack::read_pack_trusted(dir, &self.inner.policy)?;
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
            return self.inner.registry.register(PackKind::AbiV1(pack));
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
        let pack = ComponentPack {
            inspection: insp,
            pre,
        };
        self.check_describe(&pack).await?;
        self.inner.registry.register(PackKind::Component(pack))
    }

    async fn check_describe(&self, pack: &ComponentPack) -> Result<(), LoadError> {
        let m = &pack.inspection.manifest;
        let scope = InvocationScope {
            run_id: "wop:load".to_owned(),
            node_id: "describe".to_owned(),
            tenant_id: "wop:load".to_owned(),
            attempt: 1,
            type_id: String::new(),
            capabilities: Capability::BASE.into_iter().collect(),
        };
        // describe() may call nothing but the base capabilities: no tools,
        // no egress, and (see `params`) no filesystem grant.
        let site = CallSite {
            principal: Principal::default(),
            context: wop_core::model::RunContext {
                run_id: scope.run_id.clone(),
                node_id: scope.node_id.clone(),
                tenant_id: scope.tenant_id.clone(),
                attempt: 1,
            },
            pack: m.name.clone(),
            declared: Vec::new(),
            granted: Vec::new(),
            deadline: Instant::now(),
            depth: 0,
            transport: Transport::Native,
            meter: None,
        };
        let mut params = self.params(pack, scope, site);
        params.fs = None;
        let exec = execute(params, Call::Describe).await;
        let info = match exec.result {
            Ok(Returned::Describe(info)) => info,
            Ok(Returned::Invoke(_)) => {
                return Err(LoadError::Io(
                    "describe returned an invoke result".to_owned(),
                ));
            }
            Err(c) => {
                return Err(LoadError::Component {
                    code: ErrorCode::parse(&c.error.code)
                        .unwrap_or(ErrorCode::SandboxInvocationError),
                    message: format!("describe() failed at load: {}", c.error.message),
                });
            }
        };
        check_description(m, &info)
    }

    fn params<'a>(
        &'a self,
        pack: &'a ComponentPack,
        scope: InvocationScope,
        site: CallSite,
    ) -> ExecParams<'a> {
        ExecParams {
            engine: self.inner.engine,
            pre: &pack.pre,
            scope,
            limits: pack.inspection.limits,
            fs: pack.inspection.filesystem.as_ref(),
            instantiations: &self.inner.instantiations,
            gate: self.inner.gate.clone(),
            site,
            egress: None,
            mcp: None,
            bounds: RunBounds::default(),
            binding: Binding::default(),
            breakdown: self.breakdown(),
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

    /// The loaded packs (component and ABI v1 core-module packs).
    pub fn packs(&self) -> Vec<PackSummary> {
        self.inner.registry.summaries()
    }

    /// The registry of loaded packs.
    pub(crate) fn registry(&self) -> &Registry {
        &self.inner.registry
    }

    /// Runs one node invocation in a fresh sandbox. Never panics on
    /// anything the pack does; every failure is in the report's outcome.
    pub async fn invoke(&self, req: InvokeRequest) -> InvocationReport {
        self.invoke_at_depth(req, 0).await
    }

    pub(crate) async fn invoke_at_depth(&self, req: InvokeRequest, depth: u32) -> InvocationReport {
        // The pack: a component, or an ABI v1 core module (its own
        // execution path; the same metering, budgets and bounds below).
        let Some(pack) = self.inner.registry.get(&req.type_id) else {
            return InvocationReport {
                outcome: Err(NodeError::runtime(
                    ErrorCode::NotFound,
                    format!(
                        "no loaded pack implements node type `{}`; load its pack first",
                        req.type_id
                    ),
                    wop_core::details! {"typeId" => req.type_id},
                )),
                events: Vec::new(),
                usage: Default::default(),
            };
        };
        let inspection = pack.inspection();
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
        let admitted = admit(AdmissionInput {
            ledger: &ledger,
            bounds: &bounds,
            limits: inspection.limits,
            request: &inspection.manifest.wop.limits,
            fuel_ceiling: policy.limits().fuel,
            inputs: &req.inputs,
            now_ms: wop_core::time::now_ms(),
        });
        let (limits, binding) = match admitted {
            Ok(a) => (a.limits, a.binding),
            Err(fault) => {
                let (outcome, events) = refuse(events, fault);
                return self.report(&req, outcome, events, Usage::default());
            }
        };

        let (outcome, exec_events, mut usage) = match pack.as_ref() {
            PackKind::AbiV1(core) => {
                let r = core
                    .invoke(
                        &req,
                        &self.inner.instantiations,
                        limits,
                        binding,
                        self.breakdown(),
                    )
                    .await;
                (r.outcome, r.events, r.usage)
            }
            PackKind::Component(pack) => {
                let m = &pack.inspection.manifest;
                let scope = InvocationScope {
                    run_id: req.context.run_id.clone(),
                    node_id: req.context.node_id.clone(),
                    tenant_id: req.context.tenant_id.clone(),
                    attempt: req.context.attempt,
                    type_id: req.type_id.clone(),
                    capabilities: pack.inspection.effective.clone(),
                };
                let site = CallSite {
                    principal: req.principal.clone(),
                    context: req.context.clone(),
                    pack: m.name.clone(),
                    declared: m.wop.tools.clone(),
                    granted: policy.grant(&m.name).tools,
                    // Set when the invocation starts.
                    deadline: Instant::now(),
                    depth,
                    transport: Transport::Native,
                    // Tool calls are charged to the run only when it has a budget.
                    meter: (!ledger.budget.is_empty()).then(|| MeterSite {
                        meter: self.inner.meter.clone(),
                        run_id: req.context.run_id.clone(),
                        node_id: node_id.clone(),
                    }),
                };
                let egress = PackEgress {
                    engine: self.inner.egress.clone(),
                    allow: pack.inspection.egress.allow.clone(),
                };
                let run = ComponentRun {
                    scope,
                    site,
                    egress,
                    limits,
                    bounds,
                    binding,
                };
                self.run_component(pack, &req, run).await
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
    async fn run_component(
        &self,
        pack: &ComponentPack,
        req: &InvokeRequest,
        run: ComponentRun,
    ) -> (Result<Outcome, NodeError>, Vec<Event>, Usage) {
        let ComponentRun {
            scope,
            site,
            egress,
            limits,
            bounds,
            binding,
        } = run;
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
        let mut params = self.params(pack, scope, site);
        params.limits = limits;
        params.bounds = bounds;
        params.egress = Some(egress);
        params.mcp = Some(
            self.inner
                .mcp
                .for_pack(m.wop.mcp.clone(), self.inner.policy.grant(&m.name).mcp),
        );
        params.binding = binding;
        let exec = execute(params, Call::Invoke(wit_req)).await;
        let mut usage = exec.usage;
        usage.pack = m.name.clone();
        usage.pack_version = m.version.clone();
        let mut events = exec.events;
        let outcome = match exec.result {
            Ok(Returned::Invoke(r)) => {
                let (r, size) = wop_core::outcome::interpret(
                    crate::invoke::pack_return(r),
                    limits.output_bytes,
                    true,
                    &exec.verdicts,
                    &req.context.node_id,
                );
                usage.output_bytes = size;
                r.map_err(|c| {
                    events.extend(c.breach);
                    c.error
                })
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
