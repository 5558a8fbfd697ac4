//! The capability document: which pack runtimes this runtime runs, with
//! which limits, which packs are loaded, and the sandbox contract
//! (RFC 0008 §H, RFC 0035 §A). One place for both pack kinds; the engine
//! version comes from [`crate::engine::ENGINE_VERSION`].

use crate::abi_v1::imports;
use crate::engine::ENGINE_VERSION;
use crate::registry::Registry;
use serde::Serialize;
use serde_json::{Value, json};
use wop_core::abi::supported_versions;
use wop_core::capability::Capability;
use wop_core::limits::Limits;

/// The runtime's capability document (RFC 0008 §H, RFC 0035 §A).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CapabilityDocument {
    /// `nodePackRuntimes`: `wasm` (ABI v1) and `wasmComponent`.
    pub node_pack_runtimes: Value,
    /// `sandbox`: the isolation contract.
    pub sandbox: Value,
    /// `httpClient`: safe-fetch and the credential egress policy
    /// (RFC 0079 `egressPolicy`: credentials bound to their audiences,
    /// `egress.decided` emitted).
    pub http_client: Value,
    /// `secrets`: host-held credentials a node may declare
    /// (`requiresSecrets`); the host attaches them, a pack never sees them.
    pub secrets: Value,
}

/// The capability document of a runtime whose ceilings are `limits` and
/// whose loaded packs are in `registry`.
pub(crate) fn document(limits: Limits, registry: &Registry) -> CapabilityDocument {
    let abi_v1 = registry.names(true);
    let components = registry.names(false);
    let mut allowed: Vec<String> = imports::granted_names(&Capability::BASE.into_iter().collect())
        .into_iter()
        .collect();
    allowed.extend(
        Capability::BASE
            .iter()
            .map(|c| format!("{}/{}", crate::capability::OPENWOP_PACKAGE, c.as_str())),
    );
    allowed.sort();
    CapabilityDocument {
        node_pack_runtimes: json!({
            "wasm": {
                "supported": true,
                "abiVersions": supported_versions(),
                "engine": "wasmtime",
                "engineVersion": ENGINE_VERSION,
                "maxMemoryBytes": limits.memory_bytes,
                "maxExecutionMs": limits.wall_clock_ms,
                "loadedPacks": abi_v1,
            },
            "wasmComponent": {
                "supported": true,
                "worlds": ["openwop:node-pack/node-pack@0.1.0"],
                "engine": "wasmtime",
                "engineVersion": ENGINE_VERSION,
                "maxMemoryBytes": limits.memory_bytes,
                "maxExecutionMs": limits.wall_clock_ms,
                "loadedPacks": components,
            },
            // The protocol's JavaScript packs (`runtime.language:
            // javascript`, ES modules): built here into components (QuickJS
            // behind the same world) and run in the same sandbox.
            "javascript": {
                "supported": true,
                "formats": ["esm"],
                "isolationModel": "wasm",
                "engine": "quickjs",
                "engineBuild": format!("wop-js/{}", wop_js::engine_sha256()),
                "modules": ["node:crypto", "node:dns/promises"],
            },
        }),
        sandbox: json!({
            "supported": true,
            "isolationModel": "wasm",
            // RFC 0035 §B, each enforced for every pack kind here
            // (`no-eval` for JavaScript packs: no eval, no Function
            // constructors, no module from outside the pack).
            "invariants": [
                "node-pack-sandbox-fs-gated",
                "node-pack-sandbox-no-env",
                "node-pack-sandbox-network-gated",
                "node-pack-sandbox-no-process",
                "node-pack-sandbox-memory-cap",
                "node-pack-sandbox-timeout",
                "node-pack-sandbox-isolated-context",
                "node-pack-sandbox-no-eval",
            ],
            "allowedHostCalls": allowed,
            "memoryLimitBytes": limits.memory_bytes,
            "wallClockLimitMs": limits.wall_clock_ms,
        }),
        http_client: json!({
            "safeFetch": {"supported": true},
            "egressPolicy": {
                "supported": true,
                "decisions": ["allowed", "denied", "downgraded"],
            },
        }),
        secrets: json!({
            "supported": true,
            "kinds": ["ai-provider", "api-key", "oauth-token", "custom"],
            "scopes": ["tenant"],
            "attach": ["bearer", "basic", "header"],
            "paths": ["safe-fetch", "http-tool", "mcp-http"],
            "unavailableCode": "credential_unavailable",
        }),
    }
}
