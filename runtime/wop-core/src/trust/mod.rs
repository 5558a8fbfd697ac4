//! Signed packs in the protocol's format (decision 0021): `pack.json` is
//! the RFC 8785 canonical JSON of the manifest **with** its `signing`
//! block, and `keys/pack.json.sig` is the raw 64-byte Ed25519 signature
//! over exactly those bytes — what the protocol's registry publishes and
//! other hosts verify ([`protocol`]). Keys are trusted by id with the
//! namespaces they may sign (`vendor.acme.*`); the capability-escalation
//! check for upgrades (decision 0009). The earlier `pack.sig` format is
//! still verified, with a warning, until packs are re-signed.
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
//! Everything here is pure: the caller reads the files. Public keys never
//! appear in errors; key ids do.

pub mod diff;
pub mod pem;
pub mod protocol;

use crate::error::LoadError;
use crate::manifest::Manifest;
use crate::policy::Policy;
use base64::Engine as _;
use ed25519_dalek::{Signature, Verifier, VerifyingKey};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

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

/// `[trust]`: keys the operator trusts and whether signatures are required.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TrustSection {
    /// Refuse every unsigned pack (per pack: `[packs.<name>] requireSignature`).
    #[serde(default)]
    pub require_signature: bool,
    /// Trusted keys by id.
    #[serde(default)]
    pub keys: BTreeMap<String, TrustedKey>,
    /// What a registry's own keys may sign when trusted with `wop install
    /// --trust-registry`: name patterns as in `keys.*.packs`. Each
    /// registry key signs only the intersection of this and the
    /// `permittedNamespaces` the registry declares for it, and never a
    /// name an operator key's pattern covers. Absent: every name no
    /// operator key covers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub registry_namespaces: Option<Vec<String>>,
}

/// One trusted key.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TrustedKey {
    /// The Ed25519 public key: a PEM SPKI block (what a registry serves at
    /// `/keys/{keyId}.pub`) or standard base64 of the 32 raw bytes.
    #[serde(default)]
    pub public_key: Option<String>,
    /// A file holding the key in either form (e.g. a registry's
    /// `{keyId}.pub`); instead of `publicKey`.
    #[serde(default)]
    pub public_key_file: Option<std::path::PathBuf>,
    /// Pack names this key may sign: exact names, `prefix.*` (e.g.
    /// `acme.*`: every name below `acme.`) or `*`. Empty: none.
    #[serde(default)]
    pub packs: Vec<String>,
    /// Names this key may never sign, whatever `packs` says: for a
    /// registry's key trusted with `wop install --trust-registry`, every
    /// pattern an operator key covers (never set from a policy file).
    #[serde(skip)]
    pub never: Vec<String>,
}

impl TrustSection {
    /// Checks every key and pattern; errors name the key id, never the key.
    pub fn validate(&self) -> Result<(), String> {
        for (id, k) in &self.keys {
            if id.is_empty() {
                return Err("trust.keys: a key id must not be empty".to_owned());
            }
            k.key().map_err(|e| format!("trust.keys.{id}.{e}"))?;
            for (i, p) in k.packs.iter().enumerate() {
                check_pattern(p).map_err(|e| format!("trust.keys.{id}.packs[{i}]: {e}"))?;
            }
        }
        for (i, p) in self.registry_namespaces.iter().flatten().enumerate() {
            check_pattern(p).map_err(|e| format!("trust.registryNamespaces[{i}]: {e}"))?;
        }
        Ok(())
    }

    /// A registry's key as this operator trusts it: limited to the
    /// intersection of what the registry declares for it (`declared`,
    /// its `permittedNamespaces`) and `registryNamespaces`, and never over
    /// a name an operator key covers. A declared pattern that is not a
    /// name pattern (`hel*`) is dropped. Returns the key and the dropped
    /// patterns.
    pub fn registry_key(
        &self,
        public_key: String,
        declared: &[String],
    ) -> (TrustedKey, Vec<String>) {
        let mut dropped = Vec::new();
        let mut packs = Vec::new();
        let allowed: Vec<String> = self
            .registry_namespaces
            .clone()
            .unwrap_or_else(|| vec!["*".to_owned()]);
        for d in declared {
            if check_pattern(d).is_err() {
                dropped.push(d.clone());
                continue;
            }
            for a in &allowed {
                if let Some(m) = pattern_meet(d, a)
                    && !packs.contains(&m)
                {
                    packs.push(m);
                }
            }
        }
        let never = self
            .keys
            .values()
            .flat_map(|k| k.packs.iter().cloned())
            .collect();
        (
            TrustedKey {
                public_key: Some(public_key),
                public_key_file: None,
                packs,
                never,
            },
            dropped,
        )
    }
}

/// The intersection of two name patterns (each `*`, `prefix.*` or exact),
/// as one pattern, or `None` when no name matches both.
pub fn pattern_meet(a: &str, b: &str) -> Option<String> {
    let exact = |p: &str| p != "*" && !p.ends_with(".*");
    if a == "*" {
        return Some(b.to_owned());
    }
    if b == "*" {
        return Some(a.to_owned());
    }
    if exact(a) {
        return name_matches(b, a).then(|| a.to_owned());
    }
    if exact(b) {
        return name_matches(a, b).then(|| b.to_owned());
    }
    // Both `x.*`: the narrower, if one lies below the other.
    let (x, y) = (&a[..a.len() - 2], &b[..b.len() - 2]);
    if x == y || name_matches(b, x) {
        Some(a.to_owned())
    } else if name_matches(a, y) {
        Some(b.to_owned())
    } else {
        None
    }
}

/// Checks a name pattern (decision 0021, the registry's rule): `*`
/// alone, `prefix.*` (every name below `prefix.`), or an exact name. A
/// `*` anywhere else (`hel*`, `a*b`, `acme*`) is refused rather than
/// read one way here and another by the registry.
pub fn check_pattern(p: &str) -> Result<(), String> {
    if p == "*" {
        return Ok(());
    }
    let body = p.strip_suffix(".*").unwrap_or(p);
    if body.is_empty() || body.contains('*') {
        return Err(format!(
            "`{p}` is not a name pattern: give an exact name, `prefix.*` (every name below `prefix.`, e.g. `acme.*`) or `*` (every name); `*` is accepted nowhere else"
        ));
    }
    Ok(())
}

/// Whether the name pattern `pattern` covers the pack name `name`: `*`
/// every name, `prefix.*` every name below `prefix.` (never `prefix`
/// itself), anything else exactly itself.
pub fn name_matches(pattern: &str, name: &str) -> bool {
    if pattern == "*" {
        return true;
    }
    match pattern.strip_suffix(".*") {
        Some(prefix) => name
            .strip_prefix(prefix)
            .is_some_and(|rest| rest.starts_with('.') && rest.len() > 1),
        None => pattern == name,
    }
}

/// Whether the key `key` may sign the pack `name`: a pattern of its
/// `packs` covers the name and none of its `never` does.
pub fn key_allows(key: &TrustedKey, name: &str) -> bool {
    key.packs.iter().any(|p| name_matches(p, name))
        && !key.never.iter().any(|p| name_matches(p, name))
}

impl TrustedKey {
    /// The key, from `publicKey` or `publicKeyFile` (exactly one).
    pub fn key(&self) -> Result<VerifyingKey, String> {
        match (&self.public_key, &self.public_key_file) {
            (Some(k), None) => decode_public_key(k).map_err(|e| format!("publicKey: {e}")),
            (None, Some(f)) => {
                let text = std::fs::read_to_string(f)
                    .map_err(|e| format!("publicKeyFile {}: {e}", f.display()))?;
                decode_public_key(&text).map_err(|e| format!("publicKeyFile {}: {e}", f.display()))
            }
            _ => Err("publicKey: give exactly one of `publicKey` or `publicKeyFile`".to_owned()),
        }
    }
}

/// Decodes an Ed25519 public key: a PEM SPKI block or base64 of the 32
/// raw bytes.
pub fn decode_public_key(text: &str) -> Result<VerifyingKey, String> {
    let t = text.trim();
    let arr: [u8; 32] = if t.starts_with("-----BEGIN") {
        pem::public_from_pem(t)?
    } else {
        let raw = base64::engine::general_purpose::STANDARD
            .decode(t)
            .map_err(|_| "not valid base64 or PEM".to_owned())?;
        raw.try_into()
            .map_err(|_| "an Ed25519 public key is 32 bytes".to_owned())?
    };
    VerifyingKey::from_bytes(&arr).map_err(|_| "not a valid Ed25519 public key".to_owned())
}

/// The bytes that are signed: the RFC 8785 canonical JSON of `pack.json`.
/// A manifest the canonical form cannot represent exactly (a repeated
/// member, an unsafe or inexact number, a lone surrogate:
/// [`crate::ijson`]) has no such bytes and is refused.
pub fn signed_bytes(manifest: &[u8]) -> Result<Vec<u8>, String> {
    Ok(crate::jcs::canonicalize(&signable(manifest)?).into_bytes())
}

/// `pack.json` parsed, if the canonical form can represent it exactly.
pub(crate) fn signable(manifest: &[u8]) -> Result<serde_json::Value, String> {
    crate::ijson::check(manifest).map_err(|f| {
        format!(
            "pack.json cannot be signed: {} at {}: {}",
            f.violation.reason(),
            f.path,
            f.message
        )
    })?;
    serde_json::from_slice(manifest).map_err(|e| format!("pack.json is not JSON: {e}"))
}

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

/// Signs `manifest` (raw `pack.json`) with the 32-byte Ed25519 secret
/// `seed`; returns the `pack.sig` document.
pub fn sign(manifest: &[u8], seed: &[u8; 32], key_id: &str) -> Result<PackSig, String> {
    use ed25519_dalek::Signer;
    let sk = ed25519_dalek::SigningKey::from_bytes(seed);
    let msg = signed_bytes(manifest)?;
    let sig = sk.sign(&msg);
    Ok(PackSig {
        algorithm: ALGORITHM.to_owned(),
        key_id: key_id.to_owned(),
        signature: base64::engine::general_purpose::STANDARD.encode(sig.to_bytes()),
    })
}

/// The base64 public key of the secret `seed`.
pub fn public_key_of(seed: &[u8; 32]) -> String {
    let sk = ed25519_dalek::SigningKey::from_bytes(seed);
    base64::engine::general_purpose::STANDARD.encode(sk.verifying_key().to_bytes())
}

/// Reads an approved manifest: `path` is a `pack.json` or a directory
/// holding one.
///
/// Read like every pack file ([`crate::packfile`]): a regular file, not
/// followed if a symlink, opened without blocking, at most
/// [`crate::packfile::MAX_MANIFEST_BYTES`] bytes (checked before reading).
pub fn read_approved(path: &std::path::Path) -> Result<Manifest, String> {
    let file = if path.is_dir() {
        path.join("pack.json")
    } else {
        path.to_path_buf()
    };
    let bytes =
        crate::packfile::read_path(&file, crate::packfile::MAX_MANIFEST_BYTES).map_err(|r| {
            format!(
                "cannot read {}: {}",
                file.display(),
                r.into_load_error("$", &file.display().to_string())
            )
        })?;
    Manifest::parse(&bytes).map_err(|e| format!("{}: {e}", file.display()))
}

/// The name a `pack.json` declares, read for the signature check only:
/// the bytes must be representable exactly by the canonical form
/// ([`crate::ijson`]: no repeated member, so there is one `name`) and a
/// JSON object whose `name` is a valid pack name. Nothing else in the
/// manifest is judged here: what the pack is and whether it can run are
/// decided after its provenance ([`crate::runnable`]).
pub fn signed_name(manifest: &[u8]) -> Result<String, LoadError> {
    crate::ijson::check(manifest).map_err(|f| LoadError::NotCanonical {
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

/// The provenance of a `pack.json` under `policy`, before anything else
/// about it is judged: its name (for the keys' namespaces) and signature.
pub fn provenance(
    policy: &Policy,
    raw_manifest: &[u8],
    sig: Option<SigFile<'_>>,
) -> Result<(String, TrustVerdict), LoadError> {
    let name = signed_name(raw_manifest)?;
    let verdict = verify(
        &policy.trust,
        &name,
        signature_required(policy, &name),
        raw_manifest,
        sig,
    )?;
    Ok((name, verdict))
}

/// Refuses `manifest` when the policy approved another version of this
/// pack (`[packs.<name>] approved`) and `manifest` is older than it
/// (`pack_version_rollback`, unless `allowRollback`) or requests more
/// (`pack_capability_escalation`).
pub fn check_escalation(policy: &Policy, manifest: &Manifest) -> Result<(), LoadError> {
    let Some(grant) = policy.packs.get(&manifest.name) else {
        return Ok(());
    };
    let Some(path) = grant.approved.as_ref() else {
        return Ok(());
    };
    let approved = read_approved(path).map_err(|e| {
        LoadError::validation(format!("policy packs.{}.approved", manifest.name), e)
    })?;
    check_rollback(&approved, manifest, grant.allow_rollback)?;
    let adds = diff::additions(&approved, manifest);
    if adds.is_empty() {
        return Ok(());
    }
    Err(LoadError::Escalation {
        pack: manifest.name.clone(),
        version: manifest.version.clone(),
        approved_version: approved.version,
        additions: adds.iter().map(ToString::to_string).collect(),
    })
}

/// Refuses `manifest` when its version is lower than the approved one and
/// the operator did not allow a rollback. A version that cannot be
/// compared (the manifests were validated, so only a hand-made approved
/// file) is a rollback too: fail closed.
pub fn check_rollback(
    approved: &Manifest,
    manifest: &Manifest,
    allow: bool,
) -> Result<(), LoadError> {
    let older = !matches!(
        crate::manifest::compare_versions(&manifest.version, &approved.version),
        Some(std::cmp::Ordering::Equal | std::cmp::Ordering::Greater)
    );
    if older && !allow {
        return Err(LoadError::Rollback {
            pack: manifest.name.clone(),
            version: manifest.version.clone(),
            approved_version: approved.version.clone(),
        });
    }
    Ok(())
}

/// Whether a signature is required for **every** pack name: globally, with
/// no pack exempted (`[packs.<name>] requireSignature = false`). A bare
/// core module can then be refused before its name is known.
pub fn signature_required_for_all(policy: &Policy) -> bool {
    policy.trust.require_signature
        && !policy
            .packs
            .values()
            .any(|g| g.require_signature == Some(false))
}

/// The provenance check of a bare ABI v1 module, on the name it declares
/// (`openwop_pack_name`), not its file name: it has no `pack.json` and so
/// no signature, so it is refused when the policy requires one for that
/// name; and it is held to the approval of that name like any version
/// (`manifest` is the one synthesized from the module's exports).
pub fn check_bare(policy: &Policy, manifest: &Manifest, file: &str) -> Result<(), LoadError> {
    let name = &manifest.name;
    if signature_required(policy, name) {
        return Err(refuse(
            SigFailure::Missing,
            None,
            format!(
                "{file} is a bare core module declaring pack `{name}` (openwop_pack_name); it has no pack.json and so no signature, and the policy requires a signature for `{name}`: ship it as a signed pack directory (wop pack, wop sign)"
            ),
        ));
    }
    check_escalation(policy, manifest)
}

/// Whether `policy` requires a signature for the pack `name`.
pub fn signature_required(policy: &Policy, name: &str) -> bool {
    policy
        .packs
        .get(name)
        .and_then(|g| g.require_signature)
        .unwrap_or(policy.trust.require_signature)
}

#[cfg(test)]
mod tests;
