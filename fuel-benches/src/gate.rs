//! Gate fixtures shared by the `gate` binary and the `gate` and
//! `host_calls` benchmarks: an authorization decision, durable claims, and
//! a runtime with no-op host-extension tools for the `tool-call` pack.

use anyhow::{Result, anyhow};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use wop_runtime::authz;
use wop_runtime::effects::{Begin, ClaimRequest, EffectTimings, Effects, Keying};
use wop_runtime::store::KvStore;
use wop_runtime::tools::{
    RegisteredTool, SafetyTier, ToolAuth, ToolCall, ToolDescriptor, ToolFailure, ToolProvider,
    ToolSource,
};
use wop_runtime::{InvokeRequest, Outcome, Policy, Runtime, RuntimeConfig};

/// A tool that does nothing and returns `null`.
pub struct Nop;

#[async_trait::async_trait]
impl ToolProvider for Nop {
    async fn call(&self, _: ToolCall) -> Result<serde_json::Value, ToolFailure> {
        Ok(serde_json::Value::Null)
    }
}

/// A no-op host-extension tool `id` of `tier`, requiring `scopes`, visible to
/// `tenants` (all when `None`).
pub fn nop_tool(
    id: &str,
    tier: SafetyTier,
    scopes: &[&str],
    tenants: Option<Vec<String>>,
) -> RegisteredTool {
    let mut d = ToolDescriptor::new(id, ToolSource::HostExtension, tier);
    if !scopes.is_empty() {
        d.auth = Some(ToolAuth {
            scopes: scopes.iter().map(|s| (*s).to_owned()).collect(),
            credential_ref: false,
        });
    }
    RegisteredTool {
        descriptor: d,
        tenants,
        rate: None,
        timeout: Duration::from_secs(2),
        provider: Arc::new(Nop),
    }
}

/// One authorization decision's inputs: a `write` tool with two scopes,
/// visible to two tenants, a pack declaring three patterns, an operator
/// grant by wildcard, a principal holding three scopes.
pub struct AuthzCase {
    /// The tool.
    pub tool: RegisteredTool,
    /// The pack's `x-wop.tools`.
    pub declared: Vec<String>,
    /// The operator's grant.
    pub granted: Vec<String>,
    /// The principal's scopes.
    pub scopes: Vec<String>,
}

impl AuthzCase {
    /// The case measured by the benchmarks.
    pub fn new() -> Self {
        Self {
            tool: nop_tool(
                "crm:update",
                SafetyTier::Write,
                &["crm.write", "crm.read"],
                Some(vec!["acme".into(), "globex".into()]),
            ),
            declared: vec!["crm:read".into(), "crm:update".into(), "mail:*".into()],
            granted: vec!["crm:*".into()],
            scopes: vec!["crm.read".into(), "crm.write".into(), "mail.send".into()],
        }
    }

    /// The allowed path: every check passes.
    pub fn allowed(&self) -> bool {
        authz::authorize(
            &self.declared,
            &self.granted,
            Some(&self.tool),
            "crm:update",
            "acme",
            &self.scopes,
        )
        .is_ok()
    }

    /// The denied path: the principal holds no scopes.
    pub fn denied(&self) -> bool {
        authz::authorize(
            &self.declared,
            &self.granted,
            Some(&self.tool),
            "crm:update",
            "acme",
            &[],
        )
        .is_err()
    }
}

impl Default for AuthzCase {
    fn default() -> Self {
        Self::new()
    }
}

/// Makes `total` fresh claims on `store`, split over `concurrency` tasks
/// (effect ids unique per call of this function), and returns the elapsed
/// time. Must run on a tokio runtime.
pub async fn claims(store: Arc<dyn KvStore>, concurrency: usize, total: usize) -> Result<Duration> {
    static BATCH: AtomicU64 = AtomicU64::new(0);
    let batch = BATCH.fetch_add(1, Ordering::Relaxed);
    let effects = Effects::new(store, "bench");
    let timings = EffectTimings {
        lease: Duration::from_secs(30),
        in_flight_wait: Duration::from_millis(0),
        poll: Duration::from_millis(1),
    };
    let concurrency = concurrency.max(1);
    let start = Instant::now();
    let mut tasks = Vec::new();
    for c in 0..concurrency {
        let per_task = total / concurrency + usize::from(c < total % concurrency);
        let effects = effects.clone();
        tasks.push(tokio::spawn(async move {
            for i in 0..per_task {
                let req = ClaimRequest {
                    effect_id: format!("e-{batch}-{c}-{i}"),
                    keying: Keying::ActivityRecipe,
                    tenant_id: "t".into(),
                    run_id: format!("run-{batch}-{c}"),
                    node_id: "n".into(),
                    attempt: 1,
                    tool_id: "crm:update".into(),
                    digest: "d".into(),
                    idempotent: false,
                };
                let deadline = Instant::now() + Duration::from_secs(60);
                match effects.begin(&req, timings, deadline).await {
                    Ok(Begin::Perform { .. }) => {}
                    Ok(_) => return Err(anyhow!("claim {} was not fresh", req.effect_id)),
                    Err(e) => return Err(anyhow!("claim {}: {e}", req.effect_id)),
                }
            }
            Ok(())
        }));
    }
    for t in tasks {
        t.await??;
    }
    Ok(start.elapsed())
}

/// The `write`-tier no-op tool (claimed: an effect per call).
pub const WRITE_TOOL: &str = "bench:write";
/// The `read`-tier no-op tool (not claimed).
pub const READ_TOOL: &str = "bench:read";

/// A runtime with the `tool-call` pack loaded and granted `bench:*`, the
/// two no-op tools registered, and effect claims in `store` (the
/// runtime's in-memory store when `None`).
pub async fn tool_runtime(store: Option<Arc<dyn KvStore>>) -> Result<Runtime> {
    let mut cfg = RuntimeConfig::new();
    cfg.policy(Policy::from_toml(
        "[packs.tool-call]\ncapabilities = [\"tools\"]\ntools = [\"bench:*\"]\n",
    )?)
    .tool(nop_tool(WRITE_TOOL, SafetyTier::Write, &[], None))
    .tool(nop_tool(READ_TOOL, SafetyTier::Read, &[], None));
    if let Some(s) = store {
        cfg.effect_store(s);
    }
    let rt = Runtime::new(&cfg)?;
    rt.load_pack(&wop_test_packs::pack_dir("tool-call")).await?;
    Ok(rt)
}

/// A `tool-call` request calling `tool`, in a run of its own (so a
/// `write` tool makes a fresh claim every time, never a replay).
pub fn tool_request(tool: &str) -> InvokeRequest {
    static RUN: AtomicU64 = AtomicU64::new(0);
    let mut r = InvokeRequest::new(
        "wop.samples.tool-call",
        serde_json::json!({ "tool": tool, "arguments": {} }),
    );
    r.context.run_id = format!("run-{}", RUN.fetch_add(1, Ordering::Relaxed));
    r.context.node_id = "call".into();
    r
}

/// Invokes `req` and fails unless the node completed.
pub async fn invoke_ok(rt: &Runtime, req: InvokeRequest) -> Result<serde_json::Value> {
    match rt.invoke(req).await.outcome {
        Ok(Outcome::Completed { output }) => Ok(output),
        other => Err(anyhow!("expected completed, got {other:?}")),
    }
}
