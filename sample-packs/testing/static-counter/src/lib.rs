//! Attack: state leaking between invocations. A `static` counter is
//! incremented on every `invoke` and returned as `{"count": n}`; with a fresh
//! instance per invocation (as the runtime promises) it is always 1.

use std::sync::atomic::{AtomicU32, Ordering};

use serde_json::json;
use wop_sdk::{Ctx, NodeError, Outcome, Pack, PackInfo, Request};

/// The pack.
struct StaticCounter;

/// Invocations seen by this instance.
static COUNTER: AtomicU32 = AtomicU32::new(0);

impl Pack for StaticCounter {
    fn describe() -> PackInfo {
        PackInfo::new("static-counter", "0.1.0").node("wop.testing.static-counter", "0.1.0")
    }

    fn invoke(_ctx: &Ctx, _request: Request) -> Result<Outcome, NodeError> {
        let count = COUNTER.fetch_add(1, Ordering::SeqCst).wrapping_add(1);
        Outcome::completed(json!({ "count": count }))
    }
}

wop_sdk::export_pack!(StaticCounter);
