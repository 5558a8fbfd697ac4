//! Golden fuel: the exact fuel each (kernel, n) consumes is a product
//! contract (usage records, budgets and prices are in fuel). The numbers
//! live in `golden/fuel.json`:
//!
//! - `<kernel>/<n>`: the `kernels` testing pack through `Runtime::invoke`
//!   (`report.usage.fuel_consumed`): the whole invocation, SDK and JSON
//!   included. These depend on the Rust toolchain and the crates that built
//!   the component, not only on the kernel;
//! - `wat/<kernel>/<n>`: the WAT core module (`src/kernels.wat`) on a plain
//!   wasmtime engine with `consume_fuel(true)`: wasmtime's fuel accounting
//!   of fixed code, independent of our packaging and of rustc.
//!
//! Missing file or `WOP_BLESS=1` → (re)write it and pass. Otherwise any
//! difference fails, listing expected vs actual.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use fuel_benches::wat::{Kernel, Metering, WatKernels};
use fuel_benches::{invoke_kernel, kernels_runtime};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// (kernel, n) of the `kernels` pack.
const PACK_CASES: &[(&str, u32)] = &[
    ("loop", 0),
    ("loop", 1_000),
    ("loop", 100_000),
    ("collatz", 1_000),
    ("collatz", 10_000),
    ("fib", 10),
    ("fib", 20),
    ("sieve", 1_000),
    ("sieve", 100_000),
    ("noop-log", 0),
    ("noop-log", 10),
    ("noop-log", 100),
];

/// (kernel, n) of the WAT module.
const WAT_CASES: &[(Kernel, u32)] = &[
    (Kernel::Loop, 0),
    (Kernel::Loop, 1_000),
    (Kernel::Loop, 100_000),
    (Kernel::Collatz, 1_000),
    (Kernel::Collatz, 10_000),
    (Kernel::Fib, 10),
    (Kernel::Fib, 20),
    (Kernel::Sieve, 1_000),
    (Kernel::Sieve, 100_000),
];

/// Known results, so a kernel that computes something else is caught even
/// when re-blessing.
fn expected_result(kernel: &str, n: u32) -> Option<u64> {
    Some(match (kernel, n) {
        ("fib", 10) => 55,
        ("fib", 20) => 6_765,
        ("sieve", 1_000) => 168,
        ("sieve", 100_000) => 9_592,
        ("loop", 0) => 1,
        ("noop-log", n) => u64::from(n),
        _ => return None,
    })
}

fn golden_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("golden/fuel.json")
}

/// Measures every case. Returns the fuel per key and the problems found on
/// the way (wrong results, nondeterminism), which fail the test even when
/// blessing.
async fn measure() -> (BTreeMap<String, u64>, Vec<String>) {
    let mut actual = BTreeMap::new();
    let mut results = BTreeMap::new();
    let mut problems = Vec::new();

    // The pack through the real runtime, twice: fuel must not vary.
    let wop = kernels_runtime().await.unwrap();
    for &(kernel, n) in PACK_CASES {
        let key = format!("{kernel}/{n}");
        let first = invoke_kernel(&wop, kernel, n).await.unwrap();
        let second = invoke_kernel(&wop, kernel, n).await.unwrap();
        if first != second {
            problems.push(format!(
                "  {key}: two invocations differ: {first:?} vs {second:?}"
            ));
        }
        if let Some(r) = expected_result(kernel, n)
            && first.result != r
        {
            problems.push(format!("  {key}: result {} instead of {r}", first.result));
        }
        actual.insert(key.clone(), first.fuel);
        results.insert(key, first.result);
    }

    // The WAT module on a plain engine with fuel; the runtime's
    // configuration (async yields + timeout) must consume exactly the same.
    let fuel = WatKernels::new(Metering::Fuel).unwrap();
    let yielding = WatKernels::new(Metering::Runtime).unwrap();
    for &(kernel, n) in WAT_CASES {
        let key = format!("{}/{n}", kernel.name());
        let run = fuel.call(kernel, n).await.unwrap();
        let again = yielding.call(kernel, n).await.unwrap();
        if run != again {
            problems.push(format!(
                "  wat/{key}: yielding changed the run: {run:?} vs {again:?}"
            ));
        }
        // Same kernel, same answer as the pack (u64 bits of the i64).
        if let Some(&r) = results.get(&key)
            && run.result as u64 != r
        {
            problems.push(format!(
                "  {key}: the pack computes {r}, the WAT module {}",
                run.result as u64
            ));
        }
        actual.insert(format!("wat/{key}"), run.fuel);
    }
    (actual, problems)
}

fn rustc_version() -> String {
    std::process::Command::new(std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into()))
        .arg("--version")
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_else(|| "rustc (unknown version)".into())
}

#[tokio::test(flavor = "current_thread")]
async fn golden_fuel() {
    let (actual, problems) = measure().await;
    let problems = if problems.is_empty() {
        String::new()
    } else {
        format!(
            "kernels compute something else (fix the kernel; blessing does not help):\n{}\n\n",
            problems.join("\n")
        )
    };
    let path = golden_path();
    let bless = std::env::var("WOP_BLESS").is_ok_and(|v| v == "1");
    if bless || !path.exists() {
        let mut text = serde_json::to_string_pretty(&actual).unwrap();
        text.push('\n');
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
        eprintln!(
            "golden fuel: wrote {} ({} entries)",
            path.display(),
            actual.len()
        );
        assert!(problems.is_empty(), "{problems}");
        return;
    }
    let expected: BTreeMap<String, u64> = serde_json::from_slice(&std::fs::read(&path).unwrap())
        .unwrap_or_else(|e| panic!("{} is not a JSON object of numbers: {e}", path.display()));
    let mut diffs = Vec::new();
    for key in expected
        .keys()
        .chain(actual.keys().filter(|k| !expected.contains_key(*k)))
    {
        match (expected.get(key), actual.get(key)) {
            (Some(e), Some(a)) if e == a => {}
            (Some(e), Some(a)) => diffs.push(format!(
                "  {key}: expected {e}, actual {a} ({:+}, {:+.3}%)",
                i128::from(*a) - i128::from(*e),
                (*a as f64 - *e as f64) / *e as f64 * 100.0
            )),
            (Some(e), None) => diffs.push(format!("  {key}: expected {e}, no longer measured")),
            (None, Some(a)) => diffs.push(format!("  {key}: not in the golden file, actual {a}")),
            (None, None) => {}
        }
    }
    if !diffs.is_empty() || !problems.is_empty() {
        panic!(
            "{problems}golden fuel numbers changed ({} of {} entries) in {}:\n{}\n\n\
             Fuel per (kernel, n) is a product contract: usage, budgets and prices are in fuel.\n\
             `<kernel>/<n>` entries are the `kernels` pack (sample-packs/testing/kernels) through\n\
             Runtime::invoke; they depend on the Rust toolchain that built the component\n\
             (rustc here: {}), the release profile in sample-packs/Cargo.toml, the SDK and\n\
             serde_json, as well as on the kernel and wasmtime. `wat/...` entries depend only on\n\
             src/kernels.wat and wasmtime's fuel accounting.\n\
             If the change is intended, re-bless and commit the file:\n\
             \n    WOP_BLESS=1 cargo test -p fuel-benches --test golden_fuel\n",
            diffs.len(),
            expected.len().max(actual.len()),
            path.display(),
            diffs.join("\n"),
            rustc_version(),
        );
    }
}
