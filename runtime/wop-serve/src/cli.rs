//! The service's command line, shared by the `wop-serve` binary and
//! `wop serve`: flags → [`ServeOptions`], then run until SIGTERM/SIGINT.

use anyhow::{Context as _, Result};
use clap::Args;
use std::net::SocketAddr;
use std::path::PathBuf;

use crate::{ServeConfig, ServeOptions, StoreChoice};

/// `wop serve` / `wop-serve` flags.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Operator policy (TOML).
    #[arg(long)]
    pub policy: Option<PathBuf>,
    /// Directory whose packs (subdirectories, bare .wasm files) are loaded at start.
    #[arg(long)]
    pub packs: PathBuf,
    /// Listen address.
    #[arg(long, default_value = "127.0.0.1:8787")]
    pub listen: SocketAddr,
    /// Effect store: a sled directory (default: $WOP_DATA_DIR/serve, else
    /// $XDG_DATA_HOME/wop/serve, else ~/.local/share/wop/serve) or a postgres:// URL.
    #[arg(long)]
    pub store: Option<String>,
    /// Keep effects in memory only (lost at exit).
    #[arg(long, conflicts_with = "store")]
    pub memory_store: bool,
    /// Server settings (tokens, limits): serve.toml.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Serve requests without a token as `anonymous` (loopback only).
    #[arg(long)]
    pub anonymous_loopback: bool,
    /// Override `maxInFlight`.
    #[arg(long)]
    pub max_in_flight: Option<usize>,
    /// Compile cache directory.
    #[arg(long)]
    pub cache_dir: Option<PathBuf>,
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

/// Resolves when the process gets SIGTERM or SIGINT.
pub async fn shutdown_signal() {
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

impl ServeArgs {
    /// The options these flags describe (reads the policy and config files).
    pub fn options(&self) -> Result<ServeOptions> {
        let policy = match &self.policy {
            Some(p) => wop_runtime::Policy::from_file(p)
                .with_context(|| format!("policy {}", p.display()))?,
            None => wop_runtime::Policy::default(),
        };
        let mut cfg = match &self.config {
            Some(p) => ServeConfig::from_file(p).map_err(anyhow::Error::msg)?,
            None => ServeConfig::default(),
        };
        if self.anonymous_loopback {
            cfg.anonymous_loopback = true;
        }
        if let Some(n) = self.max_in_flight {
            cfg.max_in_flight = n;
        }
        let policy_store = policy.effects.store_spec();
        let mut opts = ServeOptions::new(self.listen);
        opts.policy(policy).packs_dir(&self.packs).config(cfg);
        if let Some(d) = &self.cache_dir {
            opts.cache_dir(d);
        }
        if self.memory_store {
            opts.memory_store();
        } else {
            // --store, else the policy's `[effects] store`, else the default.
            let spec = match self.store.clone() {
                Some(s) => Some(s),
                None => policy_store.map_err(anyhow::Error::msg)?,
            }
            .or_else(default_store)
            .context("no --store, no [effects] store in the policy, and no HOME to derive the default store directory")?;
            tracing::info!(store = %spec, "effect store");
            opts.store(StoreChoice::Spec(spec));
        }
        Ok(opts)
    }
}

/// Binds, prints the address, serves until SIGTERM/SIGINT, then drains.
pub async fn run(args: ServeArgs) -> Result<()> {
    let server = crate::Server::bind(args.options()?).await?;
    let addr = server.local_addr()?;
    println!("wop-serve listening on http://{addr}");
    server.run(shutdown_signal()).await?;
    println!("wop-serve stopped");
    Ok(())
}
