//! Attack: oversized result. `invoke` completes with a JSON string of
//! `inputs.bytes` characters (default 8 MiB), to exercise the runtime's
//! output size cap.

use serde::Deserialize;
use wop_sdk::{Ctx, NodeError, Outcome, Pack, PackInfo, Request};

/// The pack.
struct HugeOutput;

/// The node's inputs.
#[derive(Deserialize)]
struct Inputs {
    /// Length of the output string in bytes.
    #[serde(default = "default_bytes")]
    bytes: usize,
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
        Outcome::completed("x".repeat(inputs.bytes))
    }
}

wop_sdk::export_pack!(HugeOutput);
