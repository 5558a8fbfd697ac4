//! The protocol's error codes: one table ([`ErrorCode`]), one row per
//! code, from which the enum, its wire string (`as_str`, serde), parsing,
//! the list of every code and whether a pack may return it are all
//! generated. Adding a code is adding a row.

use serde::{Deserialize, Serialize};

/// Generates [`ErrorCode`] from its table: each row is
/// `Variant = "wire_string", reserved|shared;` under its doc comment.
/// `reserved`: only the runtime gives this code (a pack returning it is
/// rewritten, see [`ErrorCode::is_reserved`]); `shared`: a pack may
/// return it too.
macro_rules! error_codes {
    ($($(#[$doc:meta])* $variant:ident = $wire:literal, $who:ident;)*) => {
        /// OpenWOP error codes the runtime emits (exact protocol strings).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
        pub enum ErrorCode {
            $($(#[$doc])* #[serde(rename = $wire)] $variant,)*
        }

        impl ErrorCode {
            /// Every code, in table order (for tables and documents).
            pub const ALL: [ErrorCode; [$(ErrorCode::$variant),*].len()] =
                [$(ErrorCode::$variant),*];

            /// The protocol string, e.g. `sandbox_timeout`.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(Self::$variant => $wire,)*
                }
            }

            /// The code for a protocol string, if it is one of ours.
            pub fn parse(code: &str) -> Option<ErrorCode> {
                match code {
                    $($wire => Some(Self::$variant),)*
                    _ => None,
                }
            }

            /// Codes only the runtime may give as a verdict about a sandbox,
            /// a pack or a run's limits. A pack returning one of these is
            /// rewritten (see [`crate::run::outcome`]) so a host never mistakes it
            /// for ours.
            pub fn is_reserved(self) -> bool {
                match self {
                    $(Self::$variant => error_codes!(@reserved $who),)*
                }
            }
        }
    };
    (@reserved reserved) => { true };
    (@reserved shared) => { false };
}

error_codes! {
    /// The pack touched a host facility outside its sandbox (detected before it ran).
    SandboxEscapeAttempt = "sandbox_escape_attempt", reserved;
    /// The pack imports or calls a host capability that was not granted.
    SandboxCapabilityDenied = "sandbox_capability_denied", reserved;
    /// Linear memory (or a table) grew past the cap, or an out-of-bounds access.
    SandboxMemoryExceeded = "sandbox_memory_exceeded", reserved;
    /// Fuel or wall clock ran out.
    SandboxTimeout = "sandbox_timeout", reserved;
    /// Anything else that went wrong inside the sandbox.
    SandboxInvocationError = "sandbox_invocation_error", reserved;
    /// The manifest or the pack layout is invalid.
    PackValidationFailed = "pack_validation_failed", reserved;
    /// The entry's sha256 does not match the manifest.
    PackIntegrityMismatch = "pack_integrity_mismatch", reserved;
    /// The pack's signature is invalid.
    PackSignatureInvalid = "pack_signature_invalid", reserved;
    /// A new version of an approved pack requests more than the approved one.
    PackCapabilityEscalation = "pack_capability_escalation", reserved;
    /// A pack's version is lower than the approved one (a rollback) and the
    /// operator did not allow it.
    PackVersionRollback = "pack_version_rollback", reserved;
    /// The pack's runtime language or format is not supported here.
    UnsupportedRuntime = "unsupported_runtime", reserved;
    /// A WASM ABI v1 core module reports an ABI version this runtime does
    /// not support (RFC 0008).
    UnsupportedAbiVersion = "unsupported_abi_version", reserved;
    /// Authorization denied.
    Forbidden = "forbidden", shared;
    /// No such thing for this caller.
    NotFound = "not_found", shared;
    /// Too many calls; retry later.
    RateLimited = "rate_limited", shared;
    /// Malformed input.
    ValidationError = "validation_error", shared;
    /// Egress refused by policy or the SSRF guard.
    EgressDenied = "egress_denied", shared;
    /// A run budget would be exceeded.
    BudgetExhausted = "budget_exhausted", reserved;
    /// The pack's own agent loop ran too many rounds.
    LoopLimitExceeded = "loop_limit_exceeded", reserved;
    /// The run's wall clock ran out.
    RunTimeout = "run_timeout", reserved;
    /// A bug or an unexpected condition in the host.
    InternalError = "internal_error", reserved;
    /// The same idempotency key was used with different arguments.
    IdempotencyKeyMismatch = "idempotency_key_mismatch", shared;
    /// Another execution is performing this effect right now.
    IdempotencyInFlight = "idempotency_in_flight", shared;
    /// A tool's result is larger than the cap.
    ToolResultTooLarge = "tool_result_too_large", shared;
    /// One invocation made more effectful calls than the effect store
    /// records for one invocation (`effects.maxRecordsPerInvocation`).
    EffectRecordsExceeded = "effect_records_exceeded", shared;
    /// One invocation's effect records would hold more result bytes than
    /// the store keeps for one invocation
    /// (`effects.maxRecordBytesPerInvocation`).
    EffectRecordBytesExceeded = "effect_record_bytes_exceeded", shared;
    /// An effect was sent but never answered; it is not re-fired automatically.
    EffectOutcomeUnknown = "effect_outcome_unknown", shared;
    /// The effect store is full (a bounded in-memory store at its
    /// capacity): the claim, ledger or record was not written, so nothing
    /// that needed it ran.
    EffectStoreFull = "effect_store_full", reserved;
    /// Node-pack tools nested deeper than `effects.maxToolDepth`.
    ToolDepthExceeded = "tool_depth_exceeded", shared;
    /// An upstream service failed or did not answer (retryable).
    UpstreamUnavailable = "upstream_unavailable", shared;
    /// An MCP server answered with a JSON-RPC error.
    McpError = "mcp_error", shared;
    /// No protocol revision in common with a peer.
    InteropVersionUnsupported = "interop_version_unsupported", shared;
    /// One MCP result message exceeded the server's `maxResultBytes`.
    McpResultTooLarge = "mcp_result_too_large", shared;
    /// A node failed with a code of its own (the default for pack errors).
    NodeFailed = "node_failed", shared;
    /// A secret the node declares is not provided for this invocation (not
    /// configured, not granted to the pack, no value for the tenant); the
    /// node did not run.
    CredentialUnavailable = "credential_unavailable", reserved;
    /// A downloaded pack archive does not match the integrity the registry
    /// published for it (checked before unpacking).
    PackIntegrityFailure = "pack_integrity_failure", reserved;
    /// A pack's `runtime.requires[]` names a primitive the operator does
    /// not grant it.
    PackRuntimeRequirementUnmet = "pack_runtime_requirement_unmet", reserved;
    /// The manifest uses a value outside the protocol's closed vocabulary
    /// (e.g. an unknown `runtime.requires[]` token).
    InvalidManifest = "invalid_manifest", reserved;
    /// The registry has no such pack version.
    PackVersionNotFound = "pack_version_not_found", shared;
    /// The pack is of a kind this host does not run (`workflow-chain`,
    /// `connection`, `prompt`, ...): verified, but nothing here executes it.
    UnsupportedPackKind = "unsupported_pack_kind", reserved;
    /// A pack archive is larger than a cap: too many entries, an entry
    /// too large, or too many bytes once decompressed.
    PackTooLarge = "pack_too_large", reserved;
    /// A pack archive holds something a pack may not: a link, a device, an
    /// absolute or climbing path, a path too long to unpack.
    PackArchiveInvalid = "pack_archive_invalid", reserved;
    /// A pack archive's bytes are damaged: not gzip, not tar, a gzip
    /// stream cut short or whose trailer (CRC-32, length) does not match,
    /// bytes after its end.
    PackArchiveCorrupt = "pack_archive_corrupt", reserved;
    /// A node type id is outside `[A-Za-z0-9._-]{1,128}`.
    InvalidTypeId = "invalid_type_id", reserved;
    /// A registry document (discovery, index, key) is larger than the
    /// client reads.
    RegistryDocumentTooLarge = "registry_document_too_large", shared;
    /// A JavaScript pack could not be built into a component (its code
    /// does not parse, imports what it may not, exports no declared node,
    /// or its top-level code failed): `details.reason` says which.
    PackBuildFailed = "pack_build_failed", reserved;
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::ErrorCode;

    /// The wire string is the variant's name in snake case, as the
    /// protocol spells every code.
    fn snake(variant: &str) -> String {
        let mut out = String::new();
        for c in variant.chars() {
            if c.is_ascii_uppercase() {
                if !out.is_empty() {
                    out.push('_');
                }
                out.push(c.to_ascii_lowercase());
            } else {
                out.push(c);
            }
        }
        out
    }

    #[test]
    fn every_code_round_trips_through_its_wire_string() {
        for code in ErrorCode::ALL {
            let wire = code.as_str();
            assert_eq!(wire, snake(&format!("{code:?}")), "{code:?}");
            assert_eq!(code.to_string(), wire);
            assert_eq!(ErrorCode::parse(wire), Some(code), "{wire}");
            let json = serde_json::to_value(code).expect("serializes");
            assert_eq!(json, serde_json::Value::from(wire));
            let back: ErrorCode = serde_json::from_value(json).expect("deserializes");
            assert_eq!(back, code);
        }
        assert_eq!(ErrorCode::parse("Sandbox_Timeout"), None);
        assert_eq!(ErrorCode::parse(""), None);
    }

    #[test]
    fn codes_are_unique() {
        let wires: std::collections::BTreeSet<&str> =
            ErrorCode::ALL.iter().map(|c| c.as_str()).collect();
        assert_eq!(wires.len(), ErrorCode::ALL.len());
    }
}
