//! `wop run`: run one node of a pack and print its outcome, events and usage.

use crate::common::{Common, Failure, exit, json_arg, rejected, runtime, usage};
use crate::output;
use clap::Args;
use std::path::PathBuf;
use wop_runtime::{InvokeRequest, Principal, RunContext};

/// `wop run` arguments.
#[derive(Args)]
pub(crate) struct RunArgs {
    /// The pack directory (holding pack.json), or a bare ABI v1 `.wasm`.
    pub(crate) pack_dir: PathBuf,
    /// The node type to run.
    pub(crate) type_id: String,
    /// Inputs: a JSON value, or @file to read one.
    #[arg(long, default_value = "{}")]
    pub(crate) input: String,
    /// Node configuration: a JSON value, or @file.
    #[arg(long, default_value = "{}")]
    pub(crate) config: String,
    /// Resume value after a suspended outcome: JSON or @file.
    #[arg(long)]
    pub(crate) resume: Option<String>,
    /// The run's trigger payload (`ctx.triggerData` of a JavaScript pack):
    /// JSON or @file.
    #[arg(long)]
    pub(crate) trigger_data: Option<String>,
    /// The run this invocation belongs to. Default: a new run each time
    /// (`run-<ms>-<pid>`, printed), so a second `wop run` performs its
    /// effects again. Name a run to continue it: its effects replay, its
    /// budget and run timeout carry over.
    #[arg(long)]
    pub(crate) run_id: Option<String>,
    #[arg(long, default_value = "node-1")]
    pub(crate) node_id: String,
    #[arg(long, default_value = "default")]
    pub(crate) tenant: String,
    #[arg(long, default_value_t = 1)]
    pub(crate) attempt: u32,
    /// Principal id on whose behalf the node runs.
    #[arg(long, default_value = "core.system")]
    pub(crate) principal: String,
    /// Principal scopes (repeatable or comma-separated).
    #[arg(long, value_delimiter = ',')]
    pub(crate) scopes: Vec<String>,
    #[command(flatten)]
    pub(crate) limits: RunLimitArgs,
    #[command(flatten)]
    pub(crate) common: Common,
}

/// A run's budget and bounds from flags (the first invocation of a run
/// fixes its budget).
#[derive(Args)]
pub(crate) struct RunLimitArgs {
    /// Budget: performed tool calls across the run.
    #[arg(long)]
    pub(crate) max_tool_calls: Option<u64>,
    /// Budget: fuel across the run.
    #[arg(long)]
    pub(crate) max_fuel: Option<u64>,
    /// Budget: cost across the run (price table currency).
    #[arg(long)]
    pub(crate) max_cost_usd: Option<f64>,
    /// Budget: threshold percentage for `budget.threshold-crossed`.
    #[arg(long)]
    pub(crate) threshold_percent: Option<u8>,
    /// Bound: host tool-call rounds of the pack's own loop per invocation.
    #[arg(long)]
    pub(crate) max_loop_iterations: Option<u32>,
    /// Bound: wall clock across the run's invocations.
    #[arg(long)]
    pub(crate) run_timeout_ms: Option<u64>,
}

impl RunLimitArgs {
    fn budget(&self) -> Option<wop_runtime::metering::RunBudget> {
        let b = wop_runtime::metering::RunBudget {
            max_tool_calls: self.max_tool_calls,
            max_fuel: self.max_fuel,
            max_cost_usd: self.max_cost_usd,
            threshold_percent: self.threshold_percent,
            on_exhaustion: Default::default(),
        };
        (b != Default::default()).then_some(b)
    }

    fn bounds(&self) -> Option<wop_runtime::metering::RunBounds> {
        let b = wop_runtime::metering::RunBounds {
            max_loop_iterations: self.max_loop_iterations,
            run_timeout_ms: self.run_timeout_ms,
        };
        (b != Default::default()).then_some(b)
    }
}

pub(crate) async fn run(a: RunArgs) -> Result<u8, Failure> {
    let inputs = json_arg("input", &a.input)?;
    let config = json_arg("config", &a.config)?;
    let resume = a
        .resume
        .as_deref()
        .map(|r| json_arg("resume", r))
        .transpose()?;
    let trigger_data = a
        .trigger_data
        .as_deref()
        .map(|t| json_arg("trigger-data", t))
        .transpose()?;
    let rt = runtime(&a.common)?;
    let input = crate::archive_input::open(&a.pack_dir, a.common.json)?;
    let pack = match crate::progress::compiling(&a.pack_dir, rt.load_pack(input.dir())).await {
        Ok(p) => p,
        Err(e) => return Err(rejected(&a.pack_dir, &e, a.common.json)),
    };
    if !pack.type_ids.contains(&a.type_id) {
        return Err(usage(anyhow::anyhow!(
            "pack `{}` has no node type `{}`; its node types: {}",
            pack.name,
            a.type_id,
            pack.type_ids.join(", ")
        )));
    }
    let run_id = a.run_id.unwrap_or_else(|| {
        format!(
            "run-{}-{}",
            wop_runtime::effects::now_ms(),
            std::process::id()
        )
    });
    let req = InvokeRequest {
        type_id: a.type_id,
        inputs,
        config,
        resume,
        trigger_data,
        context: RunContext {
            run_id,
            node_id: a.node_id,
            tenant_id: a.tenant.clone(),
            attempt: a.attempt,
        },
        principal: Principal {
            id: a.principal,
            tenant: a.tenant,
            scopes: a.scopes,
        },
        budget: a.limits.budget(),
        bounds: a.limits.bounds(),
        traceparent: None,
    };
    let report = rt.invoke(req).await;
    // The trace leaves before the process does.
    rt.flush_traces(std::time::Duration::from_secs(5)).await;
    if a.common.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        output::print_report(&report);
    }
    if report.outcome.is_err() {
        unmapped_hint(&pack, rt.policy());
    }
    Ok(if report.outcome.is_ok() {
        0
    } else {
        exit::NODE_FAILED
    })
}

/// After a failed node of a JavaScript pack whose code names host services
/// the operator did not map (absent from its `ctx`, so the pack may have
/// failed reaching one): which, and the policy line that maps them.
fn unmapped_hint(pack: &wop_runtime::PackSummary, policy: &wop_runtime::Policy) {
    let mapped = policy.grant(&pack.name).services;
    let unmapped: Vec<&String> = pack
        .services
        .iter()
        .filter(|s| !mapped.contains_key(*s))
        .collect();
    if unmapped.is_empty() {
        return;
    }
    let line: Vec<String> = unmapped
        .iter()
        .map(|s| format!("\"{s}\" = \"<tool id>\""))
        .collect();
    eprintln!(
        "hint: this pack's code names host services that are not mapped, so they are absent from its ctx: {}; to provide them, under [packs.\"{}\"] in the policy: services = {{ {} }} (and capabilities = [\"tools\"])",
        unmapped
            .iter()
            .map(|s| s.as_str())
            .collect::<Vec<_>>()
            .join(", "),
        pack.name,
        line.join(", ")
    );
}
