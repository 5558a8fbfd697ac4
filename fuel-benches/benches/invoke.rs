//! Full-path invocation of `hello` through `Runtime::invoke` (fresh
//! instance per call: limits, fuel, WASI context, log capture, report) vs
//! bare wasmtime instantiate + call of the same component, in the same run.
//!
//! Run: `cargo bench -p fuel-benches --bench invoke`, then
//! `cargo run --release -p fuel-benches --bin report` for the ratios.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod common;

use criterion::{Criterion, criterion_group, criterion_main};
use fuel_benches::bare;
use std::hint::black_box;
use wop_runtime::{InvokeRequest, Runtime, RuntimeConfig};

fn invoke_hello(c: &mut Criterion) {
    let tokio = common::tokio_rt();
    let inputs = serde_json::json!({"name": "Ada"});
    let hello = wop_test_packs::wasm_path("hello");
    // `bare`: the pooling allocator, as wop uses; `bare-on-demand`:
    // wasmtime's default allocation.
    let pooling = bare::pre(&bare::engine(true).unwrap(), &hello).unwrap();
    let on_demand = bare::pre(&bare::engine(false).unwrap(), &hello).unwrap();
    let req = bare::request("wop.samples.hello", &inputs);
    let rt = Runtime::new(&RuntimeConfig::new()).unwrap();
    tokio
        .block_on(rt.load_pack(&wop_test_packs::pack_dir("hello")))
        .unwrap();
    let wop_req = InvokeRequest::new("wop.samples.hello", inputs);

    let mut g = c.benchmark_group("invoke_hello");
    g.bench_function("bare", |b| {
        b.iter(|| black_box(tokio.block_on(bare::invoke(&pooling, &req)).unwrap()))
    });
    g.bench_function("bare-on-demand", |b| {
        b.iter(|| black_box(tokio.block_on(bare::invoke(&on_demand, &req)).unwrap()))
    });
    g.bench_function("wop", |b| {
        b.iter(|| {
            let r = tokio.block_on(rt.invoke(wop_req.clone()));
            assert!(r.outcome.is_ok());
            black_box(r)
        })
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = common::config();
    targets = invoke_hello
}
criterion_main!(benches);
