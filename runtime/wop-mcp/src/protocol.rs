//! MCP protocol revisions, handshake messages and JSON-RPC envelopes.
//!
//! Message shapes come from rmcp's model (`InitializeRequestParams`,
//! `RequestMetaObject::with_client_context`, `ProtocolVersion`); the wire
//! itself is ours (see `lib.rs`).

use rmcp::model::{
    ClientCapabilities, Implementation, InitializeRequestParams, ProtocolVersion, RequestMetaObject,
};
use serde_json::{Map, Value, json};

use crate::error::McpError;

// The revisions, header and `_meta` names and JSON-RPC codes are defined
// once in `wop_core::mcp_protocol` (the server in `wop-serve` uses them too).
/// The revisions this client speaks, oldest first.
pub use wop_core::mcp_protocol::CLIENT_REVISIONS as SUPPORTED_REVISIONS;
use wop_core::mcp_protocol::{META_CLIENT_CAPABILITIES, META_PROTOCOL_VERSION};
pub use wop_core::mcp_protocol::{REV_2025_03_26, REV_2025_06_18, REV_2025_11_25, REV_2026_07_28};

/// JSON-RPC code a 2026-07-28 server uses for an unsupported revision.
pub(crate) use wop_core::mcp_protocol::jsonrpc::UNSUPPORTED_VERSION as CODE_UNSUPPORTED_VERSION;

/// The supported revisions as owned strings (for error details).
pub(crate) fn supported_list() -> Vec<String> {
    SUPPORTED_REVISIONS
        .iter()
        .map(|s| (*s).to_owned())
        .collect()
}

/// Whether `rev` is one this client speaks.
pub(crate) fn is_supported(rev: &str) -> bool {
    SUPPORTED_REVISIONS.contains(&rev)
}

/// Whether `rev` negotiates with `initialize` (per rmcp's rule).
pub(crate) fn has_initialize(rev: &str) -> bool {
    ProtocolVersion::V_2025_11_25.as_str() == rev || rev < ProtocolVersion::NO_INITIALIZE.as_str()
}

fn client_info() -> Implementation {
    Implementation::new("wop-mcp", env!("CARGO_PKG_VERSION"))
}

/// `initialize` params offering `offered` (a pre-2026 revision).
pub(crate) fn initialize_params(offered: &str) -> Value {
    let version = match offered {
        REV_2025_03_26 => ProtocolVersion::V_2025_03_26,
        REV_2025_06_18 => ProtocolVersion::V_2025_06_18,
        _ => ProtocolVersion::V_2025_11_25,
    };
    let params = InitializeRequestParams::new(ClientCapabilities::default(), client_info())
        .with_protocol_version(version);
    serde_json::to_value(params).unwrap_or_else(|_| {
        json!({"protocolVersion": offered, "capabilities": {},
               "clientInfo": {"name": "wop-mcp", "version": env!("CARGO_PKG_VERSION")}})
    })
}

/// The SEP-2575 client context every 2026-07-28 request carries in `_meta`.
pub(crate) fn modern_meta() -> Map<String, Value> {
    let meta = RequestMetaObject::with_client_context(
        ProtocolVersion::V_2026_07_28,
        client_info(),
        ClientCapabilities::default(),
    );
    match serde_json::to_value(meta) {
        Ok(Value::Object(m)) => m,
        _ => {
            let mut m = Map::new();
            m.insert(
                META_PROTOCOL_VERSION.into(),
                Value::String(REV_2026_07_28.into()),
            );
            m.insert(META_CLIENT_CAPABILITIES.into(), json!({}));
            m
        }
    }
}

/// Builds request params: `base` plus `_meta` = caller meta, overlaid with
/// the protocol's own keys (caller meta may not spoof them).
pub(crate) fn with_meta(
    mut base: Map<String, Value>,
    caller_meta: Map<String, Value>,
    protocol_meta: Option<&Map<String, Value>>,
) -> Value {
    let mut meta = caller_meta;
    if let Some(p) = protocol_meta {
        for (k, v) in p {
            meta.insert(k.clone(), v.clone());
        }
    }
    if !meta.is_empty() {
        base.insert("_meta".into(), Value::Object(meta));
    }
    Value::Object(base)
}

/// Encodes one JSON-RPC request.
pub(crate) fn request_bytes(id: u64, method: &str, params: &Value) -> Vec<u8> {
    let msg = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    serde_json::to_vec(&msg).unwrap_or_default()
}

/// Encodes one JSON-RPC notification.
pub(crate) fn notification_bytes(method: &str, params: Option<&Value>) -> Vec<u8> {
    let msg = match params {
        Some(p) => json!({"jsonrpc": "2.0", "method": method, "params": p}),
        None => json!({"jsonrpc": "2.0", "method": method}),
    };
    serde_json::to_vec(&msg).unwrap_or_default()
}

/// What one incoming JSON-RPC message is.
pub(crate) enum Incoming {
    /// A response (result or error) to request `id`.
    Response {
        id: Value,
        outcome: Result<Value, McpError>,
    },
    /// A request from the server (needs an answer on stdio).
    Request { id: Value, method: String },
    /// A notification (ignored).
    Notification,
    /// Valid JSON that is no JSON-RPC message.
    Invalid,
}

/// Parses one incoming message (a stdio line, an HTTP JSON body, an SSE
/// event's data), refusing invalid UTF-8 and invalid JSON with the same
/// errors on every transport.
pub(crate) fn parse_message(bytes: &[u8]) -> Result<Value, McpError> {
    let text = std::str::from_utf8(bytes).map_err(|_| McpError::invalid_utf8())?;
    serde_json::from_str(text).map_err(|_| McpError::invalid_json())
}

/// Classifies a parsed message.
pub(crate) fn classify(msg: Value) -> Incoming {
    let Value::Object(mut obj) = msg else {
        return Incoming::Invalid;
    };
    let method = obj.get("method").and_then(Value::as_str).map(str::to_owned);
    let id = obj.remove("id");
    match (method, id) {
        (Some(method), Some(id)) if !id.is_null() => Incoming::Request { id, method },
        (Some(_), _) => Incoming::Notification,
        (None, Some(id)) => {
            if let Some(result) = obj.remove("result") {
                Incoming::Response {
                    id,
                    outcome: Ok(result),
                }
            } else if let Some(err) = obj.remove("error") {
                Incoming::Response {
                    id,
                    outcome: Err(rpc_error(&err)),
                }
            } else {
                Incoming::Invalid
            }
        }
        (None, None) => Incoming::Invalid,
    }
}

/// Converts a JSON-RPC `error` member into [`McpError::Rpc`].
pub(crate) fn rpc_error(err: &Value) -> McpError {
    McpError::Rpc {
        code: err
            .get("code")
            .and_then(Value::as_i64)
            .unwrap_or(wop_core::mcp_protocol::jsonrpc::INTERNAL_ERROR),
        message: err
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or("")
            .chars()
            .take(1024)
            .collect(),
        data: err.get("data").cloned(),
    }
}

/// Whether a response `id` is the numeric request id `want`.
pub(crate) fn id_matches(id: &Value, want: u64) -> bool {
    id.as_u64() == Some(want)
}

/// Best-effort: the numeric `"id"` of a message from its first bytes or its
/// last bytes (used to attribute an oversized line without parsing it).
pub(crate) fn sniff_id(fragment: &[u8]) -> Option<u64> {
    let text = String::from_utf8_lossy(fragment);
    let mut found = None;
    let mut rest: &str = &text;
    while let Some(pos) = rest.find("\"id\"") {
        let after = rest[pos + 4..].trim_start();
        if let Some(after) = after.strip_prefix(':') {
            let digits: String = after
                .trim_start()
                .chars()
                .take_while(char::is_ascii_digit)
                .collect();
            if let Ok(n) = digits.parse::<u64>() {
                found = Some(n);
            }
        }
        rest = &rest[pos + 4..];
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn revisions_match_rmcp() {
        for rev in SUPPORTED_REVISIONS {
            assert!(
                ProtocolVersion::KNOWN_VERSIONS
                    .iter()
                    .any(|v| v.as_str() == rev),
                "{rev} unknown to rmcp"
            );
        }
        assert!(has_initialize(REV_2025_03_26));
        assert!(has_initialize(REV_2025_11_25));
        assert!(!has_initialize(REV_2026_07_28));
    }

    #[test]
    fn initialize_and_meta_shapes() {
        let p = initialize_params(REV_2025_11_25);
        assert_eq!(p["protocolVersion"], REV_2025_11_25);
        assert_eq!(p["clientInfo"]["name"], "wop-mcp");
        let m = modern_meta();
        assert_eq!(m["io.modelcontextprotocol/protocolVersion"], REV_2026_07_28);
        let mut caller = Map::new();
        caller.insert("dev.openwop/idempotencyKey".into(), json!("k"));
        caller.insert(
            "io.modelcontextprotocol/protocolVersion".into(),
            json!("spoof"),
        );
        let v = with_meta(Map::new(), caller, Some(&m));
        assert_eq!(v["_meta"]["dev.openwop/idempotencyKey"], "k");
        assert_eq!(
            v["_meta"]["io.modelcontextprotocol/protocolVersion"],
            REV_2026_07_28
        );
        assert!(
            with_meta(Map::new(), Map::new(), None)
                .get("_meta")
                .is_none()
        );
    }

    /// Why results do not go through rmcp's typed client: its model drops
    /// what the schema does not name, so the result would not be unaltered.
    #[test]
    fn rmcp_typed_results_are_not_unaltered() {
        let wire = json!({"content": [], "isError": false, "x-vendor": {"kept": true}});
        let typed: rmcp::model::CallToolResult = match serde_json::from_value(wire.clone()) {
            Ok(t) => t,
            Err(e) => panic!("rmcp rejected a valid result: {e}"),
        };
        let back = serde_json::to_value(typed).unwrap_or_default();
        assert_ne!(back, wire);
        assert!(back.get("x-vendor").is_none());
    }

    #[test]
    fn sniffs_ids() {
        assert_eq!(
            sniff_id(br#"{"jsonrpc":"2.0","id":42,"result":{"#),
            Some(42)
        );
        assert_eq!(sniff_id(br#"aaaa"}]},"jsonrpc":"2.0","id": 7}"#), Some(7));
        assert_eq!(sniff_id(br#"{"jsonrpc":"2.0","result":"#), None);
    }

    #[test]
    fn classifies() {
        assert!(matches!(
            classify(json!({"jsonrpc":"2.0","id":1,"result":{"a":1}})),
            Incoming::Response { outcome: Ok(_), .. }
        ));
        assert!(matches!(
            classify(json!({"jsonrpc":"2.0","id":1,"error":{"code":-1,"message":"x"}})),
            Incoming::Response {
                outcome: Err(McpError::Rpc { code: -1, .. }),
                ..
            }
        ));
        assert!(matches!(
            classify(json!({"jsonrpc":"2.0","method":"notifications/message"})),
            Incoming::Notification
        ));
        assert!(matches!(
            classify(json!({"jsonrpc":"2.0","id":"s1","method":"ping"})),
            Incoming::Request { .. }
        ));
        assert!(matches!(classify(json!([1])), Incoming::Invalid));
    }
}
