//! Invocation latency of `hello`: the full wop path (fresh instance per
//! call, limits, WASI, classification, report) next to bare wasmtime
//! instantiate + call of the same component, in the same run. The third
//! baseline is a bare wasmtime configured exactly like wop's engine
//! (`wop_runtime::engine_config()`: the same pooling, keep-resident and
//! pagemap settings, fuel with the same yield interval, the same stacks),
//! so the ratio against it is wop's own overhead only.
//!
//! A fifth row runs the full path with every trace exported (OTLP/HTTP
//! JSON to a loopback collector, on this same thread), so the cost of
//! tracing is read off the same run; its ratio counts only if no span was
//! dropped (the bench says how many were). A sixth samples 1 % of traces
//! (`traceidratio` 0.01, as `OTEL_TRACES_SAMPLER` would set it).
//!
//! A last row prices `wop serve`'s metrics: the time to record one
//! finished invocation into the `/metrics` families and the console's
//! recent ring (what the service does after every invocation), against
//! the full path's p50.
//!
//! Run: `cargo run --release -p fuel-benches --bin latency [-- N]`
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use fuel_benches::bare;
use std::time::Instant;

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(2000);
    let inputs = serde_json::json!({"name": "Ada"});

    // Bare wasmtime: WASI p2, no-op host functions, no limits. Three
    // baselines: the default config (on-demand allocation, no fuel), the
    // default pooling allocator (no fuel), and wop's own engine config.
    let hello = wop_test_packs::wasm_path("hello");
    let pre_default = bare::pre(&bare::engine(false).unwrap(), &hello).unwrap();
    let pre_pooling = bare::pre(&bare::engine(true).unwrap(), &hello).unwrap();
    let pre_like_wop = bare::pre(&bare::engine_like_wop().unwrap(), &hello).unwrap();
    let req = bare::request("wop.samples.hello", &inputs);
    let bare_once = |pre: &bare::NodePackPre<bare::Bare>| {
        let (pre, req) = (pre.clone(), req.clone());
        async move {
            bare::invoke(&pre, &req).await.unwrap();
        }
    };
    let like_wop_once = || {
        let (pre, req) = (pre_like_wop.clone(), req.clone());
        async move {
            bare::invoke_like_wop(&pre, &req).await.unwrap();
        }
    };

    // Full wop path.
    let rt = wop_runtime::Runtime::new(&wop_runtime::RuntimeConfig::new()).unwrap();
    rt.load_pack(&wop_test_packs::pack_dir("hello"))
        .await
        .unwrap();
    let wop_req = wop_runtime::InvokeRequest::new("wop.samples.hello", inputs.clone());
    let traced = |sampler| async move {
        let collector = wop_testkit::Server::start(wop_testkit::Mode::Ok).await;
        let mut cfg = wop_runtime::RuntimeConfig::new();
        cfg.otlp(wop_runtime::gate::telemetry::otlp::Config {
            endpoint: collector.url("/v1/traces"),
            headers: Vec::new(),
            sampler,
        });
        let rt = wop_runtime::Runtime::new(&cfg).unwrap();
        rt.load_pack(&wop_test_packs::pack_dir("hello"))
            .await
            .unwrap();
        (rt, collector)
    };
    use wop_runtime::gate::telemetry::otlp::Sampler;
    let (traced_rt, collector) = traced(Sampler::AlwaysOn).await;
    let (sampled_rt, sampled_collector) =
        traced(Sampler::from_vars(Some("traceidratio"), Some("0.01")).0).await;

    for _ in 0..200 {
        bare_once(&pre_default).await;
        bare_once(&pre_pooling).await;
        like_wop_once().await;
        assert!(rt.invoke(wop_req.clone()).await.outcome.is_ok());
        assert!(traced_rt.invoke(wop_req.clone()).await.outcome.is_ok());
        assert!(sampled_rt.invoke(wop_req.clone()).await.outcome.is_ok());
    }
    // Interleave rounds so machine noise hits all alike.
    let (mut bare, mut pooled, mut like, mut full, mut traced, mut sampled) = (
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
    );
    for _ in 0..n {
        let t = Instant::now();
        bare_once(&pre_default).await;
        bare.push(t.elapsed());
        let t = Instant::now();
        bare_once(&pre_pooling).await;
        pooled.push(t.elapsed());
        let t = Instant::now();
        like_wop_once().await;
        like.push(t.elapsed());
        let t = Instant::now();
        let r = rt.invoke(wop_req.clone()).await;
        full.push(t.elapsed());
        assert!(r.outcome.is_ok());
        let t = Instant::now();
        let r = traced_rt.invoke(wop_req.clone()).await;
        traced.push(t.elapsed());
        assert!(r.outcome.is_ok());
        let t = Instant::now();
        let r = sampled_rt.invoke(wop_req.clone()).await;
        sampled.push(t.elapsed());
        assert!(r.outcome.is_ok());
    }
    for r in [&traced_rt, &sampled_rt] {
        r.flush_traces(std::time::Duration::from_secs(10)).await;
    }
    let report = rt.invoke(wop_req.clone()).await;
    const RECORDS: usize = 100_000;
    let observe =
        wop_serve::bench::record_observability("wop.samples.hello", "anon:local", &report, RECORDS);
    let observe_us = observe.as_secs_f64() * 1e6 / RECORDS as f64;
    let (dropped, failed) = traced_rt.trace_export_losses();
    let (sampled_dropped, sampled_failed) = sampled_rt.trace_export_losses();
    let b = fuel_benches::stats(bare);
    let p = fuel_benches::stats(pooled);
    let l = fuel_benches::stats(like);
    let f = fuel_benches::stats(full);
    let tr = fuel_benches::stats(traced);
    let sa = fuel_benches::stats(sampled);
    println!("hello, {n} sequential invocations each, fresh instance per call");
    println!("| path | p50 | p99 | calls/s |");
    println!("|---|---|---|---|");
    for (name, s) in [
        ("bare wasmtime, default config (instantiate + call)", b),
        ("bare wasmtime, pooling allocator (instantiate + call)", p),
        (
            "bare wasmtime, wop's engine config (pooling + reset, fuel + yield)",
            l,
        ),
        ("wop full path (limits, fuel, WASI ctx, log, report)", f),
        (
            "wop full path, every trace exported (OTLP/HTTP JSON, loopback)",
            tr,
        ),
        (
            "wop full path, 1 % of traces sampled (traceidratio 0.01)",
            sa,
        ),
    ] {
        println!(
            "| {name} | {:.1} µs | {:.1} µs | {:.0} |",
            s.p50_us, s.p99_us, s.per_sec
        );
    }
    for (name, base) in [
        ("bare default", b),
        ("bare pooling", p),
        ("bare configured like wop", l),
    ] {
        println!(
            "| ratio wop / {name} | {:.2}× | {:.2}× | {:.2}× |",
            f.p50_us / base.p50_us,
            f.p99_us / base.p99_us,
            f.per_sec / base.per_sec
        );
    }
    let every = if dropped == 0 && failed == 0 {
        "every span exported"
    } else {
        "NOT comparable: spans were dropped or failed, see below"
    };
    for (name, s) in [
        (format!("every trace exported / untraced wop ({every})"), tr),
        ("1 % sampled / untraced wop".to_owned(), sa),
    ] {
        println!(
            "| ratio {name} | {:.2}× | {:.2}× | {:.2}× |",
            s.p50_us / f.p50_us,
            s.p99_us / f.p99_us,
            s.per_sec / f.per_sec
        );
    }
    println!(
        "| metrics + console record per invocation (wop serve) | {observe_us:.2} µs = {:.1} % of the full path's p50 | | |",
        100.0 * observe_us / f.p50_us
    );
    println!(
        "traces, every one exported: {} export requests received, {dropped} spans dropped, {failed} exports failed",
        collector.count()
    );
    println!(
        "traces, 1 % sampled: {} export requests received, {sampled_dropped} spans dropped, {sampled_failed} exports failed",
        sampled_collector.count()
    );
}
