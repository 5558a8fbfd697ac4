//! The protocol's signature format, as its registry publishes and verifies
//! it (DESIGN.md §8): `pack.json` is the canonical JSON (RFC 8785) of the
//! manifest **with** its `signing` block, and `keys/pack.json.sig` is the
//! raw 64-byte Ed25519 signature over exactly those bytes.
//!
//! The `signing` block names the key: v1 `{"method": "manual",
//! "publicKeyRef": <keyId>, "signatureRef": "keys/pack.json.sig"}` (what
//! the registry serves today, and what [`sign`] writes) or v2 `{"keyId",
//! "scheme": "ed25519-canonical-json"}`. The retired `{"method":
//! "ed25519"}` form signed the whole tarball and is refused.

use serde_json::{Value, json};

/// Where the signature lives, relative to the pack root.
pub const SIG_PATH: &str = "keys/pack.json.sig";
/// The v2 scheme name.
pub const SCHEME: &str = "ed25519-canonical-json";

fn signing(manifest: &[u8]) -> Option<Value> {
    let v: Value = serde_json::from_slice(manifest).ok()?;
    v.get("signing").cloned()
}

/// Whether `pack.json` carries a `signing` block.
pub fn has_signing_block(manifest: &[u8]) -> bool {
    signing(manifest).is_some()
}

/// The key id the `signing` block of `pack.json` names.
pub fn signing_key_id(manifest: &[u8]) -> Result<String, String> {
    let Some(s) = signing(manifest) else {
        return Err(format!(
            "{SIG_PATH} is present but pack.json has no `signing` block naming the key"
        ));
    };
    let text = |k: &str| s.get(k).and_then(Value::as_str).filter(|v| !v.is_empty());
    let id = match (text("method"), text("scheme")) {
        (Some("manual"), None) => text("publicKeyRef").or(text("keyId")),
        (None, Some(SCHEME)) => text("keyId"),
        (Some("ed25519"), _) => {
            return Err(
                "signing.method `ed25519` (a signature over the whole tarball) is a retired \
                 format; the publisher must re-sign the pack"
                    .to_owned(),
            );
        }
        (Some(m), _) => return Err(format!("signing.method `{m}` is not supported")),
        (None, Some(other)) => return Err(format!("signing.scheme `{other}` is not supported")),
        (None, None) => None,
    };
    id.map(str::to_owned)
        .ok_or_else(|| "the `signing` block names no key (`publicKeyRef` or `keyId`)".to_owned())
}

/// The `pack.json` bytes to publish for `manifest` signed by `key_id`: the
/// manifest with its `signing` block set (v1 `manual`, what the registry
/// verifies today), as canonical JSON. Refuses what the canonical form
/// cannot represent exactly ([`crate::json::ijson`]).
pub fn signed_manifest(manifest: &[u8], key_id: &str) -> Result<Vec<u8>, String> {
    let mut v = super::signed::signable(manifest)?;
    let Some(obj) = v.as_object_mut() else {
        return Err("pack.json is not a JSON object".to_owned());
    };
    obj.insert(
        "signing".to_owned(),
        json!({"method": "manual", "publicKeyRef": key_id, "signatureRef": SIG_PATH}),
    );
    Ok(crate::json::jcs::canonicalize(&v).into_bytes())
}

/// Signs `manifest` with the Ed25519 secret `seed` as `key_id`: the
/// `pack.json` bytes to write and the 64-byte signature over them.
pub fn sign(manifest: &[u8], seed: &[u8; 32], key_id: &str) -> Result<(Vec<u8>, [u8; 64]), String> {
    use ed25519_dalek::Signer as _;
    let bytes = signed_manifest(manifest, key_id)?;
    let sig = ed25519_dalek::SigningKey::from_bytes(seed).sign(&bytes);
    Ok((bytes, sig.to_bytes()))
}
