//! What can run here: the one place that decides it (decision 0025).
//!
//! It is asked only after provenance is settled (integrity of the archive,
//! the publisher's signature over `pack.json`): a signature says who
//! published the bytes whatever they are, so every kind the protocol's
//! registry publishes verifies, and only then is the pack judged for
//! running. A pack of another kind is `unsupported_pack_kind`; a node pack
//! in a language this host does not sandbox is `unsupported_runtime`.
//!
//! `kind`: the protocol's rule (its `node-pack-manifest` and
//! `registry-version-manifest` schemas, RFC 0107) is that an absent `kind`
//! is `node`, the original executable kind. The registry's node packs
//! carry none in their `pack.json`.

use crate::error::LoadError;
use serde_json::Value;

/// The only kind this host runs.
pub const NODE_KIND: &str = "node";

/// The kinds the protocol defines besides `node` (for messages; any other
/// string is refused the same way).
pub const OTHER_KINDS: &[&str] = &[
    "artifact-type",
    "connection",
    "workflow-chain",
    "prompt",
    "card",
    "form-content",
];

/// The runtime languages this host runs.
pub const LANGUAGES: &[&str] = &["wasm-component", "wasm", "javascript"];

/// The pack's `kind`, by the protocol's rule (absent: `node`).
pub fn kind_of(manifest: &Value) -> Result<&str, LoadError> {
    match manifest.get("kind") {
        None => Ok(NODE_KIND),
        Some(Value::String(s)) => Ok(s),
        Some(_) => Err(LoadError::validation("$.kind", "must be a string")),
    }
}

/// Whether the pack described by `manifest` (parsed `pack.json`) is of a
/// kind and a runtime language this host runs. Judges nothing else: the
/// rest of the manifest is [`crate::manifest::Manifest::parse`]'s.
pub fn judge(manifest: &Value) -> Result<(), LoadError> {
    let kind = kind_of(manifest)?;
    if kind != NODE_KIND {
        let shown = &kind[..kind.floor_char_boundary(40)];
        let what = if OTHER_KINDS.contains(&kind) {
            "a protocol pack kind that carries no node code"
        } else {
            "not a pack kind the protocol defines"
        };
        return Err(LoadError::UnsupportedKind {
            kind: shown.to_owned(),
            message: format!(
                "the pack is of kind `{shown}` ({what}); wop runs only `node` packs (a `kind` that is absent means `node`)"
            ),
        });
    }
    let Some(rt) = manifest.get("runtime") else {
        return Err(LoadError::validation("$.runtime", "is required"));
    };
    match rt.get("language") {
        None => Err(LoadError::validation("$.runtime.language", "is required")),
        Some(Value::String(l)) if LANGUAGES.contains(&l.as_str()) => Ok(()),
        Some(Value::String(l)) => Err(LoadError::Unsupported(unsupported_language(l))),
        Some(_) => Err(LoadError::validation(
            "$.runtime.language",
            "must be a string",
        )),
    }
}

/// Whether `e` is a verdict of [`judge`] about what can run here (as
/// opposed to a broken manifest).
pub fn is_not_runnable(e: &LoadError) -> bool {
    matches!(
        e,
        LoadError::UnsupportedKind { .. } | LoadError::Unsupported(_)
    )
}

/// Why a pack in another runtime language is refused, and what to do.
pub fn unsupported_language(language: &str) -> String {
    let shown = &language[..language.floor_char_boundary(40)];
    let hint = match language {
        "javascript" => {
            "build it as a WebAssembly component with wop's JavaScript SDK (sdk/js), which packs a JavaScript pack into a `wasm-component`"
        }
        "python" => {
            "build it as a WebAssembly component with wop's Python SDK (sdk/python), which packs a Python pack into a `wasm-component`"
        }
        "go" => {
            "compile it to a WebAssembly component (`wasm-component`) or an ABI v1 core module (`wasm`)"
        }
        "remote" => "a remote pack runs on another host; wop runs only packs it can sandbox here",
        _ => "wop runs WebAssembly packs only",
    };
    format!(
        "runtime.language `{shown}` is not supported by wop: it runs `wasm-component` and `wasm` (ABI v1) packs; {hint}"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn code(v: Value) -> Result<(), &'static str> {
        judge(&v).map_err(|e| e.code().as_str())
    }

    #[test]
    fn kinds_and_languages() {
        let rt = json!({"language": "wasm-component", "entry": "x.wasm"});
        assert_eq!(code(json!({"runtime": rt})), Ok(()), "absent kind is node");
        assert_eq!(code(json!({"kind": "node", "runtime": rt})), Ok(()));
        for k in ["workflow-chain", "connection", "prompt", "agents", ""] {
            assert_eq!(
                code(json!({"kind": k, "runtime": rt})),
                Err("unsupported_pack_kind"),
                "{k}"
            );
        }
        assert_eq!(
            code(json!({"kind": 7, "runtime": rt})),
            Err("pack_validation_failed")
        );
        for l in ["remote", "python"] {
            assert_eq!(
                code(json!({"runtime": {"language": l}})),
                Err("unsupported_runtime"),
                "{l}"
            );
        }
        // The registry's JavaScript packs run here (built by wop-js).
        assert_eq!(code(json!({"runtime": {"language": "javascript"}})), Ok(()));
        assert_eq!(code(json!({"kind": "node"})), Err("pack_validation_failed"));
    }
}
