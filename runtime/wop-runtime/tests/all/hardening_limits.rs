//! Hardening (issue 14), class 7: every limit reports itself — one
//! documented value, its own code and `cap.breached`, counted in usage —
//! for host resources, tables and captured stdio.

use super::hardening::{abi_pack, code, module};
use super::*;
use serde_json::json;
use wop_runtime::Outcome;
use wop_runtime::limits::MAX_TABLE_ELEMENTS;

/// A full resource table (a pack holding 200 open files under
/// `resourceEntries = 64`) is the resource limit — its own cause and
/// `cap.breached{resource-entries}` — not an invalid-ABI trap; holding
/// fewer works.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_resource_table_is_its_own_limit() {
    let data = tempfile::tempdir().unwrap();
    std::fs::write(data.path().join("f"), "x").unwrap();
    let rt = runtime(&format!(
        "[limits]\nresourceEntries = 64\n[packs.fs-probe.filesystem]\npath = {:?}\nreadOnly = true\n",
        data.path()
    ));
    load(&rt, "fs-probe").await;
    let hold = |count: u64| json!({"op": "hold", "path": "/data/f", "count": count});
    let r = invoke(&rt, "wop.testing.fs-probe", hold(200)).await;
    assert_eq!(code(&r), "sandbox_invocation_error", "{:?}", r.outcome);
    let e = r.outcome.as_ref().unwrap_err();
    assert_eq!(e.detail("cause"), Some(&json!("resource-entries")), "{e:?}");
    assert_eq!(e.detail("limit"), Some(&json!(64)), "{e:?}");
    assert_eq!(breaches(&r), vec!["resource-entries".to_owned()]);
    let r = invoke(&rt, "wop.testing.fs-probe", hold(10)).await;
    assert!(
        matches!(&r.outcome, Ok(Outcome::Completed { output }) if output["held"] == json!(10)),
        "{:?}",
        r.outcome
    );
}

/// A module that grows its table `$t` (1 element) by `by` in invoke.
fn table_module(name: &str, declared: u32, by: u32) -> Vec<u8> {
    let extra = format!("(table $t {declared} funcref)");
    let body = format!("(drop (table.grow $t (ref.null func) (i32.const {by})))");
    module(name, "", 16, "", &extra, &body)
}

/// Tables: the engine really holds `MAX_TABLE_ELEMENTS` (100 000) elements
/// (before, its pool stopped at 20 000 below the documented cap); one more
/// is `sandbox_memory_exceeded` (`cause: table-growth`) with
/// `cap.breached{wasm-table}`; a lower `tableElements` is enforced the same
/// way; the largest table is `usage.peakTableElements`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn table_growth_stops_at_one_documented_value() {
    let tmp = tempfile::tempdir().unwrap();
    assert_eq!(MAX_TABLE_ELEMENTS, 100_000);
    let max = MAX_TABLE_ELEMENTS as u32;
    for (policy, by, limit) in [
        ("", max - 1, None),
        ("", max, Some(MAX_TABLE_ELEMENTS)),
        ("[limits]\ntableElements = 500\n", 500, Some(500)),
    ] {
        let rt = runtime(policy);
        let name = format!("grow{by}");
        let wasm = table_module(&name, 1, by);
        rt.load_pack(&abi_pack(tmp.path(), &name, &wasm, &[]))
            .await
            .unwrap();
        let r = invoke(&rt, &format!("test.{name}"), json!({})).await;
        let reached = u64::from(by) + 1;
        match limit {
            None => {
                assert!(
                    matches!(r.outcome, Ok(Outcome::Completed { .. })),
                    "{:?}",
                    r.outcome
                );
                assert_eq!(r.usage.peak_table_elements, reached);
            }
            Some(limit) => {
                assert_eq!(code(&r), "sandbox_memory_exceeded", "{:?}", r.outcome);
                let e = r.outcome.as_ref().unwrap_err();
                assert_eq!(e.detail("cause"), Some(&json!("table-growth")));
                assert_eq!(e.detail("limit"), Some(&json!(limit)));
                assert_eq!(e.detail("observed"), Some(&json!(reached)));
                assert_eq!(breaches(&r), vec!["wasm-table".to_owned()]);
                assert!(r.usage.peak_table_elements <= limit);
            }
        }
    }
    // A policy cannot document a value the engine does not hold.
    let e = Policy::from_toml("[limits]\ntableElements = 100001\n").unwrap_err();
    assert!(e.to_string().contains("tableElements"), "{e}");
}

/// A module *declaring* a table above the cap is refused at load with the
/// table limit's code (`sandbox_memory_exceeded`, `cause: table-size`),
/// not as "not a valid WebAssembly module", and nothing of it runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_declared_table_above_the_cap_is_the_table_limit() {
    let tmp = tempfile::tempdir().unwrap();
    for (policy, declared, limit) in [
        ("", 100_001u32, MAX_TABLE_ELEMENTS),
        ("[limits]\ntableElements = 500\n", 501, 500),
    ] {
        let rt = runtime(policy);
        let name = format!("big{declared}");
        let wasm = table_module(&name, declared, 0);
        let before = rt.stats().instantiations;
        let e = rt
            .load_pack(&abi_pack(tmp.path(), &name, &wasm, &[]))
            .await
            .unwrap_err();
        assert_eq!(
            e.code(),
            wop_runtime::ErrorCode::SandboxMemoryExceeded,
            "{e}"
        );
        assert_eq!(e.details()["cause"], json!("table-size"), "{e}");
        assert_eq!(e.details()["limit"], json!(limit), "{e}");
        assert_eq!(e.details()["observed"], json!(declared), "{e}");
        assert_eq!(rt.stats().instantiations, before, "nothing ran");
    }
}

/// Dropped stdout/stderr bytes are counted: what the pack printed is
/// exactly what was kept plus `logBytesDropped`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_stdio_bytes_are_counted() {
    let rt = runtime("[limits]\nlogBytes = 4096\nlogLineBytes = 256\n");
    load(&rt, "heavy-print").await;
    let lines = 2000u64;
    let r = invoke(&rt, "wop.testing.heavy-print", json!({"lines": lines})).await;
    assert!(
        matches!(r.outcome, Ok(Outcome::Completed { .. })),
        "{:?}",
        r.outcome
    );
    // Bytes of line text (newlines end lines; they are not text).
    let printed: u64 = (0..lines)
        .map(|i| {
            let tail =
                format!(" line {i}: the quick brown fox jumps over the lazy dog").len() as u64;
            ("stdout".len() as u64 + tail) + ("stderr".len() as u64 + tail)
        })
        .sum();
    assert!(r.usage.log_bytes <= 4096, "{}", r.usage.log_bytes);
    assert_eq!(
        r.usage.log_bytes + r.usage.log_bytes_dropped,
        printed,
        "kept {} + dropped {}",
        r.usage.log_bytes,
        r.usage.log_bytes_dropped
    );
}
