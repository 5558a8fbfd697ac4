//! Attack: CPU exhaustion. `invoke` spins forever in a loop the optimizer
//! cannot remove (`black_box`), never returning and never calling the host.
//! The runtime must stop it with fuel / epoch interruption.

use std::hint::black_box;

use wop_sdk::{Ctx, NodeError, Outcome, Pack, PackInfo, Request};

/// The pack.
struct Spin;

impl Pack for Spin {
    fn describe() -> PackInfo {
        PackInfo::new("spin", "0.1.0").node("wop.testing.spin", "0.1.0")
    }

    fn invoke(_ctx: &Ctx, _request: Request) -> Result<Outcome, NodeError> {
        let mut counter: u64 = 0;
        loop {
            counter = black_box(counter.wrapping_add(1));
        }
    }
}

wop_sdk::export_pack!(Spin);
