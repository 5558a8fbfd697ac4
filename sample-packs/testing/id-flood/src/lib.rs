//! Attack: make the host hold or process what the pack chooses.
//!
//! `inputs.mode`:
//! - `"tools"`: `inputs.calls` tool calls, each with a tool id of
//!   `inputs.idBytes` bytes (default 1 MiB); completes with
//!   `{"errors": n, "codes": [distinct codes]}`. The host must refuse the id
//!   before storing, echoing or hashing it.
//! - `"log"`: logs one message of `inputs.logBytes` bytes (default 32 MiB)
//!   forever. Cheap in fuel, expensive for the host: the runtime must stop
//!   it near its wall clock.
//! - `"ids"`: `inputs.calls` tool calls, each with a distinct id of the
//!   caller's choosing, `<prefix><from + i><suffix>` (say `mcp:s` and
//!   `/x`: `mcp:s0/x`, `mcp:s1/x`, ...), going on past every refusal;
//!   completes with `{"errors": n, "codes": [distinct codes]}`. The host
//!   must not keep one thing per distinct id (a metric series, say).

use serde::Deserialize;
use serde_json::json;
use wop_sdk::{Ctx, NodeError, Outcome, Pack, PackInfo, Request};

/// The pack.
struct IdFlood;

/// The node's inputs.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Inputs {
    /// `tools` or `log`.
    mode: String,
    /// Tool calls to make.
    #[serde(default)]
    calls: u64,
    /// Length of the tool id.
    #[serde(default = "default_id")]
    id_bytes: usize,
    /// Length of the log message.
    #[serde(default = "default_log")]
    log_bytes: usize,
    /// `ids`: what each id starts with.
    #[serde(default)]
    prefix: String,
    /// `ids`: what each id ends with.
    #[serde(default)]
    suffix: String,
    /// `ids`: the first number.
    #[serde(default)]
    from: u64,
}

/// 1 MiB.
fn default_id() -> usize {
    1 << 20
}

/// 32 MiB.
fn default_log() -> usize {
    32 << 20
}

impl Pack for IdFlood {
    fn describe() -> PackInfo {
        PackInfo::new("id-flood", "0.1.0").node("wop.testing.id-flood", "0.1.0")
    }

    fn invoke(ctx: &Ctx, request: Request) -> Result<Outcome, NodeError> {
        let inputs: Inputs = request.inputs_as()?;
        if inputs.mode == "log" {
            let message = "x".repeat(inputs.log_bytes);
            loop {
                ctx.log().info(&message);
            }
        }
        let fixed = if inputs.mode == "ids" {
            String::new()
        } else {
            format!("crm:{}", "x".repeat(inputs.id_bytes))
        };
        let mut errors = 0u64;
        let mut codes: Vec<String> = Vec::new();
        for i in 0..inputs.calls {
            let distinct;
            let id = if inputs.mode == "ids" {
                distinct = format!("{}{}{}", inputs.prefix, inputs.from + i, inputs.suffix);
                &distinct
            } else {
                &fixed
            };
            if let Err(e) = ctx.tools().call(id, &json!({}), None) {
                errors += 1;
                if !codes.contains(&e.code) {
                    codes.push(e.code);
                }
            }
        }
        Outcome::completed(json!({ "errors": errors, "codes": codes }))
    }
}

wop_sdk::export_pack!(IdFlood);
