//! The client's typed errors and their protocol codes.

use serde_json::{Value, json};

/// Why an MCP operation failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum McpError {
    /// The server id is not configured.
    #[error("unknown MCP server {server:?}")]
    NotFound {
        /// The requested server id.
        server: String,
    },
    /// The server answered with a JSON-RPC error.
    #[error("MCP server error {code}: {message}")]
    Rpc {
        /// JSON-RPC error code.
        code: i64,
        /// JSON-RPC error message.
        message: String,
        /// JSON-RPC error data, if any.
        data: Option<Value>,
    },
    /// Transport failure, crash, timeout or a server that never answers.
    /// Retryable.
    #[error("MCP server unavailable: {reason}")]
    Unavailable {
        /// Human-readable cause (no secrets, no server output).
        reason: String,
    },
    /// The server offered a protocol revision this host does not speak.
    #[error("MCP server offered unsupported protocol revision {offered:?}")]
    VersionUnsupported {
        /// What the server answered (empty when it named none).
        offered: String,
        /// The revisions this host supports.
        supported: Vec<String>,
    },
    /// One result message exceeded `maxResultBytes`.
    #[error("MCP result exceeds {limit} bytes (observed at least {observed})")]
    TooLarge {
        /// The configured cap.
        limit: u64,
        /// Bytes seen when the message was refused (a lower bound).
        observed: u64,
    },
}

impl McpError {
    /// The registered error code (`not_found`, `mcp_error`,
    /// `upstream_unavailable`, `interop_version_unsupported`,
    /// `mcp_result_too_large`).
    pub fn code(&self) -> &'static str {
        match self {
            McpError::NotFound { .. } => "not_found",
            McpError::Rpc { .. } => "mcp_error",
            McpError::Unavailable { .. } => "upstream_unavailable",
            McpError::VersionUnsupported { .. } => "interop_version_unsupported",
            McpError::TooLarge { .. } => "mcp_result_too_large",
        }
    }

    /// Whether retrying later may succeed.
    pub fn retryable(&self) -> bool {
        matches!(self, McpError::Unavailable { .. })
    }

    /// The error's `details` object.
    pub fn details(&self) -> Value {
        match self {
            McpError::NotFound { server } => json!({"service": "mcp", "serverId": server}),
            McpError::Rpc {
                code,
                message,
                data,
            } => {
                let mut d = json!({"service": "mcp", "code": code, "message": message});
                if let (Some(data), Some(obj)) = (data, d.as_object_mut()) {
                    obj.insert("data".into(), data.clone());
                }
                d
            }
            McpError::Unavailable { reason } => {
                json!({"service": "mcp", "reason": reason, "retryable": true})
            }
            McpError::VersionUnsupported { offered, supported } => {
                json!({"service": "mcp", "offered": offered, "supported": supported})
            }
            McpError::TooLarge { limit, observed } => {
                json!({"service": "mcp", "limit": limit, "observed": observed})
            }
        }
    }

    pub(crate) fn unavailable(reason: impl Into<String>) -> Self {
        McpError::Unavailable {
            reason: reason.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_and_details_are_objects() {
        let all = [
            McpError::NotFound { server: "x".into() },
            McpError::Rpc {
                code: -32602,
                message: "bad".into(),
                data: Some(json!({"a": 1})),
            },
            McpError::unavailable("timeout"),
            McpError::VersionUnsupported {
                offered: "1999-01-01".into(),
                supported: vec!["2025-06-18".into()],
            },
            McpError::TooLarge {
                limit: 1,
                observed: 2,
            },
        ];
        let codes: Vec<_> = all.iter().map(McpError::code).collect();
        assert_eq!(
            codes,
            [
                "not_found",
                "mcp_error",
                "upstream_unavailable",
                "interop_version_unsupported",
                "mcp_result_too_large"
            ]
        );
        for e in &all {
            assert!(e.details().is_object());
        }
        assert_eq!(all[1].details()["data"]["a"], 1);
        assert_eq!(all[2].details()["service"], "mcp");
        assert!(all[2].retryable());
    }
}
