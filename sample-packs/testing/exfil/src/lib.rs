//! `wop.testing.exfil*`: a hostile pack that tries to learn the credentials
//! the host attaches on its behalf. Each attempt (a fetch with any method,
//! URL and headers; a tool call; an MCP tool call) is made, and whatever
//! comes back — status, every header, the whole body, or the error with its
//! details — is returned, logged with its fields and printed to stdout. A
//! test then searches every byte the host produced for the value.
//!
//! Input `{"attempts": [{"fetch": {"url", "method"?, "headers"?}} |
//! {"tool": {"id", "arguments"?}} | {"mcp": {"server", "tool",
//! "arguments"?}}]}` → `{"saw": [...]}`.

use serde::Deserialize;
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;
use wop_sdk::{Ctx, HttpRequest, NodeError, Outcome, Pack, PackInfo, Request};

struct Exfil;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
enum Attempt {
    Fetch {
        url: String,
        #[serde(default)]
        method: Option<String>,
        #[serde(default)]
        headers: BTreeMap<String, String>,
    },
    Tool {
        id: String,
        #[serde(default)]
        arguments: Value,
    },
    Mcp {
        server: String,
        tool: String,
        #[serde(default)]
        arguments: Value,
    },
}

#[derive(Deserialize)]
struct Inputs {
    attempts: Vec<Attempt>,
}

fn error(code: &str, message: &str, details: &Option<Value>) -> Value {
    json!({"error": {"code": code, "message": message, "details": details}})
}

fn attempt(ctx: &Ctx, a: Attempt) -> Value {
    match a {
        Attempt::Fetch {
            url,
            method,
            headers,
        } => {
            let mut req = HttpRequest::new(method.unwrap_or_else(|| "GET".to_owned()), url);
            for (n, v) in headers {
                req = req.header(n, v);
            }
            match ctx.http().fetch(req) {
                Ok(r) => {
                    let headers: Vec<Value> =
                        r.headers.iter().map(|(n, v)| json!([n, v])).collect();
                    json!({
                        "status": r.status,
                        "headers": headers,
                        "body": String::from_utf8_lossy(&r.body),
                        "bodyLength": r.body.len(),
                    })
                }
                Err(e) => error(&e.code, &e.message, &e.details),
            }
        }
        Attempt::Tool { id, arguments } => match ctx.tools().call(&id, &arguments, None) {
            Ok(v) => json!({"result": v}),
            Err(e) => error(&e.code, &e.message, &e.details),
        },
        Attempt::Mcp {
            server,
            tool,
            arguments,
        } => match ctx.mcp().call_tool(&server, &tool, &arguments, None) {
            Ok(v) => json!({"result": v}),
            Err(e) => error(&e.code, &e.message, &e.details),
        },
    }
}

impl Pack for Exfil {
    fn describe() -> PackInfo {
        PackInfo::new("exfil", "0.1.0")
            .node("wop.testing.exfil", "0.1.0")
            .node("wop.testing.exfil-tenant", "0.1.0")
            .node("wop.testing.exfil-bare", "0.1.0")
    }

    fn invoke(ctx: &Ctx, request: Request) -> Result<Outcome, NodeError> {
        let inputs: Inputs = request.inputs_as()?;
        let mut saw = Vec::new();
        for a in inputs.attempts {
            let got = attempt(ctx, a);
            let mut fields = Map::new();
            fields.insert("got".to_owned(), got.clone());
            ctx.log().info_with("saw", &Value::Object(fields));
            println!("saw {got}");
            saw.push(got);
        }
        Outcome::completed(json!({ "saw": saw }))
    }
}

wop_sdk::export_pack!(Exfil);
