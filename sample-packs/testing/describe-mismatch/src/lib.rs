//! Attack: a pack whose self-description disagrees with its manifest.
//! `describe()` lists the node type `wop.testing.other` while `pack.json`
//! lists `wop.testing.describe-mismatch`; the runtime must refuse to load it.

use serde_json::json;
use wop_sdk::{Ctx, NodeError, Outcome, Pack, PackInfo, Request};

/// The pack.
struct DescribeMismatch;

impl Pack for DescribeMismatch {
    fn describe() -> PackInfo {
        PackInfo::new("describe-mismatch", "0.1.0").node("wop.testing.other", "0.1.0")
    }

    fn invoke(_ctx: &Ctx, _request: Request) -> Result<Outcome, NodeError> {
        Outcome::completed(json!({ "ran": true }))
    }
}

wop_sdk::export_pack!(DescribeMismatch);
