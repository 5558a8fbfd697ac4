//! Attack: using a capability the operator did not grant. `invoke` calls
//! `ctx.http().fetch(...)`, so the component imports
//! `openwop:node-pack/http`; the runtime must refuse to load it unless `http`
//! is granted, before any of its code runs.

use serde_json::json;
use wop_sdk::{Ctx, HttpRequest, NodeError, Outcome, Pack, PackInfo, Request};

/// The pack.
struct Ungranted;

impl Pack for Ungranted {
    fn describe() -> PackInfo {
        PackInfo::new("ungranted", "0.1.0").node("wop.testing.ungranted", "0.1.0")
    }

    fn invoke(ctx: &Ctx, _request: Request) -> Result<Outcome, NodeError> {
        let response = ctx.http().fetch(HttpRequest::get("https://example.com/"))?;
        Outcome::completed(json!({ "status": response.status }))
    }
}

wop_sdk::export_pack!(Ungranted);
