//! `wop probe`: the protocol's conformance probe for core modules. Calls
//! one export of a `.wasm` with one i32 (or none) in a fresh sandbox and
//! prints one JSON line: `{"ok":true,"result":N}` or
//! `{"ok":false,"error":{"code":…,"details":{…}}}`.

use crate::common::{Failure, exit, usage};
use clap::Args;
use std::path::{Path, PathBuf};
use wop_runtime::abi_v1::{ProbeOptions, ProbeVerdict, probe as run_probe};

/// `wop probe` arguments.
#[derive(Args)]
pub(crate) struct ProbeArgs {
    /// The core module (`.wasm`).
    module: PathBuf,
    /// The export to call.
    #[arg(long, default_value = "invoke")]
    entry: String,
    /// The i32 passed to the export (when it takes one; default 0).
    #[arg(long, allow_negative_numbers = true)]
    arg: Option<i32>,
    /// Grant the import `openwop.NAME` (repeatable or comma-separated). A
    /// granted `(i32) -> i32` import is the identity function; ABI imports
    /// (`openwop_log`, ...) or capability names (`log`, ...) get the real
    /// host functions. Default: no host calls at all.
    #[arg(long, value_delimiter = ',', num_args = 1..)]
    allow: Vec<String>,
    /// Memory cap over every memory: bytes, or with KiB/MiB/GiB (also KB/MB/K/M).
    #[arg(long, default_value = "2MiB", value_parser = parse_bytes)]
    memory: u64,
    /// Wall clock: milliseconds, or with ms/s.
    #[arg(long, default_value = "1000ms", value_parser = parse_millis)]
    timeout: u64,
}

/// `2MiB`, `64KiB`, `1048576`, `1M` → bytes.
pub(crate) fn parse_bytes(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: u64 = num
        .parse()
        .map_err(|_| format!("`{s}` is not a size (e.g. 2MiB, 65536)"))?;
    let mul: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        other => return Err(format!("unknown size unit `{other}` (use KiB, MiB, GiB)")),
    };
    n.checked_mul(mul)
        .ok_or_else(|| format!("`{s}` is too large"))
}

/// `300ms`, `2s`, `1000` → milliseconds.
pub(crate) fn parse_millis(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: u64 = num
        .parse()
        .map_err(|_| format!("`{s}` is not a duration (e.g. 300ms, 2s)"))?;
    match unit.trim() {
        "" | "ms" => Ok(n),
        "s" => n
            .checked_mul(1000)
            .ok_or_else(|| format!("`{s}` is too large")),
        other => Err(format!("unknown duration unit `{other}` (use ms or s)")),
    }
}

/// Runs the probe; exit 0 ok, 3 refused before running, 4 failed while running.
pub(crate) async fn probe(a: ProbeArgs) -> Result<u8, Failure> {
    if a.timeout == 0 {
        return Err(usage(anyhow::anyhow!("--timeout must be greater than 0")));
    }
    // The bounded, no-follow reader every pack file goes through.
    let wasm = wop_runtime::packfile::read_path(&a.module, wop_runtime::packfile::MAX_ENTRY_BYTES)
        .map_err(|r| {
            let file = a.module.display().to_string();
            usage(anyhow::anyhow!(r.into_load_error(&file, &file)))
        })?;
    let opts = ProbeOptions {
        entry: a.entry,
        arg: a.arg,
        allow: a.allow,
        memory_bytes: a.memory,
        timeout_ms: a.timeout,
    };
    let report = run_probe(&wasm, &opts).await.map_err(usage)?;
    println!("{}", report.to_json_line());
    if let Some(e) = report.error() {
        eprintln!("wop: probe failed: {e}");
    }
    Ok(match report.verdict {
        ProbeVerdict::Ok(_) => 0,
        ProbeVerdict::Refused(_) => exit::PACK_REJECTED,
        ProbeVerdict::Failed(_) => exit::NODE_FAILED,
    })
}

/// For `wop inspect`: a bare `.wasm` has no manifest, so no sha256 check.
pub(crate) fn bare_note(path: &Path) -> Option<&'static str> {
    path.is_file().then_some(
        "bare core module: no pack.json, so no sha256 integrity check; name and node ids come from the module's own exports, capabilities are the base set (log, clock, random) and limits are the policy ceilings",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_durations() {
        assert_eq!(parse_bytes("2MiB"), Ok(2 << 20));
        assert_eq!(parse_bytes("64KiB"), Ok(64 << 10));
        assert_eq!(parse_bytes("1048576"), Ok(1 << 20));
        assert_eq!(parse_bytes("1G"), Ok(1 << 30));
        assert!(parse_bytes("lots").is_err());
        assert!(parse_bytes("2PiB").is_err());
        assert_eq!(parse_millis("300ms"), Ok(300));
        assert_eq!(parse_millis("2s"), Ok(2000));
        assert_eq!(parse_millis("1000"), Ok(1000));
        assert!(parse_millis("1h").is_err());
    }
}
