//! Prints the latest criterion results of `cargo bench -p fuel-benches` as
//! Markdown: per group, each benchmark's median and its ratio to the
//! group's baseline (ratios first), plus derived numbers (cost of one log
//! call, claims per second).
//!
//! Run: `cargo run --release -p fuel-benches --bin report [-- <criterion dir>]`
//! (default: `$CARGO_TARGET_DIR/criterion`, else `target/criterion` of this
//! workspace).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// (group, function) → median in nanoseconds.
type Medians = BTreeMap<String, Vec<(String, f64)>>;

fn collect(dir: &Path, out: &mut Medians) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if !p.is_dir() {
            continue;
        }
        let (bench, est) = (p.join("new/benchmark.json"), p.join("new/estimates.json"));
        if bench.is_file() && est.is_file() {
            let b: serde_json::Value =
                serde_json::from_slice(&std::fs::read(&bench).unwrap()).unwrap();
            let e: serde_json::Value =
                serde_json::from_slice(&std::fs::read(&est).unwrap()).unwrap();
            let group = b["group_id"].as_str().unwrap_or("?").to_owned();
            let func = b["function_id"].as_str().unwrap_or("?").to_owned();
            let median = e["median"]["point_estimate"].as_f64().unwrap_or(f64::NAN);
            out.entry(group).or_default().push((func, median));
        } else {
            collect(&p, out);
        }
    }
}

fn time(ns: f64) -> String {
    if ns >= 1e6 {
        format!("{:.2} ms", ns / 1e6)
    } else if ns >= 1e3 {
        format!("{:.1} µs", ns / 1e3)
    } else {
        format!("{ns:.0} ns")
    }
}

/// The benchmark ids in the order the benches define them; the first is
/// the baseline of ratios.
fn order(group: &str) -> &'static [&'static str] {
    match group {
        "invoke_hello" => &["bare", "bare-on-demand", "wop"],
        "host_call_log" => &["bare-n0", "bare-n1000", "wop-n0", "wop-n1000"],
        "host_call_tool" => &["read-memory", "write-memory", "write-sled"],
        "authz" => &["allowed", "denied-scopes"],
        "claims" => &[
            "memory-c1",
            "sled-gc-off-c1",
            "sled-gc-on-c1",
            "memory-c16",
            "sled-gc-off-c16",
            "sled-gc-on-c16",
        ],
        g if g.starts_with("kernels_wat/") => &[
            "bare",
            "fuel",
            "epoch",
            "fuel+epoch",
            "runtime(fuel+yield+timeout)",
        ],
        g if g.starts_with("kernels_pack/") => &["bare", "bare+fuel", "wop"],
        _ => &[],
    }
}

fn main() {
    let dir = std::env::args().nth(1).map_or_else(
        || {
            std::env::var_os("CARGO_TARGET_DIR")
                .map_or_else(
                    || PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../target")),
                    PathBuf::from,
                )
                .join("criterion")
        },
        PathBuf::from,
    );
    let mut all = Medians::new();
    collect(&dir, &mut all);
    if all.is_empty() {
        eprintln!(
            "no criterion results under {}; run `cargo bench -p fuel-benches` first",
            dir.display()
        );
        std::process::exit(1);
    }
    let median = |g: &str, f: &str| {
        all.get(g)
            .and_then(|v| v.iter().find(|(id, _)| id == f))
            .map(|(_, m)| *m)
    };

    // Kernels: one row per kernel, ratios vs bare first.
    let wat: Vec<&String> = all
        .keys()
        .filter(|g| g.starts_with("kernels_wat/"))
        .collect();
    if !wat.is_empty() {
        let cols = order("kernels_wat/");
        println!("## CPU kernels, WAT core module (median; ratio vs bare)\n");
        println!("| kernel | {} | bare median |", cols[1..].join(" | "));
        println!("|---|{}---|", "---|".repeat(cols.len() - 1));
        for g in wat {
            let base = median(g, "bare").unwrap_or(f64::NAN);
            let ratios: Vec<String> = cols[1..]
                .iter()
                .map(|c| median(g, c).map_or("–".into(), |m| format!("{:.2}×", m / base)))
                .collect();
            println!(
                "| {} | {} | {} |",
                g.trim_start_matches("kernels_wat/"),
                ratios.join(" | "),
                time(base)
            );
        }
        println!();
    }
    let pack: Vec<&String> = all
        .keys()
        .filter(|g| g.starts_with("kernels_pack/"))
        .collect();
    if !pack.is_empty() {
        println!("## CPU kernels, `kernels` component pack (median; ratio vs bare wasmtime)\n");
        println!("| kernel | wop / bare | bare+fuel / bare | bare median | wop median |");
        println!("|---|---|---|---|---|");
        for g in pack {
            let m = |id| median(g, id).unwrap_or(f64::NAN);
            let (b, f, w) = (m("bare"), m("bare+fuel"), m("wop"));
            println!(
                "| {} | {:.2}× | {:.2}× | {} | {} |",
                g.trim_start_matches("kernels_pack/"),
                w / b,
                f / b,
                time(b),
                time(w)
            );
        }
        println!();
    }

    for g in [
        "invoke_hello",
        "host_call_tool",
        "authz",
        "claims",
        "host_call_log",
    ] {
        let Some(rows) = all.get(g) else { continue };
        let ids = order(g);
        let base = median(g, ids[0]).unwrap_or(f64::NAN);
        println!("## {g} (median; ratio vs `{}`)\n", ids[0]);
        println!("| benchmark | ratio | median |");
        println!("|---|---|---|");
        let mut sorted: Vec<&(String, f64)> = rows.iter().collect();
        sorted.sort_by_key(|(id, _)| ids.iter().position(|x| x == id).unwrap_or(usize::MAX));
        for (id, m) in sorted {
            let extra = if g == "claims" {
                format!(" ({:.0} claims/s)", 1e9 / m)
            } else {
                String::new()
            };
            println!("| {id} | {:.2}× | {}{extra} |", m / base, time(*m));
        }
        if g == "host_call_log"
            && let (Some(b0), Some(b1), Some(w0), Some(w1)) = (
                median(g, "bare-n0"),
                median(g, "bare-n1000"),
                median(g, "wop-n0"),
                median(g, "wop-n1000"),
            )
        {
            let (b, w) = ((b1 - b0) / 1000.0, (w1 - w0) / 1000.0);
            println!(
                "\nOne `log` host call: wop {} vs bare {} ({:.2}×)",
                time(w),
                time(b),
                w / b
            );
        }
        println!();
    }
}
