//! `wop`: run, inspect and demo OpenWOP node packs in the wop sandbox.
//!
//! This file is the command line (clap) and the dispatch; each command lives
//! in `cmd/<command>.rs`, shared pieces in `common.rs` and `output.rs`.

/// `println!` for this binary (shadows the prelude's in every module below):
/// a closed stdout (`wop run … | head -1`) ends the process quietly with
/// exit code 141, as SIGPIPE would, instead of a panic.
macro_rules! println {
    () => { $crate::stdout::write(format_args!("\n")) };
    ($($arg:tt)*) => { $crate::stdout::write(format_args!("{}\n", format_args!($($arg)*))) };
}

mod archive_input;
mod cmd;
mod common;
mod output;
mod progress;
mod stdout;

use clap::{Parser, Subcommand};
use cmd::*;
use common::exit;
use std::process::ExitCode;

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
    Run(Box<run::RunArgs>),
    /// Show a pack's nodes, imports, requested vs granted capabilities and limits.
    Inspect(inspect::InspectArgs),
    /// A short tour of the sandbox using the bundled sample packs.
    Demo(demo::DemoArgs),
    /// Assemble a runnable pack directory from a pack.json template and a
    /// built component: copies the component and fills in `x-wop.sha256`.
    Pack(pack::PackArgs),
    /// Scaffold a pack source directory: pack.json, a hello node in the
    /// language, build.sh and a README.
    New(new::NewArgs),
    /// List a run's effects, or resolve / purge effect records.
    #[command(args_conflicts_with_subcommands = true)]
    Effects(effects::EffectsArgs),
    /// List the tools a principal may see.
    Tools(tools::ToolsArgs),
    /// Usage and cost, rolled up per run and per pack (persisted in the store).
    Usage(usage::UsageArgs),
    /// Conformance probe: call one export of a core module (`.wasm`) in the
    /// sandbox and print one JSON line (`{"ok":true,"result":N}` or
    /// `{"ok":false,"error":{...}}`).
    Probe(probe::ProbeArgs),
    /// Print the runtime's capability document (`nodePackRuntimes`,
    /// `sandbox`) as JSON.
    Capabilities(capabilities::CapabilitiesArgs),
    /// Generate an Ed25519 key pair for signing packs.
    Keygen(trust::KeygenArgs),
    /// Install a pack from an OpenWOP registry (verified, locked in
    /// pack-lock.json).
    Install(install::InstallArgs),
    /// Sign a pack directory in the protocol's format (canonical pack.json
    /// with its `signing` block, keys/pack.json.sig).
    Sign(trust::SignArgs),
    /// Check a pack's signature, trust and integrity under a policy.
    Verify(trust::VerifyArgs),
    /// List what a new version of a pack requests beyond an old one.
    Diff(trust::DiffArgs),
    /// Run the executor service (MCP server mount, OpenWOP routes, invoke
    /// API over HTTP) until SIGTERM/SIGINT.
    Serve(Box<wop_serve::cli::ServeArgs>),
}

/// jemalloc, as every binary that runs the service (decision 0040).
#[global_allocator]
static ALLOCATOR: wop_serve::allocator::Allocator = wop_serve::allocator::Allocator;

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
            Command::Run(a) => run::run(*a).await,
            Command::Inspect(a) => inspect::inspect(a).await,
            Command::Demo(a) => demo::demo(a.json).await,
            Command::Pack(a) => pack::pack(a).await,
            Command::New(a) => new::new(a),
            Command::Effects(a) => effects::effects(a).await,
            Command::Tools(a) => tools::tools(a).await,
            Command::Usage(a) => usage::usage(a).await,
            Command::Probe(a) => probe::probe(a).await,
            Command::Capabilities(a) => capabilities::capabilities(a).await,
            Command::Keygen(a) => trust::keygen(a).await,
            Command::Install(a) => install::install(a).await,
            Command::Sign(a) => trust::sign(a).await,
            Command::Verify(a) => trust::verify(a).await,
            Command::Diff(a) => trust::diff(a).await,
            Command::Serve(a) => wop_serve::cli::run(*a)
                .await
                .map(|()| 0)
                .map_err(Into::into),
        }
    });
    // A blocking task that never ends (a sled flush parked after the
    // store failed; decision 0056) must not keep the process from exiting.
    rt.shutdown_timeout(wop_serve::SHUTDOWN_GRACE);
    match result {
        Ok(code) => ExitCode::from(code),
        Err(f) => {
            eprintln!("wop: {:#}", f.error);
            ExitCode::from(f.code)
        }
    }
}
