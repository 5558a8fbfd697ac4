//! The node's own failure.

use std::fmt;

use serde_json::Value;

use crate::bindings::openwop::node_pack::types::ErrorInfo;

/// Common OpenWOP error codes used by this SDK.
pub mod codes {
    /// The node's inputs, config or arguments are invalid.
    pub const VALIDATION_ERROR: &str = "validation_error";
    /// The pack itself misbehaved (for example its output could not be
    /// serialized).
    pub const INTERNAL_ERROR: &str = "internal_error";
}

/// A node failure: an OpenWOP error code, a message for people and optional
/// machine-readable details (a JSON object).
///
/// Returned from [`Pack::invoke`](crate::Pack::invoke), it is reported as the
/// node's own failure, never mistaken for a runtime error. Host calls that
/// fail ([`ToolError`](crate::ToolError), HTTP, MCP) convert into it, so `?`
/// works in `invoke`.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeError {
    /// OpenWOP error code, e.g. `validation_error`, `forbidden`.
    pub code: String,
    /// Human-readable message.
    pub message: String,
    /// Machine-readable details; should be a JSON object.
    pub details: Option<Value>,
}

impl NodeError {
    /// An error with `code` and `message` and no details.
    pub fn new(code: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            code: code.into(),
            message: message.into(),
            details: None,
        }
    }

    /// A `validation_error` with `message`.
    pub fn validation(message: impl Into<String>) -> Self {
        Self::new(codes::VALIDATION_ERROR, message)
    }

    /// The same error with `details` attached (should be a JSON object).
    #[must_use]
    pub fn with_details(mut self, details: Value) -> Self {
        self.details = Some(details);
        self
    }

    pub(crate) fn into_wit(self) -> ErrorInfo {
        ErrorInfo {
            code: self.code,
            message: self.message,
            details: self.details.map(|d| d.to_string()),
        }
    }

    pub(crate) fn from_wit(info: ErrorInfo) -> Self {
        Self {
            code: info.code,
            message: info.message,
            details: info.details.map(|d| parse_lenient(&d)),
        }
    }
}

impl fmt::Display for NodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl std::error::Error for NodeError {}

/// Parse JSON the host promised to be valid; keep it as a string otherwise.
pub(crate) fn parse_lenient(json: &str) -> Value {
    serde_json::from_str(json).unwrap_or_else(|_| Value::String(json.to_owned()))
}
