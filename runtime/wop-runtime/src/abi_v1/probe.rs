//! Probe mode (`wop probe`): calls one export of a core module with one
//! i32 (or none) under the sandbox contract and reports one JSON line.

use super::execute::{AbiCall, AbiReturned, execute};
use super::host::NodeState;
use super::imports;
use super::loader::{self, Mode};
use crate::env::{RunEnv, internal_context};
use crate::sandbox::Grants;
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::sync::atomic::AtomicU64;
use wop_core::capability::Capability;
use wop_core::error::{ErrorCode, LoadError, NodeError};
use wop_core::events::Event;
use wop_core::limits::Limits;
use wop_core::model::Principal;

/// Options of probe mode (`wop probe`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeOptions {
    /// The export to call. Default `invoke`.
    pub entry: String,
    /// The i32 passed when the export takes one parameter. Default 0.
    pub arg: Option<i32>,
    /// `openwop.<name>` imports to grant (field names, with or without the
    /// `openwop.` prefix, or capability names such as `log`). Default none:
    /// no host calls at all.
    pub allow: Vec<String>,
    /// The memory cap (every memory). Default 2 MiB.
    pub memory_bytes: u64,
    /// The wall clock. Default 1000 ms.
    pub timeout_ms: u64,
}

impl Default for ProbeOptions {
    fn default() -> Self {
        Self {
            entry: "invoke".to_owned(),
            arg: None,
            allow: Vec::new(),
            memory_bytes: 2 << 20,
            timeout_ms: 1000,
        }
    }
}

/// The verdict of a probe.
#[derive(Debug, Clone, PartialEq)]
pub enum ProbeVerdict {
    /// The export returned (its first result, or `null`).
    Ok(Value),
    /// Refused before running (escape, denied capability, bad module).
    Refused(NodeError),
    /// Failed while running (memory, timeout, trap).
    Failed(NodeError),
}

/// What a probe produced.
#[derive(Debug, Clone)]
pub struct ProbeReport {
    /// The verdict.
    pub verdict: ProbeVerdict,
    /// Events (`log.appended` from granted `openwop_log`, `cap.breached`).
    pub events: Vec<Event>,
    /// Module instances created (0 when refused before running).
    pub instantiations: u64,
}

impl ProbeReport {
    /// The protocol's one-line probe answer, `ok` first:
    /// `{"ok":true,"result":N}` or
    /// `{"ok":false,"error":{"code":…,"details":{…}}}`.
    pub fn to_json_line(&self) -> String {
        match &self.verdict {
            ProbeVerdict::Ok(v) => format!("{{\"ok\":true,\"result\":{v}}}"),
            ProbeVerdict::Refused(e) | ProbeVerdict::Failed(e) => format!(
                "{{\"ok\":false,\"error\":{{\"code\":{},\"details\":{}}}}}",
                Value::String(e.code.clone()),
                e.details.clone().unwrap_or_else(|| json!({}))
            ),
        }
    }

    /// The error, if the probe did not return.
    pub fn error(&self) -> Option<&NodeError> {
        match &self.verdict {
            ProbeVerdict::Ok(_) => None,
            ProbeVerdict::Refused(e) | ProbeVerdict::Failed(e) => Some(e),
        }
    }
}

/// A probe that could not be attempted (the caller's mistake).
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    /// The entry export is missing or has an unsupported signature.
    #[error("{0}")]
    Entry(String),
}

fn probe_grants(allow: &[String]) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for a in allow {
        let name = a.strip_prefix("openwop.").unwrap_or(a);
        let cap: Option<Capability> = serde_json::from_value(Value::String(name.to_owned())).ok();
        match cap {
            Some(c) => out.extend(imports::granted_names(&[c].into_iter().collect())),
            None => {
                out.insert(name.to_owned());
            }
        }
    }
    out
}

fn val_json(v: &wasmtime::Val) -> Value {
    match v {
        wasmtime::Val::I32(x) => json!(x),
        wasmtime::Val::I64(x) => json!(x),
        wasmtime::Val::F32(x) => json!(f32::from_bits(*x)),
        wasmtime::Val::F64(x) => json!(f64::from_bits(*x)),
        _ => Value::Null,
    }
}

/// Probe mode: judges the module's imports (granting only `allow`), then
/// calls `entry` once in a fresh sandbox with the options' caps. A granted
/// `openwop.<name>` import of type `(i32) -> i32` is the identity function.
pub async fn probe(wasm: &[u8], opts: &ProbeOptions) -> Result<ProbeReport, ProbeError> {
    let refused = |e: LoadError| ProbeReport {
        verdict: ProbeVerdict::Refused(e.to_node_error()),
        events: Vec::new(),
        instantiations: 0,
    };
    let engine = match crate::engine::engine() {
        Ok(e) => e,
        Err(e) => return Ok(refused(LoadError::Io(e.to_string()))),
    };
    let limits = Limits {
        memory_bytes: opts.memory_bytes,
        wall_clock_ms: opts.timeout_ms,
        ..Limits::default()
    };
    // The loaders' check: a declared table above the limit is the table
    // limit (`sandbox_memory_exceeded`, `cause: table-size`), not bad wasm.
    if let Err(e) = crate::sandbox::check_declared_tables(wasm, crate::sandbox::table_cap(&limits))
    {
        return Ok(refused(e));
    }
    let module = match loader::compile(engine, wasm.to_vec()).await {
        Ok(m) => m,
        Err(e) => return Ok(refused(e)),
    };
    match module.get_export(&opts.entry) {
        Some(wasmtime::ExternType::Func(ft)) => {
            let s = loader::sig(&ft);
            let params = s.split(':').next().unwrap_or("");
            if !(params.is_empty() || params == "i") {
                return Err(ProbeError::Entry(format!(
                    "export `{}` takes ({params}); probe calls exports with no parameters or one i32",
                    opts.entry
                )));
            }
        }
        _ => {
            return Err(ProbeError::Entry(format!(
                "the module does not export a function `{}`",
                opts.entry
            )));
        }
    }
    let allowed = probe_grants(&opts.allow);
    let gate = loader::gate(&module, &allowed, None);
    if let Some(r) = gate.refusal {
        return Ok(refused(r));
    }
    // Host calls may use the capabilities of the ABI imports allowed.
    let caps: Vec<Capability> = imports::AbiImport::ALL
        .into_iter()
        .filter(|a| allowed.contains(a.name()))
        .map(imports::AbiImport::capability)
        .collect();
    let grants = Grants::of(&caps);
    let (linked, _) = match loader::link(engine, &module, &gate.judged, &limits, Mode::Probe) {
        Ok(l) => l,
        Err(e) => return Ok(refused(e)),
    };
    let counter = AtomicU64::new(0);
    let context = internal_context("wop:probe", "probe");
    let principal = Principal::default();
    let env = RunEnv::internal(&context, &principal, limits, Some(&counter));
    let call = AbiCall::Probe {
        entry: opts.entry.clone(),
        arg: opts.arg,
    };
    let exec = execute(&linked, &env, grants, NodeState::default(), call).await;
    let verdict = match exec.result {
        Ok(AbiReturned::Probe(v)) => ProbeVerdict::Ok(v.as_ref().map_or(Value::Null, val_json)),
        Ok(AbiReturned::Suspended(_)) | Ok(_) => ProbeVerdict::Failed(NodeError::runtime(
            ErrorCode::SandboxInvocationError,
            "the probe did not return",
            Default::default(),
        )),
        Err(c) => ProbeVerdict::Failed(c.error),
    };
    Ok(ProbeReport {
        verdict,
        events: exec.events,
        instantiations: counter.load(std::sync::atomic::Ordering::Relaxed),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probe_grant_names() {
        let g = probe_grants(&["openwop.host_fetch".into(), "log".into(), "x".into()]);
        let g: Vec<_> = g.into_iter().collect();
        assert_eq!(g, vec!["host_fetch", "openwop_log", "x"]);
    }
}
