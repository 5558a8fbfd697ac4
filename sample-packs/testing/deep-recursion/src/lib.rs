//! Attack: stack exhaustion, two ways. `invoke` recurses without bound and
//! uses the callee's result after the call, so the optimizer can neither
//! turn it into a loop nor elide the frames. The runtime must turn the
//! overflow into a classified trap, not a host crash.
//!
//! - `{"mode": "wasm"}` (default): frames hold only scalars, so they live on
//!   the engine's wasm stack and the engine's stack limit traps.
//! - `{"mode": "shadow"}`: every frame keeps a buffer in Rust's *shadow
//!   stack* in linear memory; overflowing it is an out-of-bounds access.

use std::hint::black_box;

use serde_json::json;
use wop_sdk::{Ctx, NodeError, Outcome, Pack, PackInfo, Request};

/// The pack.
struct DeepRecursion;

/// Recurse on the wasm stack only (scalars, non-associative combination).
#[inline(never)]
fn native(depth: u64, a: u64, b: u64) -> u64 {
    if depth == a.wrapping_sub(1) {
        return b;
    }
    let r = native(depth + 1, a, b.wrapping_mul(31).wrapping_add(depth));
    r.rotate_left(3) ^ depth ^ b
}

/// Recurse until the stack runs out (the base case is unreachable in
/// practice, but the compiler cannot know that).
#[inline(never)]
fn recurse(depth: u64) -> u64 {
    let mut frame = [0u8; 128];
    frame[(depth % 128) as usize] = depth as u8;
    black_box(&mut frame);
    if black_box(depth) == u64::MAX {
        return 0;
    }
    let below = recurse(black_box(depth + 1));
    black_box(below)
        .wrapping_add(u64::from(frame[(depth % 128) as usize]))
        .wrapping_add(1)
}

impl Pack for DeepRecursion {
    fn describe() -> PackInfo {
        PackInfo::new("deep-recursion", "0.1.0").node("wop.testing.deep-recursion", "0.1.0")
    }

    fn invoke(_ctx: &Ctx, request: Request) -> Result<Outcome, NodeError> {
        let depth = match request.inputs.get("mode").and_then(|m| m.as_str()) {
            Some("shadow") => recurse(0),
            // `a` = 0 makes the base case unreachable (depth never wraps to
            // u64::MAX), but only at run time.
            _ => native(0, black_box(0), 7),
        };
        Outcome::completed(json!({ "depth": depth }))
    }
}

wop_sdk::export_pack!(DeepRecursion);
