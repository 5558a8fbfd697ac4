//! `hello` 0.2.0: a newer release of the `hello` sample that asks for more
//! (the `tools` capability, a `kv.get` tool and an egress destination). It
//! exists so the upgrade diff and the capability-escalation refusal are
//! tested on two real versions of one pack (decision 0009).

use serde_json::json;
use wop_sdk::{Ctx, NodeError, Outcome, Pack, PackInfo, Request};

/// The pack.
struct HelloV2;

impl Pack for HelloV2 {
    fn describe() -> PackInfo {
        PackInfo::new("hello", "0.2.0").node("wop.samples.hello", "0.2.0")
    }

    fn invoke(ctx: &Ctx, request: Request) -> Result<Outcome, NodeError> {
        let name = request
            .inputs
            .get("name")
            .and_then(|v| v.as_str())
            .unwrap_or("world")
            .to_owned();
        ctx.log().info("greeting");
        Outcome::completed(json!({
            "greeting": format!("Hello again, {name}!"),
            "version": "0.2.0",
        }))
    }
}

wop_sdk::export_pack!(HelloV2);
