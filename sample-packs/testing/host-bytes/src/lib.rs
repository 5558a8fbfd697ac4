//! Testing: host work in bytes the pack chooses, with the pack's own work
//! kept independent of those bytes, so a test can see fuel follow them.
//!
//! `inputs.via`:
//! - `"stdout"`: builds `inputs.bytes` bytes and writes them to WASI stdout
//!   in 4 KiB `blocking-write-and-flush` calls (the raw stream: std's line
//!   buffering would scan every byte in the guest);
//! - `"none"`: builds the same bytes and does not write them (the control
//!   for `"stdout"`);
//! - `"mcp"`: calls MCP tool `inputs.tool` on `inputs.server` with
//!   `inputs.arguments` (JSON text, passed through unparsed) through the
//!   raw binding and keeps only the result's length: the result is never
//!   parsed, so the pack's own work does not grow with it.
//!
//! Completes with `{"bytes": n}`: the bytes built, or the result's length.

use serde::Deserialize;
use serde_json::json;
use wop_sdk::bindings::openwop::node_pack::mcp;
use wop_sdk::{Ctx, NodeError, Outcome, Pack, PackInfo, Request};

/// The pack.
struct HostBytes;

/// The node's inputs.
#[derive(Deserialize)]
struct Inputs {
    /// `stdout`, `none` or `mcp`.
    via: String,
    /// How many bytes to build (`stdout`, `none`).
    #[serde(default)]
    bytes: usize,
    /// The MCP server id (`mcp`).
    #[serde(default)]
    server: String,
    /// The MCP tool (`mcp`).
    #[serde(default)]
    tool: String,
    /// The tool's arguments as JSON text (`mcp`).
    #[serde(default)]
    arguments: String,
}

impl Pack for HostBytes {
    fn describe() -> PackInfo {
        PackInfo::new("host-bytes", "0.1.0").node("wop.testing.host-bytes", "0.1.0")
    }

    fn invoke(_ctx: &Ctx, request: Request) -> Result<Outcome, NodeError> {
        let inputs: Inputs = request.inputs_as()?;
        let n = match inputs.via.as_str() {
            "stdout" | "none" => {
                let buf = std::hint::black_box(vec![b'x'; inputs.bytes]);
                if inputs.via == "stdout" {
                    let out = wasip2::cli::stdout::get_stdout();
                    for chunk in buf.chunks(4096) {
                        out.blocking_write_and_flush(chunk)
                            .map_err(|e| NodeError::new("write_failed", format!("{e:?}")))?;
                    }
                }
                buf.len()
            }
            "mcp" => mcp::call_tool(&inputs.server, &inputs.tool, &inputs.arguments, None)
                .map(|text| text.len())
                .map_err(|e| NodeError::new(e.code, e.message))?,
            other => return Err(NodeError::validation(format!("unknown via `{other}`"))),
        };
        Outcome::completed(json!({ "bytes": n }))
    }
}

wop_sdk::export_pack!(HostBytes);
