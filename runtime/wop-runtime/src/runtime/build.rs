//! Building a [`super::Runtime`] from its configuration: the config, the gate
//! and the parts a runtime holds.

use super::Inner;
use crate::component::Components;
use crate::kind::Kinds;
use crate::registry::Registry;
use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use wop_core::error::ConfigError;
use wop_core::events::EventSink;
use wop_core::policy::Policy;
use wop_effects::Meter;
use wop_effects::effects::{EffectTimings, Effects};
use wop_effects::store::KvStore;
use wop_gate::http_tool::HttpTool;
use wop_gate::pack_tool::{InvokerSlot, PackTool};
use wop_gate::tools::{
    Egress, RegisteredTool, ToolAuth, ToolDescriptor, ToolProvider, ToolRegistry, ToolSource,
};
use wop_gate::{Gate, GateConfig};

/// How to build a [`Runtime`](super::Runtime).
#[derive(Clone, Default)]
pub struct RuntimeConfig {
    policy: Policy,
    cache_dir: Option<PathBuf>,
    sink: Option<Arc<dyn EventSink>>,
    effect_store: Option<Arc<dyn KvStore>>,
    executor_id: Option<String>,
    tools: Vec<RegisteredTool>,
    resolver: Option<Arc<dyn wop_gate::Resolver>>,
    otlp: Option<wop_gate::telemetry::otlp::Config>,
    usage_commit: Option<wop_effects::UsageCommit>,
    usage_entries: Option<Option<u64>>,
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

    /// Exports traces over OTLP/HTTP JSON to `cfg` (see
    /// [`wop_gate::telemetry::otlp::Config::from_env`] for the standard variables).
    /// By default no trace is kept.
    pub fn otlp(&mut self, cfg: wop_gate::telemetry::otlp::Config) -> &mut Self {
        self.otlp = Some(cfg);
        self
    }

    /// How the usage of runs without a budget is committed.
    /// [`UsageCommit::Durable`](wop_effects::UsageCommit::Durable): every
    /// usage record and roll-up is stored before the invocation's report
    /// returns. [`UsageCommit::Deferred`](wop_effects::UsageCommit::Deferred)
    /// writes them off the invocation's path within a bounded window;
    /// call [`Runtime::flush_usage`](super::Runtime::flush_usage) at drain.
    /// Runs with a budget are always recorded before the report returns,
    /// and every usage read writes the waiting records first.
    ///
    /// By default: durable with an [`effect_store`](Self::effect_store)
    /// (it may be durable, or shared with other executors that read the
    /// same usage); [`UsageCommit::DEFERRED`](wop_effects::UsageCommit::DEFERRED)
    /// (10 ms or 1,000 records) on the default in-memory store, where a
    /// crash loses the whole store anyway and only this runtime reads it.
    pub fn usage_commit(&mut self, commit: wop_effects::UsageCommit) -> &mut Self {
        self.usage_commit = Some(commit);
        self
    }

    /// The most usage records and run roll-ups the meter keeps in its
    /// store (`None`: unbounded); past it, runs are forgotten — the least
    /// recently recorded of the tenant holding the most, so a tenant
    /// flooding the store forgets its own first — their roll-up and usage
    /// records deleted, never a ledger or an effect claim
    /// ([`MeterOptions::usage_entries`](wop_effects::MeterOptions::usage_entries)).
    /// For a store only this process uses and nothing purges.
    ///
    /// By default: [`USAGE_ENTRIES_IN_MEMORY`](wop_effects::USAGE_ENTRIES_IN_MEMORY)
    /// (about 50 MiB) on the default in-memory store, where every new run
    /// otherwise adds about 1 KiB for good; unbounded with an
    /// [`effect_store`](Self::effect_store) (give a bound here if it is an
    /// in-memory one too).
    pub fn usage_entries(&mut self, bound: Option<u64>) -> &mut Self {
        self.usage_entries = Some(bound);
        self
    }

    /// Registers a tool implemented by the embedder (`host-extension`).
    /// By default there are none.
    pub fn tool(&mut self, tool: RegisteredTool) -> &mut Self {
        self.tools.push(tool);
        self
    }
}

fn build_gate(config: &RuntimeConfig, me: &InvokerSlot) -> Result<Gate, ConfigError> {
    let policy = &config.policy;
    let e = &policy.effects;
    let max_result_bytes = e.max_result_bytes();
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
        let carries = policy.secrets.values().any(|s| s.tools.contains(&t.id));
        d.auth = (!t.scopes.is_empty() || carries).then(|| ToolAuth {
            scopes: t.scopes.clone(),
            credential_ref: carries,
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
    let kv = config.effect_store.clone().unwrap_or_else(|| {
        // Process memory: bounded, so no client can exhaust the process
        // through it (decision 0046).
        let bytes = wop_effects::store::MEMORY_STORE_BYTES;
        Arc::new(wop_effects::store::MemoryStore::with_capacity(bytes))
    });
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
            max_records_per_invocation: e.max_records_per_invocation.unwrap_or(64),
            max_record_bytes_per_invocation: e.max_record_bytes_per_invocation(),
        },
    ))
}

/// Everything a runtime holds, and the slot its node-pack tools reach it
/// through (filled by [`super::Runtime::new`] once the runtime exists).
pub(super) fn inner(config: &RuntimeConfig) -> Result<(Inner, InvokerSlot), ConfigError> {
    let engine = crate::engine::engine()?;
    let components = Components::new(engine, config.cache_dir.clone())?;
    if let Some(d) = &config.cache_dir {
        std::fs::create_dir_all(d).map_err(|e| {
            ConfigError::Io(format!("cannot create cache dir {}: {e}", d.display()))
        })?;
    }
    let me: InvokerSlot = Arc::new(OnceLock::new());
    let gate = Arc::new(build_gate(config, &me)?);
    let mcp = wop_gate::mcp::McpGateway::new(config.policy.mcp.servers.clone())
        .map_err(ConfigError::Policy)?;
    let meter_options = wop_effects::MeterOptions {
        usage_commit: config.usage_commit.unwrap_or(match config.effect_store {
            // The default in-memory store: nothing survives a crash, and
            // no other process reads it, so a window costs nothing
            // (decision 0038).
            None => wop_effects::UsageCommit::DEFERRED,
            Some(_) => wop_effects::UsageCommit::Durable,
        }),
        usage_entries: config.usage_entries.unwrap_or(match config.effect_store {
            None => Some(wop_effects::USAGE_ENTRIES_IN_MEMORY),
            Some(_) => None,
        }),
        ..Default::default()
    };
    let meter = Meter::with_options(
        gate.effects().kv().clone(),
        config.policy.prices.clone(),
        meter_options,
    );
    let inner = Inner {
        gate,
        egress: Arc::new(wop_gate::Egress::new(
            config.policy.egress.settings(),
            config.resolver.clone(),
        )),
        meter,
        kinds: Kinds { components },
        policy: config.policy.clone(),
        sink: config.sink.clone(),
        registry: Registry::default(),
        instantiations: AtomicU64::new(0),
        nested: OnceLock::new(),
        mcp: Arc::new(mcp),
        secrets: wop_gate::secrets::SecretStore::load(&config.policy),
        tracer: config
            .otlp
            .clone()
            .map(|c| wop_gate::telemetry::otlp::Exporter::new(c, env!("CARGO_PKG_VERSION"))),
    };
    Ok((inner, me))
}

#[cfg(test)]
mod tests {
    use super::*;
    use wop_effects::UsageCommit;

    fn commit(config: &RuntimeConfig) -> UsageCommit {
        inner(config).unwrap().0.meter.options().usage_commit
    }

    /// Unbudgeted usage waits (10 ms or 1,000 records) only on the default
    /// in-memory store; with a store the embedder gives (durable, or shared
    /// with other executors) it is stored before the report, unless the
    /// embedder chooses otherwise (decision 0038).
    #[test]
    fn usage_is_deferred_by_default_only_on_the_in_memory_store() {
        assert_eq!(commit(&RuntimeConfig::new()), UsageCommit::DEFERRED);
        let mut given = RuntimeConfig::new();
        given.effect_store(Arc::new(wop_effects::store::MemoryStore::new()));
        assert_eq!(commit(&given), UsageCommit::Durable);
        let mut chosen = RuntimeConfig::new();
        chosen.usage_commit(UsageCommit::Durable);
        assert_eq!(commit(&chosen), UsageCommit::Durable);
        given.usage_commit(UsageCommit::DEFERRED);
        assert_eq!(commit(&given), UsageCommit::DEFERRED);
    }

    fn usage_entries(config: &RuntimeConfig) -> Option<u64> {
        inner(config).unwrap().0.meter.options().usage_entries
    }

    /// The default in-memory store's usage is bounded; a store the
    /// embedder gives is not, unless the embedder bounds it.
    #[test]
    fn usage_is_bounded_by_default_only_on_the_in_memory_store() {
        let bound = Some(wop_effects::USAGE_ENTRIES_IN_MEMORY);
        assert_eq!(usage_entries(&RuntimeConfig::new()), bound);
        let mut given = RuntimeConfig::new();
        given.effect_store(Arc::new(wop_effects::store::MemoryStore::new()));
        assert_eq!(usage_entries(&given), None);
        given.usage_entries(Some(7));
        assert_eq!(usage_entries(&given), Some(7));
    }
}
