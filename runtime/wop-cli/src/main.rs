//! `wop`: run, inspect and demo OpenWOP node packs in the wop sandbox.

mod capabilities;
mod demo;
mod output;
mod probe;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use wop_runtime::{InvokeRequest, Policy, Principal, RunContext, Runtime, RuntimeConfig};

/// Exit codes, distinct per failure class.
pub(crate) mod exit {
    /// Something went wrong in wop itself.
    pub const INTERNAL: u8 = 1;
    /// Bad flags, input or policy.
    pub const USAGE: u8 = 2;
    /// The pack was refused at load (validation, integrity, escape, grant).
    pub const PACK_REJECTED: u8 = 3;
    /// The pack loaded but the node failed.
    pub const NODE_FAILED: u8 = 4;
}

#[derive(Parser)]
#[command(
    name = "wop",
    version,
    about = "Run untrusted OpenWOP node packs as sandboxed WebAssembly"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run one node of a pack and print its outcome, events and usage.
    Run(Box<RunArgs>),
    /// Show a pack's nodes, imports, requested vs granted capabilities and limits.
    Inspect(InspectArgs),
    /// A short tour of the sandbox using the bundled sample packs.
    Demo(DemoArgs),
    /// Assemble a runnable pack directory from a pack.json template and a
    /// built component: copies the component and fills in `x-wop.sha256`.
    Pack(PackArgs),
    /// List a run's effects, or resolve / purge effect records.
    #[command(args_conflicts_with_subcommands = true)]
    Effects(EffectsArgs),
    /// List the tools a principal may see.
    Tools(ToolsArgs),
    /// Usage and cost, rolled up per run and per pack (persisted in the store).
    Usage(UsageArgs),
    /// Conformance probe: call one export of a core module (`.wasm`) in the
    /// sandbox and print one JSON line (`{"ok":true,"result":N}` or
    /// `{"ok":false,"error":{...}}`).
    Probe(probe::ProbeArgs),
    /// Print the runtime's capability document (`nodePackRuntimes`,
    /// `sandbox`) as JSON.
    Capabilities(capabilities::CapabilitiesArgs),
}

#[derive(Args)]
struct UsageArgs {
    /// Only this run.
    #[arg(long)]
    run: Option<String>,
    /// Only this pack (name).
    #[arg(long)]
    pack: Option<String>,
    /// Also list every invocation record.
    #[arg(long)]
    records: bool,
    #[command(flatten)]
    common: Common,
}

/// A run's budget and bounds from flags (the first invocation of a run
/// fixes its budget).
#[derive(Args)]
struct RunLimitArgs {
    /// Budget: performed tool calls across the run.
    #[arg(long)]
    max_tool_calls: Option<u64>,
    /// Budget: fuel across the run.
    #[arg(long)]
    max_fuel: Option<u64>,
    /// Budget: cost across the run (price table currency).
    #[arg(long)]
    max_cost_usd: Option<f64>,
    /// Budget: threshold percentage for `budget.threshold-crossed`.
    #[arg(long)]
    threshold_percent: Option<u8>,
    /// Bound: host tool-call rounds of the pack's own loop per invocation.
    #[arg(long)]
    max_loop_iterations: Option<u32>,
    /// Bound: wall clock across the run's invocations.
    #[arg(long)]
    run_timeout_ms: Option<u64>,
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

#[derive(Args)]
struct EffectsArgs {
    #[command(subcommand)]
    action: Option<EffectsAction>,
    /// The run whose effects to list.
    run_id: Option<String>,
    #[command(flatten)]
    common: Common,
}

#[derive(Subcommand)]
enum EffectsAction {
    /// Resolve an effect whose outcome is unknown, after checking the provider.
    Resolve {
        /// The effect id (from `wop effects <runId>` or the error details).
        effect_id: String,
        /// What really happened: `completed` (it took effect) or `released`
        /// (it did not; a retry may perform it).
        #[arg(long = "as", value_parser = ["completed", "released"])]
        as_state: String,
        #[command(flatten)]
        common: Common,
    },
    /// Delete finished records older than the retention period (>= 14 days).
    Purge {
        #[command(flatten)]
        common: Common,
    },
}

#[derive(Args)]
struct ToolsArgs {
    /// Principal id.
    #[arg(long, default_value = "core.system")]
    principal: String,
    /// Principal scopes (comma-separated).
    #[arg(long, value_delimiter = ',')]
    scopes: Vec<String>,
    #[arg(long, default_value = "default")]
    tenant: String,
    #[command(flatten)]
    common: Common,
}

#[derive(Args)]
struct PackArgs {
    /// The pack's source directory, holding the pack.json template.
    src: PathBuf,
    /// The built component, e.g. target/wasm32-wasip2/release/my_pack.wasm.
    #[arg(long)]
    wasm: PathBuf,
    /// Where to write the pack directory (it becomes <out>/<name>/).
    #[arg(long, default_value = "dist")]
    out: PathBuf,
}

#[derive(Args)]
struct Common {
    /// Operator policy (TOML). Default: default limits, no grants.
    #[arg(long)]
    policy: Option<PathBuf>,
    /// Compile cache directory. Default: $WOP_CACHE_DIR, else $XDG_CACHE_HOME/wop, else ~/.cache/wop.
    #[arg(long)]
    cache_dir: Option<PathBuf>,
    /// Do not use an on-disk compile cache.
    #[arg(long)]
    no_cache: bool,
    /// Effect store directory (sled). Default: $WOP_DATA_DIR/effects, else
    /// $XDG_DATA_HOME/wop/effects, else ~/.local/share/wop/effects.
    #[arg(long)]
    store: Option<PathBuf>,
    /// This executor's id in effect claims (default: wop-<pid>-<time>).
    #[arg(long)]
    executor_id: Option<String>,
    /// Print one JSON document instead of human output.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct RunArgs {
    /// The pack directory (holding pack.json), or a bare ABI v1 `.wasm`.
    pack_dir: PathBuf,
    /// The node type to run.
    type_id: String,
    /// Inputs: a JSON value, or @file to read one.
    #[arg(long, default_value = "{}")]
    input: String,
    /// Node configuration: a JSON value, or @file.
    #[arg(long, default_value = "{}")]
    config: String,
    /// Resume value after a suspended outcome: JSON or @file.
    #[arg(long)]
    resume: Option<String>,
    #[arg(long, default_value = "run-local")]
    run_id: String,
    #[arg(long, default_value = "node-1")]
    node_id: String,
    #[arg(long, default_value = "default")]
    tenant: String,
    #[arg(long, default_value_t = 1)]
    attempt: u32,
    /// Principal id on whose behalf the node runs.
    #[arg(long, default_value = "core.system")]
    principal: String,
    /// Principal scopes (repeatable or comma-separated).
    #[arg(long, value_delimiter = ',')]
    scopes: Vec<String>,
    #[command(flatten)]
    limits: RunLimitArgs,
    #[command(flatten)]
    common: Common,
}

#[derive(Args)]
struct InspectArgs {
    /// The pack directory, or a bare ABI v1 `.wasm`.
    pack_dir: PathBuf,
    #[command(flatten)]
    common: Common,
}

#[derive(Args)]
struct DemoArgs {
    /// Print one JSON document per step instead of the story.
    #[arg(long)]
    json: bool,
}

/// An error with the exit code it maps to.
pub(crate) struct Failure {
    pub code: u8,
    pub error: anyhow::Error,
}

impl<E: Into<anyhow::Error>> From<E> for Failure {
    fn from(e: E) -> Self {
        Failure {
            code: exit::INTERNAL,
            error: e.into(),
        }
    }
}

pub(crate) fn usage(e: impl Into<anyhow::Error>) -> Failure {
    Failure {
        code: exit::USAGE,
        error: e.into(),
    }
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("WOP_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("wop: cannot start the async runtime: {e}");
            return ExitCode::from(exit::INTERNAL);
        }
    };
    let result = rt.block_on(async {
        match cli.command {
            Command::Run(a) => run(*a).await,
            Command::Inspect(a) => inspect(a).await,
            Command::Demo(a) => demo::demo(a.json).await,
            Command::Pack(a) => pack(a).await,
            Command::Effects(a) => effects(a).await,
            Command::Tools(a) => tools(a).await,
            Command::Usage(a) => usage_cmd(a).await,
            Command::Probe(a) => probe::probe(a).await,
            Command::Capabilities(a) => capabilities::capabilities(a).await,
        }
    });
    match result {
        Ok(code) => ExitCode::from(code),
        Err(f) => {
            eprintln!("wop: {:#}", f.error);
            ExitCode::from(f.code)
        }
    }
}

pub(crate) fn default_cache_dir() -> Option<PathBuf> {
    if let Some(d) = std::env::var_os("WOP_CACHE_DIR") {
        return Some(d.into());
    }
    if let Some(d) = std::env::var_os("XDG_CACHE_HOME") {
        return Some(PathBuf::from(d).join("wop"));
    }
    std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache").join("wop"))
}

pub(crate) fn default_store_dir() -> Option<PathBuf> {
    if let Some(d) = std::env::var_os("WOP_DATA_DIR") {
        return Some(PathBuf::from(d).join("effects"));
    }
    if let Some(d) = std::env::var_os("XDG_DATA_HOME") {
        return Some(PathBuf::from(d).join("wop").join("effects"));
    }
    std::env::var_os("HOME").map(|h| {
        PathBuf::from(h)
            .join(".local")
            .join("share")
            .join("wop")
            .join("effects")
    })
}

fn runtime(c: &Common) -> Result<Runtime, Failure> {
    let policy = match &c.policy {
        Some(p) => Policy::from_file(p).map_err(usage)?,
        None => Policy::default(),
    };
    if policy.egress.allow_loopback {
        eprintln!("wop: {}", output::LOOPBACK_WARNING);
    }
    let mut cfg = RuntimeConfig::new();
    cfg.policy(policy);
    if !c.no_cache
        && let Some(d) = c.cache_dir.clone().or_else(default_cache_dir)
    {
        cfg.cache_dir(d);
    }
    let store = c.store.clone().or_else(default_store_dir).ok_or_else(|| {
        usage(anyhow::anyhow!(
            "no place for the effect store: pass --store <dir> or set WOP_DATA_DIR"
        ))
    })?;
    let kv = wop_runtime::store::SledStore::open(&store)?;
    cfg.effect_store(std::sync::Arc::new(kv));
    if let Some(id) = &c.executor_id {
        cfg.executor_id(id.clone());
    }
    Ok(Runtime::new(&cfg)?)
}

fn json_arg(what: &str, raw: &str) -> Result<Value, Failure> {
    let text = match raw.strip_prefix('@') {
        Some(path) => std::fs::read_to_string(path)
            .with_context(|| format!("cannot read --{what} file {path}"))
            .map_err(usage)?,
        None => raw.to_owned(),
    };
    serde_json::from_str(&text)
        .with_context(|| format!("--{what} is not valid JSON (pass a JSON value or @file)"))
        .map_err(usage)
}

fn rejected(dir: &Path, e: &wop_runtime::LoadError, json: bool) -> Failure {
    if json {
        let doc = serde_json::json!({
            "pack": dir.display().to_string(),
            "loaded": false,
            "error": e.to_node_error(),
        });
        println!("{}", serde_json::to_string_pretty(&doc).unwrap_or_default());
    }
    Failure {
        code: exit::PACK_REJECTED,
        error: anyhow::anyhow!("pack {} refused: {e}", dir.display()),
    }
}

async fn run(a: RunArgs) -> Result<u8, Failure> {
    let inputs = json_arg("input", &a.input)?;
    let config = json_arg("config", &a.config)?;
    let resume = a
        .resume
        .as_deref()
        .map(|r| json_arg("resume", r))
        .transpose()?;
    let rt = runtime(&a.common)?;
    if let Err(e) = rt.load_pack(&a.pack_dir).await {
        return Err(rejected(&a.pack_dir, &e, a.common.json));
    }
    let req = InvokeRequest {
        type_id: a.type_id,
        inputs,
        config,
        resume,
        context: RunContext {
            run_id: a.run_id,
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
    };
    let report = rt.invoke(req).await;
    if a.common.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        output::print_report(&report);
    }
    Ok(if report.outcome.is_ok() {
        0
    } else {
        exit::NODE_FAILED
    })
}

async fn inspect(a: InspectArgs) -> Result<u8, Failure> {
    let rt = runtime(&a.common)?;
    let insp = match rt.inspect_pack(&a.pack_dir).await {
        Ok(i) => i,
        Err(e) => return Err(rejected(&a.pack_dir, &e, a.common.json)),
    };
    let note = probe::bare_note(&a.pack_dir);
    if a.common.json {
        let mut v = serde_json::to_value(&insp)?;
        if let (Some(n), Some(o)) = (note, v.as_object_mut()) {
            o.insert(
                "integrity".to_owned(),
                serde_json::Value::String(n.to_owned()),
            );
        }
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        output::print_inspection(&insp);
        if let Some(n) = note {
            println!("note: {n}");
        }
    }
    Ok(if insp.refusal.is_some() {
        exit::PACK_REJECTED
    } else {
        0
    })
}

async fn pack(a: PackArgs) -> Result<u8, Failure> {
    use sha2::Digest;
    let template = a.src.join("pack.json");
    let text = std::fs::read_to_string(&template)
        .with_context(|| format!("cannot read {}", template.display()))
        .map_err(usage)?;
    let mut manifest: Value = serde_json::from_str(&text)
        .with_context(|| format!("{} is not valid JSON", template.display()))
        .map_err(usage)?;
    let name = manifest["name"]
        .as_str()
        .ok_or_else(|| {
            usage(anyhow::anyhow!(
                "{}: $.name is required",
                template.display()
            ))
        })?
        .to_owned();
    let entry = manifest["runtime"]["entry"]
        .as_str()
        .ok_or_else(|| {
            usage(anyhow::anyhow!(
                "{}: $.runtime.entry is required",
                template.display()
            ))
        })?
        .to_owned();
    wop_runtime::manifest::check_relative_path(&entry, "$.runtime.entry").map_err(usage)?;
    let wasm = std::fs::read(&a.wasm)
        .with_context(|| format!("cannot read the component {}", a.wasm.display()))
        .map_err(usage)?;
    let sha = hex::encode(sha2::Sha256::digest(&wasm));
    match manifest.get_mut("x-wop") {
        Some(Value::Object(block)) => {
            block.insert("sha256".to_owned(), Value::String(sha.clone()));
        }
        _ => {
            return Err(usage(anyhow::anyhow!(
                "{}: $.x-wop is required (it holds the sha256 and the capabilities the pack requests)",
                template.display()
            )));
        }
    }
    let dir = a.out.join(&name);
    let entry_path = dir.join(&entry);
    if let Some(parent) = entry_path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::write(&entry_path, &wasm)?;
    std::fs::write(
        dir.join("pack.json"),
        serde_json::to_string_pretty(&manifest)? + "\n",
    )?;
    let rt = Runtime::new(&RuntimeConfig::new())?;
    match rt.inspect_pack(&dir).await {
        Ok(insp) => {
            println!("packed {} (sha256 {sha})", dir.display());
            output::print_inspection(&insp);
            Ok(if insp.refusal.is_some() {
                exit::PACK_REJECTED
            } else {
                0
            })
        }
        Err(e) => Err(rejected(&dir, &e, false)),
    }
}

async fn effects(a: EffectsArgs) -> Result<u8, Failure> {
    match a.action {
        Some(EffectsAction::Resolve {
            effect_id,
            as_state,
            common,
        }) => {
            let rt = runtime(&common)?;
            let to = if as_state == "completed" {
                wop_runtime::effects::EffectState::Completed
            } else {
                wop_runtime::effects::EffectState::Released
            };
            let r = rt.resolve_effect(&effect_id, to).await.map_err(usage)?;
            if common.json {
                println!("{}", serde_json::to_string_pretty(&r)?);
            } else {
                println!("effect {} is now {:?}", r.effect_id, r.state);
            }
            Ok(0)
        }
        Some(EffectsAction::Purge { common }) => {
            let rt = runtime(&common)?;
            let n = rt.purge_effects().await?;
            println!("purged {n} finished effect record(s) past the retention period");
            Ok(0)
        }
        None => {
            let run = a
                .run_id
                .ok_or_else(|| usage(anyhow::anyhow!("usage: wop effects <runId> | wop effects resolve <effectId> --as completed|released")))?;
            let rt = runtime(&a.common)?;
            let list = rt.effects(&run).await?;
            if a.common.json {
                println!("{}", serde_json::to_string_pretty(&list)?);
            } else if list.is_empty() {
                println!("run {run} has no recorded effects");
            } else {
                println!(
                    "{:<44} {:<18} {:>7} {:<18} {:<10} at(ms)",
                    "effectId", "nodeId", "attempt", "keying", "state"
                );
                for e in list {
                    println!(
                        "{:<44} {:<18} {:>7} {:<18} {:<10} {}",
                        e.effect_id,
                        e.node_id,
                        e.attempt,
                        serde_json::to_value(e.keying)?.as_str().unwrap_or(""),
                        serde_json::to_value(e.state)?.as_str().unwrap_or(""),
                        e.at
                    );
                }
            }
            Ok(0)
        }
    }
}

async fn tools(a: ToolsArgs) -> Result<u8, Failure> {
    let rt = runtime(&a.common)?;
    let p = Principal {
        id: a.principal,
        tenant: a.tenant.clone(),
        scopes: a.scopes,
    };
    let list = rt.catalog(&p, &a.tenant);
    if a.common.json {
        println!("{}", serde_json::to_string_pretty(&list)?);
    } else if list.is_empty() {
        println!("no tools visible to {} in tenant {}", p.id, a.tenant);
    } else {
        for t in list {
            println!(
                "{:<32} {:<6} {}",
                t.tool_id,
                serde_json::to_value(t.safety_tier)?.as_str().unwrap_or(""),
                t.title.unwrap_or_default()
            );
        }
    }
    Ok(0)
}

async fn usage_cmd(a: UsageArgs) -> Result<u8, Failure> {
    let rt = runtime(&a.common)?;
    let (by_run, by_pack) = rt.usage_rollup(a.run.as_deref(), a.pack.as_deref()).await?;
    if a.common.json {
        let mut doc = serde_json::json!({"byRun": by_run, "byPack": by_pack});
        if a.records {
            doc["records"] =
                serde_json::to_value(rt.usage(a.run.as_deref(), a.pack.as_deref()).await?)?;
        }
        println!("{}", serde_json::to_string_pretty(&doc)?);
        return Ok(0);
    }
    if by_run.is_empty() {
        println!(
            "no usage recorded{}",
            a.run.map(|r| format!(" for run {r}")).unwrap_or_default()
        );
        return Ok(0);
    }
    for (title, map) in [("by run", &by_run), ("by pack", &by_pack)] {
        println!("{title}");
        println!(
            "  {:<28} {:>6} {:>14} {:>10} {:>6} {:>12}",
            "", "calls", "fuel", "wall ms", "tools", "cost"
        );
        for (k, r) in map.iter() {
            println!(
                "  {:<28} {:>6} {:>14} {:>10.1} {:>6} {:>8.6} {}",
                k,
                r.invocations,
                r.fuel,
                r.wall_time_us as f64 / 1000.0,
                r.tool_calls,
                r.cost,
                r.currency
            );
        }
    }
    if a.records {
        for u in rt.usage(a.run.as_deref(), a.pack.as_deref()).await? {
            println!("{}", serde_json::to_string(&u)?);
        }
    }
    Ok(0)
}
