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

/// A failed request, and whether it may have reached the server.
///
/// `sent: false` means the request was certainly never written to the
/// server: the server id is unknown, the connection or the revision
/// handshake failed or timed out, the server was dead or restarting, or an
/// HTTP connection could not be opened. Nothing was performed, so a caller
/// holding an effect claim releases it. `sent: true` means it may have
/// been (an answer, an error answer, or no answer after it was written).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{error}")]
pub struct McpFailure {
    /// What went wrong.
    pub error: McpError,
    /// Whether the request may have reached the server.
    pub sent: bool,
}

impl McpFailure {
    /// A failure before the request was written.
    pub fn not_sent(error: McpError) -> Self {
        Self { error, sent: false }
    }

    /// A failure after the request may have been written.
    pub fn sent(error: McpError) -> Self {
        Self { error, sent: true }
    }
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

    /// The refusal of a message that is not valid UTF-8, the same on every
    /// transport (stdio line, HTTP JSON body, SSE event).
    pub(crate) fn invalid_utf8() -> Self {
        McpError::unavailable("MCP server sent a message that is not valid UTF-8")
    }

    /// The refusal of a message that is not JSON, the same on every
    /// transport.
    pub(crate) fn invalid_json() -> Self {
        McpError::unavailable("MCP server sent a message that is not valid JSON")
    }

    /// A handshake that failed: whatever the server answered, the call was
    /// never sent, so it is `upstream_unavailable` (retryable) — except a
    /// revision this host cannot speak, which keeps its own code.
    pub(crate) fn handshake(self) -> Self {
        match self {
            McpError::Unavailable { .. }
            | McpError::VersionUnsupported { .. }
            | McpError::NotFound { .. } => self,
            McpError::Rpc { code, message, .. } => McpError::unavailable(format!(
                "MCP handshake failed: the server answered error {code}: {}",
                message.chars().take(256).collect::<String>()
            )),
            McpError::TooLarge { limit, .. } => McpError::unavailable(format!(
                "MCP handshake failed: the server's answer exceeds {limit} bytes"
            )),
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
