//! What a signature covers: the RFC 8785 canonical bytes of `pack.json`
//! ([`signed_bytes`]) and the name they are judged for ([`signed_name`]).
//! Both refuse a manifest the canonical form cannot represent exactly.

use crate::error::LoadError;

/// The bytes that are signed: the RFC 8785 canonical JSON of `pack.json`.
/// A manifest the canonical form cannot represent exactly (a repeated
/// member, an unsafe or inexact number, a lone surrogate:
/// [`crate::json::ijson`]) has no such bytes and is refused.
pub fn signed_bytes(manifest: &[u8]) -> Result<Vec<u8>, String> {
    Ok(crate::json::jcs::canonicalize(&signable(manifest)?).into_bytes())
}

/// `pack.json` parsed, if the canonical form can represent it exactly.
pub(crate) fn signable(manifest: &[u8]) -> Result<serde_json::Value, String> {
    crate::json::ijson::check(manifest).map_err(|f| {
        format!(
            "pack.json cannot be signed: {} at {}: {}",
            f.violation.reason(),
            f.path,
            f.message
        )
    })?;
    serde_json::from_slice(manifest).map_err(|e| format!("pack.json is not JSON: {e}"))
}

/// The name a `pack.json` declares, read for the signature check only:
/// the bytes must be representable exactly by the canonical form
/// ([`crate::json::ijson`]: no repeated member, so there is one `name`) and a
/// JSON object whose `name` is a valid pack name. Nothing else in the
/// manifest is judged here: what the pack is and whether it can run are
/// decided after its provenance ([`crate::manifest::runnable`]).
pub fn signed_name(manifest: &[u8]) -> Result<String, LoadError> {
    crate::json::ijson::check(manifest).map_err(|f| LoadError::NotCanonical {
        path: f.path,
        reason: f.violation.reason(),
        message: f.message,
    })?;
    let v: serde_json::Value = serde_json::from_slice(manifest)
        .map_err(|e| LoadError::validation("$", format!("pack.json is not valid JSON: {e}")))?;
    match v.get("name") {
        Some(serde_json::Value::String(n)) if crate::manifest::valid_name(n) => Ok(n.clone()),
        Some(serde_json::Value::String(n)) => Err(LoadError::validation(
            "$.name",
            format!(
                "`{}` must be lowercase letters, digits and `-._@/`",
                &n[..n.floor_char_boundary(80)]
            ),
        )),
        Some(_) => Err(LoadError::validation("$.name", "must be a string")),
        None if v.is_object() => Err(LoadError::validation("$.name", "is required")),
        None => Err(LoadError::validation(
            "$",
            "pack.json must be a JSON object",
        )),
    }
}
