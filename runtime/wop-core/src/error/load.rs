//! Why a pack could not be loaded: one [`LoadError`] variant per cause,
//! each with its protocol code, its message and its `details`.

use super::NodeError;
use super::code::ErrorCode;
use serde_json::{Map, Value};

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
    /// cannot be read (`crate::files::packfile`).
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
    /// change, a lone surrogate (`crate::json::ijson`). Refused before the
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
    /// The pack's `kind` is not one this host runs (`crate::manifest::runnable`).
    #[error("unsupported_pack_kind: {message}")]
    UnsupportedKind {
        /// The kind the manifest declares.
        kind: String,
        /// What is wrong and what to do.
        message: String,
    },
    /// A pack archive was refused (`crate::files::archive`): too large
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
