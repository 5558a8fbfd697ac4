//! Attack: an oversized or malformed result, to exercise the runtime's
//! output cap (which covers the whole outcome) and its checks of a pack's
//! error.
//!
//! `inputs`:
//! - `{"bytes": n, "in": where}`: a JSON string of `n` characters (default
//!   8 MiB) returned as the output (`"in": "output"`, the default), as the
//!   interrupt of a suspension (`"interrupt"`), as a failure's `details`
//!   (`"details"`: `{"d": "xxx…"}`) or as a failure's message (`"message"`).
//! - `{"fail": {"code": c, "message"?: m, "details"?: any JSON}}`: fails
//!   with exactly that error (a code with a newline, a runtime-reserved
//!   code, details that are not an object, ...).

use serde::Deserialize;
use serde_json::{Value, json};
use wop_sdk::{Ctx, NodeError, Outcome, Pack, PackInfo, Request};

/// The pack.
struct HugeOutput;

/// The node's inputs.
#[derive(Deserialize)]
struct Inputs {
    /// Length of the string in bytes.
    #[serde(default = "default_bytes")]
    bytes: usize,
    /// Where the string goes: `output`, `interrupt`, `details`, `message`.
    #[serde(default, rename = "in")]
    place: Option<String>,
    /// Fail with exactly this error.
    #[serde(default)]
    fail: Option<Fail>,
}

/// An error to return as is.
#[derive(Deserialize)]
struct Fail {
    /// The code.
    code: String,
    /// The message.
    #[serde(default)]
    message: String,
    /// The details, any JSON.
    #[serde(default)]
    details: Option<Value>,
}

/// 8 MiB.
fn default_bytes() -> usize {
    8 << 20
}

impl Pack for HugeOutput {
    fn describe() -> PackInfo {
        PackInfo::new("huge-output", "0.1.0").node("wop.testing.huge-output", "0.1.0")
    }

    fn invoke(_ctx: &Ctx, request: Request) -> Result<Outcome, NodeError> {
        let inputs: Inputs = request.inputs_as()?;
        if let Some(f) = inputs.fail {
            let e = NodeError::new(f.code, f.message);
            return Err(match f.details {
                Some(d) => e.with_details(d),
                None => e,
            });
        }
        let big = "x".repeat(inputs.bytes);
        match inputs.place.as_deref().unwrap_or("output") {
            "interrupt" => Outcome::suspended(big),
            "details" => {
                Err(NodeError::new("too_big", "see details").with_details(json!({"d": big})))
            }
            "message" => Err(NodeError::new("too_big", big)),
            _ => Outcome::completed(big),
        }
    }
}

wop_sdk::export_pack!(HugeOutput);
