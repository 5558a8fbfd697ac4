//! Judging a pack's signature against the trusted keys ([`verify`]): the
//! verdict ([`TrustVerdict`]) or why it was refused ([`SigFailure`]).

use super::keys::{TrustSection, key_allows, name_matches};
use super::legacy::{ALGORITHM, PackSig, SIG_FILE};
use super::protocol;
use super::signed::signed_bytes;
use crate::error::LoadError;
use base64::Engine as _;
use ed25519_dalek::{Signature, Verifier};
use serde::Serialize;

/// How a pack's provenance was judged.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase", tag = "verdict")]
pub enum TrustVerdict {
    /// No signature and none required.
    Unsigned,
    /// Signed by a trusted key allowed for this name.
    Trusted {
        /// The signer's key id.
        #[serde(rename = "keyId")]
        key_id: String,
        /// Signed in the earlier `pack.sig` format (re-sign with `wop sign`).
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        legacy: bool,
    },
}

impl std::fmt::Display for TrustVerdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Unsigned => f.write_str("unsigned (no signature required)"),
            Self::Trusted {
                key_id,
                legacy: false,
            } => write!(f, "signed by `{key_id}` (trusted)"),
            Self::Trusted {
                key_id,
                legacy: true,
            } => write!(
                f,
                "signed by `{key_id}` (trusted; legacy {SIG_FILE}: re-sign with `wop sign` to write the protocol's keys/pack.json.sig)"
            ),
        }
    }
}

/// Why a signature was refused (`details.reason`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SigFailure {
    /// No `pack.sig`, but the policy requires one.
    Missing,
    /// `pack.sig` is unreadable or not the expected shape.
    Malformed,
    /// The key id is not in `[trust.keys]`.
    UnknownKey,
    /// The key is trusted but not for this pack name.
    KeyNotAllowed,
    /// The signature does not verify (tampered manifest or wrong key).
    Bad,
}

impl SigFailure {
    /// The `details.reason` string.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Missing => "missing",
            Self::Malformed => "malformed",
            Self::UnknownKey => "unknown-key",
            Self::KeyNotAllowed => "key-not-allowed",
            Self::Bad => "bad-signature",
        }
    }
}

fn refuse(reason: SigFailure, key_id: Option<&str>, message: String) -> LoadError {
    LoadError::Signature {
        reason: reason.as_str(),
        key_id: key_id.map(str::to_owned),
        message,
    }
}

/// A pack's signature file, as found next to its `pack.json`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SigFile<'a> {
    /// `keys/pack.json.sig`: the raw 64-byte signature (the protocol's).
    Protocol(&'a [u8]),
    /// `pack.sig`: the earlier JSON document (deprecated).
    Legacy(&'a [u8]),
}

/// Judges a pack's signature. `manifest` is the raw `pack.json`, `sig` its
/// signature file if present, `name` the manifest's (validated) pack name
/// and `required` whether the policy requires a signature for it.
///
/// A signature that is present is always checked, required or not, and so
/// is a `signing` block without one: a pack that claims a provenance it
/// cannot back is refused.
pub fn verify(
    trust: &TrustSection,
    name: &str,
    required: bool,
    manifest: &[u8],
    sig: Option<SigFile<'_>>,
) -> Result<TrustVerdict, LoadError> {
    let (kid, signature, signed, legacy): (String, Vec<u8>, Vec<u8>, bool) = match sig {
        None => {
            if protocol::has_signing_block(manifest) {
                // A retired or unknown `signing` form says so, rather than
                // "no signature file" (the retired `method: ed25519`
                // signed the whole tarball and ships no keys/pack.json.sig).
                if let Err(e) = protocol::signing_key_id(manifest) {
                    return Err(refuse(
                        SigFailure::Malformed,
                        None,
                        format!("pack `{name}`: {e}"),
                    ));
                }
                return Err(refuse(
                    SigFailure::Missing,
                    None,
                    format!(
                        "pack `{name}`'s pack.json has a `signing` block but there is no {}",
                        protocol::SIG_PATH
                    ),
                ));
            }
            return if required {
                Err(refuse(
                    SigFailure::Missing,
                    None,
                    format!(
                        "pack `{name}` is not signed (no {}), and the policy requires a signature",
                        protocol::SIG_PATH
                    ),
                ))
            } else {
                Ok(TrustVerdict::Unsigned)
            };
        }
        Some(SigFile::Protocol(raw)) => {
            let kid = protocol::signing_key_id(manifest)
                .map_err(|e| refuse(SigFailure::Malformed, None, format!("pack `{name}`: {e}")))?;
            // Verified over the exact bytes, as the registry's verifiers do.
            (kid, raw.to_vec(), manifest.to_vec(), false)
        }
        Some(SigFile::Legacy(doc)) => {
            let parsed: PackSig = serde_json::from_slice(doc).map_err(|e| {
                refuse(
                    SigFailure::Malformed,
                    None,
                    format!("{SIG_FILE} is not a signature document: {e}"),
                )
            })?;
            if parsed.algorithm != ALGORITHM {
                return Err(refuse(
                    SigFailure::Malformed,
                    Some(&parsed.key_id),
                    format!(
                        "{SIG_FILE}: algorithm `{}` is not supported (only `{ALGORITHM}`)",
                        parsed.algorithm
                    ),
                ));
            }
            let raw = base64::engine::general_purpose::STANDARD
                .decode(parsed.signature.trim())
                .map_err(|_| {
                    refuse(
                        SigFailure::Bad,
                        Some(&parsed.key_id),
                        format!("{SIG_FILE}: the signature is not base64"),
                    )
                })?;
            let signed = signed_bytes(manifest)
                .map_err(|e| refuse(SigFailure::Bad, Some(&parsed.key_id), e))?;
            (parsed.key_id, raw, signed, true)
        }
    };
    let kid = kid.as_str();
    let Some(key) = trust.keys.get(kid) else {
        return Err(refuse(
            SigFailure::UnknownKey,
            Some(kid),
            format!(
                "pack `{name}` is signed by key `{kid}`, which is not in the policy's [trust.keys]"
            ),
        ));
    };
    if !key_allows(key, name) {
        let why = if key.never.iter().any(|p| name_matches(p, name)) {
            format!(
                "`{name}` is covered by an operator key's pattern, which a registry's key never signs for"
            )
        } else {
            format!("trust.keys.{kid}.packs does not cover `{name}`")
        };
        return Err(refuse(
            SigFailure::KeyNotAllowed,
            Some(kid),
            format!("key `{kid}` is trusted, but not to sign packs named `{name}`: {why}"),
        ));
    }
    let bad = |what: &str| {
        refuse(
            SigFailure::Bad,
            Some(kid),
            format!("the signature of pack `{name}` by key `{kid}` does not verify: {what}"),
        )
    };
    let vk = key.key().map_err(|_| bad("the trusted key is invalid"))?;
    let sig =
        Signature::from_slice(&signature).map_err(|_| bad("the signature is not 64 bytes"))?;
    vk.verify(&signed, &sig)
        .map_err(|_| bad("pack.json was changed after signing, or another key signed it"))?;
    Ok(TrustVerdict::Trusted {
        key_id: kid.to_owned(),
        legacy,
    })
}
