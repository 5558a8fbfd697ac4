//! `wop-serve`: runs the executor service until SIGTERM/SIGINT.
//!
//! `wop-serve --policy policy.toml --packs DIR [--listen 127.0.0.1:8787]
//! [--store DIR] [--config serve.toml] [--anonymous-loopback]`

use anyhow::{Context as _, Result};
use clap::Parser;
use std::net::SocketAddr;
use std::path::PathBuf;
use wop_serve::{ServeConfig, ServeOptions, StoreChoice};

/// The wop executor service: MCP server mount + OpenWOP routes + invoke API.
#[derive(Debug, Parser)]
#[command(name = "wop-serve", version)]
struct Args {
    /// Operator policy (TOML).
    #[arg(long)]
    policy: Option<PathBuf>,
    /// Directory whose packs (subdirectories, bare .wasm files) are loaded at start.
    #[arg(long)]
    packs: PathBuf,
    /// Listen address.
    #[arg(long, default_value = "127.0.0.1:8787")]
    listen: SocketAddr,
    /// Effect store: a sled directory (default: $WOP_DATA_DIR/serve, else
    /// $XDG_DATA_HOME/wop/serve, else ~/.local/share/wop/serve) or a postgres:// URL.
    #[arg(long)]
    store: Option<String>,
    /// Keep effects in memory only (lost at exit).
    #[arg(long, conflicts_with = "store")]
    memory_store: bool,
    /// Server settings (tokens, limits): serve.toml.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Serve requests without a token as `anonymous` (loopback only).
    #[arg(long)]
    anonymous_loopback: bool,
    /// Override `maxInFlight`.
    #[arg(long)]
    max_in_flight: Option<usize>,
    /// Compile cache directory.
    #[arg(long)]
    cache_dir: Option<PathBuf>,
}

fn default_store() -> Option<String> {
    let base = if let Some(d) = std::env::var_os("WOP_DATA_DIR") {
        PathBuf::from(d)
    } else if let Some(d) = std::env::var_os("XDG_DATA_HOME") {
        PathBuf::from(d).join("wop")
    } else {
        PathBuf::from(std::env::var_os("HOME")?)
            .join(".local")
            .join("share")
            .join("wop")
    };
    Some(base.join("serve").display().to_string())
}

async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = term.recv() => tracing::info!("SIGTERM"),
                    _ = tokio::signal::ctrl_c() => tracing::info!("SIGINT"),
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

#[tokio::main]
async fn main() -> Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let args = Args::parse();
    let policy = match &args.policy {
        Some(p) => {
            wop_runtime::Policy::from_file(p).with_context(|| format!("policy {}", p.display()))?
        }
        None => wop_runtime::Policy::default(),
    };
    let mut cfg = match &args.config {
        Some(p) => ServeConfig::from_file(p).map_err(anyhow::Error::msg)?,
        None => ServeConfig::default(),
    };
    if args.anonymous_loopback {
        cfg.anonymous_loopback = true;
    }
    if let Some(n) = args.max_in_flight {
        cfg.max_in_flight = n;
    }
    let mut opts = ServeOptions::new(args.listen);
    opts.policy(policy).packs_dir(&args.packs).config(cfg);
    if let Some(d) = &args.cache_dir {
        opts.cache_dir(d);
    }
    if args.memory_store {
        opts.memory_store();
    } else {
        let spec = args
            .store
            .clone()
            .or_else(default_store)
            .context("no --store and no HOME to derive the default store directory")?;
        tracing::info!(store = %spec, "effect store");
        opts.store(StoreChoice::Spec(spec));
    }
    let server = wop_serve::Server::bind(opts).await?;
    let addr = server.local_addr()?;
    println!("wop-serve listening on http://{addr}");
    server.run(shutdown_signal()).await?;
    println!("wop-serve stopped");
    Ok(())
}
