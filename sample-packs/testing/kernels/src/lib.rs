//! Testing: CPU kernels and a host-call loop, for `fuel-benches` (benchmarks
//! and the golden fuel test: the fuel each `(kernel, n)` consumes is a
//! product contract, so changing a kernel changes `fuel-benches/golden/fuel.json`).
//!
//! Input `{"kernel": "loop"|"collatz"|"fib"|"sieve"|"noop-log", "n": <u32>}`
//! → `{"kernel": ..., "n": ..., "result": <u64>}`:
//!
//! - `loop`: `n` iterations of a 64-bit LCG, a dependent chain (latency-bound);
//! - `collatz`: total Collatz steps of every start value in `1..=n`;
//! - `fib`: recursive `fib(n)` (call-heavy, kept doubly recursive);
//! - `sieve`: the number of primes `< n` (sieve of Eratosthenes, `n` bytes);
//! - `noop-log`: `n` calls of `log.debug("x")` (host-call overhead); result `n`.
//!
//! `black_box` keeps the compiler from folding any kernel into a constant.
//! The same four CPU kernels exist as WAT in `fuel-benches/src/kernels.wat`.

use std::hint::black_box;

use serde::Deserialize;
use serde_json::json;
use wop_sdk::{Ctx, NodeError, Outcome, Pack, PackInfo, Request};

/// The pack.
struct Kernels;

/// The node's inputs.
#[derive(Deserialize)]
struct Inputs {
    /// Which kernel.
    kernel: String,
    /// Its size parameter.
    n: u32,
}

/// `n` steps of Knuth's MMIX LCG from 1: each step depends on the last.
fn lcg(n: u32) -> u64 {
    let mut x: u64 = black_box(1);
    for _ in 0..n {
        x = x
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
    }
    x
}

/// Total Collatz steps to reach 1 of every start value in `1..=n`.
fn collatz(n: u32) -> u64 {
    let mut steps: u64 = 0;
    for start in 1..=u64::from(n) {
        let mut v = start;
        while v > 1 {
            v = if v & 1 == 0 { v >> 1 } else { 3 * v + 1 };
            steps += 1;
        }
    }
    steps
}

/// Recursive Fibonacci. The `black_box` around the second call keeps it
/// out of tail position, so LLVM cannot turn the recursion into a loop.
#[inline(never)]
fn fib(n: u32) -> u64 {
    if n < 2 {
        u64::from(n)
    } else {
        fib(n - 1).wrapping_add(black_box(fib(n - 2)))
    }
}

/// The number of primes below `n` (sieve of Eratosthenes over `n` bytes).
fn sieve(n: u32) -> u64 {
    let n = n as usize;
    if n < 3 {
        return 0;
    }
    let mut composite = vec![false; n];
    let mut count = 0;
    for i in 2..n {
        if !composite[i] {
            count += 1;
            let mut j = i.saturating_mul(i);
            while j < n {
                composite[j] = true;
                j += i;
            }
        }
    }
    black_box(&composite);
    count
}

impl Pack for Kernels {
    fn describe() -> PackInfo {
        PackInfo::new("kernels", "0.1.0").node("wop.testing.kernels", "0.1.0")
    }

    fn invoke(ctx: &Ctx, request: Request) -> Result<Outcome, NodeError> {
        let inputs: Inputs = request.inputs_as()?;
        let n = black_box(inputs.n);
        let result = match inputs.kernel.as_str() {
            "loop" => lcg(n),
            "collatz" => collatz(n),
            "fib" => fib(n),
            "sieve" => sieve(n),
            "noop-log" => {
                for _ in 0..n {
                    ctx.log().debug("x");
                }
                u64::from(n)
            }
            other => {
                return Err(NodeError::validation(format!(
                    "unknown kernel `{other}` (loop, collatz, fib, sieve, noop-log)"
                )));
            }
        };
        Outcome::completed(json!({
            "kernel": inputs.kernel,
            "n": inputs.n,
            "result": black_box(result),
        }))
    }
}

wop_sdk::export_pack!(Kernels);
