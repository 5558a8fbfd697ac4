//! Attack: guest panic. `invoke` panics with "boom"; on wasm that is an
//! `unreachable` trap, which the runtime must report as a runtime-classified
//! node failure without harming the host or other invocations.

use wop_sdk::{Ctx, NodeError, Outcome, Pack, PackInfo, Request};

/// The pack.
struct Panic;

impl Pack for Panic {
    fn describe() -> PackInfo {
        PackInfo::new("panic", "0.1.0").node("wop.testing.panic", "0.1.0")
    }

    fn invoke(_ctx: &Ctx, _request: Request) -> Result<Outcome, NodeError> {
        panic!("boom");
    }
}

wop_sdk::export_pack!(Panic);
