//! Signed packs in the protocol's format (decision 0021): `pack.json` is
//! the RFC 8785 canonical JSON of the manifest **with** its `signing`
//! block, and `keys/pack.json.sig` is the raw 64-byte Ed25519 signature
//! over exactly those bytes — what the protocol's registry publishes and
//! other hosts verify ([`protocol`]). Keys are trusted by id with the
//! namespaces they may sign (`vendor.acme.*`, [`keys`]); an approved
//! manifest ([`approved`]) and what a new version requests beyond it
//! ([`diff`]) feed the capability-escalation check for upgrades (decision
//! 0009, judged under the policy in [`crate::pack`]). The earlier
//! `pack.sig` format ([`legacy`]) is still verified, with a warning, until
//! packs are re-signed.
//!
//! `pack.json` pins the entry's sha256 (`x-wop.sha256`), so a signature over
//! the manifest covers the code too: a changed manifest fails the
//! signature, a swapped entry fails the integrity check that follows.
//!
//! ```toml
//! [trust]
//! requireSignature = true          # every pack (default false)
//! [trust.keys.acme-2026]
//! publicKey = "<base64 of the 32-byte Ed25519 public key>"
//! packs = ["acme.*"]               # names this key may sign
//!
//! [packs."acme.fetch"]
//! requireSignature = true          # per pack (overrides [trust])
//! approved = "/srv/wop/approved/acme.fetch/pack.json"
//! ```
//!
//! Everything here is pure: the caller reads the files (an approved
//! manifest is read by the one pack-file reader). Nothing here reads the
//! policy as a whole: [`verify()`] takes its `[trust]` section; whether a
//! signature is required for a name is the policy's, judged in
//! [`crate::pack`]. Public keys never appear in errors; key ids do.

pub mod approved;
pub mod diff;
pub mod keys;
pub mod legacy;
pub mod pem;
pub mod protocol;
pub mod signed;
pub mod verify;

pub use approved::read_approved;
pub use keys::{
    TrustSection, TrustedKey, check_pattern, decode_public_key, key_allows, name_matches,
    pattern_meet, public_key_of,
};
pub use legacy::{ALGORITHM, PackSig, SIG_FILE, sign};
pub use signed::{signed_bytes, signed_name};
pub use verify::{SigFailure, SigFile, TrustVerdict, verify};

#[cfg(test)]
mod tests;
