//! `wop.samples.hello-abi`: an OpenWOP **WASM ABI v1** core module
//! (`runtime.language: "wasm"`, RFC 0008), written against the ABI by hand:
//! plain `extern "C"` exports and imports, no WASI, no wit-bindgen. Built
//! for `wasm32-unknown-unknown`.
//!
//! Stable Rust has no multi-value returns on this target, so every
//! (ptr, len) result uses the ABI's packed-`i64` form: ptr in the low 32
//! bits, len in the high 32 bits. Strings returned from
//! `openwop_pack_name`/`openwop_node_id_at` are static; the response of
//! `openwop_node_invoke` is allocated with `openwop_alloc` and freed by the
//! host with `openwop_free`, as is the request the host hands in.

use serde_json::{Value, json};
use std::alloc::{Layout, alloc, dealloc};

#[link(wasm_import_module = "openwop")]
unsafe extern "C" {
    /// `openwop_log(level, ptr, len)`: 0 trace, 1 debug, 2 info, 3 warn, 4 error.
    fn openwop_log(level: i32, ptr: *const u8, len: usize);
}

const PACK_NAME: &str = "hello-abi";
const NODE_IDS: [&str; 1] = ["wop.samples.hello-abi"];
const INFO: i32 = 2;

/// Packs (ptr, len) into one `i64`: ptr low, len high.
fn pack(ptr: *const u8, len: usize) -> i64 {
    ((len as u64) << 32 | (ptr as usize as u64)) as i64
}

fn log(level: i32, message: &str) {
    // SAFETY: the pointer and length describe a live `&str`; the host only
    // reads from it during the call.
    unsafe { openwop_log(level, message.as_ptr(), message.len()) }
}

/// The ABI version this module implements.
#[unsafe(no_mangle)]
pub extern "C" fn openwop_abi_version() -> i32 {
    1
}

/// (ptr, len) of the pack name.
#[unsafe(no_mangle)]
pub extern "C" fn openwop_pack_name() -> i64 {
    pack(PACK_NAME.as_ptr(), PACK_NAME.len())
}

/// How many node types this module implements.
#[unsafe(no_mangle)]
pub extern "C" fn openwop_node_count() -> i32 {
    NODE_IDS.len() as i32
}

/// (ptr, len) of the typeId at `index`, or (0, 0).
#[unsafe(no_mangle)]
pub extern "C" fn openwop_node_id_at(index: i32) -> i64 {
    match usize::try_from(index).ok().and_then(|i| NODE_IDS.get(i)) {
        Some(id) => pack(id.as_ptr(), id.len()),
        None => 0,
    }
}

/// Allocates `size` bytes for the host (alignment 1; 0 for size 0).
#[unsafe(no_mangle)]
pub extern "C" fn openwop_alloc(size: i32) -> i32 {
    let Ok(size) = usize::try_from(size) else {
        return 0;
    };
    if size == 0 {
        return 0;
    }
    match Layout::from_size_align(size, 1) {
        // SAFETY: the layout has a non-zero size.
        Ok(layout) => unsafe { alloc(layout) as usize as i32 },
        Err(_) => 0,
    }
}

/// Frees a buffer from [`openwop_alloc`] (the host calls it once per buffer).
#[unsafe(no_mangle)]
pub extern "C" fn openwop_free(ptr: i32, size: i32) {
    let (Ok(size), false) = (usize::try_from(size), ptr == 0) else {
        return;
    };
    if size == 0 {
        return;
    }
    if let Ok(layout) = Layout::from_size_align(size, 1) {
        // SAFETY: the host hands back exactly a (ptr, size) this module
        // returned from `openwop_alloc` (or from `openwop_node_invoke`,
        // whose buffer comes from the same allocator with alignment 1).
        unsafe { dealloc(ptr as usize as *mut u8, layout) }
    }
}

/// Copies `bytes` into a fresh `openwop_alloc` buffer; (ptr, len) packed.
fn hand_over(bytes: &[u8]) -> i64 {
    let ptr = openwop_alloc(bytes.len() as i32) as usize as *mut u8;
    if ptr.is_null() {
        return 0;
    }
    // SAFETY: `ptr` was just allocated with room for `bytes.len()` bytes.
    unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), ptr, bytes.len()) };
    pack(ptr, bytes.len())
}

fn respond(response: &Value) -> i64 {
    hand_over(response.to_string().as_bytes())
}

fn failed(code: &str, message: &str) -> i64 {
    respond(&json!({
        "outcome": "failed",
        "error": { "code": code, "message": message, "details": {} }
    }))
}

/// Runs node `index` on the JSON request at (ptr, len).
#[unsafe(no_mangle)]
pub extern "C" fn openwop_node_invoke(index: i32, ptr: i32, len: i32) -> i64 {
    if index != 0 {
        return failed("not_found", "unknown node index");
    }
    let request: &[u8] = match usize::try_from(len) {
        Ok(0) | Err(_) => &[],
        // SAFETY: the host wrote `len` bytes of request at `ptr`, inside a
        // buffer it got from `openwop_alloc`; it frees it after we return.
        Ok(n) => unsafe { std::slice::from_raw_parts(ptr as usize as *const u8, n) },
    };
    let request: Value = match serde_json::from_slice(request) {
        Ok(v) => v,
        Err(e) => return failed("validation_error", &format!("bad request: {e}")),
    };
    let name = request["inputs"]["name"].as_str().unwrap_or("world");
    let greeting = format!("Hello, {name}!");
    log(INFO, &greeting);
    respond(&json!({ "outcome": "completed", "output": { "greeting": greeting } }))
}
