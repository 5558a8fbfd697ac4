//! Invocation latency of `hello`: the full wop path (fresh instance per
//! call, limits, WASI, classification, report) next to bare wasmtime
//! instantiate + call of the same component, in the same run.
//!
//! Run: `cargo run --release -p fuel-benches --bin latency [-- N]`
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::time::Instant;
use wasmtime::component::{Component, HasSelf, Linker};
use wasmtime::{Config, Engine, Store};
use wasmtime_wasi::{ResourceTable, WasiCtx, WasiCtxView, WasiView};

wasmtime::component::bindgen!({
    path: "../wit",
    world: "node-pack",
    imports: { default: async },
    exports: { default: async },
});

struct Bare {
    wasi: WasiCtx,
    table: ResourceTable,
}

impl WasiView for Bare {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

use openwop::node_pack::{clock, http, log, mcp, random, tools, types};
impl types::Host for Bare {}
impl log::Host for Bare {
    async fn log(&mut self, _: log::Level, _: String, _: Option<String>) {}
}
impl clock::Host for Bare {
    async fn now_ms(&mut self) -> u64 {
        0
    }
}
impl random::Host for Bare {
    async fn fill(&mut self, len: u32) -> Vec<u8> {
        vec![0; len as usize]
    }
}
impl tools::Host for Bare {
    async fn call(
        &mut self,
        _: String,
        _: String,
        _: Option<String>,
    ) -> Result<String, tools::ToolError> {
        Ok("null".into())
    }
    async fn list(&mut self) -> Vec<tools::ToolDescriptor> {
        Vec::new()
    }
}
impl http::Host for Bare {
    async fn safe_fetch(&mut self, _: http::Request) -> Result<http::Response, types::ErrorInfo> {
        Err(types::ErrorInfo {
            code: "x".into(),
            message: String::new(),
            details: None,
        })
    }
}
impl mcp::Host for Bare {
    async fn call_tool(
        &mut self,
        _: String,
        _: String,
        _: String,
        _: Option<String>,
    ) -> Result<String, types::ErrorInfo> {
        Ok("null".into())
    }
    async fn list_tools(
        &mut self,
        _: String,
        _: Option<String>,
    ) -> Result<String, types::ErrorInfo> {
        Ok("null".into())
    }
    async fn read_resource(&mut self, _: String, _: String) -> Result<String, types::ErrorInfo> {
        Ok("null".into())
    }
    async fn server_health(&mut self, _: String) -> Result<String, types::ErrorInfo> {
        Ok("null".into())
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(2000);
    let inputs = serde_json::json!({"name": "Ada"});

    // Bare wasmtime: WASI p2, no-op host functions, no fuel, no limits.
    // Two baselines: the default config (on-demand allocation) and the
    // pooling allocator wop itself uses.
    let default_engine = Engine::new(&Config::new()).unwrap();
    let pooling_engine = {
        let mut c = Config::new();
        c.allocation_strategy(wasmtime::InstanceAllocationStrategy::pooling());
        Engine::new(&c).unwrap()
    };
    let pre_for = |engine: &Engine| {
        let component = Component::from_file(engine, wop_test_packs::wasm_path("hello")).unwrap();
        let mut linker: Linker<Bare> = Linker::new(engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut linker).unwrap();
        NodePack::add_to_linker::<Bare, HasSelf<Bare>>(&mut linker, |s| s).unwrap();
        NodePackPre::new(linker.instantiate_pre(&component).unwrap()).unwrap()
    };
    let pre_default = pre_for(&default_engine);
    let pre_pooling = pre_for(&pooling_engine);
    let req = exports::openwop::node_pack::node::Request {
        context: types::NodeContext {
            run_id: "r".into(),
            node_id: "n".into(),
            tenant_id: "t".into(),
            attempt: 1,
            type_id: "wop.samples.hello".into(),
        },
        inputs: inputs.to_string(),
        config: "{}".into(),
        resume: None,
    };
    let bare_once = |pre: &NodePackPre<Bare>| {
        let pre = pre.clone();
        let req = req.clone();
        async move {
            let mut store = Store::new(
                pre.engine(),
                Bare {
                    wasi: WasiCtx::builder().build(),
                    table: ResourceTable::new(),
                },
            );
            let inst = pre.instantiate_async(&mut store).await.unwrap();
            inst.openwop_node_pack_node()
                .call_invoke(&mut store, &req)
                .await
                .unwrap()
                .unwrap();
        }
    };

    // Full wop path.
    let rt = wop_runtime::Runtime::new(&wop_runtime::RuntimeConfig::new()).unwrap();
    rt.load_pack(&wop_test_packs::pack_dir("hello"))
        .await
        .unwrap();
    let wop_req = wop_runtime::InvokeRequest::new("wop.samples.hello", inputs.clone());

    for _ in 0..200 {
        bare_once(&pre_default).await;
        bare_once(&pre_pooling).await;
        assert!(rt.invoke(wop_req.clone()).await.outcome.is_ok());
    }
    // Interleave rounds so machine noise hits all alike.
    let (mut bare, mut pooled, mut full) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..n {
        let t = Instant::now();
        bare_once(&pre_default).await;
        bare.push(t.elapsed());
        let t = Instant::now();
        bare_once(&pre_pooling).await;
        pooled.push(t.elapsed());
        let t = Instant::now();
        let r = rt.invoke(wop_req.clone()).await;
        full.push(t.elapsed());
        assert!(r.outcome.is_ok());
    }
    let b = fuel_benches::stats(bare);
    let p = fuel_benches::stats(pooled);
    let f = fuel_benches::stats(full);
    println!("hello, {n} sequential invocations each, fresh instance per call");
    println!("| path | p50 | p99 | calls/s |");
    println!("|---|---|---|---|");
    for (name, s) in [
        ("bare wasmtime, default config (instantiate + call)", b),
        ("bare wasmtime, pooling allocator (instantiate + call)", p),
        ("wop full path (limits, fuel, WASI ctx, log, report)", f),
    ] {
        println!(
            "| {name} | {:.1} µs | {:.1} µs | {:.0} |",
            s.p50_us, s.p99_us, s.per_sec
        );
    }
    for (name, base) in [("bare default", b), ("bare pooling", p)] {
        println!(
            "| ratio wop / {name} | {:.2}× | {:.2}× | {:.2}× |",
            f.p50_us / base.p50_us,
            f.p99_us / base.p99_us,
            f.per_sec / base.per_sec
        );
    }
}
