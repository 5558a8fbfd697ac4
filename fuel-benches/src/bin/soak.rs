//! The soak run (issue 14): a shared runtime — in this process and behind
//! the real `wop serve` — under a concurrent mix of honest and hostile
//! invocations for N minutes, recording every answer, host panics and RSS
//! over time. Exits non-zero if a call went unanswered or got an
//! unexpected answer, anything panicked, RSS grew more than 5 % between
//! the quiet points after the warm-up and after the run, or `wop serve` did not exit 0 on SIGTERM.
//!
//! ```sh
//! cargo build --release -p wop-cli     # serve mode runs target/<profile>/wop
//! cargo run --release -p fuel-benches --bin soak -- --mode library --minutes 10
//! cargo run --release -p fuel-benches --bin soak -- --mode serve --minutes 3
//! ```
//!
//! Flags: `--mode library|serve|both` (default library), `--seconds N` or
//! `--minutes N` (default 60 s; `both` runs each mode that long),
//! `--concurrency C` (default 16), `--store postgres://…|DIR` (default:
//! sled in a temp dir), `--wop PATH` (the `wop` binary for serve mode).
//! The last line is machine-readable: `soak: mode=… invocations=N
//! answered=N unexpected=0 unanswered=0 panics=0 rss_start_kib=…
//! rss_end_kib=… growth=…% ok`.

/// The allocator `wop serve` runs on (decision 0040), so that library and
/// service figures compare like for like.
#[global_allocator]
static ALLOCATOR: wop_serve::allocator::Allocator = wop_serve::allocator::Allocator;

use anyhow::{Context as _, Result, bail};
use fuel_benches::soak::{self, Report, Settings};
use std::time::Duration;

fn parse(args: &[String]) -> Result<(String, Settings)> {
    let mut mode = "library".to_owned();
    let mut s = Settings {
        duration: Duration::from_secs(60),
        concurrency: 16,
        store: None,
        wop: None,
    };
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        let mut value = || it.next().with_context(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--mode" => mode = value()?.clone(),
            "--seconds" => s.duration = Duration::from_secs_f64(value()?.parse()?),
            "--minutes" => s.duration = Duration::from_secs_f64(value()?.parse::<f64>()? * 60.0),
            "--concurrency" => s.concurrency = value()?.parse()?,
            "--store" => s.store = Some(value()?.clone()),
            "--wop" => s.wop = Some(value()?.into()),
            "-h" | "--help" => {
                println!(
                    "soak [--mode library|serve|both] [--seconds N | --minutes N] [--concurrency C] [--store postgres://…|DIR] [--wop PATH]"
                );
                std::process::exit(0);
            }
            other => bail!("unknown flag {other} (see --help)"),
        }
    }
    if !matches!(mode.as_str(), "library" | "serve" | "both") {
        bail!("--mode must be library, serve or both, not {mode}");
    }
    if s.concurrency == 0 || s.duration.is_zero() {
        bail!("--concurrency and the duration must be positive");
    }
    Ok((mode, s))
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (mode, settings) = parse(&args)?;
    let mut reports: Vec<Report> = Vec::new();
    if mode == "library" || mode == "both" {
        reports.push(soak::library::run(&settings)?);
    }
    if mode == "serve" || mode == "both" {
        reports.push(soak::serve::run(&settings)?);
    }
    println!();
    for r in &reports {
        println!("{}", r.line());
    }
    if reports.len() > 1 {
        let ok = reports.iter().all(Report::ok);
        println!("soak: mode=both {}", if ok { "ok" } else { "FAIL" });
    }
    if !reports.iter().all(Report::ok) {
        std::process::exit(1);
    }
    Ok(())
}
