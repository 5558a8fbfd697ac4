//! The build: wizer instruments the engine, the engine loads the bundle
//! under a fixed, deterministic preview 1 and bounded fuel and memory,
//! wizer snapshots the heap, and wit-component encodes the component.

use crate::error::JsBuildError;
use crate::preview1::{self, BuildIo};
use std::future::Future;
use std::pin::pin;
use std::sync::OnceLock;
use std::task::{Context, Poll, Waker};
use wasmtime::{Config, Engine, Instance, Linker, Module, Store, StoreLimitsBuilder, Val};
use wasmtime_wizer::{InstanceState, SnapshotVal, Wizer};

/// The engine's build-time initializer.
const INIT_FUNC: &str = "wop_js_init";
/// Fuel for a pack's top-level code (loading the prelude costs about
/// 1/1000 of it).
pub(crate) const BUILD_FUEL: u64 = 20_000_000_000;
/// Memory for a pack's top-level code. The snapshot holds the whole linear
/// memory, so this also bounds the component written to the cache (and
/// equals the runtime's default memory cap: a pack loaded with more could
/// not run anyway).
pub(crate) const BUILD_MEMORY: usize = 64 << 20;

/// Drives a future that never waits (wizer's snapshot over an instance
/// whose state is all in memory).
fn ready<F: Future>(f: F) -> Result<F::Output, JsBuildError> {
    let mut f = pin!(f);
    match f.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(v) => Ok(v),
        Poll::Pending => Err(JsBuildError::Engine(
            "the snapshot waited on nothing".into(),
        )),
    }
}

struct Snap<'a> {
    store: &'a mut Store<BuildIo>,
    instance: Instance,
}

impl InstanceState for Snap<'_> {
    async fn global_get(&mut self, name: &str, _: wasmparser::ValType) -> SnapshotVal {
        match self
            .instance
            .get_global(&mut *self.store, name)
            .map(|g| g.get(&mut *self.store))
        {
            Some(Val::I32(x)) => SnapshotVal::I32(x),
            Some(Val::I64(x)) => SnapshotVal::I64(x),
            Some(Val::F32(x)) => SnapshotVal::F32(x),
            Some(Val::F64(x)) => SnapshotVal::F64(x),
            Some(Val::V128(x)) => SnapshotVal::V128(x.as_u128()),
            // The instrumented module exports every global wizer asks for,
            // all of number types; nothing else can reach here.
            _ => SnapshotVal::I32(0),
        }
    }

    async fn memory_contents(&mut self, name: &str, contents: impl FnOnce(&[u8]) + Send) {
        match self.instance.get_memory(&mut *self.store, name) {
            Some(m) => contents(m.data(&*self.store)),
            None => contents(&[]),
        }
    }
}

fn engine_error(what: &str) -> impl Fn(wasmtime::Error) -> JsBuildError + '_ {
    move |e| JsBuildError::Engine(format!("{what}: {e:#}"))
}

/// The instrumented engine, compiled once per process (every pack's build
/// starts from the same instrumented bytes).
fn compiled(instrumented: &[u8]) -> Result<&'static (Engine, Module), JsBuildError> {
    static COMPILED: OnceLock<Result<(Engine, Module), String>> = OnceLock::new();
    COMPILED
        .get_or_init(|| {
            let mut config = Config::new();
            config.consume_fuel(true);
            let engine = Engine::new(&config).map_err(|e| format!("build engine: {e:#}"))?;
            let module = Module::new(&engine, instrumented)
                .map_err(|e| format!("cannot compile the engine: {e:#}"))?;
            Ok((engine, module))
        })
        .as_ref()
        .map_err(|e| JsBuildError::Engine(e.clone()))
}

/// Pre-initializes `engine_wasm` with `bundle` (the JSON the engine reads on
/// stdin) and returns the snapshot, a core module.
pub(crate) fn snapshot(engine_wasm: &[u8], bundle: &[u8]) -> Result<Vec<u8>, JsBuildError> {
    let mut wizer = Wizer::new();
    wizer.init_func(INIT_FUNC);
    let (cx, instrumented) = wizer
        .instrument(engine_wasm)
        .map_err(engine_error("cannot instrument the engine"))?;
    let (engine, module) = compiled(&instrumented)?;
    let mut linker = Linker::new(engine);
    preview1::add(&mut linker).map_err(engine_error("preview1"))?;
    // Host calls at build time (top-level code calling fetch or a tool)
    // trap: the pack's code runs for real only inside an invocation.
    linker
        .define_unknown_imports_as_traps(module)
        .map_err(engine_error("cannot link the engine"))?;
    let limits = StoreLimitsBuilder::new().memory_size(BUILD_MEMORY).build();
    let mut store = Store::new(
        engine,
        BuildIo {
            stdin: bundle.to_vec(),
            read: 0,
            stderr: Vec::new(),
            limits,
        },
    );
    store.limiter(|io| &mut io.limits);
    store.set_fuel(BUILD_FUEL).map_err(engine_error("fuel"))?;
    let instance = linker
        .instantiate(&mut store, module)
        .map_err(engine_error("cannot instantiate the engine"))?;
    let init = instance
        .get_typed_func::<(), ()>(&mut store, INIT_FUNC)
        .map_err(engine_error("the engine has no initializer"))?;
    if let Err(e) = init.call(&mut store, ()) {
        let stderr = String::from_utf8_lossy(&store.data().stderr).into_owned();
        if let Some(err) = JsBuildError::from_engine_stderr(&stderr) {
            return Err(err);
        }
        if store.get_fuel().is_ok_and(|f| f == 0) {
            return Err(JsBuildError::Limit(format!(
                "the pack's top-level code used all of the build's {BUILD_FUEL} fuel (an endless loop at module level?)"
            )));
        }
        return Err(JsBuildError::Limit(format!(
            "the pack's top-level code trapped while loading ({e:#}); it may have exceeded the build's {} MiB of memory or called the host, which top-level code cannot{}",
            BUILD_MEMORY >> 20,
            if stderr.is_empty() {
                String::new()
            } else {
                format!("; engine said: {}", stderr.trim())
            }
        )));
    }
    ready(wizer.snapshot(
        &cx,
        &mut Snap {
            store: &mut store,
            instance,
        },
    ))?
    .map_err(engine_error("snapshot"))
}

/// Encodes the snapshot as a component (preview 1 through the reactor
/// adapter, the world from the engine's embedded WIT).
pub(crate) fn encode(core: &[u8]) -> Result<Vec<u8>, JsBuildError> {
    wit_component::ComponentEncoder::default()
        .validate(true)
        .module(core)
        .and_then(|e| {
            e.adapter(
                "wasi_snapshot_preview1",
                wasi_preview1_component_adapter_provider::WASI_SNAPSHOT_PREVIEW1_REACTOR_ADAPTER,
            )
        })
        .and_then(|e| e.encode())
        .map_err(|e| JsBuildError::Engine(format!("cannot encode the component: {e:#}")))
}
