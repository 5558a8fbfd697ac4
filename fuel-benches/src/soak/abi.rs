//! WASM ABI v1 core modules built from WAT at startup (the same shape as
//! `runtime/wop-runtime/tests/all/hardening.rs`), written out as pack
//! directories: one honest (`abi-kv`: a variable set and read back) and
//! three hostile (`abi-reenter`: `openwop_alloc` re-entering the host,
//! `abi-spin`: `loop br 0`, `abi-grow`: `memory.grow` until refused).

use anyhow::{Context as _, Result, anyhow};
use serde_json::json;
use sha2::Digest as _;
use std::path::{Path, PathBuf};

/// `{"outcome":"completed","output":0}` at 256; the digit is flipped to 1
/// when a variable write is refused.
const RESPONSE: &str = r#"{"outcome":"completed","output":0}"#;
const DIGIT: usize = 256 + RESPONSE.len() - 2;

const VGET: &str =
    r#"(import "openwop" "openwop_variable_get" (func $vget (param i32 i32) (result i32 i32)))"#;
const VSET: &str = r#"(import "openwop" "openwop_variable_set" (func $vset (param i32 i32 i32 i32) (result i32)))"#;

/// A minimal ABI v1 module: `imports`, `pages` of exported memory, a bump
/// `openwop_alloc` (body `alloc` runs first), `extra` items, and an
/// `openwop_node_invoke` body `invoke`; node type `soak.<name>`.
fn module(name: &str, imports: &str, alloc: &str, extra: &str, invoke: &str) -> Result<Vec<u8>> {
    let pages = 16u32;
    let wat = format!(
        r#"(module
  {imports}
  (memory (export "memory") {pages})
  (global $bump (mut i32) (i32.const {heap}))
  (data (i32.const 16) "{name}")
  (data (i32.const 64) "soak.{name}")
  (data (i32.const 256) "{{\"outcome\":\"completed\",\"output\":0}}")
  {extra}
  (func $alloc (export "openwop_alloc") (param $n i32) (result i32)
    (local $p i32)
    {alloc}
    (local.set $p (global.get $bump))
    (global.set $bump (i32.add (local.get $p) (local.get $n)))
    (local.get $p))
  (func (export "openwop_abi_version") (result i32) (i32.const 1))
  (func (export "openwop_pack_name") (result i32 i32) (i32.const 16) (i32.const {nl}))
  (func (export "openwop_node_count") (result i32) (i32.const 1))
  (func (export "openwop_node_id_at") (param i32) (result i32 i32) (i32.const 64) (i32.const {tl}))
  (func (export "openwop_free") (param i32 i32))
  (func (export "openwop_node_invoke") (param $idx i32) (param $ptr i32) (param $len i32) (result i32 i32)
    {invoke}
    (i32.const 256) (i32.const {rl}))
)"#,
        heap = (pages - 8) * 65536,
        nl = name.len(),
        tl = name.len() + 5,
        rl = RESPONSE.len(),
    );
    wat::parse_str(&wat).map_err(|e| anyhow!("{name}: {e}"))
}

/// Writes an ABI v1 pack directory `root/name` for `wasm` with `caps`.
fn write_pack(root: &Path, name: &str, wasm: &[u8], caps: &[&str]) -> Result<PathBuf> {
    let dir = root.join(name);
    std::fs::create_dir_all(&dir).with_context(|| format!("{}", dir.display()))?;
    std::fs::write(dir.join("module.wasm"), wasm)?;
    let manifest = json!({
        "kind": "node", "name": name, "version": "1.0.0",
        "engines": {"openwop": ">=1.0.0"},
        "nodes": [{"typeId": format!("soak.{name}"), "version": "1.0.0", "category": "transform", "role": "worker"}],
        "runtime": {"language": "wasm", "entry": "module.wasm", "format": "wasm", "wasm": {"abiVersion": 1}},
        "x-wop": {"sha256": hex::encode(sha2::Sha256::digest(wasm)), "capabilities": caps}
    });
    std::fs::write(dir.join("pack.json"), manifest.to_string())?;
    Ok(dir)
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
