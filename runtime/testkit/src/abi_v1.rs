//! WASM ABI v1 core modules from WAT, written out as pack directories: the
//! hostile-pack tests and the soak build theirs here.

use serde_json::json;
use sha2::Digest as _;
use std::path::{Path, PathBuf};

/// The response every [`Module`] returns, at address 256.
pub const RESPONSE: &str = r#"{"outcome":"completed","output":0}"#;

/// Address of the output digit in [`RESPONSE`] (a body can flip it).
pub const DIGIT: usize = 256 + RESPONSE.len() - 2;

/// A minimal ABI v1 module: `imports`, `pages` of exported memory, a bump
/// `openwop_alloc` (body `alloc` runs first), `extra` items, and an
/// `openwop_node_invoke` body `invoke` before it returns [`RESPONSE`].
/// Its one node type is `<prefix>.<name>`.
#[derive(Debug, Clone, Copy)]
pub struct Module<'a> {
    /// Type-id prefix (`test`, `soak`).
    pub prefix: &'a str,
    /// Pack name.
    pub name: &'a str,
    /// Import declarations.
    pub imports: &'a str,
    /// Memory pages (at least 9: the heap starts 8 pages below the top).
    pub pages: u32,
    /// Runs first in `openwop_alloc`.
    pub alloc: &'a str,
    /// Extra module items (data, functions, tables).
    pub extra: &'a str,
    /// Runs in `openwop_node_invoke` before the response is returned.
    pub invoke: &'a str,
}

impl<'a> Module<'a> {
    /// `prefix.name` with 16 pages and empty bodies.
    pub fn new(prefix: &'a str, name: &'a str) -> Self {
        Self {
            prefix,
            name,
            imports: "",
            pages: 16,
            alloc: "",
            extra: "",
            invoke: "",
        }
    }

    /// The module's WAT text.
    pub fn wat(&self) -> String {
        let Module {
            prefix,
            name,
            imports,
            pages,
            alloc,
            extra,
            invoke,
        } = *self;
        format!(
            r#"(module
  {imports}
  (memory (export "memory") {pages})
  (global $bump (mut i32) (i32.const {heap}))
  (data (i32.const 16) "{name}")
  (data (i32.const 64) "{prefix}.{name}")
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
            heap = pages.saturating_sub(8) * 65536,
            nl = name.len(),
            tl = prefix.len() + 1 + name.len(),
            rl = RESPONSE.len(),
        )
    }
}

/// Writes the ABI v1 pack directory `root/name` (node type
/// `<prefix>.<name>`) for `wasm`, requesting `caps`.
pub fn write_pack(
    root: &Path,
    prefix: &str,
    name: &str,
    wasm: &[u8],
    caps: &[&str],
) -> std::io::Result<PathBuf> {
    let dir = root.join(name);
    std::fs::create_dir_all(&dir)?;
    std::fs::write(dir.join("module.wasm"), wasm)?;
    let manifest = json!({
        "kind": "node", "name": name, "version": "1.0.0",
        "engines": {"openwop": ">=1.0.0"},
        "nodes": [{"typeId": format!("{prefix}.{name}"), "version": "1.0.0", "category": "transform", "role": "worker"}],
        "runtime": {"language": "wasm", "entry": "module.wasm", "format": "wasm", "wasm": {"abiVersion": 1}},
        "x-wop": {"sha256": hex::encode(sha2::Sha256::digest(wasm)), "capabilities": caps}
    });
    std::fs::write(dir.join("pack.json"), manifest.to_string())?;
    Ok(dir)
}
