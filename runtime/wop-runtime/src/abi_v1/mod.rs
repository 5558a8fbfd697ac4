//! OpenWOP WASM ABI v1 core-module packs (`runtime.language: "wasm"`,
//! RFC 0008) under the protocol's sandbox contract (RFC 0035).
//!
//! A core module exports `openwop_abi_version`, `openwop_pack_name`,
//! `openwop_node_count`, `openwop_node_id_at`, `openwop_alloc`,
//! `openwop_free` and `openwop_node_invoke`, and may import the host
//! functions of module `openwop`. Strings and JSON cross as (ptr, len) in
//! the module's memory; every (ptr, len) result is accepted as multi-value
//! `(i32 i32)` or as one packed `i64` (ptr low, len high), decided per
//! function from the signature the module declares.
//!
//! Loading, in order: read (`pack.json` with integrity check, or a bare
//! `.wasm`) → compile on the shared engine → the static import gate
//! ([`imports`]) on the compiled module's imports, before anything is
//! instantiated → link with the declared signatures → identification in a
//! fresh sandbox, reading `openwop_abi_version` **first** (only
//! [`SUPPORTED_ABI_VERSIONS`] go further) → name and node ids checked
//! against the manifest → typeIds registered.
//!
//! Invocation: a fresh store and instance per call on the process-wide
//! engine, with the same limiter (every memory, imported or module-defined),
//! fuel, fuel-yield + deadline wall clock, bounded log and replay seeds as
//! components; failures go through the one [`crate::classify::classify`].
//!
//! Grants: `openwop_log`, `openwop_now_ms` and `openwop_random` are base
//! (capabilities `log`, `clock`, `random`); `openwop_variable_get/set` need
//! `variables`, `openwop_channel_read/write` need `channels` and
//! `openwop_interrupt` needs `interrupt` — requested in `x-wop.capabilities`
//! **and** granted in the policy's `[packs.<name>] capabilities`. A bare
//! `.wasm` (no manifest) gets the base set only and no integrity check.

mod execute;
mod host;
pub mod imports;
mod load;
mod loader;
mod probe;
mod source;

pub use execute::AbiExports;
pub use host::PairEncoding;
pub use probe::{ProbeError, ProbeOptions, ProbeReport, ProbeVerdict, probe};
pub use wop_core::abi::{SUPPORTED_ABI_VERSIONS, supported_versions};

pub(crate) use load::{inspect, load};

use crate::env::RunEnv;
use crate::sandbox::Grants;
use execute::{AbiCall, AbiReturned, Linked, execute};
use host::NodeState;
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;
use std::path::Path;
use wop_core::capability::Capability;
use wop_core::error::{ErrorCode, LoadError, NodeError};
use wop_core::model::{InvocationReport, InvokeRequest};
use wop_core::outcome::PackReturn;
use wop_core::pack::Inspection;

/// Whether `path` is an ABI v1 pack: anything but a directory (a bare core
/// module, read later by the bounded reader, which refuses what is not a
/// regular file), or a directory whose `pack.json` says `runtime.language:
/// "wasm"`. That `pack.json` is read by the bounded, no-follow reader
/// ([`wop_core::packfile`]), and its refusal is the load's: a `pack.json`
/// that is a FIFO, a device or too large is never read whole or waited on.
pub(crate) fn is_abi_v1_pack(path: &Path) -> Result<bool, LoadError> {
    if std::fs::symlink_metadata(path).is_err() {
        // Nothing there: the component path says so.
        return Ok(false);
    }
    if !source::is_dir(path) {
        return Ok(true);
    }
    let bytes = wop_core::pack::read_manifest_bytes(path)?;
    Ok(serde_json::from_slice::<Value>(&bytes)
        .ok()
        .is_some_and(|v| v["runtime"]["language"] == "wasm"))
}

/// A loaded, identified ABI v1 pack.
pub(crate) struct AbiV1Pack {
    /// The load-time inspection (manifest, grants, limits).
    pub inspection: Inspection,
    linked: Linked,
    /// The capabilities its host calls may use.
    grants: Grants,
    /// typeId → `openwop_node_id_at` index.
    nodes: BTreeMap<String, u32>,
}

impl AbiV1Pack {
    fn new(inspection: Inspection, linked: Linked, nodes: BTreeMap<String, u32>) -> Self {
        Self {
            grants: Grants::of(&inspection.effective),
            inspection,
            linked,
            nodes,
        }
    }

    /// Runs one node invocation in a fresh sandbox.
    pub(crate) async fn invoke(&self, req: &InvokeRequest, env: &RunEnv<'_>) -> InvocationReport {
        let index = self.nodes.get(&req.type_id).copied().unwrap_or(0);
        let agent = if req.principal.id == "core.system" {
            Value::Null
        } else {
            json!({"agentId": req.principal.id})
        };
        let request = json!({
            "abiVersion": 1,
            "nodeContext": {
                "runId": req.context.run_id,
                "nodeId": req.context.node_id,
                "tenantId": req.context.tenant_id,
                "attempt": req.context.attempt,
                "configurable": req.config,
                "agent": agent,
            },
            "inputs": req.inputs,
        });
        let seeded = |key: &str| match req.config.get(key) {
            Some(Value::Object(o)) => o.clone(),
            _ => Map::new(),
        };
        let node = NodeState {
            variables: seeded("variables"),
            channels: seeded("channels"),
            resume: req.resume.clone(),
        };
        let call = AbiCall::Invoke {
            index,
            request: request.to_string().into_bytes(),
        };
        let exec = execute(&self.linked, env, self.grants, node, call).await;
        // Suspending needs the `interrupt` grant (as the host call does).
        let may_suspend = self.grants.contains(Capability::Interrupt);
        exec.report(env, |r| match r {
            AbiReturned::Response(bytes) => Ok((PackReturn::Envelope(bytes), may_suspend)),
            // `openwop_interrupt` already required the grant; its payload
            // is the outcome, under the same cap and counted the same way.
            AbiReturned::Suspended(interrupt) => Ok((PackReturn::Suspended(interrupt), true)),
            _ => Err(NodeError::runtime(
                ErrorCode::InternalError,
                "invoke returned no response",
                Default::default(),
            )),
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};
    use wop_core::capability::Capability;
    use wop_core::error::LoadError;
    use wop_core::manifest::{Language, Manifest};

    #[test]
    fn wasm_manifests() {
        let base = json!({
            "kind": "node", "name": "core", "version": "1.0.0",
            "engines": {"openwop": ">=1.0.0"},
            "nodes": [{"typeId": "t.x", "version": "1.0.0", "category": "c", "role": "worker"}],
            "runtime": {"language": "wasm", "entry": "m.wasm"},
            "x-wop": {"sha256": "a".repeat(64), "capabilities": ["variables", "interrupt"]}
        });
        let parse = |v: &Value| Manifest::parse(v.to_string().as_bytes());
        let m = parse(&base).map_err(|e| e.to_string());
        assert_eq!(
            m.map(|m| (m.runtime.language, m.wop.capabilities)),
            Ok((
                Language::Wasm,
                vec![Capability::Variables, Capability::Interrupt]
            ))
        );
        let mut v = base.clone();
        v["runtime"]["format"] = json!("wasm");
        v["runtime"]["wasm"] = json!({"abiVersion": 1});
        assert!(parse(&v).is_ok());
        v["runtime"]["format"] = json!("wasm-component");
        assert!(
            matches!(parse(&v), Err(LoadError::Validation { path, .. }) if path == "$.runtime.format")
        );
        v["runtime"]["format"] = json!("wasm");
        v["runtime"]["wasm"] = json!({"abiVersion": 2});
        assert!(matches!(
            parse(&v),
            Err(LoadError::AbiVersion { version: 2, .. })
        ));
        v["runtime"]["wasm"] = json!({"abiVersion": "1"});
        assert!(
            matches!(parse(&v), Err(LoadError::Validation { path, .. }) if path == "$.runtime.wasm.abiVersion")
        );
        v = base.clone();
        v["x-wop"].as_object_mut().map(|o| o.remove("sha256"));
        assert!(parse(&v).is_err(), "integrity stays required");
    }
}
