//! `[trust]`: the keys an operator trusts, the pack names each may sign
//! (name patterns: `*`, `prefix.*`, exact) and what a registry's own key
//! may sign. Errors name key ids, never keys.

use super::pem;
use base64::Engine as _;
use ed25519_dalek::VerifyingKey;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

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

/// The base64 public key of the secret `seed`.
pub fn public_key_of(seed: &[u8; 32]) -> String {
    let sk = ed25519_dalek::SigningKey::from_bytes(seed);
    base64::engine::general_purpose::STANDARD.encode(sk.verifying_key().to_bytes())
}
