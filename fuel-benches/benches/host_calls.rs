//! Host-call overhead per interface, through the real runtime:
//!
//! - `host_call_log`: the `kernels` pack's `noop-log` kernel with n = 0 and
//!   n = 1000 `log.debug("x")` calls, through `Runtime::invoke` and through
//!   bare wasmtime (no-op host): (n1000 − n0) / 1000 is the cost of one call;
//! - `host_call_tool`: one `tools.call` of a no-op host-extension tool
//!   through the gate (the `tool-call` pack): a `read` tool (authorized, not
//!   claimed), a `write` tool claimed in the in-memory store, and a `write`
//!   tool claimed durably in sled (group commit on, the CLI's default).
//!
//! Run: `cargo bench -p fuel-benches --bench host_calls`, then
//! `cargo run --release -p fuel-benches --bin report` for the ratios.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod common;

use criterion::{Criterion, criterion_group, criterion_main};
use fuel_benches::gate::{READ_TOOL, WRITE_TOOL, invoke_ok, tool_request, tool_runtime};
use fuel_benches::{KERNELS_TYPE, bare, invoke_kernel, kernel_inputs, kernels_runtime};
use std::hint::black_box;
use std::sync::Arc;
use wop_runtime::store::SledStore;

/// log calls per invocation.
const N: u32 = 1000;

fn log_calls(c: &mut Criterion) {
    let tokio = common::tokio_rt();
    let wop = tokio.block_on(kernels_runtime()).unwrap();
    let pre = bare::pre(
        &bare::engine(true).unwrap(),
        &wop_test_packs::wasm_path("kernels"),
    )
    .unwrap();
    let mut g = c.benchmark_group("host_call_log");
    for n in [0, N] {
        let req = bare::request(KERNELS_TYPE, &kernel_inputs("noop-log", n));
        g.bench_function(format!("bare-n{n}"), |b| {
            b.iter(|| black_box(tokio.block_on(bare::invoke(&pre, &req)).unwrap()))
        });
    }
    for n in [0, N] {
        g.bench_function(format!("wop-n{n}"), |b| {
            b.iter(|| black_box(tokio.block_on(invoke_kernel(&wop, "noop-log", n)).unwrap()))
        });
    }
    g.finish();
}

fn tool_calls(c: &mut Criterion) {
    let tokio = common::tokio_rt();
    let memory = tokio.block_on(tool_runtime(None)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let sled = Arc::new(SledStore::open(&dir.path().join("effects")).unwrap());
    let durable = tokio.block_on(tool_runtime(Some(sled))).unwrap();
    let mut g = c.benchmark_group("host_call_tool");
    for (id, rt, tool) in [
        ("read-memory", &memory, READ_TOOL),
        ("write-memory", &memory, WRITE_TOOL),
        ("write-sled", &durable, WRITE_TOOL),
    ] {
        g.bench_function(id, |b| {
            b.iter(|| black_box(tokio.block_on(invoke_ok(rt, tool_request(tool))).unwrap()))
        });
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = common::config();
    targets = log_calls, tool_calls
}
criterion_main!(benches);
