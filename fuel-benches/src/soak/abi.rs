//! WASM ABI v1 core modules built from WAT at startup (the shape of
//! `wop_testkit::abi_v1`, shared with the hardening tests), written out as pack
//! directories: one honest (`abi-kv`: a variable set and read back) and
//! three hostile (`abi-reenter`: `openwop_alloc` re-entering the host,
//! `abi-spin`: `loop br 0`, `abi-grow`: `memory.grow` until refused).

use anyhow::{Context as _, Result, anyhow};
use std::path::{Path, PathBuf};
use wop_testkit::abi_v1::{DIGIT, Module};

const VGET: &str =
    r#"(import "openwop" "openwop_variable_get" (func $vget (param i32 i32) (result i32 i32)))"#;
const VSET: &str = r#"(import "openwop" "openwop_variable_set" (func $vset (param i32 i32 i32 i32) (result i32)))"#;

/// A minimal ABI v1 module of node type `soak.<name>` (see
/// [`wop_testkit::abi_v1::Module`]).
fn module(name: &str, imports: &str, alloc: &str, extra: &str, invoke: &str) -> Result<Vec<u8>> {
    let wat = Module {
        imports,
        alloc,
        extra,
        invoke,
        ..Module::new("soak", name)
    }
    .wat();
    wat::parse_str(&wat).map_err(|e| anyhow!("{name}: {e}"))
}

/// Writes an ABI v1 pack directory `root/name` for `wasm` with `caps`.
fn write_pack(root: &Path, name: &str, wasm: &[u8], caps: &[&str]) -> Result<PathBuf> {
    wop_testkit::abi_v1::write_pack(root, "soak", name, wasm, caps)
        .with_context(|| format!("{}", root.join(name).display()))
}

/// The ABI v1 packs' names (node type `soak.<name>`); the policy grants
/// `variables` to `abi-kv` and `abi-reenter`.
pub const PACKS: [&str; 4] = ["abi-kv", "abi-reenter", "abi-spin", "abi-grow"];

/// Builds the ABI v1 packs under `root`; returns their directories.
pub fn write_packs(root: &Path) -> Result<Vec<PathBuf>> {
    let key = r#"(data (i32.const 300) "k") (data (i32.const 310) "\"v\"")"#;
    let lookup = "(drop (drop (call $vget (i32.const 300) (i32.const 1))))";
    let set_get = format!(
        r#"(if (call $vset (i32.const 300) (i32.const 1) (i32.const 310) (i32.const 3))
      (then (i32.store8 (i32.const {DIGIT}) (i32.const 49))))
    {lookup}"#
    );
    let both = format!("{VGET}\n  {VSET}");
    let grow = "(block $done (loop $l
      (br_if $done (i32.eq (memory.grow (i32.const 16)) (i32.const -1)))
      (br $l)))";
    let modules = [
        (
            "abi-kv",
            module("abi-kv", &both, "", key, &set_get)?,
            &["variables"][..],
        ),
        (
            "abi-reenter",
            module("abi-reenter", VGET, lookup, key, lookup)?,
            &["variables"][..],
        ),
        (
            "abi-spin",
            module("abi-spin", "", "", "", "(loop $l (br $l))")?,
            &[][..],
        ),
        ("abi-grow", module("abi-grow", "", "", "", grow)?, &[][..]),
    ];
    modules
        .iter()
        .map(|(name, wasm, caps)| write_pack(root, name, wasm, caps))
        .collect()
}
