//! Protocol error codes and the typed errors of the runtime.
//!
//! Every failure a caller can see carries an OpenWOP error code
//! ([`ErrorCode`]) so hosts can act on it without parsing messages.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// OpenWOP error codes the runtime emits (exact protocol strings).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// The pack touched a host facility outside its sandbox (detected before it ran).
    SandboxEscapeAttempt,
    /// The pack imports or calls a host capability that was not granted.
    SandboxCapabilityDenied,
    /// Linear memory (or a table) grew past the cap, or an out-of-bounds access.
    SandboxMemoryExceeded,
    /// Fuel or wall clock ran out.
    SandboxTimeout,
    /// Anything else that went wrong inside the sandbox.
    SandboxInvocationError,
    /// The manifest or the pack layout is invalid.
    PackValidationFailed,
    /// The entry's sha256 does not match the manifest.
    PackIntegrityMismatch,
    /// The pack's signature is invalid.
    PackSignatureInvalid,
    /// A new version of an approved pack requests more than the approved one.
    PackCapabilityEscalation,
    /// A pack's version is lower than the approved one (a rollback) and the
    /// operator did not allow it.
    PackVersionRollback,
    /// The pack's runtime language or format is not supported here.
    UnsupportedRuntime,
    /// A WASM ABI v1 core module reports an ABI version this runtime does
    /// not support (RFC 0008).
    UnsupportedAbiVersion,
    /// Authorization denied.
    Forbidden,
    /// No such thing for this caller.
    NotFound,
    /// Too many calls; retry later.
    RateLimited,
    /// Malformed input.
    ValidationError,
    /// Egress refused by policy or the SSRF guard.
    EgressDenied,
    /// A run budget would be exceeded.
    BudgetExhausted,
    /// The pack's own agent loop ran too many rounds.
    LoopLimitExceeded,
    /// The run's wall clock ran out.
    RunTimeout,
    /// A bug or an unexpected condition in the host.
    InternalError,
    /// The same idempotency key was used with different arguments.
    IdempotencyKeyMismatch,
    /// Another execution is performing this effect right now.
    IdempotencyInFlight,
    /// A tool's result is larger than the cap.
    ToolResultTooLarge,
    /// One invocation made more effectful calls than the effect store
    /// records for one invocation (`effects.maxRecordsPerInvocation`).
    EffectRecordsExceeded,
    /// One invocation's effect records would hold more result bytes than
    /// the store keeps for one invocation
    /// (`effects.maxRecordBytesPerInvocation`).
    EffectRecordBytesExceeded,
    /// An effect was sent but never answered; it is not re-fired automatically.
    EffectOutcomeUnknown,
    /// Node-pack tools nested deeper than `effects.maxToolDepth`.
    ToolDepthExceeded,
    /// An upstream service failed or did not answer (retryable).
    UpstreamUnavailable,
    /// An MCP server answered with a JSON-RPC error.
    McpError,
    /// No protocol revision in common with a peer.
    InteropVersionUnsupported,
    /// One MCP result message exceeded the server's `maxResultBytes`.
    McpResultTooLarge,
    /// A node failed with a code of its own (the default for pack errors).
    NodeFailed,
    /// A secret the node declares is not provided for this invocation (not
    /// configured, not granted to the pack, no value for the tenant); the
    /// node did not run.
    CredentialUnavailable,
    /// A downloaded pack archive does not match the integrity the registry
    /// published for it (checked before unpacking).
    PackIntegrityFailure,
    /// A pack's `runtime.requires[]` names a primitive the operator does
    /// not grant it.
    PackRuntimeRequirementUnmet,
    /// The manifest uses a value outside the protocol's closed vocabulary
    /// (e.g. an unknown `runtime.requires[]` token).
    InvalidManifest,
    /// The registry has no such pack version.
    PackVersionNotFound,
    /// The pack is of a kind this host does not run (`workflow-chain`,
    /// `connection`, `prompt`, ...): verified, but nothing here executes it.
    UnsupportedPackKind,
    /// A pack archive is larger than a cap: too many entries, an entry
    /// too large, or too many bytes once decompressed.
    PackTooLarge,
    /// A pack archive holds something a pack may not: a link, a device, an
    /// absolute or climbing path, a path too long to unpack.
    PackArchiveInvalid,
    /// A pack archive's bytes are damaged: not gzip, not tar, a gzip
    /// stream cut short or whose trailer (CRC-32, length) does not match,
    /// bytes after its end.
    PackArchiveCorrupt,
    /// A node type id is outside `[A-Za-z0-9._-]{1,128}`.
    InvalidTypeId,
    /// A registry document (discovery, index, key) is larger than the
    /// client reads.
    RegistryDocumentTooLarge,
    /// A JavaScript pack could not be built into a component (its code
    /// does not parse, imports what it may not, exports no declared node,
    /// or its top-level code failed): `details.reason` says which.
    PackBuildFailed,
}

impl ErrorCode {
    /// The protocol string, e.g. `sandbox_timeout`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::SandboxEscapeAttempt => "sandbox_escape_attempt",
            Self::SandboxCapabilityDenied => "sandbox_capability_denied",
            Self::SandboxMemoryExceeded => "sandbox_memory_exceeded",
            Self::SandboxTimeout => "sandbox_timeout",
            Self::SandboxInvocationError => "sandbox_invocation_error",
            Self::PackValidationFailed => "pack_validation_failed",
            Self::PackIntegrityMismatch => "pack_integrity_mismatch",
            Self::PackSignatureInvalid => "pack_signature_invalid",
            Self::PackCapabilityEscalation => "pack_capability_escalation",
            Self::PackVersionRollback => "pack_version_rollback",
            Self::UnsupportedRuntime => "unsupported_runtime",
            Self::UnsupportedAbiVersion => "unsupported_abi_version",
            Self::Forbidden => "forbidden",
            Self::NotFound => "not_found",
            Self::RateLimited => "rate_limited",
            Self::ValidationError => "validation_error",
            Self::EgressDenied => "egress_denied",
            Self::BudgetExhausted => "budget_exhausted",
            Self::LoopLimitExceeded => "loop_limit_exceeded",
            Self::RunTimeout => "run_timeout",
            Self::InternalError => "internal_error",
            Self::IdempotencyKeyMismatch => "idempotency_key_mismatch",
            Self::IdempotencyInFlight => "idempotency_in_flight",
            Self::ToolResultTooLarge => "tool_result_too_large",
            Self::EffectRecordsExceeded => "effect_records_exceeded",
            Self::EffectRecordBytesExceeded => "effect_record_bytes_exceeded",
            Self::EffectOutcomeUnknown => "effect_outcome_unknown",
            Self::ToolDepthExceeded => "tool_depth_exceeded",
            Self::UpstreamUnavailable => "upstream_unavailable",
            Self::McpError => "mcp_error",
            Self::InteropVersionUnsupported => "interop_version_unsupported",
            Self::McpResultTooLarge => "mcp_result_too_large",
            Self::NodeFailed => "node_failed",
            Self::CredentialUnavailable => "credential_unavailable",
            Self::PackIntegrityFailure => "pack_integrity_failure",
            Self::PackRuntimeRequirementUnmet => "pack_runtime_requirement_unmet",
            Self::InvalidManifest => "invalid_manifest",
            Self::PackVersionNotFound => "pack_version_not_found",
            Self::UnsupportedPackKind => "unsupported_pack_kind",
            Self::PackTooLarge => "pack_too_large",
            Self::PackArchiveInvalid => "pack_archive_invalid",
            Self::PackArchiveCorrupt => "pack_archive_corrupt",
            Self::InvalidTypeId => "invalid_type_id",
            Self::RegistryDocumentTooLarge => "registry_document_too_large",
            Self::PackBuildFailed => "pack_build_failed",
        }
    }

    /// Every code, in declaration order (for tables and documents).
    pub const ALL: [ErrorCode; 45] = [
        Self::SandboxEscapeAttempt,
        Self::SandboxCapabilityDenied,
        Self::SandboxMemoryExceeded,
        Self::SandboxTimeout,
        Self::SandboxInvocationError,
        Self::PackValidationFailed,
        Self::PackIntegrityMismatch,
        Self::PackSignatureInvalid,
        Self::PackCapabilityEscalation,
        Self::PackVersionRollback,
        Self::UnsupportedRuntime,
        Self::UnsupportedAbiVersion,
        Self::Forbidden,
        Self::NotFound,
        Self::RateLimited,
        Self::ValidationError,
        Self::EgressDenied,
        Self::BudgetExhausted,
        Self::LoopLimitExceeded,
        Self::RunTimeout,
        Self::InternalError,
        Self::IdempotencyKeyMismatch,
        Self::IdempotencyInFlight,
        Self::ToolResultTooLarge,
        Self::EffectRecordsExceeded,
        Self::EffectRecordBytesExceeded,
        Self::EffectOutcomeUnknown,
        Self::ToolDepthExceeded,
        Self::UpstreamUnavailable,
        Self::McpError,
        Self::InteropVersionUnsupported,
        Self::McpResultTooLarge,
        Self::NodeFailed,
        Self::CredentialUnavailable,
        Self::PackIntegrityFailure,
        Self::PackRuntimeRequirementUnmet,
        Self::InvalidManifest,
        Self::PackVersionNotFound,
        Self::UnsupportedPackKind,
        Self::PackTooLarge,
        Self::PackArchiveInvalid,
        Self::PackArchiveCorrupt,
        Self::InvalidTypeId,
        Self::RegistryDocumentTooLarge,
        Self::PackBuildFailed,
    ];

    /// The code for a protocol string, if it is one of ours.
    pub fn parse(code: &str) -> Option<ErrorCode> {
        Self::ALL.into_iter().find(|c| c.as_str() == code)
    }

    /// Codes only the runtime may give as a verdict about a sandbox, a
    /// pack or a run's limits. A pack returning one of these is rewritten
    /// (see [`crate::outcome`]) so a host never mistakes it for ours.
    pub fn is_reserved(self) -> bool {
        matches!(
            self,
            Self::SandboxEscapeAttempt
                | Self::SandboxCapabilityDenied
                | Self::SandboxMemoryExceeded
                | Self::SandboxTimeout
                | Self::SandboxInvocationError
                | Self::PackValidationFailed
                | Self::PackIntegrityMismatch
                | Self::PackSignatureInvalid
                | Self::PackCapabilityEscalation
                | Self::PackVersionRollback
                | Self::UnsupportedRuntime
                | Self::UnsupportedAbiVersion
                | Self::BudgetExhausted
                | Self::LoopLimitExceeded
                | Self::RunTimeout
                | Self::InternalError
                | Self::CredentialUnavailable
                | Self::PackIntegrityFailure
                | Self::PackRuntimeRequirementUnmet
                | Self::InvalidManifest
                | Self::UnsupportedPackKind
                | Self::PackTooLarge
                | Self::PackArchiveInvalid
                | Self::PackArchiveCorrupt
                | Self::InvalidTypeId
                | Self::PackBuildFailed
        )
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

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

/// Why a pack could not be loaded. Each variant maps to one protocol code.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The manifest or layout is invalid; `path` is the JSON path (or file) at fault.
    #[error("pack_validation_failed at {path}: {message}")]
    Validation {
        /// JSON path of the offending field (e.g. `$.nodes[0].typeId`), or a file name.
        path: String,
        /// What is wrong and how to fix it.
        message: String,
    },
    /// A pack file is not a regular file, is larger than its cap, or
    /// cannot be read (`crate::packfile`).
    #[error("pack_validation_failed at {path}: {message}")]
    PackFile {
        /// JSON path of the field naming the file (e.g. `$.runtime.entry`),
        /// `$` for `pack.json`, or the file itself.
        path: String,
        /// The file, relative to the pack directory (or as given).
        file: String,
        /// `details.reason`: `missing`, `symlink`, `directory`, `fifo`,
        /// `socket`, `device`, `not-regular`, `too-large`, `unreadable`.
        reason: &'static str,
        /// The size cap, for `too-large`.
        limit: Option<u64>,
        /// The size seen, for `too-large`.
        observed: Option<u64>,
        /// What is wrong and how to fix it.
        message: String,
    },
    /// `pack.json` is JSON the canonical form (RFC 8785, over I-JSON)
    /// cannot represent exactly: a repeated member name, a number it would
    /// change, a lone surrogate (`crate::ijson`). Refused before the
    /// signature is verified.
    #[error("pack_validation_failed at {path}: {message}")]
    NotCanonical {
        /// JSON path of the offending value.
        path: String,
        /// `details.reason`: `duplicate-member`, `unsafe-integer`,
        /// `inexact-number`, `lone-surrogate`.
        reason: &'static str,
        /// What is wrong and how to fix it.
        message: String,
    },
    /// Two packs in one packs directory declare the same name; both are
    /// refused.
    #[error(
        "pack_validation_failed: pack name `{name}` is declared by {} packs in this directory ({}); none of them is loaded: give each pack its own name or remove all but one",
        .paths.len(), .paths.join(", ")
    )]
    DuplicateName {
        /// The declared name.
        name: String,
        /// Every pack declaring it.
        paths: Vec<String>,
    },
    /// `runtime.requires[]` names a token outside the protocol's closed
    /// vocabulary.
    #[error("invalid_manifest at {path}: {message}")]
    InvalidManifest {
        /// JSON path of the offending value.
        path: String,
        /// What is wrong.
        message: String,
    },
    /// `runtime.requires[]` names primitives the operator does not grant.
    #[error(
        "pack_runtime_requirement_unmet: {manifest} requires {} which the operator does not grant: {advice}",
        .unmet.join(", ")
    )]
    RequirementUnmet {
        /// The primitives not granted.
        unmet: Vec<String>,
        /// `name@version`.
        manifest: String,
        /// What the operator can do.
        advice: String,
    },
    /// The entry's sha256 does not match `x-wop.sha256`.
    #[error("pack_integrity_mismatch: {entry} has sha256 {actual}, the manifest says {expected}")]
    Integrity {
        /// The entry file.
        entry: String,
        /// The digest in the manifest.
        expected: String,
        /// The digest of the file on disk.
        actual: String,
    },
    /// The signature is missing (when required), malformed, by an unknown
    /// key, by a key not allowed for this name, or does not verify.
    #[error("pack_signature_invalid ({reason}): {message}")]
    Signature {
        /// `missing`, `malformed`, `unknown-key`, `key-not-allowed`, `bad-signature`.
        reason: &'static str,
        /// The key id named by `pack.sig` (never the key).
        key_id: Option<String>,
        /// What is wrong.
        message: String,
    },
    /// A new version of an approved pack requests more than the approved one.
    #[error(
        "pack_capability_escalation: pack `{pack}` {version} requests more than the approved {approved_version}: {}; review with `wop diff` and approve this version in the operator policy (`--policy`): `approved = \"{version}\"` under {}",
        .additions.join(", "), packs_table(.pack)
    )]
    Escalation {
        /// The pack name.
        pack: String,
        /// The version being loaded.
        version: String,
        /// The approved version.
        approved_version: String,
        /// What it requests beyond the approved version (`kind: item`).
        additions: Vec<String>,
    },
    /// The pack's version is lower than the approved one.
    #[error(
        "pack_version_rollback: pack `{pack}` {version} is older than the approved {approved_version}; load the approved version, or allow a rollback in the operator policy (`--policy`): `allowRollback = true` under {}",
        packs_table(.pack)
    )]
    Rollback {
        /// The pack name.
        pack: String,
        /// The version being loaded.
        version: String,
        /// The approved version.
        approved_version: String,
    },
    /// The runtime language/format is not supported.
    #[error("unsupported_runtime: {0}")]
    Unsupported(String),
    /// The pack's `kind` is not one this host runs (`crate::runnable`).
    #[error("unsupported_pack_kind: {message}")]
    UnsupportedKind {
        /// The kind the manifest declares.
        kind: String,
        /// What is wrong and what to do.
        message: String,
    },
    /// A pack archive was refused (`crate::archive`): too large
    /// (`pack_too_large`), holding what a pack may not
    /// (`pack_archive_invalid`) or damaged (`pack_archive_corrupt`).
    #[error("{code}: {message}")]
    Archive {
        /// The code.
        code: ErrorCode,
        /// The archive, as given.
        file: String,
        /// `details.reason` (e.g. `too-many-entries`, `path-too-long`,
        /// `gzip-trailer`).
        reason: &'static str,
        /// The cap, when a cap was passed.
        limit: Option<u64>,
        /// What was seen, when a cap was passed.
        observed: Option<u64>,
        /// What is wrong.
        message: String,
    },
    /// A JavaScript pack's component could not be built (`wop-js`).
    #[error("pack_build_failed ({reason}): {message}")]
    Build {
        /// The build's own code (`js_syntax_error`, `js_import_not_allowed`,
        /// `js_node_not_exported`, `js_module_failed`, `js_build_limit`, …).
        reason: String,
        /// What, and where in the source.
        message: String,
    },
    /// A node type id is not `[A-Za-z0-9._-]{1,128}`.
    #[error("invalid_type_id at {path}: {message}")]
    TypeId {
        /// JSON path of the id (`$.nodes[3].typeId`).
        path: String,
        /// What is wrong.
        message: String,
    },
    /// The pack imports a host facility that would escape the sandbox.
    #[error(
        "sandbox_escape_attempt ({kind}): the pack imports `{import}`, which is never granted to packs"
    )]
    Escape {
        /// `host-fs-escape`, `host-env-leak`, `network-escape` or `host-process-escape`.
        kind: &'static str,
        /// The import name.
        import: String,
    },
    /// The pack imports a capability that was not granted.
    #[error("sandbox_capability_denied: the pack imports `{import}`{}", grant_hint(.grant, .pack.as_deref()))]
    CapabilityDenied {
        /// The import name.
        import: String,
        /// The grant that would allow it, if there is one.
        grant: Option<String>,
        /// The pack the operator would grant it to (its policy table),
        /// when it is known.
        pack: Option<String>,
    },
    /// The compiled component is not a valid pack (bad wasm, missing exports,
    /// or `describe()` failed).
    #[error("{code}: {message}")]
    Component {
        /// Protocol code (`pack_validation_failed` or a sandbox code from describe()).
        code: ErrorCode,
        /// What went wrong.
        message: String,
    },
    /// The pack declares more than a limit allows (a table whose declared
    /// size is above `limits.tableElements`): refused at load with the
    /// limit's own code and cause.
    #[error("{code}: {message}")]
    Limit {
        /// The limit's code (e.g. `sandbox_memory_exceeded`).
        code: ErrorCode,
        /// `details.cause`, e.g. `table-size`.
        cause: &'static str,
        /// The limit.
        limit: u64,
        /// What the pack declared.
        observed: u64,
        /// What is wrong.
        message: String,
    },
    /// Host-side I/O failed (cache directory, pack directory).
    #[error("internal_error: {0}")]
    Io(String),
    /// A core module's `openwop_abi_version()` is not a supported version.
    #[error(
        "unsupported_abi_version: the module reports WASM ABI version {version}; this runtime supports {supported:?}"
    )]
    AbiVersion {
        /// What `openwop_abi_version()` returned.
        version: i64,
        /// The versions this runtime supports.
        supported: Vec<u32>,
    },
}

fn grant_hint(grant: &Option<String>, pack: Option<&str>) -> String {
    match (grant, pack) {
        (Some(g), Some(p)) => format!(
            " but the operator did not grant `{g}` to this pack (request it in pack.json `x-wop.capabilities`, and grant it in the operator policy — the TOML file given with `--policy` — as `capabilities = [\"{g}\"]` under {})",
            packs_table(p)
        ),
        (Some(g), None) => format!(
            " but `{g}` is not granted: a bare .wasm module gets the base capabilities only (to have `{g}`, ship it as a pack directory whose pack.json requests it, and grant it in the operator policy given with `--policy`)"
        ),
        (None, _) => " which this runtime does not provide to packs".to_owned(),
    }
}

/// The operator policy's table for `pack`, as it is written in TOML:
/// `[packs.my-pack]`, or `[packs."acme.fetch"]` when the name is not a
/// bare TOML key (dots, `@`, `/`).
pub fn packs_table(pack: &str) -> String {
    let bare = !pack.is_empty()
        && pack
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if bare {
        format!("[packs.{pack}]")
    } else {
        let quoted = pack.replace('\\', "\\\\").replace('"', "\\\"");
        format!("[packs.\"{quoted}\"]")
    }
}

impl LoadError {
    /// The protocol code of this error.
    pub fn code(&self) -> ErrorCode {
        match self {
            Self::Validation { .. }
            | Self::PackFile { .. }
            | Self::NotCanonical { .. }
            | Self::DuplicateName { .. } => ErrorCode::PackValidationFailed,
            Self::Rollback { .. } => ErrorCode::PackVersionRollback,
            Self::Integrity { .. } => ErrorCode::PackIntegrityMismatch,
            Self::Signature { .. } => ErrorCode::PackSignatureInvalid,
            Self::Escalation { .. } => ErrorCode::PackCapabilityEscalation,
            Self::Unsupported(_) => ErrorCode::UnsupportedRuntime,
            Self::UnsupportedKind { .. } => ErrorCode::UnsupportedPackKind,
            Self::Archive { code, .. } => *code,
            Self::TypeId { .. } => ErrorCode::InvalidTypeId,
            Self::Build { .. } => ErrorCode::PackBuildFailed,
            Self::InvalidManifest { .. } => ErrorCode::InvalidManifest,
            Self::RequirementUnmet { .. } => ErrorCode::PackRuntimeRequirementUnmet,
            Self::Escape { .. } => ErrorCode::SandboxEscapeAttempt,
            Self::CapabilityDenied { .. } => ErrorCode::SandboxCapabilityDenied,
            Self::Component { code, .. } | Self::Limit { code, .. } => *code,
            Self::Io(_) => ErrorCode::InternalError,
            Self::AbiVersion { .. } => ErrorCode::UnsupportedAbiVersion,
        }
    }

    /// Protocol `details` for this error.
    pub fn details(&self) -> Map<String, Value> {
        match self {
            Self::Validation { path, .. } => crate::details! {"path" => path},
            Self::Build { reason, .. } => crate::details! {"reason" => reason},
            Self::PackFile {
                path,
                file,
                reason,
                limit,
                observed,
                ..
            } => {
                let mut d = crate::details! {"path" => path, "file" => file, "reason" => reason};
                if let (Some(l), Some(o)) = (limit, observed) {
                    d.insert("limit".to_owned(), Value::from(*l));
                    d.insert("observed".to_owned(), Value::from(*o));
                }
                d
            }
            Self::NotCanonical { path, reason, .. } => {
                crate::details! {"path" => path, "reason" => reason}
            }
            Self::InvalidManifest { path, .. } | Self::TypeId { path, .. } => {
                crate::details! {"path" => path}
            }
            Self::UnsupportedKind { kind, .. } => crate::details! {"kind" => kind},
            Self::Archive {
                file,
                reason,
                limit,
                observed,
                ..
            } => {
                let mut d = crate::details! {"file" => file, "reason" => reason};
                if let (Some(l), Some(o)) = (limit, observed) {
                    d.insert("limit".to_owned(), Value::from(*l));
                    d.insert("observed".to_owned(), Value::from(*o));
                }
                d
            }
            Self::RequirementUnmet {
                unmet,
                manifest,
                advice,
            } => crate::details! {"unmet" => unmet, "manifest" => manifest, "advice" => advice},
            Self::DuplicateName { name, paths } => {
                crate::details! {"reason" => "duplicate-name", "name" => name, "paths" => paths}
            }
            Self::Rollback {
                pack,
                version,
                approved_version,
            } => crate::details! {
                "pack" => pack, "version" => version, "approvedVersion" => approved_version
            },
            Self::Integrity {
                entry,
                expected,
                actual,
            } => crate::details! {"entry" => entry, "expected" => expected, "actual" => actual},
            Self::Escape { kind, import } => {
                crate::details! {"escapeKind" => kind, "import" => import}
            }
            Self::Signature { reason, key_id, .. } => match key_id {
                Some(k) => crate::details! {"reason" => reason, "keyId" => k},
                None => crate::details! {"reason" => reason},
            },
            Self::Escalation {
                pack,
                version,
                approved_version,
                additions,
            } => crate::details! {
                "pack" => pack, "version" => version,
                "approvedVersion" => approved_version, "additions" => additions
            },
            Self::CapabilityDenied { import, pack, .. } => match pack {
                Some(p) => crate::details! {"requestedCapability" => import, "pack" => p},
                None => crate::details! {"requestedCapability" => import},
            },
            Self::AbiVersion { version, supported } => {
                crate::details! {"abiVersion" => version, "supportedAbiVersions" => supported}
            }
            Self::Limit {
                cause,
                limit,
                observed,
                ..
            } => crate::details! {"cause" => cause, "limit" => limit, "observed" => observed},
            Self::Unsupported(_) | Self::Component { .. } | Self::Io(_) => Map::new(),
        }
    }

    /// This error as a runtime-sourced [`NodeError`].
    pub fn to_node_error(&self) -> NodeError {
        NodeError::runtime(self.code(), self.to_string(), self.details())
    }

    /// A validation error at `path` (a JSON path or a file).
    pub fn validation(path: impl Into<String>, message: impl Into<String>) -> Self {
        Self::Validation {
            path: path.into(),
            message: message.into(),
        }
    }
}

/// Errors building a [`crate::Runtime`] or reading a policy.
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

#[cfg(test)]
mod tests {
    use super::packs_table;

    #[test]
    fn packs_table_is_valid_toml_for_every_pack_name() {
        assert_eq!(packs_table("my-pack"), "[packs.my-pack]");
        assert_eq!(packs_table("acme.fetch"), r#"[packs."acme.fetch"]"#);
        assert_eq!(packs_table("@acme/x"), r#"[packs."@acme/x"]"#);
        for name in ["my-pack", "acme.fetch", "@acme/x", "a_b"] {
            let doc = format!("{}\ntools = [\"t\"]\n", packs_table(name));
            let v: toml::Table = toml::from_str(&doc).expect("valid TOML");
            assert!(v["packs"][name]["tools"].is_array(), "{doc}");
        }
    }
}
