//! `wop.samples.hello`: greets `inputs.name` (default "world") and logs the
//! greeting at info level.

use serde::Deserialize;
use serde_json::json;
use wop_sdk::{Ctx, NodeError, Outcome, Pack, PackInfo, Request};

/// The pack.
struct Hello;

/// The node's inputs.
#[derive(Deserialize)]
struct Inputs {
    /// Who to greet.
    #[serde(default)]
    name: Option<String>,
}

impl Pack for Hello {
    fn describe() -> PackInfo {
        PackInfo::new("hello", "0.1.0").node("wop.samples.hello", "0.1.0")
    }

    fn invoke(ctx: &Ctx, request: Request) -> Result<Outcome, NodeError> {
        let inputs: Inputs = request.inputs_as()?;
        let name = inputs.name.unwrap_or_else(|| "world".to_owned());
        let greeting = format!("Hello, {name}!");
        ctx.log().info_with("greeting", &json!({ "name": name }));
        Outcome::completed(json!({ "greeting": greeting }))
    }
}

wop_sdk::export_pack!(Hello);
