//! The embedder API: [`Runtime`], built from a [`RuntimeConfig`].

use crate::cache::{CacheStats, CompileCache};
use crate::registry::Registry;
use crate::state::HostState;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use wasmtime::Engine;
use wasmtime::component::Linker;
use wop_core::budget::{Ledger, Rollup};
use wop_core::capability::Capability;
use wop_core::error::{ErrorCode, NodeError};
use wop_core::events::EventSink;
use wop_core::limits::Limits;
use wop_core::model::{InvocationReport, InvokeRequest, Principal, Usage};
use wop_core::policy::Policy;
use wop_effects::effects::{EffectError, EffectState, EffectSummary};
use wop_effects::{Meter, MeterError, UsageScope};
use wop_gate::Gate;
use wop_gate::pack_tool::NodeInvoker;
use wop_gate::tools::ToolDescriptor;

mod build;
mod invocation;
mod live;
mod load;

pub use build::RuntimeConfig;

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

    /// The loaded packs (component and ABI v1 core-module packs).
    pub fn packs(&self) -> Vec<PackSummary> {
        self.inner.registry.summaries()
    }

    /// The registry of loaded packs.
    pub(crate) fn registry(&self) -> &Registry {
        &self.inner.registry
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

    /// The budget ledger of `tenant`'s run `run`, if the run has started.
    pub async fn ledger(&self, tenant: &str, run: &str) -> Result<Option<Ledger>, MeterError> {
        self.inner.meter.ledger(tenant, run).await
    }
}
