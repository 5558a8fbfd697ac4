//! Output interpretation for every pack kind: what a pack returned becomes
//! the node's [`Outcome`] or a [`NodeError`], in one place.
//!
//! Rules (the same for components and ABI v1 core modules):
//! - **The output cap covers the whole outcome**: output, interrupt, and a
//!   failure's code, message and details. Its size is what the pack sent
//!   (`Usage::output_bytes`); past `limits.outputBytes` the node fails with
//!   `sandbox_invocation_error` + `cap.breached{output-bytes}` *before*
//!   anything is parsed.
//! - **A pack's error is checked, not taken at face value**: its code must
//!   match [`valid_code`] (`[A-Za-z][A-Za-z0-9_.-]*`, at most
//!   [`MAX_CODE_BYTES`]) and its `details`, if any, must be a JSON object;
//!   otherwise the node fails with `sandbox_invocation_error` (cause
//!   `invalid-error`) from the runtime. A code the runtime reserves for its
//!   own verdicts ([`ErrorCode::is_reserved`], e.g. `sandbox_timeout`) is
//!   rewritten to `node_failed` with `details.reservedCode`, so a host never
//!   mistakes an invented verdict for ours — unless the runtime gave the
//!   pack that very code during this invocation (a tool call refused with
//!   `budget_exhausted`, say): a pack may relay a verdict, not invent one. The message is cut at
//!   [`MAX_MESSAGE_BYTES`]. An empty code is `node_failed`.
//! - **Suspension needs permission** where the pack kind requires one (ABI
//!   v1: the `interrupt` capability); otherwise the node fails with
//!   `sandbox_capability_denied`.

use crate::error::{ErrorCode, FailureSource, NodeError};
use crate::model::Outcome;
use crate::run::classify::{Classified, Fault, classify};
use serde_json::{Map, Value, json};
use std::collections::BTreeSet;

/// Longest error code a pack may return, in bytes.
pub const MAX_CODE_BYTES: usize = 64;
/// Longest error message kept, in bytes (cut with a marker past it).
pub const MAX_MESSAGE_BYTES: usize = 4096;

/// What a pack returned, before interpretation.
#[derive(Debug, Clone, PartialEq)]
pub enum PackReturn {
    /// A component's `completed(json)`.
    Completed(String),
    /// A component's `suspended(json)`.
    Suspended(String),
    /// A component's `error-info`.
    Failed {
        /// The pack's code.
        code: String,
        /// For people.
        message: String,
        /// JSON text, if any.
        details: Option<String>,
    },
    /// An ABI v1 response: one JSON text `{outcome, output | interrupt | error}`.
    Envelope(Vec<u8>),
}

impl PackReturn {
    /// Bytes the pack sent for its outcome (what the output cap counts).
    pub fn size(&self) -> u64 {
        let n = match self {
            Self::Completed(j) | Self::Suspended(j) => j.len(),
            Self::Failed {
                code,
                message,
                details,
            } => code.len() + message.len() + details.as_ref().map_or(0, String::len),
            Self::Envelope(b) => b.len(),
        };
        n as u64
    }
}

/// Whether a pack-supplied error code is well formed.
pub fn valid_code(code: &str) -> bool {
    let b = code.as_bytes();
    !b.is_empty()
        && b.len() <= MAX_CODE_BYTES
        && b[0].is_ascii_alphabetic()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b'-'))
}

fn boxed_invalid(node_id: &str, kind: &str, message: String) -> Box<Classified> {
    Box::new(invalid(node_id, kind, message))
}

fn invalid(node_id: &str, kind: &str, message: String) -> Classified {
    classify(
        &Fault::Trap {
            kind: kind.to_owned(),
            message,
        },
        node_id,
    )
}

/// Turns what a pack returned into the node's outcome. `output_cap` is
/// `limits.outputBytes`; `may_suspend` whether this pack may suspend.
/// Returns the outcome and the bytes counted against the cap.
pub fn interpret(
    ret: PackReturn,
    output_cap: u64,
    may_suspend: bool,
    relayed: &BTreeSet<String>,
    node_id: &str,
) -> (Result<Outcome, Classified>, u64) {
    let size = ret.size();
    if size > output_cap {
        let c = classify(
            &Fault::HostCap {
                kind: crate::model::breach::BreachKind::OutputBytes,
                limit: output_cap,
                observed: size,
            },
            node_id,
        );
        return (Err(c), size);
    }
    (
        interpret_within_cap(ret, may_suspend, relayed, node_id).map_err(|c| *c),
        size,
    )
}

fn interpret_within_cap(
    ret: PackReturn,
    may_suspend: bool,
    relayed: &BTreeSet<String>,
    node_id: &str,
) -> Result<Outcome, Box<Classified>> {
    let parse = |text: &str, what: &str| {
        serde_json::from_str::<Value>(text).map_err(|e| {
            boxed_invalid(
                node_id,
                "invalid-output",
                format!("the node's {what} is not valid JSON: {e}"),
            )
        })
    };
    let (value, completed) = match ret {
        PackReturn::Completed(j) => (parse(&j, "output")?, true),
        PackReturn::Suspended(j) => (parse(&j, "interrupt")?, false),
        PackReturn::Failed {
            code,
            message,
            details,
        } => {
            let details = match details {
                None => None,
                Some(d) => Some(parse(&d, "error details")?),
            };
            return Err(Box::new(pack_error(
                &code, &message, details, relayed, node_id,
            )));
        }
        PackReturn::Envelope(bytes) => return envelope(&bytes, may_suspend, relayed, node_id),
    };
    finish(value, completed, may_suspend, node_id)
}

fn finish(
    value: Value,
    completed: bool,
    may_suspend: bool,
    node_id: &str,
) -> Result<Outcome, Box<Classified>> {
    if completed {
        return Ok(Outcome::Completed { output: value });
    }
    if !may_suspend {
        return Err(Box::new(classify(
            &Fault::CapabilityDenied {
                capability: "interrupt".to_owned(),
            },
            node_id,
        )));
    }
    Ok(Outcome::Suspended { interrupt: value })
}

/// An ABI v1 response envelope.
fn envelope(
    bytes: &[u8],
    may_suspend: bool,
    relayed: &BTreeSet<String>,
    node_id: &str,
) -> Result<Outcome, Box<Classified>> {
    let bad = |m: String| boxed_invalid(node_id, "invalid-response", m);
    let text = std::str::from_utf8(bytes)
        .map_err(|_| bad("the response is not valid UTF-8".to_owned()))?;
    let v: Value = serde_json::from_str(text)
        .map_err(|e| bad(format!("the response is not valid JSON: {e}")))?;
    let field = |k: &str| {
        v.get(k).cloned().ok_or_else(|| {
            bad(format!(
                "a `{}` response must have `{k}`",
                crate::text::cut(&v["outcome"].to_string(), 64)
            ))
        })
    };
    match v.get("outcome").and_then(Value::as_str) {
        Some("completed") => finish(field("output")?, true, may_suspend, node_id),
        Some("suspended") => finish(field("interrupt")?, false, may_suspend, node_id),
        Some("failed") => {
            let e = v.get("error").cloned().unwrap_or(Value::Null);
            let code = e.get("code").and_then(Value::as_str).unwrap_or("");
            let message = e.get("message").and_then(Value::as_str).unwrap_or("");
            let details = e.get("details").filter(|d| !d.is_null()).cloned();
            Err(Box::new(pack_error(
                code, message, details, relayed, node_id,
            )))
        }
        _ => Err(bad(
            "the response's `outcome` must be completed, suspended or failed".to_owned(),
        )),
    }
}

/// A pack's own error, checked (see the module docs).
fn pack_error(
    code: &str,
    message: &str,
    details: Option<Value>,
    relayed: &BTreeSet<String>,
    node_id: &str,
) -> Classified {
    let malformed = |why: String| {
        let mut c = invalid(node_id, "invalid-error", why);
        if let Some(Value::Object(m)) = &mut c.error.details {
            m.insert(
                "packCode".to_owned(),
                json!(crate::text::cut(code, MAX_CODE_BYTES)),
            );
        }
        c
    };
    let details = match details {
        None => None,
        Some(Value::Object(m)) => Some(m),
        Some(other) => {
            return malformed(format!(
                "the node failed with error details that are not a JSON object (a {}); return an object",
                kind_of(&other)
            ));
        }
    };
    let code = if code.is_empty() {
        ErrorCode::NodeFailed.as_str()
    } else {
        code
    };
    if !valid_code(code) {
        return malformed(format!(
            "the node failed with a malformed error code; codes are `[A-Za-z][A-Za-z0-9_.-]*`, at most {MAX_CODE_BYTES} bytes"
        ));
    }
    let (code, details) = match ErrorCode::parse(code) {
        Some(c) if c.is_reserved() && !relayed.contains(code) => {
            let mut m = Map::new();
            m.insert("reservedCode".to_owned(), json!(code));
            if let Some(d) = details {
                m.insert("packDetails".to_owned(), Value::Object(d));
            }
            (ErrorCode::NodeFailed.as_str(), Some(m))
        }
        _ => (code, details),
    };
    Classified {
        error: NodeError {
            code: code.to_owned(),
            message: crate::text::cut(message, MAX_MESSAGE_BYTES),
            details: details.map(Value::Object),
            source: FailureSource::Pack,
        },
        breach: None,
    }
}

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::panic)]
    use super::*;

    fn failed(code: &str, details: Option<&str>) -> PackReturn {
        PackReturn::Failed {
            code: code.to_owned(),
            message: "m".to_owned(),
            details: details.map(str::to_owned),
        }
    }

    fn env(v: Value) -> PackReturn {
        PackReturn::Envelope(v.to_string().into_bytes())
    }

    #[test]
    fn outcome_table() {
        // (what the pack returned, may suspend, expected code or outcome kind)
        let cases: Vec<(PackReturn, bool, &str)> = vec![
            (
                PackReturn::Completed("{\"a\":1}".into()),
                false,
                "completed",
            ),
            (PackReturn::Suspended("{\"q\":1}".into()), true, "suspended"),
            (
                PackReturn::Suspended("{}".into()),
                false,
                "sandbox_capability_denied",
            ),
            (
                PackReturn::Completed("{".into()),
                false,
                "sandbox_invocation_error",
            ),
            (failed("my_error", None), false, "my_error"),
            (
                failed("acme.crm-down_2", Some("{\"x\":1}")),
                false,
                "acme.crm-down_2",
            ),
            (failed("", None), false, "node_failed"),
            // The registry's JavaScript packs use UPPER_SNAKE codes.
            (failed("CONFIG_INVALID", None), false, "CONFIG_INVALID"),
            (failed("1bad", None), false, "sandbox_invocation_error"),
            (failed("bad\ncode", None), false, "sandbox_invocation_error"),
            (
                failed(&"a".repeat(65), None),
                false,
                "sandbox_invocation_error",
            ),
            (failed("x", Some("[1]")), false, "sandbox_invocation_error"),
            (
                failed("x", Some("\"s\"")),
                false,
                "sandbox_invocation_error",
            ),
            (failed("x", Some("{")), false, "sandbox_invocation_error"),
            (failed("sandbox_timeout", None), false, "node_failed"),
            (failed("budget_exhausted", Some("{}")), false, "node_failed"),
            (failed("forbidden", None), false, "forbidden"),
            (
                env(json!({"outcome":"completed","output":1})),
                false,
                "completed",
            ),
            (
                env(json!({"outcome":"suspended","interrupt":{}})),
                false,
                "sandbox_capability_denied",
            ),
            (
                env(json!({"outcome":"suspended","interrupt":{}})),
                true,
                "suspended",
            ),
            (
                env(json!({"outcome":"failed","error":{"code":"sandbox_timeout"}})),
                false,
                "node_failed",
            ),
            (
                env(json!({"outcome":"failed","error":{"code":"e","details":5}})),
                false,
                "sandbox_invocation_error",
            ),
            (
                env(json!({"outcome":"completed"})),
                false,
                "sandbox_invocation_error",
            ),
            (
                env(json!({"outcome":"nope"})),
                false,
                "sandbox_invocation_error",
            ),
            (
                PackReturn::Envelope(vec![0xff]),
                false,
                "sandbox_invocation_error",
            ),
        ];
        for (i, (ret, may, want)) in cases.into_iter().enumerate() {
            let (r, _) = interpret(ret, 1 << 20, may, &BTreeSet::new(), "n");
            let got = match &r {
                Ok(Outcome::Completed { .. }) => "completed".to_owned(),
                Ok(Outcome::Suspended { .. }) => "suspended".to_owned(),
                Err(c) => c.error.code.clone(),
            };
            assert_eq!(got, want, "case {i}: {r:?}");
        }
    }

    #[test]
    fn reserved_codes_keep_what_the_pack_said() {
        let none = BTreeSet::new();
        let (r, _) = interpret(
            failed("run_timeout", Some("{\"k\":1}")),
            1 << 20,
            false,
            &none,
            "n",
        );
        let e = r.unwrap_err().error;
        assert_eq!(e.source, FailureSource::Pack);
        assert_eq!(
            e.details,
            Some(json!({"reservedCode": "run_timeout", "packDetails": {"k": 1}}))
        );
        // A verdict the runtime gave the pack in this invocation may be relayed.
        let relayed: BTreeSet<String> = ["budget_exhausted".to_owned()].into();
        for (set, want) in [(&none, "node_failed"), (&relayed, "budget_exhausted")] {
            let (r, _) = interpret(failed("budget_exhausted", None), 1 << 20, false, set, "n");
            assert_eq!(r.unwrap_err().error.code, want);
        }
    }

    #[test]
    fn the_cap_covers_the_whole_outcome() {
        let big = format!("{{\"d\":\"{}\"}}", "x".repeat(100));
        for ret in [
            PackReturn::Completed(big.clone()),
            PackReturn::Suspended(big.clone()),
            PackReturn::Failed {
                code: "e".into(),
                message: "m".into(),
                details: Some(big.clone()),
            },
            PackReturn::Failed {
                code: "e".into(),
                message: "m".repeat(200),
                details: None,
            },
            env(json!({"outcome":"failed","error":{"code":"e","details":{"d":"x".repeat(100)}}})),
        ] {
            let size = ret.size();
            let (r, counted) = interpret(ret, 64, true, &BTreeSet::new(), "n");
            assert_eq!(counted, size);
            let c = r.unwrap_err();
            assert_eq!(c.error.code, "sandbox_invocation_error");
            assert!(
                matches!(&c.breach, Some(crate::model::events::Event::CapBreached { kind, .. }) if kind == "output-bytes")
            );
        }
    }
}
