//! Tool calls through the host's gate.

use std::fmt;
use std::marker::PhantomData;

use serde::Serialize;
use serde_json::Value;

use crate::bindings::openwop::node_pack::tools as wit;
use crate::ctx::Ctx;
use crate::error::{NodeError, codes, parse_lenient};

/// Tool calls, from [`Ctx::tools`].
///
/// The host authorizes every call (pack grant and the principal's scopes,
/// failing closed), applies rate limits and budgets, and claims effects
/// durably so a retried node never fires the same effect twice.
#[derive(Debug, Clone, Copy)]
pub struct Tools<'a> {
    _ctx: PhantomData<&'a Ctx>,
}

impl Tools<'_> {
    pub(crate) fn new() -> Self {
        Self { _ctx: PhantomData }
    }

    /// Call `tool_id` with JSON `arguments`.
    ///
    /// `idempotency_key`, when given, names the business operation: the same
    /// key never fires the effect twice, across retries and executors.
    /// Without it the effect identity is the position of this call in the
    /// invocation, so a retry of the node maps to the same effects. A call
    /// whose effect already completed returns the recorded result.
    pub fn call(
        &self,
        tool_id: &str,
        arguments: &Value,
        idempotency_key: Option<&str>,
    ) -> Result<Value, ToolError> {
        let arguments = arguments.to_string();
        match wit::call(tool_id, &arguments, idempotency_key) {
            Ok(result) => serde_json::from_str(&result).map_err(|e| ToolError {
                kind: ToolErrorKind::Failed,
                code: codes::VALIDATION_ERROR.to_owned(),
                message: format!("tool `{tool_id}` returned malformed JSON: {e}"),
                details: None,
            }),
            Err(error) => Err(ToolError::from_wit(error)),
        }
    }

    /// The tools this invocation may call, sorted by tool id.
    pub fn list(&self) -> Vec<ToolDescriptor> {
        wit::list()
            .into_iter()
            .map(ToolDescriptor::from_wit)
            .collect()
    }
}

/// How much a tool can change the world (OpenWOP `safetyTier`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SafetyTier {
    /// No side effects.
    Pure,
    /// Reads outside state.
    Read,
    /// Changes outside state.
    Write,
    /// Executes arbitrary actions.
    Exec,
}

/// A tool this invocation may call. Serializes to the OpenWOP
/// `ToolDescriptor` field names (`toolId`, `safetyTier`, ...).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolDescriptor {
    /// `<scope>:<id>`, unique in the catalog.
    pub tool_id: String,
    /// Short human-readable title.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// What the tool does.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// How much the tool can change the world.
    pub safety_tier: SafetyTier,
    /// JSON Schema of the arguments, if published.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub input_schema: Option<Value>,
    /// JSON Schema of the result, if published.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
}

impl ToolDescriptor {
    fn from_wit(d: wit::ToolDescriptor) -> Self {
        Self {
            tool_id: d.tool_id,
            title: d.title,
            description: d.description,
            safety_tier: match d.safety_tier {
                wit::SafetyTier::Pure => SafetyTier::Pure,
                wit::SafetyTier::Read => SafetyTier::Read,
                wit::SafetyTier::Write => SafetyTier::Write,
                wit::SafetyTier::Exec => SafetyTier::Exec,
            },
            input_schema: d.input_schema.as_deref().map(parse_lenient),
            output_schema: d.output_schema.as_deref().map(parse_lenient),
        }
    }
}

/// Why a tool call did not produce a result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ToolErrorKind {
    /// `forbidden`: not granted to the pack or the principal lacks a scope.
    /// Not performed.
    Forbidden,
    /// `not_found`: no such tool for this caller.
    NotFound,
    /// `rate_limited`: `details.retryAfterMs` says when to retry. Not
    /// performed.
    RateLimited,
    /// `budget_exhausted`: `details.dimension` names the budget. Not
    /// performed.
    BudgetExhausted,
    /// `idempotency_in_flight` or `idempotency_key_mismatch`.
    Conflict,
    /// The tool ran (or may have run) and failed, or its outcome is unknown.
    Failed,
}

/// A failed tool call: its kind plus the protocol error (code, message,
/// details). Converts into [`NodeError`] unchanged, so `?` in
/// [`Pack::invoke`](crate::Pack::invoke) fails the node with the tool's code.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolError {
    /// Which kind of failure.
    pub kind: ToolErrorKind,
    /// OpenWOP error code, e.g. `forbidden`.
    pub code: String,
    /// Human-readable message.
    pub message: String,
    /// Machine-readable details (a JSON object), if any.
    pub details: Option<Value>,
}

impl ToolError {
    fn from_wit(error: wit::ToolError) -> Self {
        let (kind, info) = match error {
            wit::ToolError::Forbidden(i) => (ToolErrorKind::Forbidden, i),
            wit::ToolError::NotFound(i) => (ToolErrorKind::NotFound, i),
            wit::ToolError::RateLimited(i) => (ToolErrorKind::RateLimited, i),
            wit::ToolError::BudgetExhausted(i) => (ToolErrorKind::BudgetExhausted, i),
            wit::ToolError::Conflict(i) => (ToolErrorKind::Conflict, i),
            wit::ToolError::Failed(i) => (ToolErrorKind::Failed, i),
        };
        let NodeError {
            code,
            message,
            details,
        } = NodeError::from_wit(info);
        Self {
            kind,
            code,
            message,
            details,
        }
    }
}

impl fmt::Display for ToolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl std::error::Error for ToolError {}

impl From<ToolError> for NodeError {
    fn from(e: ToolError) -> Self {
        Self {
            code: e.code,
            message: e.message,
            details: e.details,
        }
    }
}
