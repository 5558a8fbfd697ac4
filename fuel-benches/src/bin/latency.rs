//! Invocation latency of `hello`: the full wop path (fresh instance per
//! call, limits, WASI, classification, report) next to bare wasmtime
//! instantiate + call of the same component, in the same run. The third
//! baseline is a bare wasmtime configured exactly like wop's engine
//! (`wop_runtime::engine_config()`: the same pooling, keep-resident and
//! pagemap settings, fuel with the same yield interval, the same stacks),
//! so the ratio against it is wop's own overhead only.
//!
//! A fifth row runs the full path with every trace exported (OTLP/HTTP
//! JSON to a loopback collector on a thread of its own, answering `{}` as
//! an OTLP collector does), so the cost of tracing is read off the same
//! run; its ratio counts only if no span was dropped (the bench says how
//! many were). A sixth samples 1 % of traces (`traceidratio` 0.01, as
//! `OTEL_TRACES_SAMPLER` would set it). Each round runs every path for a
//! block of calls in turn, a traced runtime's block followed by its flush,
//! so an exporter works only in its own block (see the loop).
//! The collector used to run on the bench's own current-thread runtime and
//! echo each body back: it read requests only while an invocation waited,
//! so it, not the exporter, fell behind (15,592 spans dropped of 20,000).

//! A last row prices `wop serve`'s metrics: the time to record one
//! finished invocation into the `/metrics` families and the console's
//! recent ring (what the service does after every invocation), against
//! the full path's p50.
//!
//! Run: `cargo run --release -p fuel-benches --bin latency [-- N]`
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

/// The allocator `wop serve` runs on (decision 0040), so that library and
/// service figures compare like for like.
#[global_allocator]
static ALLOCATOR: wop_serve::allocator::Allocator = wop_serve::allocator::Allocator;

use fuel_benches::bare;
use std::time::{Duration, Instant};

/// Calls per path in one block of a round.
const BLOCK: usize = 500;

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
        let collector =
            wop_testkit::Server::start_detached(wop_testkit::Mode::Status(200, "{}".to_owned()));
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
    // Rounds of blocks, so machine noise hits all alike: in each round
    // every path runs BLOCK calls in a row, paths in turn, and each traced
    // runtime's block ends with its flush (its calls/s include it). So an
    // exporter works only in its own block, and every path runs with its
    // own code and slot warm. Before, the paths ran interleaved call by
    // call: the untraced rows paid for the traced row's exporting on the
    // other core (the untraced full path took 31 µs against 21 µs when the
    // traced runtime dropped its spans instead), and each call found the
    // caches full of the previous path's.
    let (mut bare, mut pooled, mut like, mut full, mut traced, mut sampled) = (
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
    );
    let (mut traced_flush, mut sampled_flush) = (Duration::ZERO, Duration::ZERO);
    let mut done = 0;
    while done < n {
        let block = BLOCK.min(n - done);
        for (pre, samples) in [(&pre_default, &mut bare), (&pre_pooling, &mut pooled)] {
            for _ in 0..block {
                let t = Instant::now();
                bare_once(pre).await;
                samples.push(t.elapsed());
            }
        }
        for _ in 0..block {
            let t = Instant::now();
            like_wop_once().await;
            like.push(t.elapsed());
        }
        for (r, samples, flush) in [
            (&rt, &mut full, None),
            (&traced_rt, &mut traced, Some(&mut traced_flush)),
            (&sampled_rt, &mut sampled, Some(&mut sampled_flush)),
        ] {
            for _ in 0..block {
                let t = Instant::now();
                let out = r.invoke(wop_req.clone()).await;
                samples.push(t.elapsed());
                assert!(out.outcome.is_ok());
            }
            if let Some(flush) = flush {
                let t = Instant::now();
                r.flush_traces(Duration::from_secs(10)).await;
                *flush += t.elapsed();
            }
        }
        done += block;
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
    let with_flush = |samples: Vec<Duration>, flush: Duration| {
        let total: Duration = samples.iter().sum::<Duration>() + flush;
        let calls = samples.len() as f64;
        let mut s = fuel_benches::stats(samples);
        s.per_sec = calls / total.as_secs_f64().max(1e-9);
        s
    };
    let tr = with_flush(traced, traced_flush);
    let sa = with_flush(sampled, sampled_flush);
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
