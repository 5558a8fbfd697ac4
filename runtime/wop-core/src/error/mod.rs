//! Protocol error codes and the typed errors of the runtime.
//!
//! Every failure a caller can see carries an OpenWOP error code
//! ([`ErrorCode`], the one table in [`code`]) so hosts can act on it
//! without parsing messages. Why a pack could not be loaded is a
//! [`LoadError`] ([`load`]); a failed node is a [`NodeError`].

pub mod code;
pub mod load;

pub use code::ErrorCode;
pub use load::{LoadError, packs_table};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Who decided that a node failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FailureSource {
    /// The pack returned this error itself; `code` is the pack's own string.
    Pack,
    /// The runtime classified the failure (a limit, a trap, a denial).
    Runtime,
}

/// A node failure as reported to the host: a protocol error plus who raised it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeError {
    /// OpenWOP error code; for [`FailureSource::Pack`] the pack's own string.
    pub code: String,
    /// A message for people.
    pub message: String,
    /// Machine-readable details (a JSON object), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<Value>,
    /// Whether the pack or the runtime raised this error.
    pub source: FailureSource,
}

impl NodeError {
    /// A runtime-classified error with `details` built from key/value pairs.
    pub fn runtime(
        code: ErrorCode,
        message: impl Into<String>,
        details: Map<String, Value>,
    ) -> Self {
        Self {
            code: code.as_str().to_owned(),
            message: message.into(),
            details: if details.is_empty() {
                None
            } else {
                Some(Value::Object(details))
            },
            source: FailureSource::Runtime,
        }
    }

    /// The value of `details[key]`, if present.
    pub fn detail(&self, key: &str) -> Option<&Value> {
        self.details.as_ref()?.get(key)
    }
}

impl std::fmt::Display for NodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl std::error::Error for NodeError {}

/// Builds a `details` map: `details!{"cause" => "fuel", "limit" => 10}`.
#[macro_export]
#[doc(hidden)]
macro_rules! details {
    ($($k:expr => $v:expr),* $(,)?) => {{
        #[allow(unused_mut)]
        let mut m = ::serde_json::Map::new();
        $( m.insert(($k).to_string(), ::serde_json::json!($v)); )*
        m
    }};
}

/// Errors building a `wop_runtime::Runtime` or reading a policy.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The policy file is invalid; the message names the field.
    #[error("invalid policy: {0}")]
    Policy(String),
    /// The engine could not be created.
    #[error("cannot create the wasm engine: {0}")]
    Engine(String),
    /// An I/O error (cache directory, policy file).
    #[error("{0}")]
    Io(String),
}
