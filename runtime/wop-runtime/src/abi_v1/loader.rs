//! Loading a core module: compile on the shared engine, judge every import
//! (before anything is instantiated), check declared signatures against
//! the ABI, and link the host functions with the exact types the module
//! declared (multi-value or packed `i64` per function).

use super::execute::{AbiExports, Linked};
use super::host::{AbiV1State, HostFn, PairEncoding};
use super::imports::{AbiImport, AbiV1Verdict, ImportKind, judge};
use std::collections::BTreeSet;
use wasmtime::{Engine, ExternType, FuncType, Linker, MemoryType, Module, ValType};
use wop_core::error::{ErrorCode, LoadError};
use wop_core::limits::Limits;
use wop_core::pack::ImportReport;

/// Compiles a core module (on a blocking thread: compilation is CPU work).
pub(crate) async fn compile(engine: &'static Engine, bytes: Vec<u8>) -> Result<Module, LoadError> {
    let res = tokio::task::spawn_blocking(move || {
        if wasmparser_is_component(&bytes) {
            return Err(
                "this is a WebAssembly component; declare `runtime.language: \"wasm-component\"`"
                    .to_owned(),
            );
        }
        Module::new(engine, &bytes).map_err(|e| format!("{e:#}"))
    })
    .await
    .map_err(|e| LoadError::Io(format!("compile task failed: {e}")))?;
    res.map_err(|e| LoadError::Component {
        code: ErrorCode::PackValidationFailed,
        message: format!(
            "the entry is not a valid WebAssembly core module ({e}); build it with `cargo build --target wasm32-unknown-unknown` or another core-wasm toolchain"
        ),
    })
}

/// Component binaries carry layer 1 in the preamble (`\0asm`, version, layer).
fn wasmparser_is_component(bytes: &[u8]) -> bool {
    bytes.len() >= 8 && bytes[..4] == *b"\0asm" && bytes[6..8] == [1, 0]
}

/// One import with its verdict, in declaration order.
pub(crate) struct Judged {
    pub module: String,
    pub name: String,
    pub ty: ExternType,
    pub verdict: AbiV1Verdict,
}

/// The gate's result: every import judged, and the first refusal.
pub(crate) struct GateResult {
    pub judged: Vec<Judged>,
    pub reports: Vec<ImportReport>,
    pub refusal: Option<LoadError>,
}

fn kind_of(ty: &ExternType) -> ImportKind {
    match ty {
        ExternType::Func(_) => ImportKind::Func,
        ExternType::Memory(m) => ImportKind::Memory {
            is_64: m.is_64(),
            shared: m.is_shared(),
        },
        _ => ImportKind::Other,
    }
}

/// The static import gate over the compiled module's imports. `pack`
/// names the pack in a refusal (`None` for a bare module, which no
/// policy table grants anything, and for probes).
pub(crate) fn gate(module: &Module, granted: &BTreeSet<String>, pack: Option<&str>) -> GateResult {
    let mut judged = Vec::new();
    let mut reports = Vec::new();
    let mut refusal = None;
    for imp in module.imports() {
        let ty = imp.ty();
        let verdict = judge(imp.module(), imp.name(), kind_of(&ty), granted);
        let full = format!("{}.{}", imp.module(), imp.name());
        if refusal.is_none() {
            refusal = match &verdict {
                AbiV1Verdict::Escape(k) => Some(LoadError::Escape {
                    kind: k.as_str(),
                    import: full.clone(),
                }),
                AbiV1Verdict::NotGranted(name) => Some(LoadError::CapabilityDenied {
                    import: name.clone(),
                    grant: AbiImport::from_name(name).map(|a| a.capability().as_str().to_owned()),
                    pack: pack.map(str::to_owned),
                }),
                AbiV1Verdict::Unknown(name) => Some(LoadError::CapabilityDenied {
                    import: name.clone(),
                    grant: None,
                    pack: pack.map(str::to_owned),
                }),
                _ => None,
            };
        }
        reports.push(ImportReport {
            name: full,
            verdict: verdict.label(),
        });
        judged.push(Judged {
            module: imp.module().to_owned(),
            name: imp.name().to_owned(),
            ty,
            verdict,
        });
    }
    GateResult {
        judged,
        reports,
        refusal,
    }
}

/// A signature as text: params `:` results, `i` = i32, `I` = i64.
pub(crate) fn sig(ft: &FuncType) -> String {
    let c = |v: ValType| match v {
        ValType::I32 => 'i',
        ValType::I64 => 'I',
        ValType::F32 => 'f',
        ValType::F64 => 'F',
        _ => '?',
    };
    let mut s: String = ft.params().map(c).collect();
    s.push(':');
    s.extend(ft.results().map(c));
    s
}

/// Readable form of a signature for error messages.
fn show(s: &str) -> String {
    let (p, r) = s.split_once(':').unwrap_or((s, ""));
    let f = |x: &str| {
        x.chars()
            .map(|c| match c {
                'i' => "i32",
                'I' => "i64",
                'f' => "f32",
                'F' => "f64",
                _ => "?",
            })
            .collect::<Vec<_>>()
            .join(" ")
    };
    format!("(param {}) (result {})", f(p), f(r))
}

/// The host function for an ABI import declared with signature `s`.
fn abi_fn(a: AbiImport, s: &str) -> Option<HostFn> {
    use AbiImport::*;
    let pair = |m: &str, p: &str| {
        if s == m {
            Some(HostFn::Abi(a, Some(PairEncoding::MultiValue)))
        } else if s == p {
            Some(HostFn::Abi(a, Some(PairEncoding::PackedI64)))
        } else {
            None
        }
    };
    match a {
        Log if s == "iii:" => Some(HostFn::Abi(a, None)),
        NowMs if s == ":I" => Some(HostFn::Abi(a, None)),
        Random if s == "ii:" => Some(HostFn::Abi(a, None)),
        VariableSet | ChannelWrite if s == "iiii:i" => Some(HostFn::Abi(a, None)),
        VariableGet | ChannelRead | Interrupt => pair("ii:ii", "ii:I"),
        _ => None,
    }
}

fn expected(a: AbiImport) -> &'static str {
    use AbiImport::*;
    match a {
        Log => "(param i32 i32 i32)",
        NowMs => "(result i64)",
        Random => "(param i32 i32)",
        VariableSet | ChannelWrite => "(param i32 i32 i32 i32) (result i32)",
        VariableGet | ChannelRead | Interrupt => {
            "(param i32 i32) (result i32 i32) or (param i32 i32) (result i64)"
        }
    }
}

fn invalid(message: String) -> LoadError {
    LoadError::Component {
        code: ErrorCode::PackValidationFailed,
        message,
    }
}

/// How imports are satisfied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// A pack: ABI imports with ABI signatures only; ABI exports required.
    Pack,
    /// `wop probe`: granted `(i32) -> i32` imports are the identity.
    Probe,
}

/// The memory type the host creates for `env.memory`: the import's
/// minimum, and the cap (or the import's own smaller maximum) as maximum.
fn host_memory(import: &wasmtime::MemoryType, limits: &Limits) -> MemoryType {
    let cap_pages = u32::try_from(limits.memory_bytes / 65_536).unwrap_or(65_536);
    let min = u32::try_from(import.minimum()).unwrap_or(u32::MAX);
    let mut max = cap_pages;
    if let Some(m) = import.maximum() {
        max = max.min(u32::try_from(m).unwrap_or(u32::MAX));
    }
    // A minimum above the cap is refused by the limiter when the memory
    // is created (sandbox_memory_exceeded), not by an invalid type here.
    MemoryType::new(min, Some(max.max(min)))
}

/// Links the judged imports (the gate must have passed) and checks the
/// ABI exports. In pack mode the exports are checked leniently here:
/// identification reads `openwop_abi_version` first and reports missing
/// exports only for supported versions (see `export_problem`).
pub(crate) fn link(
    engine: &Engine,
    module: &Module,
    judged: &[Judged],
    limits: &Limits,
    mode: Mode,
) -> Result<(Linked, Option<String>), LoadError> {
    let mut linker: Linker<AbiV1State> = Linker::new(engine);
    let mut mem_ty = None;
    for j in judged {
        match (&j.verdict, &j.ty) {
            (AbiV1Verdict::HostMemory, ExternType::Memory(m)) => {
                mem_ty = Some(host_memory(m, limits));
            }
            (AbiV1Verdict::Abi(_) | AbiV1Verdict::Named(_), ExternType::Func(ft)) => {
                let s = sig(ft);
                let f = match (&j.verdict, mode) {
                    (_, Mode::Probe) if s == "i:i" => HostFn::Identity,
                    (AbiV1Verdict::Abi(a), _) => abi_fn(*a, &s).ok_or_else(|| {
                        invalid(format!(
                            "import {}.{} is declared {} but the ABI defines it as {}",
                            j.module,
                            j.name,
                            show(&s),
                            expected(*a)
                        ))
                    })?,
                    _ => {
                        return Err(invalid(format!(
                            "import {}.{} is declared {}; probe mode can only provide granted imports of type (param i32) (result i32)",
                            j.module,
                            j.name,
                            show(&s)
                        )));
                    }
                };
                linker
                    .func_new_async(
                        &j.module,
                        &j.name,
                        ft.clone(),
                        move |caller, params, results| {
                            Box::new(super::host::call(f, caller, params, results))
                        },
                    )
                    .map_err(|e| invalid(format!("cannot link {}.{}: {e:#}", j.module, j.name)))?;
            }
            _ => {
                return Err(invalid(format!(
                    "import {}.{} cannot be linked",
                    j.module, j.name
                )));
            }
        }
    }
    let (exports, problem) = match mode {
        Mode::Probe => (None, None),
        Mode::Pack => {
            let version = module.get_export("openwop_abi_version");
            match version {
                Some(ExternType::Func(ft)) if sig(&ft) == ":i" => {}
                Some(_) => {
                    return Err(invalid(
                        "export openwop_abi_version must be (result i32)".to_owned(),
                    ));
                }
                None => {
                    return Err(invalid(
                        "the module does not export openwop_abi_version; it is not a WASM ABI v1 pack".to_owned(),
                    ));
                }
            }
            match abi_exports(module, mem_ty.is_some()) {
                Ok(e) => (Some(e), None),
                Err(p) => (None, Some(p)),
            }
        }
    };
    let pre = if mem_ty.is_none() {
        Some(
            linker
                .instantiate_pre(module)
                .map_err(|e| invalid(format!("cannot link the module: {e:#}")))?,
        )
    } else {
        None
    };
    Ok((
        Linked {
            module: module.clone(),
            linker,
            pre,
            host_memory: mem_ty,
            exports,
        },
        problem,
    ))
}

/// Checks the ABI exports' signatures and the memory.
fn abi_exports(module: &Module, imports_memory: bool) -> Result<AbiExports, String> {
    let func = |name: &str| match module.get_export(name) {
        Some(ExternType::Func(ft)) => Ok(sig(&ft)),
        Some(_) => Err(format!("export {name} is not a function")),
        None => Err(format!("the module does not export {name}")),
    };
    let exact = |name: &str, want: &str| {
        let s = func(name)?;
        if s == want {
            Ok(())
        } else {
            Err(format!(
                "export {name} is {} but the ABI requires {}",
                show(&s),
                show(want)
            ))
        }
    };
    let pair = |name: &str, params: &str| {
        let s = func(name)?;
        if s == format!("{params}:ii") {
            Ok(PairEncoding::MultiValue)
        } else if s == format!("{params}:I") {
            Ok(PairEncoding::PackedI64)
        } else {
            Err(format!(
                "export {name} is {} but the ABI requires {} or {}",
                show(&s),
                show(&format!("{params}:ii")),
                show(&format!("{params}:I"))
            ))
        }
    };
    exact("openwop_node_count", ":i")?;
    exact("openwop_alloc", "i:i")?;
    exact("openwop_free", "ii:")?;
    let e = AbiExports {
        pack_name: pair("openwop_pack_name", "")?,
        node_id_at: pair("openwop_node_id_at", "i")?,
        node_invoke: pair("openwop_node_invoke", "iii")?,
    };
    match module.get_export("memory") {
        Some(ExternType::Memory(m)) if !m.is_64() && !m.is_shared() => {}
        Some(_) => return Err("export `memory` must be a 32-bit unshared memory".to_owned()),
        None if imports_memory => {}
        None => {
            return Err(
                "the module has no linear memory: export `memory` or import `env.memory`"
                    .to_owned(),
            );
        }
    }
    Ok(e)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn abi_import_signatures() {
        use AbiImport::*;
        let ok = [
            (Log, "iii:"),
            (NowMs, ":I"),
            (Random, "ii:"),
            (VariableGet, "ii:ii"),
            (VariableGet, "ii:I"),
            (ChannelRead, "ii:I"),
            (Interrupt, "ii:ii"),
            (VariableSet, "iiii:i"),
            (ChannelWrite, "iiii:i"),
        ];
        for (a, s) in ok {
            assert!(abi_fn(a, s).is_some(), "{a:?} {s}");
        }
        let bad = [
            (Log, "ii:"),
            (NowMs, ":i"),
            (VariableGet, "ii:i"),
            (VariableSet, "iiii:"),
            (Interrupt, "i:i"),
        ];
        for (a, s) in bad {
            assert!(abi_fn(a, s).is_none(), "{a:?} {s}");
        }
        assert_eq!(show("iii:ii"), "(param i32 i32 i32) (result i32 i32)");
        assert!(wasmparser_is_component(b"\0asm\x0d\0\x01\0"));
        assert!(!wasmparser_is_component(b"\0asm\x01\0\0\0"));
    }
}
