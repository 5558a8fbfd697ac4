//! The bare-wasmtime baseline for components: the `node-pack` world bound
//! with `bindgen!`, WASI p2 and no-op host functions, no fuel, no limits.
//! Benchmarks compare the full wop path against instantiate + call here.

use std::path::Path;
use wasmtime::component::{Component, HasSelf, Linker};
use wasmtime::{Config, Engine, InstanceAllocationStrategy, Result, Store, format_err};
use wasmtime_wasi::{ResourceTable, WasiCtx, WasiCtxView, WasiView};

/// Host bindings of the `openwop:node-pack` world (generated).
#[allow(missing_docs)]
pub mod bindings {
    wasmtime::component::bindgen!({
        path: "../wit",
        world: "node-pack",
        imports: { default: async },
        exports: { default: async },
    });
}

use bindings::exports::openwop::node_pack::node;
use bindings::openwop::node_pack::{clock, http, log, mcp, random, tools, types};
pub use bindings::{NodePack, NodePackPre};

/// Host state of a bare invocation: an empty WASI context, no-op imports.
pub struct Bare {
    wasi: WasiCtx,
    table: ResourceTable,
}

impl Bare {
    /// A fresh state: WASI with nothing granted.
    pub fn new() -> Self {
        Self {
            wasi: WasiCtx::builder().build(),
            table: ResourceTable::new(),
        }
    }
}

impl Default for Bare {
    fn default() -> Self {
        Self::new()
    }
}

impl WasiView for Bare {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

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
fn unsupported() -> types::ErrorInfo {
    types::ErrorInfo {
        code: "unsupported".into(),
        message: String::new(),
        details: None,
    }
}
impl http::Host for Bare {
    async fn safe_fetch(&mut self, _: http::Request) -> Result<http::Response, types::ErrorInfo> {
        Err(unsupported())
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
        Err(unsupported())
    }
    async fn list_tools(
        &mut self,
        _: String,
        _: Option<String>,
    ) -> Result<String, types::ErrorInfo> {
        Err(unsupported())
    }
    async fn read_resource(&mut self, _: String, _: String) -> Result<String, types::ErrorInfo> {
        Err(unsupported())
    }
    async fn server_health(&mut self, _: String) -> Result<String, types::ErrorInfo> {
        Err(unsupported())
    }
}

/// A bare engine: wasmtime's default configuration (no fuel, no epochs),
/// optionally with the pooling allocator wop itself uses.
pub fn engine(pooling: bool) -> Result<Engine> {
    engine_with(pooling, false)
}

/// A bare engine configured exactly like wop's process-wide engine (the
/// same `wasmtime::Config`: pooling allocator with its keep-resident and
/// pagemap settings, fuel on, the same stacks), so that a ratio against it
/// is wop's own overhead only. Invoke with [`invoke_like_wop`].
pub fn engine_like_wop() -> Result<Engine> {
    Engine::new(&wop_runtime::engine_config())
}

/// [`invoke`] on an [`engine_like_wop`] engine: fuel granted (wop's default
/// limit) and the same fuel-yield interval wop sets on every store.
pub async fn invoke_like_wop(pre: &NodePackPre<Bare>, req: &node::Request) -> Result<String> {
    let fuel = wop_runtime::Limits::default().fuel;
    let mut store = Store::new(pre.engine(), Bare::new());
    store.set_fuel(fuel)?;
    store.fuel_async_yield_interval(Some(wop_runtime::FUEL_YIELD_INTERVAL))?;
    call(pre, &mut store, req).await
}

/// [`engine`], with fuel metering on or off (then call [`invoke_fueled`]).
pub fn engine_with(pooling: bool, fuel: bool) -> Result<Engine> {
    let mut c = Config::new();
    c.consume_fuel(fuel);
    if pooling {
        c.allocation_strategy(InstanceAllocationStrategy::pooling());
    }
    Engine::new(&c)
}

/// Compiles the component at `wasm` and links it against WASI p2 and the
/// no-op host, ready to instantiate.
pub fn pre(engine: &Engine, wasm: &Path) -> Result<NodePackPre<Bare>> {
    let component = Component::from_file(engine, wasm)
        .map_err(|e| e.context(format!("compile {}", wasm.display())))?;
    let mut linker: Linker<Bare> = Linker::new(engine);
    wasmtime_wasi::p2::add_to_linker_async(&mut linker)?;
    NodePack::add_to_linker::<Bare, HasSelf<Bare>>(&mut linker, |s| s)?;
    NodePackPre::new(linker.instantiate_pre(&component)?)
}

/// A request for `type_id` with `inputs`, a fixed context and `{}` config.
pub fn request(type_id: &str, inputs: &serde_json::Value) -> node::Request {
    node::Request {
        context: types::NodeContext {
            run_id: "r".into(),
            node_id: "n".into(),
            tenant_id: "t".into(),
            attempt: 1,
            type_id: type_id.into(),
        },
        inputs: inputs.to_string(),
        config: "{}".into(),
        resume: None,
    }
}

/// One bare invocation: fresh store and instance, call `invoke`. Returns
/// the `completed` output (JSON text); any other outcome is an error.
/// (wasmtime 48 has its own [`wasmtime::Error`]; this module uses it.)
pub async fn invoke(pre: &NodePackPre<Bare>, req: &node::Request) -> Result<String> {
    invoke_fueled(pre, req, None).await
}

/// [`invoke`] with `fuel` granted first (for an engine with fuel on).
pub async fn invoke_fueled(
    pre: &NodePackPre<Bare>,
    req: &node::Request,
    fuel: Option<u64>,
) -> Result<String> {
    let mut store = Store::new(pre.engine(), Bare::new());
    if let Some(f) = fuel {
        store.set_fuel(f)?;
    }
    call(pre, &mut store, req).await
}

/// Instantiates `pre` in `store` and calls `invoke`.
async fn call(
    pre: &NodePackPre<Bare>,
    store: &mut Store<Bare>,
    req: &node::Request,
) -> Result<String> {
    let instance = pre.instantiate_async(&mut *store).await?;
    match instance
        .openwop_node_pack_node()
        .call_invoke(&mut *store, req)
        .await?
    {
        Ok(node::Outcome::Completed(output)) => Ok(output),
        Ok(node::Outcome::Suspended(_)) => Err(format_err!("the node suspended")),
        Err(e) => Err(format_err!("the node failed: {}: {}", e.code, e.message)),
    }
}
