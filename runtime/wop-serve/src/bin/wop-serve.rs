//! `wop-serve`: runs the executor service until SIGTERM/SIGINT (the same
//! as `wop serve`).
//!
//! `wop-serve --policy policy.toml --packs DIR [--listen 127.0.0.1:8787]
//! [--store DIR|postgres://…] [--config serve.toml] [--anonymous-loopback]`

use clap::Parser;

/// The wop executor service: MCP server mount + OpenWOP routes + invoke API.
#[derive(Debug, Parser)]
#[command(name = "wop-serve", version)]
struct Cli {
    #[command(flatten)]
    args: wop_serve::cli::ServeArgs,
}

/// jemalloc, as every binary that runs the service (decision 0040).
#[global_allocator]
static ALLOCATOR: wop_serve::allocator::Allocator = wop_serve::allocator::Allocator;

fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let args = Cli::parse().args;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let result = rt.block_on(wop_serve::cli::run(args));
    // A blocking task that never ends (a sled flush parked after the
    // store failed; decision 0056) must not keep the process from exiting.
    rt.shutdown_timeout(wop_serve::SHUTDOWN_GRACE);
    result
}
