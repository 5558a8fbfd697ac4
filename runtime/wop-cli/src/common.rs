//! What every command shares: exit codes, [`Failure`], the `--policy` /
//! `--store` / cache flags ([`Common`]) and the runtime built from them,
//! default directories, JSON arguments and the "pack refused" report.

use anyhow::Context;
use clap::Args;
use serde_json::Value;
use std::path::{Path, PathBuf};
use wop_runtime::{Policy, Runtime, RuntimeConfig};

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

/// Flags shared by the commands that build a runtime.
#[derive(Args)]
pub(crate) struct Common {
    /// Operator policy (TOML). Default: default limits, no grants.
    #[arg(long)]
    pub(crate) policy: Option<PathBuf>,
    /// Compile cache directory. Default: $WOP_CACHE_DIR, else $XDG_CACHE_HOME/wop, else ~/.cache/wop.
    #[arg(long)]
    pub(crate) cache_dir: Option<PathBuf>,
    /// Do not use an on-disk compile cache.
    #[arg(long)]
    pub(crate) no_cache: bool,
    /// Effect store: a directory (sled) or a `postgres://` /
    /// `postgresql://` URL. Default: $WOP_DATA_DIR/effects, else
    /// $XDG_DATA_HOME/wop/effects, else ~/.local/share/wop/effects.
    #[arg(long)]
    pub(crate) store: Option<PathBuf>,
    /// This executor's id in effect claims (default: wop-<pid>-<time>).
    #[arg(long)]
    pub(crate) executor_id: Option<String>,
    /// Print one JSON document instead of human output.
    #[arg(long)]
    pub(crate) json: bool,
    /// Export the invocation's trace over OTLP/HTTP JSON to this traces
    /// endpoint (e.g. http://localhost:4318/v1/traces). Default: the
    /// standard OTEL_EXPORTER_OTLP_* variables, else no trace.
    #[arg(long)]
    pub(crate) otlp: Option<String>,
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

/// A runtime for commands that run no node (`inspect`, `tools`,
/// `capabilities`): effects stay in memory, so they never take (or wait on)
/// the lock of the store a running `wop run` holds.
pub(crate) fn runtime_without_store(c: &Common) -> Result<Runtime, Failure> {
    runtime_with(c, false)
}

pub(crate) fn runtime(c: &Common) -> Result<Runtime, Failure> {
    runtime_with(c, true)
}

fn runtime_with(c: &Common, with_store: bool) -> Result<Runtime, Failure> {
    let rt = build_runtime(c, with_store)?;
    for w in rt.secret_warnings() {
        eprintln!("wop: warning: {w}");
    }
    Ok(rt)
}

fn build_runtime(c: &Common, with_store: bool) -> Result<Runtime, Failure> {
    let policy = match &c.policy {
        Some(p) => Policy::from_file(p).map_err(usage)?,
        None => Policy::default(),
    };
    if policy.egress.allow_loopback {
        eprintln!("wop: {}", crate::output::LOOPBACK_WARNING);
    }
    let mut cfg = RuntimeConfig::new();
    let (otlp, warning) = wop_runtime::gate::telemetry::otlp::Config::from_env();
    if let Some(w) = warning {
        eprintln!("wop: warning: {w}");
    }
    let otlp = match &c.otlp {
        Some(url) => {
            let (sampler, sampler_warning) =
                wop_runtime::gate::telemetry::otlp::Config::sampler_from_env();
            if otlp.is_none()
                && let Some(w) = sampler_warning
            {
                eprintln!("wop: warning: {w}");
            }
            Some(wop_runtime::gate::telemetry::otlp::Config {
                endpoint: url.clone(),
                headers: otlp.map(|o| o.headers).unwrap_or_default(),
                sampler,
            })
        }
        None => otlp,
    };
    if let Some(o) = otlp {
        cfg.otlp(o);
    }
    if !c.no_cache
        && let Some(d) = c.cache_dir.clone().or_else(default_cache_dir)
    {
        cfg.cache_dir(d);
    }
    if !with_store {
        cfg.policy(policy);
        return Ok(Runtime::new(&cfg)?);
    }
    // --store, else the policy's `[effects] store`, else the default dir.
    let from_policy = policy
        .effects
        .store_spec()
        .map_err(|e| usage(anyhow::anyhow!(e)))?
        .map(PathBuf::from);
    let store = c
        .store
        .clone()
        .or(from_policy)
        .or_else(default_store_dir)
        .ok_or_else(|| {
            usage(anyhow::anyhow!(
                "no place for the effect store: pass --store <dir>, set [effects] store in the policy, or set WOP_DATA_DIR"
            ))
        })?;
    cfg.policy(policy);
    cfg.effect_store(open_store(&store)?);
    if let Some(id) = &c.executor_id {
        cfg.executor_id(id.clone());
    }
    Ok(Runtime::new(&cfg)?)
}

/// The effect store `--store` names: a `postgres://` URL goes through
/// `wop_effects::store::open`, anything else is a sled directory (opened as
/// a path, so a non-UTF-8 directory name still works).
fn open_store(spec: &Path) -> Result<std::sync::Arc<dyn wop_runtime::store::KvStore>, Failure> {
    match spec.to_str() {
        Some(s) if wop_runtime::store::is_postgres_url(s) => Ok(wop_runtime::store::open(s)?),
        _ => Ok(std::sync::Arc::new(wop_runtime::store::SledStore::open(
            spec,
        )?)),
    }
}

pub(crate) fn json_arg(what: &str, raw: &str) -> Result<Value, Failure> {
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

pub(crate) fn rejected(dir: &Path, e: &wop_runtime::LoadError, json: bool) -> Failure {
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
