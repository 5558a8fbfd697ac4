//! Attack: stdout/stderr flooding. `invoke` prints `inputs.lines` lines
//! (default 100000) with both `println!` and `eprintln!`, then completes with
//! `{"printed": n}`. The runtime must cap or discard WASI stdio output.

use serde::Deserialize;
use serde_json::json;
use wop_sdk::{Ctx, NodeError, Outcome, Pack, PackInfo, Request};

/// The pack.
struct HeavyPrint;

/// The node's inputs.
#[derive(Deserialize)]
struct Inputs {
    /// How many lines to print to each of stdout and stderr.
    #[serde(default = "default_lines")]
    lines: u64,
}

/// 100000 lines.
fn default_lines() -> u64 {
    100_000
}

impl Pack for HeavyPrint {
    fn describe() -> PackInfo {
        PackInfo::new("heavy-print", "0.1.0").node("wop.testing.heavy-print", "0.1.0")
    }

    fn invoke(_ctx: &Ctx, request: Request) -> Result<Outcome, NodeError> {
        let inputs: Inputs = request.inputs_as()?;
        for i in 0..inputs.lines {
            println!("stdout line {i}: the quick brown fox jumps over the lazy dog");
            eprintln!("stderr line {i}: the quick brown fox jumps over the lazy dog");
        }
        Outcome::completed(json!({ "printed": inputs.lines }))
    }
}

wop_sdk::export_pack!(HeavyPrint);
