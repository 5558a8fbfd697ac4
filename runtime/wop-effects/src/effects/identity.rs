//! Effect identities (activity recipe, business key) and request digests.

use base64::Engine as _;
use serde_json::Value;
use wop_core::digest::tagged;

pub(super) fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// The activity recipe (protocol): `base64url(sha256("openwop:activity:v2\0"
/// ‖ tenantId ‖ "\0" ‖ runId ‖ "\0" ‖ nodeId ‖ "\0" ‖ ordinal ‖ "\0" ‖
/// providerKey))`, with the ordinal in decimal and the tool id as provider key.
pub fn activity_id(
    tenant: &str,
    run: &str,
    node: &str,
    ordinal: u32,
    provider_key: &str,
) -> String {
    let ordinal = ordinal.to_string();
    let parts = [tenant, run, node, &ordinal, provider_key].map(str::as_bytes);
    b64(&tagged("openwop:activity:v2", &parts))
}

/// Business identity (our documented derivation): `base64url(sha256(
/// "openwop:business:v1\0" ‖ tenantId ‖ "\0" ‖ toolId ‖ "\0" ‖ key))`. No
/// run, node, ordinal or attempt: the same key never fires twice.
pub fn business_id(tenant: &str, tool: &str, key: &str) -> String {
    let parts = [tenant, tool, key].map(str::as_bytes);
    b64(&tagged("openwop:business:v1", &parts))
}

/// The digest of a request: JCS SHA-256 of `{toolId, arguments}`.
pub fn request_digest(tool_id: &str, arguments: &Value) -> String {
    wop_core::jcs::sha256_hex(&serde_json::json!({"toolId": tool_id, "arguments": arguments}))
}
