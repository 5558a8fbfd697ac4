//! Generated modules (issue 14): wasm-smith core modules shaped like ABI
//! v1 packs, loaded and invoked through the real loader and sandbox.
//!
//! Each module comes from a seed. [`Shape::pick`] decides what it looks
//! like: which ABI exports are random code and which a fixed, well-behaved
//! harness; the pair encodings (multi-value or packed `i64`); which
//! `openwop.*` host functions it may import, with the ABI's signature or a
//! wrong one; the forbidden imports it may try; an exported or an imported
//! memory; the capabilities granted; a pack directory or a bare `.wasm`.
//! wasm-smith generates the module and [`with_harness`] appends fixed
//! identification exports, so that most modules pass the load and their
//! random `openwop_node_invoke` runs against the real host functions with
//! random arguments over random memory. Some modules keep every export
//! random, some have no ABI shape at all, some have invalid bodies.
//!
//! Asserted for every module: the host never panics or hangs; a refusal is
//! a load error with a protocol code (never `internal_error`); every
//! invocation ends in a well-formed report (a valid outcome, or an error
//! whose code is a protocol code or a well-formed pack code; the usage names
//! the pack; the report serializes). Afterwards the same runtime still runs
//! a well-behaved pack.
//!
//! `WOP_FUZZ_MODULES=N` runs N modules (default [`DEFAULT_MODULES`]);
//! `WOP_FUZZ_SECONDS=S` runs for S seconds instead; `WOP_FUZZ_SEED=X`
//! starts at another seed; `WOP_FUZZ_VERBOSE=1` prints every load error.
//! A failure names its seed and keeps the module in
//! the system temp directory (`wop-generated-modules/seed-<X>.wasm`).

use super::*;
use arbitrary::Unstructured;
use serde_json::json;
use sha2::Digest;
use smith_wasmparser::{Payload, TypeRef};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};
use wasm_encoder::reencode::{Reencode, RoundtripReencoder};
use wasm_encoder::{
    CodeSection, ExportKind, ExportSection, Function, FunctionSection, MemArg, MemArgTarget,
    RawSection, TypeSection, ValType,
};
use wop_runtime::{ErrorCode, FailureSource, LoadError, Outcome};

/// Modules per `cargo test` run: about 16 s in the debug build on a
/// 2-core machine.
const DEFAULT_MODULES: u64 = 160;
/// The first seed (any value works; fixed so CI runs the same modules).
const DEFAULT_SEED: u64 = 0x5EED_0014;
/// A fresh runtime every this many modules (bounds the in-memory compile
/// cache during long local runs).
const MODULES_PER_RUNTIME: u64 = 200;
/// Far beyond any limit in [`POLICY`] (wall clock 2 s): a load or an
/// invocation still running after this is hung, and fails the test.
const HANG: Duration = Duration::from_secs(120);

/// `gen` gets every ABI capability; `gen-base` asks for them and gets none.
const POLICY: &str = r#"
[limits]
fuel = 20000000
wallClockMs = 2000
memoryBytes = 16777216
outputBytes = 65536
hostArgBytes = 65536

[packs.gen]
capabilities = ["variables", "channels", "interrupt"]
"#;

/// What one generated module looks like.
#[derive(Debug, Clone)]
struct Shape {
    mode: Mode,
    /// The pack name (and typeId prefix) the harness reports.
    name: &'static str,
    /// `openwop_pack_name`/`openwop_node_id_at` of the harness as packed `i64`.
    ident_packed: bool,
    /// `openwop_node_invoke` as packed `i64`.
    invoke_packed: bool,
    /// Import `env.memory` instead of exporting `memory`.
    import_memory: bool,
    /// The harness's `openwop_node_invoke` calls the random `gen_body`
    /// (same parameters, no results), then returns [`RESPONSES`]`[n]`.
    wrap_invoke: Option<usize>,
    /// `openwop_alloc` / `openwop_free` are random code, not the harness's.
    random_alloc: bool,
    random_free: bool,
    /// What the harness's `openwop_abi_version` and `openwop_node_count` say.
    abi_version: i32,
    node_count: i32,
    /// Imports wasm-smith may use (WAT).
    imports: Vec<&'static str>,
    /// A bare `.wasm` instead of a pack directory.
    bare: bool,
    /// Generate some invalid function bodies.
    invalid_funcs: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Any module: no ABI shape asked for.
    Raw,
    /// Every ABI export generated as random code.
    AllRandom,
    /// Random `openwop_node_invoke` (and maybe alloc/free) plus the harness.
    Harness,
}

/// The ABI's host functions with their signatures: (import with the
/// multi-value pair, import with the packed pair, a wrong signature).
const ABI_IMPORTS: &[(&str, &str, &str)] = &[
    (
        r#"(import "openwop" "openwop_log" (func (param i32 i32 i32)))"#,
        "",
        r#"(import "openwop" "openwop_log" (func (param i32 i32)))"#,
    ),
    (
        r#"(import "openwop" "openwop_now_ms" (func (result i64)))"#,
        "",
        r#"(import "openwop" "openwop_now_ms" (func (result i32)))"#,
    ),
    (
        r#"(import "openwop" "openwop_random" (func (param i32 i32)))"#,
        "",
        r#"(import "openwop" "openwop_random" (func (param i64 i32)))"#,
    ),
    (
        r#"(import "openwop" "openwop_variable_get" (func (param i32 i32) (result i32 i32)))"#,
        r#"(import "openwop" "openwop_variable_get" (func (param i32 i32) (result i64)))"#,
        r#"(import "openwop" "openwop_variable_get" (func (param i32 i32) (result i32)))"#,
    ),
    (
        r#"(import "openwop" "openwop_variable_set" (func (param i32 i32 i32 i32) (result i32)))"#,
        "",
        r#"(import "openwop" "openwop_variable_set" (func (param i32 i32 i32 i32)))"#,
    ),
    (
        r#"(import "openwop" "openwop_channel_read" (func (param i32 i32) (result i32 i32)))"#,
        r#"(import "openwop" "openwop_channel_read" (func (param i32 i32) (result i64)))"#,
        r#"(import "openwop" "openwop_channel_read" (func (param i32) (result i32 i32)))"#,
    ),
    (
        r#"(import "openwop" "openwop_channel_write" (func (param i32 i32 i32 i32) (result i32)))"#,
        "",
        r#"(import "openwop" "openwop_channel_write" (func (param i32 i32 i32 i32) (result i64)))"#,
    ),
    (
        r#"(import "openwop" "openwop_interrupt" (func (param i32 i32) (result i32 i32)))"#,
        r#"(import "openwop" "openwop_interrupt" (func (param i32 i32) (result i64)))"#,
        r#"(import "openwop" "openwop_interrupt" (func (param i32 i32)))"#,
    ),
];

/// Imports the gate must refuse.
const FORBIDDEN_IMPORTS: &[&str] = &[
    r#"(import "wasi_snapshot_preview1" "fd_write" (func (param i32 i32 i32 i32) (result i32)))"#,
    r#"(import "env" "abort" (func))"#,
    r#"(import "openwop" "host_exec" (func (param i32) (result i32)))"#,
    r#"(import "env" "table" (table 1 funcref))"#,
    r#"(import "env" "g" (global i32))"#,
];

const ENV_MEMORY: &str = r#"(import "env" "memory" (memory 1))"#;

/// `n` in `den`.
fn ratio(u: &mut Unstructured<'_>, n: u8, den: u8) -> bool {
    u.ratio(n, den).unwrap_or(false)
}

impl Shape {
    fn pick(u: &mut Unstructured<'_>) -> Shape {
        let mode = match u.int_in_range(0..=15u8).unwrap_or(15) {
            0 => Mode::Raw,
            1 | 2 => Mode::AllRandom,
            _ => Mode::Harness,
        };
        let import_memory = ratio(u, 1, 6);
        let mut imports = Vec::new();
        for (multi, packed, wrong) in ABI_IMPORTS {
            if !ratio(u, 2, 3) {
                continue;
            }
            imports.push(if ratio(u, 1, 25) {
                *wrong
            } else if !packed.is_empty() && ratio(u, 1, 2) {
                *packed
            } else {
                *multi
            });
        }
        for f in FORBIDDEN_IMPORTS {
            if ratio(u, 1, 40) {
                imports.push(*f);
            }
        }
        if import_memory {
            imports.push(ENV_MEMORY);
        }
        Shape {
            mode,
            name: if ratio(u, 1, 10) { "gen-base" } else { "gen" },
            wrap_invoke: if mode == Mode::Harness && ratio(u, 1, 2) {
                u.choose_index(RESPONSES.len()).ok()
            } else {
                None
            },
            ident_packed: ratio(u, 1, 2),
            invoke_packed: ratio(u, 1, 2),
            import_memory,
            random_alloc: ratio(u, 1, 4),
            random_free: ratio(u, 1, 4),
            abi_version: if ratio(u, 1, 25) { 2 } else { 1 },
            node_count: if ratio(u, 1, 40) { 0 } else { 1 },
            imports,
            bare: mode == Mode::Harness && ratio(u, 1, 8),
            invalid_funcs: ratio(u, 1, 30),
        }
    }

    /// The exports wasm-smith must generate, as a module (WAT); `None`:
    /// any exports.
    fn exports(&self) -> Option<String> {
        if self.mode == Mode::Raw {
            return None;
        }
        let pair = |packed: bool| {
            if packed {
                "(result i64)"
            } else {
                "(result i32 i32)"
            }
        };
        let mut wat = Vec::new();
        if self.wrap_invoke.is_some() {
            wat.push(r#"(func (export "gen_body") (param i32 i32 i32) unreachable)"#.into());
        } else {
            wat.push(format!(
                r#"(func (export "openwop_node_invoke") (param i32 i32 i32) {} unreachable)"#,
                pair(self.invoke_packed)
            ));
        }
        if self.mode == Mode::AllRandom || self.random_alloc {
            wat.push(
                r#"(func (export "openwop_alloc") (param i32) (result i32) unreachable)"#.into(),
            );
        }
        if self.mode == Mode::AllRandom || self.random_free {
            wat.push(r#"(func (export "openwop_free") (param i32 i32) unreachable)"#.into());
        }
        if self.mode == Mode::AllRandom {
            let p = pair(self.ident_packed);
            wat.push(r#"(func (export "openwop_abi_version") (result i32) unreachable)"#.into());
            wat.push(format!(
                r#"(func (export "openwop_pack_name") {p} unreachable)"#
            ));
            wat.push(r#"(func (export "openwop_node_count") (result i32) unreachable)"#.into());
            wat.push(format!(
                r#"(func (export "openwop_node_id_at") (param i32) {p} unreachable)"#
            ));
        }
        if !self.import_memory {
            wat.push(r#"(memory (export "memory") 1)"#.into());
        }
        Some(format!("(module {})", wat.join("\n")))
    }

    fn type_id(&self) -> String {
        format!("{}.node", self.name)
    }
}

fn config(shape: &Shape, u: &mut Unstructured<'_>) -> wasm_smith::Config {
    let mut c = wasm_smith::Config::default();
    let imports = format!("(module {})", shape.imports.join("\n"));
    c.available_imports = Some(wat::parse_str(&imports).expect("imports WAT"));
    c.exports = shape
        .exports()
        .map(|w| wat::parse_str(&w).expect("exports WAT"));
    // What the engine compiles (no GC or typed references, threads,
    // exceptions, 64-bit or multiple memories): anything else would only
    // test the compiler's refusal, over and over.
    c.gc_enabled = false;
    c.exceptions_enabled = false;
    c.threads_enabled = false;
    c.shared_everything_threads_enabled = false;
    c.memory64_enabled = false;
    c.compact_imports_enabled = false;
    c.custom_page_sizes_enabled = false;
    c.custom_descriptors_enabled = false;
    c.wide_arithmetic_enabled = false;
    c.reference_types_enabled = false;
    // The required `memory` export is one memory already.
    c.max_memories = usize::from(shape.import_memory || shape.mode == Mode::Raw);
    c.max_tables = 2;
    c.max_memory32_bytes = 64 << 20;
    c.max_table_elements = 1000;
    c.max_data_segments = 8;
    c.max_imports = 16;
    c.max_types = 24;
    c.max_globals = 8;
    c.allow_start_export = true;
    c.allow_invalid_funcs = shape.invalid_funcs;
    c.max_funcs = u.int_in_range(1..=12).unwrap_or(4);
    c.max_instructions = u.int_in_range(4..=250).unwrap_or(50);
    c
}

/// The module for `seed`, and its shape.
fn generate(seed: u64) -> (Shape, Vec<u8>) {
    let mut rng = SplitMix(seed);
    let len = 256 + (rng.next() % 16_384) as usize;
    let data: Vec<u8> = (0..len.div_ceil(8))
        .flat_map(|_| rng.next().to_le_bytes())
        .collect();
    let mut u = Unstructured::new(&data);
    let shape = Shape::pick(&mut u);
    let cfg = config(&shape, &mut u);
    let module = match wasm_smith::Module::new(cfg, &mut u) {
        Ok(m) => m.to_bytes(),
        // Not enough data for what the shape asks: an empty module.
        Err(_) => wat::parse_str("(module)").expect("empty module"),
    };
    if shape.mode != Mode::Harness {
        return (shape, module);
    }
    match with_harness(&module, &shape) {
        Ok(m) => (shape, m),
        // No memory to write the names into: keep the module as generated.
        Err(_) => (shape, module),
    }
}

/// splitmix64: a tiny, fixed PRNG for the module bytes.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// One function the harness appends.
struct Extra {
    name: &'static str,
    params: Vec<ValType>,
    results: Vec<ValType>,
    body: Function,
}

const NAME_AT: i32 = 8;
const TYPE_ID_AT: i32 = 64;
const RESPONSE_AT: i32 = 256;
const HEAP_AT: i32 = 1024;

/// What a wrapped `openwop_node_invoke` returns after the random body ran.
const RESPONSES: &[&str] = &[
    r#"{"outcome":"completed","output":{"ok":true}}"#,
    r#"{"outcome":"suspended","interrupt":{"question":"go?"}}"#,
    r#"{"outcome":"failed","error":{"code":"my_error","message":"m","details":{"x":1}}}"#,
    r#"{"outcome":"failed","error":{"code":"sandbox_timeout","message":"invented"}}"#,
    r#"{"outcome":"completed"}"#,
    r#"not json"#,
];

/// Stores `text` at `at` in memory 0 (after calling `before`, with the
/// function's parameters), then returns (at, len) as `packed` says.
fn string_fn(
    name: &'static str,
    params: Vec<ValType>,
    before: Option<u32>,
    at: i32,
    text: &str,
    packed: bool,
) -> Extra {
    let mut f = Function::new([]);
    let mem = MemArg {
        offset: 0,
        align: 0,
        target: MemArgTarget::Memory(0),
        ordering: None,
    };
    let mut ins = f.instructions();
    if let Some(callee) = before {
        for i in 0..params.len() as u32 {
            ins.local_get(i);
        }
        ins.call(callee);
    }
    for (i, b) in text.bytes().enumerate() {
        ins.i32_const(at + i as i32)
            .i32_const(i32::from(b))
            .i32_store8(mem);
    }
    let len = text.len() as i64;
    let results = if packed {
        ins.i64_const((len << 32) | i64::from(at));
        vec![ValType::I64]
    } else {
        ins.i32_const(at).i32_const(len as i32);
        vec![ValType::I32, ValType::I32]
    };
    ins.end();
    Extra {
        name,
        params,
        results,
        body: f,
    }
}

fn const_fn(name: &'static str, params: Vec<ValType>, result: Option<i32>) -> Extra {
    let mut f = Function::new([]);
    let mut ins = f.instructions();
    if let Some(v) = result {
        ins.i32_const(v);
    }
    ins.end();
    Extra {
        name,
        params,
        results: result.map(|_| ValType::I32).into_iter().collect(),
        body: f,
    }
}

/// Appends the harness's identification exports (and alloc/free unless
/// generated) to a wasm-smith module. Errors if there is no memory 0.
fn with_harness(wasm: &[u8], s: &Shape) -> Result<Vec<u8>, String> {
    let err = |e: &dyn std::fmt::Display| e.to_string();
    let mut imported_funcs = 0u32;
    let mut memories = 0u32;
    let mut gen_body = None;
    for p in smith_wasmparser::Parser::new(0).parse_all(wasm) {
        match p.map_err(|e| err(&e))? {
            Payload::ExportSection(r) => {
                for e in r {
                    let e = e.map_err(|e| err(&e))?;
                    if e.name == "gen_body" {
                        gen_body = Some(e.index);
                    }
                }
            }
            Payload::ImportSection(r) => {
                for imp in r.into_imports() {
                    match imp.map_err(|e| err(&e))?.ty {
                        TypeRef::Func(_) | TypeRef::FuncExact(_) => imported_funcs += 1,
                        TypeRef::Memory(_) => memories += 1,
                        _ => {}
                    }
                }
            }
            Payload::MemorySection(r) => memories += r.count(),
            _ => {}
        }
    }
    if memories == 0 {
        return Err("no memory".to_owned());
    }
    let i32s = |n: usize| vec![ValType::I32; n];
    let mut extra = vec![
        const_fn("openwop_abi_version", vec![], Some(s.abi_version)),
        string_fn(
            "openwop_pack_name",
            vec![],
            None,
            NAME_AT,
            s.name,
            s.ident_packed,
        ),
        const_fn("openwop_node_count", vec![], Some(s.node_count)),
        string_fn(
            "openwop_node_id_at",
            i32s(1),
            None,
            TYPE_ID_AT,
            &s.type_id(),
            s.ident_packed,
        ),
    ];
    if let Some(n) = s.wrap_invoke {
        let body = gen_body.ok_or("no gen_body export")?;
        extra.push(string_fn(
            "openwop_node_invoke",
            i32s(3),
            Some(body),
            RESPONSE_AT,
            RESPONSES[n],
            s.invoke_packed,
        ));
    }
    if !s.random_alloc {
        extra.push(const_fn("openwop_alloc", i32s(1), Some(HEAP_AT)));
    }
    if !s.random_free {
        extra.push(const_fn("openwop_free", i32s(2), None));
    }

    let mut rt = RoundtripReencoder;
    let mut out = wasm_encoder::Module::new();
    let (mut types, mut defined) = (0u32, 0u32);
    let mut seen = 0u8;
    let mut code: Option<(CodeSection, u32)> = None;
    for p in smith_wasmparser::Parser::new(0).parse_all(wasm) {
        match p.map_err(|e| err(&e))? {
            Payload::Version { .. } => {}
            Payload::TypeSection(r) => {
                for g in r.clone() {
                    types += g.map_err(|e| err(&e))?.types().count() as u32;
                }
                let mut t = TypeSection::new();
                rt.parse_type_section(&mut t, r).map_err(|e| err(&e))?;
                for f in &extra {
                    t.ty()
                        .function(f.params.iter().copied(), f.results.iter().copied());
                }
                out.section(&t);
                seen |= 1;
            }
            Payload::FunctionSection(r) => {
                defined = r.count();
                let mut f = FunctionSection::new();
                rt.parse_function_section(&mut f, r).map_err(|e| err(&e))?;
                for k in 0..extra.len() as u32 {
                    f.function(types + k);
                }
                out.section(&f);
                seen |= 2;
            }
            Payload::ExportSection(r) => {
                let mut e = ExportSection::new();
                rt.parse_export_section(&mut e, r).map_err(|e| err(&e))?;
                for (k, f) in extra.iter().enumerate() {
                    e.export(
                        f.name,
                        ExportKind::Func,
                        imported_funcs + defined + k as u32,
                    );
                }
                out.section(&e);
                seen |= 4;
            }
            Payload::CodeSectionStart { count, .. } => code = Some((CodeSection::new(), count)),
            Payload::CodeSectionEntry(body) => {
                let Some((c, left)) = code.as_mut() else {
                    return Err("code entry outside the code section".to_owned());
                };
                c.raw(body.as_bytes());
                *left -= 1;
                if *left == 0 {
                    for f in &extra {
                        c.function(&f.body);
                    }
                    out.section(c);
                    seen |= 8;
                    code = None;
                }
            }
            Payload::End(_) => break,
            other => {
                if let Some((id, range)) = other.as_section() {
                    let data = &wasm[range.start as usize..range.end as usize];
                    out.section(&RawSection { id, data });
                }
            }
        }
    }
    if seen != 15 {
        return Err("a type, function, export or code section is missing".to_owned());
    }
    Ok(out.finish())
}

/// Writes the module as a pack directory (or a bare `.wasm`); returns the
/// path to load.
fn write_pack(root: &Path, shape: &Shape, wasm: &[u8]) -> PathBuf {
    if shape.bare {
        let path = root.join(format!("{}.wasm", shape.name));
        std::fs::write(&path, wasm).expect("write module");
        return path;
    }
    let dir = root.join(shape.name);
    std::fs::create_dir_all(&dir).expect("pack dir");
    std::fs::write(dir.join("module.wasm"), wasm).expect("write module");
    let manifest = json!({
        "kind": "node", "name": shape.name, "version": "1.0.0",
        "engines": {"openwop": ">=1.0.0"},
        "nodes": [{"typeId": shape.type_id(), "version": "1.0.0", "category": "transform", "role": "worker"}],
        "runtime": {"language": "wasm", "entry": "module.wasm", "format": "wasm", "wasm": {"abiVersion": 1}},
        "x-wop": {
            "sha256": hex::encode(sha2::Sha256::digest(wasm)),
            "capabilities": ["variables", "channels", "interrupt"]
        }
    });
    std::fs::write(dir.join("pack.json"), manifest.to_string()).expect("write pack.json");
    dir
}

/// Keeps a failing module and fails the test with its seed.
fn fail(seed: u64, wasm: &[u8], what: &str) -> ! {
    let dir = std::env::temp_dir().join("wop-generated-modules");
    let path = dir.join(format!("seed-{seed}.wasm"));
    let kept = std::fs::create_dir_all(&dir)
        .and_then(|()| std::fs::write(&path, wasm))
        .map_or_else(
            |e| format!("(not kept: {e})"),
            |()| path.display().to_string(),
        );
    panic!(
        "generated module seed {seed} ({kept}): {what}\n(rerun: WOP_FUZZ_SEED={seed} WOP_FUZZ_MODULES=1)"
    );
}

/// A load error must be a refusal with a protocol code, not a host failure.
fn check_load_error(e: &LoadError) -> Result<String, String> {
    let code = e.code();
    if code == ErrorCode::InternalError || e.to_string().trim().is_empty() {
        return Err(format!("load failed with {}: {e}", code.as_str()));
    }
    Ok(code.as_str().to_owned())
}

/// A report must be well formed; returns its outcome's name or code.
fn check_report(r: &InvocationReport, shape: &Shape) -> Result<String, String> {
    if r.usage.type_id != shape.type_id() || r.usage.pack != shape.name {
        return Err(format!("usage names another node: {:?}", r.usage));
    }
    serde_json::to_string(r).map_err(|e| format!("the report does not serialize: {e}"))?;
    match &r.outcome {
        Ok(Outcome::Completed { .. }) => Ok("completed".to_owned()),
        Ok(Outcome::Suspended { .. }) => Ok("suspended".to_owned()),
        Err(e) => {
            let ok = match e.source {
                FailureSource::Pack => wop_runtime::outcome::valid_code(&e.code),
                _ => ErrorCode::parse(&e.code).is_some_and(|c| c != ErrorCode::InternalError),
            };
            if !ok || e.message.is_empty() {
                return Err(format!("malformed error: {e:?}"));
            }
            Ok(e.code.clone())
        }
    }
}

/// Loads (and inspects) one module, then invokes it twice; returns the
/// outcomes seen.
async fn exercise(rt: Runtime, path: PathBuf, shape: Shape) -> Result<Vec<String>, String> {
    let mut seen = Vec::new();
    match rt.inspect_pack(&path).await {
        Ok(_) => {}
        Err(e) => {
            check_load_error(&e)?;
        }
    }
    if let Err(e) = rt.load_pack(&path).await {
        if std::env::var_os("WOP_FUZZ_VERBOSE").is_some() {
            eprintln!("{:?}: {e}", shape.mode);
        }
        seen.push(format!("load:{}", check_load_error(&e)?));
        return Ok(seen);
    }
    seen.push("load:ok".to_owned());
    let config = json!({"variables": {"k": "v", "n": 1}, "channels": {"c": [], "d": {"x": 1}}});
    for resume in [None, Some(json!({"answer": true}))] {
        let mut req = InvokeRequest::new(shape.type_id(), json!({"name": "Ada", "n": 7}));
        req.config = config.clone();
        req.resume = resume;
        let r = rt.invoke(req).await;
        seen.push(format!("invoke:{}", check_report(&r, &shape)?));
    }
    Ok(seen)
}

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.trim().parse().ok())
}

/// A well-behaved ABI v1 module named `ok`.
const GOOD: &str = r#"(module
  (memory (export "memory") 1)
  (data (i32.const 16) "ok")
  (data (i32.const 64) "ok.node")
  (data (i32.const 256) "{\"outcome\":\"completed\",\"output\":1}")
  (func (export "openwop_alloc") (param i32) (result i32) (i32.const 1024))
  (func (export "openwop_free") (param i32 i32))
  (func (export "openwop_abi_version") (result i32) (i32.const 1))
  (func (export "openwop_pack_name") (result i32 i32) (i32.const 16) (i32.const 2))
  (func (export "openwop_node_count") (result i32) (i32.const 1))
  (func (export "openwop_node_id_at") (param i32) (result i32 i32) (i32.const 64) (i32.const 7))
  (func (export "openwop_node_invoke") (param i32 i32 i32) (result i32 i32)
    (i32.const 256) (i32.const 34)))"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generated_modules_never_break_the_host() {
    let first = env_u64("WOP_FUZZ_SEED").unwrap_or(DEFAULT_SEED);
    let seconds = env_u64("WOP_FUZZ_SECONDS");
    let count = env_u64("WOP_FUZZ_MODULES").unwrap_or(DEFAULT_MODULES);
    let started = Instant::now();
    let tmp = tempfile::tempdir().expect("tempdir");
    let mut rt = runtime(POLICY);
    let mut tally: BTreeMap<String, u64> = BTreeMap::new();
    let mut n = 0u64;
    loop {
        let more = match seconds {
            Some(s) => started.elapsed() < Duration::from_secs(s),
            None => n < count,
        };
        if !more {
            break;
        }
        if n > 0 && n.is_multiple_of(MODULES_PER_RUNTIME) {
            rt = runtime(POLICY);
        }
        let seed = first.wrapping_add(n);
        n += 1;
        let (shape, wasm) = generate(seed);
        let root = tmp.path().join(format!("m{seed}"));
        std::fs::create_dir_all(&root).expect("module dir");
        let path = write_pack(&root, &shape, &wasm);
        let task = tokio::spawn(exercise(rt.clone(), path, shape.clone()));
        let seen = match tokio::time::timeout(HANG, task).await {
            Err(_) => fail(seed, &wasm, "hung (no verdict within the hang guard)"),
            Ok(Err(join)) if join.is_panic() => {
                fail(seed, &wasm, &format!("the host panicked: {join}"))
            }
            Ok(Err(join)) => fail(seed, &wasm, &format!("the task failed: {join}")),
            Ok(Ok(Err(what))) => fail(seed, &wasm, &format!("{what}\n{shape:?}")),
            Ok(Ok(Ok(seen))) => seen,
        };
        for s in seen {
            *tally.entry(s).or_default() += 1;
        }
        let _ = std::fs::remove_dir_all(&root);
    }
    eprintln!(
        "generated modules: {n} from seed {first} in {:.1?}: {tally:?}",
        started.elapsed()
    );
    // The harness must reach invocation, or this tests only the loader.
    assert!(tally.get("load:ok").is_some_and(|c| *c > 0), "{tally:?}");

    // The runtime is still healthy after every module.
    let good = wat::parse_str(GOOD).expect("good module");
    let path = tmp.path().join("ok.wasm");
    std::fs::write(&path, good).expect("write");
    rt.load_pack(&path).await.expect("load the good module");
    let r = rt.invoke(InvokeRequest::new("ok.node", json!({}))).await;
    assert!(
        matches!(&r.outcome, Ok(Outcome::Completed { output }) if *output == json!(1)),
        "{:?}",
        r.outcome
    );
}
