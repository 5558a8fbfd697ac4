//! The earlier signature format, `pack.sig` next to `pack.json`: a JSON
//! document naming the key and carrying a base64 Ed25519 signature over
//! the canonical form ([`super::signed::signed_bytes`]). Still verified,
//! with a warning, until packs are re-signed in the protocol's format
//! ([`super::protocol`]).

use base64::Engine as _;
use serde::{Deserialize, Serialize};

/// The file, next to `pack.json`, that carries the signature.
pub const SIG_FILE: &str = "pack.sig";
/// The only algorithm supported.
pub const ALGORITHM: &str = "ed25519";

/// `pack.sig`: `{"algorithm":"ed25519","keyId":…,"signature":<base64>}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PackSig {
    /// Always `ed25519`.
    pub algorithm: String,
    /// The id of the key in the operator's `[trust.keys]`.
    pub key_id: String,
    /// Standard base64 of the 64-byte signature.
    pub signature: String,
}

/// Signs `manifest` (raw `pack.json`) with the 32-byte Ed25519 secret
/// `seed`; returns the `pack.sig` document.
pub fn sign(manifest: &[u8], seed: &[u8; 32], key_id: &str) -> Result<PackSig, String> {
    use ed25519_dalek::Signer;
    let sk = ed25519_dalek::SigningKey::from_bytes(seed);
    let msg = super::signed::signed_bytes(manifest)?;
    let sig = sk.sign(&msg);
    Ok(PackSig {
        algorithm: ALGORITHM.to_owned(),
        key_id: key_id.to_owned(),
        signature: base64::engine::general_purpose::STANDARD.encode(sig.to_bytes()),
    })
}
