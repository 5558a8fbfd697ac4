//! Benchmarks of the wop runtime and golden fuel numbers; see README.md.
//! Ratios against a bare wasmtime baseline measured in the same run, never
//! absolute thresholds.
//!
//! - [`bare`]: the bare-wasmtime host for components (the baseline);
//! - [`wat`]: the CPU kernels as a core module under each metering
//!   configuration;
//! - [`gate`]: gate fixtures (authorization, claims, no-op tools);
//! - [`invoke_kernel`]: the `kernels` testing pack through the runtime;
//! - [`soak`]: the soak run (`src/bin/soak.rs`).

pub mod bare;
pub mod gate;
pub mod soak;
pub mod wat;

use anyhow::{Result, anyhow};
use std::time::Duration;
use wop_runtime::{InvokeRequest, Outcome, Runtime, RuntimeConfig};

/// Writes one byte of every 64 in `buf`: between two measured calls, a
/// stand-in for the rest of a request's work (HTTP, other connections, the
/// load generator) taking the caches. `memory_store` and `languages
/// --profile --pollute-kib` use it.
pub fn pollute(buf: &mut [u8]) {
    for b in buf.iter_mut().step_by(64) {
        *b = b.wrapping_add(1);
    }
    std::hint::black_box(buf);
}

/// Percentiles of a sample, in microseconds.
#[derive(Debug, Clone, Copy)]
pub struct Stats {
    /// Median.
    pub p50_us: f64,
    /// 99th percentile.
    pub p99_us: f64,
    /// Calls per second (sequential).
    pub per_sec: f64,
}

/// Computes [`Stats`] from per-call durations.
pub fn stats(mut samples: Vec<Duration>) -> Stats {
    samples.sort();
    let n = samples.len().max(1);
    let at = |q: f64| {
        let i = ((n as f64 - 1.0) * q).round() as usize;
        samples.get(i).map_or(0.0, |d| d.as_secs_f64() * 1e6)
    };
    let total: f64 = samples.iter().map(Duration::as_secs_f64).sum();
    Stats {
        p50_us: at(0.5),
        p99_us: at(0.99),
        per_sec: if total > 0.0 { n as f64 / total } else { 0.0 },
    }
}

/// The `wop` binary next to this executable (`target/<profile>/wop`), for
/// the benches that start a real `wop serve`.
pub fn wop_next_to_exe() -> Result<std::path::PathBuf> {
    let exe = std::env::current_exe()?;
    let wop = exe
        .parent()
        .ok_or_else(|| anyhow!("{} has no directory", exe.display()))?
        .join("wop");
    if !wop.is_file() {
        return Err(anyhow!(
            "{} is missing: build it first with `cargo build --release -p wop-cli`",
            wop.display()
        ));
    }
    Ok(wop)
}

/// The node type of the `kernels` testing pack.
pub const KERNELS_TYPE: &str = "wop.testing.kernels";

/// The `kernels` pack's inputs for `kernel` (`loop`, `collatz`, `fib`,
/// `sieve`, `noop-log`) and `n`.
pub fn kernel_inputs(kernel: &str, n: u32) -> serde_json::Value {
    serde_json::json!({ "kernel": kernel, "n": n })
}

/// A runtime (default policy) with the `kernels` pack loaded.
pub async fn kernels_runtime() -> Result<Runtime> {
    let rt = Runtime::new(&RuntimeConfig::new())?;
    rt.load_pack(&wop_test_packs::pack_dir("kernels")).await?;
    Ok(rt)
}

/// What one invocation of the `kernels` pack returned and consumed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KernelRun {
    /// The output's `result`.
    pub result: u64,
    /// `usage.fuel_consumed` of the invocation.
    pub fuel: u64,
}

/// Runs `kernel(n)` of the `kernels` pack through [`Runtime::invoke`].
pub async fn invoke_kernel(rt: &Runtime, kernel: &str, n: u32) -> Result<KernelRun> {
    let report = rt
        .invoke(InvokeRequest::new(KERNELS_TYPE, kernel_inputs(kernel, n)))
        .await;
    match report.outcome {
        Ok(Outcome::Completed { output }) => Ok(KernelRun {
            result: output["result"]
                .as_u64()
                .ok_or_else(|| anyhow!("{kernel}/{n}: no `result` in {output}"))?,
            fuel: report.usage.fuel_consumed,
        }),
        other => Err(anyhow!("{kernel}/{n}: expected completed, got {other:?}")),
    }
}
