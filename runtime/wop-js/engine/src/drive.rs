//! Run time: one invocation. Calls the prelude's dispatcher and drives the
//! promise it returns: QuickJS's job queue first, then the next virtual
//! timer, until the promise settles or nothing is left that could settle
//! it. Fuel, the deadline and the memory cap (the host's) bound all of it.

use crate::exports::openwop::node_pack::node::{Outcome, Request};
use crate::openwop::node_pack::types::ErrorInfo;
use crate::state;
use rquickjs::promise::PromiseState;
use rquickjs::{CatchResultExt, Ctx, Function, Object, Promise};
use serde_json::{Value, json};

fn err(code: &str, message: impl Into<String>) -> ErrorInfo {
    ErrorInfo {
        code: code.to_owned(),
        message: message.into(),
        details: None,
    }
}

/// The request as the dispatcher reads it. `inputs`, `config` and
/// `resume` are the host's JSON text, passed through unparsed (no float
/// is re-rounded, no key reordered on the way in).
fn request_json(r: &Request) -> String {
    let context = json!({
        "runId": r.context.run_id,
        "nodeId": r.context.node_id,
        "tenantId": r.context.tenant_id,
        "attempt": r.context.attempt,
        "typeId": r.context.type_id,
    });
    let or_null = |s: &str| {
        if s.trim().is_empty() {
            "null".to_owned()
        } else {
            s.to_owned()
        }
    };
    format!(
        "{{\"context\":{context},\"inputs\":{},\"config\":{},\"resume\":{}}}",
        or_null(&r.inputs),
        or_null(&r.config),
        r.resume
            .as_deref()
            .map_or_else(|| "null".to_owned(), or_null),
    )
}

/// The dispatcher's settled value: `{"ok":{"completed"|"suspended": v}}` or
/// `{"err":{code, message, details?}}`.
fn outcome(text: &str) -> Result<Outcome, ErrorInfo> {
    // The dispatcher builds success envelopes by concatenation around the
    // JSON of the value: take that JSON as it is.
    for (prefix, make) in [
        (
            "{\"ok\":{\"completed\":",
            Outcome::Completed as fn(String) -> Outcome,
        ),
        (
            "{\"ok\":{\"suspended\":",
            Outcome::Suspended as fn(String) -> Outcome,
        ),
    ] {
        if let Some(inner) = text.strip_prefix(prefix).and_then(|r| r.strip_suffix("}}")) {
            return Ok(make(inner.to_owned()));
        }
    }
    let v: Value = serde_json::from_str(text).map_err(|e| {
        err(
            "js_engine_failed",
            format!("the dispatcher returned malformed JSON: {e}"),
        )
    })?;
    if let Some(ok) = v.get("ok") {
        if let Some(c) = ok.get("completed") {
            return Ok(Outcome::Completed(c.to_string()));
        }
        if let Some(s) = ok.get("suspended") {
            return Ok(Outcome::Suspended(s.to_string()));
        }
    }
    if let Some(e) = v.get("err") {
        let code = e
            .get("code")
            .and_then(Value::as_str)
            .unwrap_or("node_error");
        let message = e.get("message").and_then(Value::as_str).unwrap_or("");
        return Err(ErrorInfo {
            code: code.to_owned(),
            message: message.to_owned(),
            details: e
                .get("details")
                .filter(|d| !d.is_null())
                .map(Value::to_string),
        });
    }
    Err(err(
        "js_engine_failed",
        "the dispatcher returned neither ok nor err",
    ))
}

/// Runs jobs and timers until `p` settles.
fn settle<'js>(
    ctx: &Ctx<'js>,
    internal: &Object<'js>,
    p: &Promise<'js>,
) -> Result<String, ErrorInfo> {
    let advance: Function = internal
        .get("advanceTimers")
        .map_err(|e| err("js_engine_failed", format!("no timer hook: {e}")))?;
    loop {
        match p.state() {
            PromiseState::Resolved => {
                return p.result::<String>().and_then(Result::ok).ok_or_else(|| {
                    err(
                        "js_engine_failed",
                        "the dispatcher settled with a non-string",
                    )
                });
            }
            PromiseState::Rejected => {
                let why = p
                    .result::<rquickjs::Value>()
                    .map(|r| format!("{:?}", r.err()));
                return Err(err(
                    "js_engine_failed",
                    format!("the dispatcher rejected: {why:?}"),
                ));
            }
            PromiseState::Pending => {}
        }
        // A job that throws leaves nothing pending (rquickjs clears it);
        // the node sees the rejection through its own promise chain.
        if ctx.execute_pending_job() {
            continue;
        }
        match advance.call::<_, bool>(()).catch(ctx) {
            Ok(true) => {}
            Ok(false) => {
                return Err(err(
                    "js_promise_never_settled",
                    "the node's promise can never settle: no pending job and no timer left (an await on a promise nothing resolves)",
                ));
            }
            Err(e) => return Err(err("js_engine_failed", format!("timer hook failed: {e}"))),
        }
    }
}

pub(crate) fn invoke(request: Request) -> Result<Outcome, ErrorInfo> {
    let json = request_json(&request);
    let run = state::with(|s| {
        s.context.with(|ctx| {
            let internal = s
                .internal
                .clone()
                .restore(&ctx)
                .map_err(|e| err("js_engine_failed", format!("{e}")))?;
            let dispatch: Function = internal
                .get("dispatch")
                .map_err(|e| err("js_engine_failed", format!("no dispatcher: {e}")))?;
            let p: Promise = dispatch
                .call((json,))
                .catch(&ctx)
                .map_err(|e| err("js_engine_failed", format!("the dispatcher threw: {e}")))?;
            let text = settle(&ctx, &internal, &p)?;
            outcome(&text)
        })
    });
    run.unwrap_or_else(|| {
        Err(err(
            "js_engine_failed",
            "this engine was not built with a pack (use `wop install` or `wop pack`)",
        ))
    })
}
