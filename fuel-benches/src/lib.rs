//! Benchmarks of the wop runtime; see README.md. Ratios against a bare
//! wasmtime baseline measured in the same run, never absolute thresholds.

use std::time::Duration;

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
