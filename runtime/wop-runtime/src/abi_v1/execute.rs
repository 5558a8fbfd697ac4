//! One sandboxed execution of a core module: a fresh store and instance on
//! the process-wide engine, the same limiter, fuel, fuel-yield + deadline
//! wall clock and bounded log as components, then classification through
//! the one [`classify`] function.

use super::host::{AbiV1State, NodeState, PairEncoding, in_bounds};
use crate::env::RunEnv;
use crate::sandbox::{self, Grants, Sandbox};
use wasmtime::{Instance, InstancePre, Linker, Memory, MemoryType, Module, Store, Trap, Val};
use wop_core::breach::BreachKind;
use wop_core::classify::Fault;

/// Longest pack name read from `openwop_pack_name` (as `pack.json`).
const MAX_NAME_BYTES: u32 = 214;
/// Longest node typeId read from `openwop_node_id_at`.
const MAX_TYPE_ID_BYTES: u32 = 256;
/// Most node types one module may report.
const MAX_NODES: i32 = 1024;

/// The signatures of the ABI exports a module declared.
#[derive(Debug, Clone, Copy, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AbiExports {
    /// `openwop_pack_name`.
    pub pack_name: PairEncoding,
    /// `openwop_node_id_at`.
    pub node_id_at: PairEncoding,
    /// `openwop_node_invoke`.
    pub node_invoke: PairEncoding,
}

/// A compiled module with everything needed to instantiate it.
pub(crate) struct Linked {
    pub module: Module,
    pub linker: Linker<AbiV1State>,
    /// Ready-made pre-instantiation when the module imports no memory.
    pub pre: Option<InstancePre<AbiV1State>>,
    /// The memory the host provides as `env.memory` (max = the cap).
    pub host_memory: Option<MemoryType>,
    /// The ABI exports (absent in probe mode).
    pub exports: Option<AbiExports>,
}

/// What to call on the fresh instance.
pub(crate) enum AbiCall {
    /// `openwop_abi_version` first, then name and node ids.
    Identify,
    /// `openwop_node_invoke(index, request)`.
    Invoke { index: u32, request: Vec<u8> },
    /// Probe mode: one export with no argument or one i32.
    Probe { entry: String, arg: Option<i32> },
}

/// What identification read.
#[derive(Debug, Clone)]
pub(crate) struct Identity {
    pub version: i64,
    /// `None` when the version is unsupported (nothing else was read).
    pub name: Option<String>,
    pub node_ids: Vec<String>,
}

pub(crate) enum AbiReturned {
    Identity(Identity),
    /// The response bytes (already freed in the module).
    Response(Vec<u8>),
    /// `openwop_interrupt` suspended the node with this payload (JSON text).
    Suspended(String),
    /// The probe's first result, if the export returns one.
    Probe(Option<Val>),
}

/// The result of one core-module execution.
pub(crate) type AbiExecution = sandbox::Execution<AbiReturned>;

/// Runs `call` on a fresh store and instance of `linked` in `env`, its host
/// calls allowed `grants` and seeing `node`'s variables, channels and resume
/// value, then drops both.
pub(crate) async fn execute(
    linked: &Linked,
    env: &RunEnv<'_>,
    grants: Grants,
    node: NodeState,
    call: AbiCall,
) -> AbiExecution {
    let state = AbiV1State::new(Sandbox::new(env, &env.seed(), grants), node);
    let engine = linked.module.engine().clone();
    let mut armed = match sandbox::arm(&engine, state, env, "instantiate") {
        Ok(a) => a,
        Err(failed) => return *failed,
    };
    let deadline = armed.deadline();
    let store = &mut armed.store;
    // Built in place, pinned (see `sandbox::within`), and dropped before
    // the store is finished.
    let outcome = {
        let run = std::pin::pin!(async {
            let instance = instantiate(linked, &mut *store).await?;
            sandbox::instantiated(store);
            let r = match call {
                AbiCall::Identify => identify(linked, &instance, &mut *store).await,
                AbiCall::Invoke { index, request } => {
                    invoke(linked, &instance, &mut *store, index, &request).await
                }
                AbiCall::Probe { entry, arg } => probe(&instance, &mut *store, &entry, arg).await,
            };
            // `openwop_interrupt` suspends by trapping with the payload set.
            match (r, store.data_mut().suspended.take()) {
                (Err(_), Some(payload)) => Ok(AbiReturned::Suspended(payload)),
                (r, _) => r,
            }
        });
        sandbox::within(deadline, run).await
    };
    armed.finish(outcome)
}

async fn instantiate(linked: &Linked, store: &mut Store<AbiV1State>) -> wasmtime::Result<Instance> {
    if let Some(pre) = &linked.pre {
        return pre.instantiate_async(&mut *store).await;
    }
    let mut linker = linked.linker.clone();
    if let Some(ty) = &linked.host_memory {
        let mem = Memory::new(&mut *store, ty.clone())?;
        store.data_mut().memory = Some(mem);
        linker.define(&*store, "env", "memory", mem)?;
    }
    linker.instantiate_async(&mut *store, &linked.module).await
}

fn memory(instance: &Instance, store: &mut Store<AbiV1State>) -> wasmtime::Result<Memory> {
    if let Some(m) = store.data().memory {
        return Ok(m);
    }
    match instance.get_memory(&mut *store, "memory") {
        Some(m) => Ok(m),
        None => Err(store
            .data_mut()
            .invalid("the module has no linear memory (export `memory` or import `env.memory`)")),
    }
}

/// Calls an export that returns (ptr, len) and copies the bytes out.
async fn call_pair(
    instance: &Instance,
    store: &mut Store<AbiV1State>,
    export: &str,
    params: &[Val],
    enc: PairEncoding,
) -> wasmtime::Result<(u32, u32)> {
    let Some(f) = instance.get_func(&mut *store, export) else {
        return Err(store
            .data_mut()
            .invalid(format!("the module does not export {export}")));
    };
    let mut results = vec![Val::I32(0); enc.arity()];
    f.call_async(&mut *store, params, &mut results).await?;
    match enc.decode(&results) {
        Some(p) => Ok(p),
        None => Err(store
            .data_mut()
            .invalid(format!("{export} returned values of the wrong type"))),
    }
}

/// Bounds-checks (ptr, len), caps len, copies the bytes.
fn read_out(
    instance: &Instance,
    store: &mut Store<AbiV1State>,
    what: &str,
    (ptr, len): (u32, u32),
    cap: u64,
    cap_kind: Option<BreachKind>,
) -> wasmtime::Result<Vec<u8>> {
    let mem = memory(instance, store)?;
    let size = mem.data_size(&*store);
    if !in_bounds(ptr, len, size) {
        return Err(store.data_mut().invalid(format!(
            "{what}: (ptr {ptr}, len {len}) lies past the end of memory ({size} bytes)"
        )));
    }
    if u64::from(len) > cap {
        return Err(match cap_kind {
            Some(kind) => store.data_mut().fault(Fault::HostCap {
                kind,
                limit: cap,
                observed: len.into(),
            }),
            None => store.data_mut().invalid(format!(
                "{what}: {len} bytes is longer than the {cap}-byte limit"
            )),
        });
    }
    let start = ptr as usize;
    Ok(mem.data(&*store)[start..start + len as usize].to_vec())
}

fn text(store: &mut Store<AbiV1State>, what: &str, bytes: Vec<u8>) -> wasmtime::Result<String> {
    String::from_utf8(bytes).map_err(|_| {
        store
            .data_mut()
            .invalid(format!("{what} is not valid UTF-8"))
    })
}

async fn call_i32(
    instance: &Instance,
    store: &mut Store<AbiV1State>,
    export: &str,
) -> wasmtime::Result<i32> {
    let f = match instance.get_typed_func::<(), i32>(&mut *store, export) {
        Ok(f) => f,
        Err(e) => return Err(store.data_mut().invalid(format!("{export}: {e}"))),
    };
    f.call_async(&mut *store, ()).await
}

async fn identify(
    linked: &Linked,
    instance: &Instance,
    store: &mut Store<AbiV1State>,
) -> wasmtime::Result<AbiReturned> {
    // The ABI version first: nothing else is read from an unsupported module.
    let version = i64::from(call_i32(instance, store, "openwop_abi_version").await?);
    if !super::SUPPORTED_ABI_VERSIONS.contains(&version) {
        return Ok(AbiReturned::Identity(Identity {
            version,
            name: None,
            node_ids: Vec::new(),
        }));
    }
    let Some(exports) = linked.exports else {
        return Err(store.data_mut().invalid("not linked as an ABI v1 pack"));
    };
    let p = call_pair(instance, store, "openwop_pack_name", &[], exports.pack_name).await?;
    let bytes = read_out(
        instance,
        store,
        "openwop_pack_name",
        p,
        MAX_NAME_BYTES.into(),
        None,
    )?;
    let name = text(store, "openwop_pack_name", bytes)?;
    let count = call_i32(instance, store, "openwop_node_count").await?;
    if !(0..=MAX_NODES).contains(&count) {
        return Err(store.data_mut().invalid(format!(
            "openwop_node_count returned {count}; expected 0..={MAX_NODES}"
        )));
    }
    let mut node_ids = Vec::with_capacity(count as usize);
    for i in 0..count {
        let p = call_pair(
            instance,
            store,
            "openwop_node_id_at",
            &[Val::I32(i)],
            exports.node_id_at,
        )
        .await?;
        let bytes = read_out(
            instance,
            store,
            "openwop_node_id_at",
            p,
            MAX_TYPE_ID_BYTES.into(),
            None,
        )?;
        node_ids.push(text(store, "openwop_node_id_at", bytes)?);
    }
    Ok(AbiReturned::Identity(Identity {
        version,
        name: Some(name),
        node_ids,
    }))
}

/// Calls `openwop_free`; a trap in it is the module's fault, classified
/// as `sandbox_invocation_error` (unless a limit stopped it).
async fn free(
    instance: &Instance,
    store: &mut Store<AbiV1State>,
    (ptr, len): (u32, u32),
) -> wasmtime::Result<()> {
    let f = match instance.get_typed_func::<(i32, i32), ()>(&mut *store, "openwop_free") {
        Ok(f) => f,
        Err(e) => return Err(store.data_mut().invalid(format!("openwop_free: {e}"))),
    };
    match f.call_async(&mut *store, (ptr as i32, len as i32)).await {
        Ok(()) => Ok(()),
        Err(e) => {
            let limit_hit = store.data().sb.limiter.breach.is_some()
                || store.data().sb.host_fault.is_some()
                || matches!(e.downcast_ref::<Trap>(), Some(Trap::OutOfFuel));
            if limit_hit {
                Err(e)
            } else {
                Err(store.data_mut().fault(Fault::Trap {
                    kind: "free-trapped".to_owned(),
                    message: format!("openwop_free({ptr}, {len}) trapped: {e:#}"),
                }))
            }
        }
    }
}

async fn invoke(
    linked: &Linked,
    instance: &Instance,
    store: &mut Store<AbiV1State>,
    index: u32,
    request: &[u8],
) -> wasmtime::Result<AbiReturned> {
    let Some(exports) = linked.exports else {
        return Err(store.data_mut().invalid("not linked as an ABI v1 pack"));
    };
    let len = match u32::try_from(request.len()) {
        Ok(l) if l <= i32::MAX as u32 => l,
        _ => return Err(store.data_mut().invalid("the request is too large")),
    };
    let alloc = match instance.get_typed_func::<i32, i32>(&mut *store, "openwop_alloc") {
        Ok(f) => f,
        Err(e) => return Err(store.data_mut().invalid(format!("openwop_alloc: {e}"))),
    };
    let req_ptr = alloc.call_async(&mut *store, len as i32).await? as u32;
    let mem = memory(instance, store)?;
    let size = mem.data_size(&*store);
    if req_ptr == 0 || !in_bounds(req_ptr, len, size) {
        return Err(store.data_mut().invalid(format!(
            "openwop_alloc({len}) returned {req_ptr}, which is not a usable buffer in a memory of {size} bytes"
        )));
    }
    if let Err(e) = mem.write(&mut *store, req_ptr as usize, request) {
        return Err(store
            .data_mut()
            .invalid(format!("writing the request: {e}")));
    }
    let resp = call_pair(
        instance,
        store,
        "openwop_node_invoke",
        &[
            Val::I32(index as i32),
            Val::I32(req_ptr as i32),
            Val::I32(len as i32),
        ],
        exports.node_invoke,
    )
    .await?;
    if resp == (0, 0) {
        return Err(store
            .data_mut()
            .invalid("openwop_node_invoke returned no response (0, 0)"));
    }
    // The whole response envelope is the outcome: it is counted, and not
    // even copied out past the output cap (decision 0011).
    store.data_mut().response_bytes = resp.1.into();
    let cap = store.data().sb.limits.output_bytes;
    let bytes = read_out(
        instance,
        store,
        "openwop_node_invoke response",
        resp,
        cap,
        Some(BreachKind::OutputBytes),
    )?;
    // The host frees what it allocated and what it was handed, once each.
    free(instance, store, (req_ptr, len)).await?;
    free(instance, store, resp).await?;
    Ok(AbiReturned::Response(bytes))
}

async fn probe(
    instance: &Instance,
    store: &mut Store<AbiV1State>,
    entry: &str,
    arg: Option<i32>,
) -> wasmtime::Result<AbiReturned> {
    let Some(f) = instance.get_func(&mut *store, entry) else {
        return Err(store
            .data_mut()
            .invalid(format!("the module does not export a function `{entry}`")));
    };
    let ty = f.ty(&*store);
    let params: Vec<Val> = if ty.params().len() == 0 {
        Vec::new()
    } else {
        vec![Val::I32(arg.unwrap_or(0))]
    };
    let mut results = vec![Val::I32(0); ty.results().len()];
    f.call_async(&mut *store, &params, &mut results).await?;
    Ok(AbiReturned::Probe(results.into_iter().next()))
}
