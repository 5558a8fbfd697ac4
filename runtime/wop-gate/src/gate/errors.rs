//! The gate's errors: their class (which WIT `tool-error` case) and the
//! protocol error, plus the constructors every refusal path uses.

use serde_json::{Value, json};
use wop_core::authz::Denial;
use wop_core::error::ErrorCode;
use wop_core::events::ToolStatus;
use wop_effects::effects::EffectRecord;

/// Why the gate did not return a result; maps onto the WIT `tool-error`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GateErrorKind {
    /// `forbidden`.
    Forbidden,
    /// `not_found`.
    NotFound,
    /// `rate_limited`.
    RateLimited,
    /// `budget_exhausted`.
    BudgetExhausted,
    /// `idempotency_in_flight` / `idempotency_key_mismatch`.
    Conflict,
    /// Anything else (the tool failed, the outcome is unknown, ...).
    Failed,
}

/// A gate error: its class plus the protocol error.
#[derive(Debug, Clone, PartialEq)]
pub struct GateError {
    /// Class.
    pub kind: GateErrorKind,
    /// Protocol code.
    pub code: ErrorCode,
    /// For people.
    pub message: String,
    /// Machine-readable details (a JSON object).
    pub details: Value,
}

impl GateError {
    pub(crate) fn new(
        kind: GateErrorKind,
        code: ErrorCode,
        message: impl Into<String>,
        details: Value,
    ) -> Self {
        Self {
            kind,
            code,
            message: message.into(),
            details,
        }
    }

    /// A failure a provider (or a recorded outcome) reported with the code
    /// `code`: a protocol code stays itself; anything else (a node pack's
    /// own code, relayed by a node-pack tool) is `node_failed`, with the
    /// provider's code kept as `details.toolCode`.
    pub(crate) fn reported(code: &str, message: impl Into<String>, details: Value) -> Self {
        let (code, details) = match ErrorCode::parse(code) {
            Some(c) => (c, details),
            None => {
                let mut d = match details {
                    Value::Object(m) => m,
                    Value::Null => serde_json::Map::new(),
                    other => [("details".to_owned(), other)].into_iter().collect(),
                };
                d.insert("toolCode".to_owned(), json!(code));
                (ErrorCode::NodeFailed, Value::Object(d))
            }
        };
        Self::new(GateErrorKind::Failed, code, message, details)
    }

    pub(crate) fn as_json(&self) -> Value {
        json!({"code": self.code, "message": self.message, "details": self.details})
    }
}

pub(crate) fn unreachable_error() -> GateError {
    GateError::new(
        GateErrorKind::Failed,
        ErrorCode::InternalError,
        "internal error",
        Value::Null,
    )
}

pub(crate) fn not_found(tool_id: &str) -> GateError {
    GateError::new(
        GateErrorKind::NotFound,
        ErrorCode::NotFound,
        format!("no tool `{tool_id}` is available to this caller"),
        json!({"toolName": tool_id}),
    )
}

pub(crate) fn denial_error(tool_id: &str, pack: &str, d: Denial) -> (ToolStatus, GateError) {
    let forbidden = |reason: &str, message: String, required: Vec<String>| {
        (
            ToolStatus::Forbidden,
            GateError::new(
                GateErrorKind::Forbidden,
                ErrorCode::Forbidden,
                message,
                json!({"scope": "tool", "toolName": tool_id, "requiredScopes": required, "reason": reason}),
            ),
        )
    };
    match d {
        Denial::NotDeclared => forbidden(
            "not-declared",
            format!(
                "tool `{tool_id}` is not declared in this pack's manifest (add it to pack.json `x-wop.tools`)"
            ),
            Vec::new(),
        ),
        Denial::NotGranted => forbidden(
            "not-granted",
            format!(
                "tool `{tool_id}` is not granted to this pack (the operator grants it in the policy given with `--policy`: `tools = [\"{tool_id}\"]` under {})",
                wop_core::error::packs_table(pack)
            ),
            Vec::new(),
        ),
        Denial::MissingScopes { required, missing } => forbidden(
            "missing-scopes",
            format!(
                "the principal lacks scope(s) {} required by tool `{tool_id}`",
                missing.join(", ")
            ),
            required,
        ),
        Denial::PolicyError(e) => forbidden(
            "policy-error",
            format!(
                "the authorization decision for `{tool_id}` could not be evaluated, so it was denied: {e}"
            ),
            Vec::new(),
        ),
        Denial::NotFound => (ToolStatus::Error, not_found(tool_id)),
    }
}

/// The error a replay returns: the recorded one in its original shape —
/// the same code, message and `details` the first execution returned (its
/// `details` members at the top, `effectId` among them) — plus
/// `details.replayed: true`.
pub(crate) fn recorded_error(e: &Value, effect_id: &str) -> GateError {
    let code = e["code"]
        .as_str()
        .unwrap_or(ErrorCode::UpstreamUnavailable.as_str());
    let message = e["message"].as_str().unwrap_or("the tool failed");
    GateError::reported(
        code,
        message.to_owned(),
        replayed_details(&e["details"], effect_id),
    )
}

/// `details` of a recorded error as first returned, marked replayed.
fn replayed_details(recorded: &Value, effect_id: &str) -> Value {
    let mut d = match recorded {
        Value::Object(m) => m.clone(),
        Value::Null => serde_json::Map::new(),
        other => {
            let mut m = serde_json::Map::new();
            m.insert("cause".to_owned(), other.clone());
            m
        }
    };
    d.insert("effectId".to_owned(), json!(effect_id));
    d.insert("replayed".to_owned(), json!(true));
    Value::Object(d)
}

pub(crate) fn unknown_outcome(rec: &EffectRecord) -> GateError {
    GateError::new(
        GateErrorKind::Failed,
        ErrorCode::EffectOutcomeUnknown,
        format!(
            "the outcome of effect {} on tool `{}` is unknown (the call was sent but never answered, or its executor died); it will not be re-fired automatically. Check the provider, then run `wop effects resolve {} --as completed|released`",
            rec.effect_id, rec.tool_id, rec.effect_id
        ),
        json!({"effectId": rec.effect_id, "toolName": rec.tool_id, "state": rec.state, "cause": rec.error}),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replayed_errors_keep_their_shape() {
        let cases = [
            (
                json!({"service": "mcp", "code": -32000, "message": "boom"}),
                json!({"service": "mcp", "code": -32000, "message": "boom", "effectId": "e", "replayed": true}),
            ),
            (Value::Null, json!({"effectId": "e", "replayed": true})),
            (
                json!("text"),
                json!({"cause": "text", "effectId": "e", "replayed": true}),
            ),
        ];
        for (recorded, want) in cases {
            let e = recorded_error(
                &json!({"code": "mcp_error", "message": "m", "details": recorded}),
                "e",
            );
            assert_eq!(e.details, want);
            assert_eq!(e.code, ErrorCode::McpError);
            assert!(e.details.get("details").is_none(), "no nesting");
        }
    }

    #[test]
    fn reported_codes_are_typed_and_foreign_ones_kept_in_details() {
        let e = GateError::reported("rate_limited", "slow down", json!({"a": 1}));
        assert_eq!(e.code, ErrorCode::RateLimited);
        assert_eq!(e.details, json!({"a": 1}));
        // A node pack's own code, relayed by a node-pack tool.
        let e = GateError::reported("crm.down", "no CRM", json!({"a": 1}));
        assert_eq!(e.code, ErrorCode::NodeFailed);
        assert_eq!(e.details, json!({"a": 1, "toolCode": "crm.down"}));
        let e = GateError::reported("x", "m", Value::Null);
        assert_eq!(e.details, json!({"toolCode": "x"}));
        let e = GateError::reported("x", "m", json!([1]));
        assert_eq!(e.details, json!({"details": [1], "toolCode": "x"}));
        assert_eq!(e.as_json()["code"], "node_failed");
    }
}
