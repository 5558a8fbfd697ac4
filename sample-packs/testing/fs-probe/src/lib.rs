//! Attack: filesystem escape. Performs one `std::fs` operation on an
//! arbitrary path so tests can probe the single WASI preopen (mounted at
//! `/data`) with relative and absolute paths, `..` and symlinks.
//!
//! Input `{"op": "read" | "write" | "list" | "hold", "path": "...",
//! "content"?: "...", "count"?: n}`.
//! Output `{"ok": true, "content": "..."}` (read), `{"ok": true}` (write),
//! `{"ok": true, "entries": ["name", ...]}` (list, sorted), `{"ok": true,
//! "held": n}` (hold: opens `path` `count` times and keeps every handle
//! open, each one a host resource), or
//! `{"ok": false, "error": "<ErrorKind>: <message>"}`.
//!
//! Its `describe()` also tries to write `/data/written-by-describe`: it
//! must not have the filesystem grant at load.

use serde::Deserialize;
use serde_json::{Value, json};
use wop_sdk::{Ctx, NodeError, Outcome, Pack, PackInfo, Request};

/// The pack.
struct FsProbe;

/// The operation to perform.
#[derive(Deserialize)]
#[serde(rename_all = "lowercase")]
enum Op {
    /// Read the file as UTF-8.
    Read,
    /// Write `content` to the file (create or truncate).
    Write,
    /// List the directory.
    List,
    /// Open the file `count` times, holding every handle.
    Hold,
}

/// The node's inputs.
#[derive(Deserialize)]
struct Inputs {
    /// The operation.
    op: Op,
    /// The path to operate on.
    path: String,
    /// What to write (`write` only); empty when absent.
    #[serde(default)]
    content: Option<String>,
    /// How many handles to hold (`hold` only).
    #[serde(default)]
    count: usize,
}

/// Run the operation, returning the success fields.
fn run(inputs: &Inputs) -> std::io::Result<Value> {
    match inputs.op {
        Op::Read => {
            let content = std::fs::read_to_string(&inputs.path)?;
            Ok(json!({ "ok": true, "content": content }))
        }
        Op::Write => {
            std::fs::write(&inputs.path, inputs.content.as_deref().unwrap_or(""))?;
            Ok(json!({ "ok": true }))
        }
        Op::List => {
            let mut entries = Vec::new();
            for entry in std::fs::read_dir(&inputs.path)? {
                entries.push(entry?.file_name().to_string_lossy().into_owned());
            }
            entries.sort();
            Ok(json!({ "ok": true, "entries": entries }))
        }
        Op::Hold => {
            let mut held = Vec::new();
            for _ in 0..inputs.count {
                held.push(std::fs::File::open(&inputs.path)?);
            }
            Ok(json!({ "ok": true, "held": held.len() }))
        }
    }
}

impl Pack for FsProbe {
    fn describe() -> PackInfo {
        // Hostile: a side effect at load, before any invocation. The
        // runtime runs describe() without the filesystem grant.
        let _ = std::fs::write("/data/written-by-describe", "describe");
        PackInfo::new("fs-probe", "0.1.0").node("wop.testing.fs-probe", "0.1.0")
    }

    fn invoke(_ctx: &Ctx, request: Request) -> Result<Outcome, NodeError> {
        let inputs: Inputs = request.inputs_as()?;
        let output = run(&inputs)
            .unwrap_or_else(|e| json!({ "ok": false, "error": format!("{:?}: {e}", e.kind()) }));
        Outcome::completed(output)
    }
}

wop_sdk::export_pack!(FsProbe);
