//! Attack: nondeterminism under replay. Returns the host clock twice, 16
//! bytes of host randomness, 16 bytes of WASI randomness (`getrandom`, i.e.
//! `wasi:random`) and the WASI wall clock (`SystemTime::now()`), so tests can
//! check which sources are replay-stable per (run, node, attempt):
//! `{"nowMs", "nowMs2", "random", "wasiRandom", "systemTimeMs"}`.

use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::json;
use wop_sdk::{Ctx, NodeError, Outcome, Pack, PackInfo, Request};

/// The pack.
struct Replay;

/// Lowercase hex of `bytes`.
fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

impl Pack for Replay {
    fn describe() -> PackInfo {
        PackInfo::new("replay", "0.1.0").node("wop.testing.replay", "0.1.0")
    }

    fn invoke(ctx: &Ctx, _request: Request) -> Result<Outcome, NodeError> {
        let now_ms = ctx.now_ms();
        let now_ms2 = ctx.now_ms();
        let random = hex(&ctx.random_bytes(16));
        let mut wasi_random = [0u8; 16];
        getrandom::fill(&mut wasi_random)
            .map_err(|e| NodeError::new("internal_error", format!("getrandom failed: {e}")))?;
        let system_time_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
            .unwrap_or(0);
        Outcome::completed(json!({
            "nowMs": now_ms,
            "nowMs2": now_ms2,
            "random": random,
            "wasiRandom": hex(&wasi_random),
            "systemTimeMs": system_time_ms,
        }))
    }
}

wop_sdk::export_pack!(Replay);
