//! CPU kernels under each metering configuration, ratios vs bare:
//!
//! - `kernels_wat/<kernel>`: the WAT core module (`src/kernels.wat`) on a
//!   plain engine: `bare` (no fuel, no epoch), `fuel`, `epoch` (1 ms ticker
//!   thread), `fuel+epoch`, and `runtime(fuel+yield+timeout)`: what
//!   wop-runtime uses (fuel, async yield every 100 000 units, tokio timeout);
//! - `kernels_pack/<kernel>`: the `kernels` component pack through
//!   `Runtime::invoke` (`wop`) vs bare wasmtime of the same component
//!   (`bare`), and bare wasmtime with fuel on (`bare+fuel`: how much of
//!   the difference is fuel metering);
//! - then (printed, not a criterion benchmark) how long after a 50 ms
//!   deadline each configuration with a wall clock stops `loop br 0`.
//!
//! Run: `cargo bench -p fuel-benches --bench kernels`, then
//! `cargo run --release -p fuel-benches --bin report` for the ratios.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod common;

use criterion::{Criterion, criterion_group, criterion_main};
use fuel_benches::wat::{FUEL_LIMIT, Kernel, Metering, WatKernels};
use fuel_benches::{KERNELS_TYPE, bare, invoke_kernel, kernel_inputs, kernels_runtime};
use std::hint::black_box;
use std::time::Duration;

fn wat_kernels(c: &mut Criterion) {
    let tokio = common::tokio_rt();
    let configs: Vec<(Metering, WatKernels)> = Metering::ALL
        .iter()
        .map(|&m| (m, WatKernels::new(m).unwrap()))
        .collect();
    for kernel in Kernel::ALL {
        let n = kernel.bench_n();
        let mut g = c.benchmark_group(format!("kernels_wat/{}", kernel.name()));
        let expected = tokio.block_on(configs[0].1.call(kernel, n)).unwrap().result;
        for (m, k) in &configs {
            g.bench_function(m.name(), |b| {
                b.iter(|| {
                    let run = tokio.block_on(k.call(kernel, black_box(n))).unwrap();
                    assert_eq!(run.result, expected);
                    run
                })
            });
        }
        g.finish();
    }
}

fn pack_kernels(c: &mut Criterion) {
    let tokio = common::tokio_rt();
    let wop = tokio.block_on(kernels_runtime()).unwrap();
    let wasm = wop_test_packs::wasm_path("kernels");
    let pre = bare::pre(&bare::engine(true).unwrap(), &wasm).unwrap();
    let fueled = bare::pre(&bare::engine_with(true, true).unwrap(), &wasm).unwrap();
    for kernel in Kernel::ALL {
        let n = kernel.bench_n();
        let req = bare::request(KERNELS_TYPE, &kernel_inputs(kernel.name(), n));
        let mut g = c.benchmark_group(format!("kernels_pack/{}", kernel.name()));
        g.bench_function("bare", |b| {
            b.iter(|| black_box(tokio.block_on(bare::invoke(&pre, &req)).unwrap()))
        });
        g.bench_function("bare+fuel", |b| {
            b.iter(|| {
                black_box(
                    tokio
                        .block_on(bare::invoke_fueled(&fueled, &req, Some(FUEL_LIMIT)))
                        .unwrap(),
                )
            })
        });
        g.bench_function("wop", |b| {
            b.iter(|| {
                black_box(
                    tokio
                        .block_on(invoke_kernel(&wop, kernel.name(), n))
                        .unwrap(),
                )
            })
        });
        g.finish();
    }
}

/// Median of 7 stops of `loop br 0` after a 50 ms deadline.
fn stop_latency(_: &mut Criterion) {
    let tokio = common::tokio_rt();
    let deadline = Duration::from_millis(50);
    println!("\nstop latency of `loop br 0`, deadline {deadline:?}, median of 7:");
    for m in [Metering::Epoch, Metering::FuelEpoch, Metering::Runtime] {
        let k = WatKernels::new(m).unwrap();
        let mut over: Vec<Duration> = (0..7)
            .map(|_| tokio.block_on(k.stop_latency(deadline)).unwrap())
            .collect();
        over.sort();
        println!(
            "stop_latency/{}: {:.2} ms after the deadline (min {:.2}, max {:.2})",
            m.name(),
            over[3].as_secs_f64() * 1e3,
            over[0].as_secs_f64() * 1e3,
            over[6].as_secs_f64() * 1e3
        );
    }
}

criterion_group! {
    name = benches;
    config = common::config();
    targets = wat_kernels, pack_kernels, stop_latency
}
criterion_main!(benches);
