//! Shared by every benchmark: a criterion configuration small enough that
//! `cargo bench -p fuel-benches` finishes in a few minutes on 2 cores, and
//! the tokio runtime invocations run on.
#![allow(dead_code)]

use criterion::Criterion;
use std::time::Duration;

/// 10 samples, 0.5 s warm-up, 2 s measurement (command-line flags such as
/// `--sample-size` or `--measurement-time` override these).
pub fn config() -> Criterion {
    Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .configure_from_args()
}

/// A current-thread tokio runtime with timers (what `wop run` uses).
pub fn tokio_rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}
