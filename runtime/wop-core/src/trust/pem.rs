//! Ed25519 keys in the formats the protocol's registry and common tools
//! use: PEM SPKI public keys (`-----BEGIN PUBLIC KEY-----`, what a registry
//! serves at `/keys/{keyId}.pub`) and PEM PKCS#8 private keys
//! (`-----BEGIN PRIVATE KEY-----`, what `openssl genpkey -algorithm
//! ed25519` and `node:crypto` write).

use base64::Engine as _;

/// DER prefix of an Ed25519 SubjectPublicKeyInfo (RFC 8410), before the
/// 32 key bytes.
const SPKI_PREFIX: [u8; 12] = [
    0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00,
];
/// DER prefix of an Ed25519 PKCS#8 v1 private key (RFC 8410), before the
/// 32 seed bytes.
const PKCS8_PREFIX: [u8; 16] = [
    0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x04, 0x22, 0x04, 0x20,
];

fn der_of(text: &str, label: &str) -> Result<Vec<u8>, String> {
    let begin = format!("-----BEGIN {label}-----");
    let end = format!("-----END {label}-----");
    let t = text.trim();
    let body = t
        .strip_prefix(begin.as_str())
        .and_then(|r| r.strip_suffix(end.as_str()))
        .ok_or_else(|| format!("not a PEM `{label}` block"))?;
    let b64: String = body.chars().filter(|c| !c.is_whitespace()).collect();
    base64::engine::general_purpose::STANDARD
        .decode(b64)
        .map_err(|_| format!("the PEM `{label}` body is not base64"))
}

/// The 32 public-key bytes of a PEM SPKI Ed25519 public key.
pub fn public_from_pem(text: &str) -> Result<[u8; 32], String> {
    let der = der_of(text, "PUBLIC KEY")?;
    der.strip_prefix(&SPKI_PREFIX[..])
        .and_then(|k| <[u8; 32]>::try_from(k).ok())
        .ok_or_else(|| "the PEM public key is not an Ed25519 key".to_owned())
}

/// A PEM SPKI block for 32 public-key bytes.
pub fn public_to_pem(key: &[u8; 32]) -> String {
    let mut der = SPKI_PREFIX.to_vec();
    der.extend_from_slice(key);
    block("PUBLIC KEY", &der)
}

/// The 32-byte seed of a PEM PKCS#8 Ed25519 private key.
pub fn seed_from_pem(text: &str) -> Result<zeroize::Zeroizing<[u8; 32]>, String> {
    let der = zeroize::Zeroizing::new(der_of(text, "PRIVATE KEY")?);
    der.strip_prefix(&PKCS8_PREFIX[..])
        .and_then(|k| <[u8; 32]>::try_from(k).ok())
        .map(zeroize::Zeroizing::new)
        .ok_or_else(|| "the PEM private key is not an Ed25519 PKCS#8 key".to_owned())
}

/// A PEM PKCS#8 block for a 32-byte seed.
pub fn seed_to_pem(seed: &[u8; 32]) -> zeroize::Zeroizing<String> {
    let mut der = zeroize::Zeroizing::new(PKCS8_PREFIX.to_vec());
    der.extend_from_slice(seed);
    zeroize::Zeroizing::new(block("PRIVATE KEY", &der))
}

fn block(label: &str, der: &[u8]) -> String {
    let b64 = base64::engine::general_purpose::STANDARD.encode(der);
    format!("-----BEGIN {label}-----\n{b64}\n-----END {label}-----\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_round_trip_and_wrong_kinds_are_refused() {
        let seed = [7u8; 32];
        let sk = ed25519_dalek::SigningKey::from_bytes(&seed);
        let pk = sk.verifying_key().to_bytes();
        assert_eq!(public_from_pem(&public_to_pem(&pk)).unwrap(), pk);
        assert_eq!(*seed_from_pem(&seed_to_pem(&seed)).unwrap(), seed);
        // `openssl pkey -pubout` of an Ed25519 key starts like this.
        assert!(public_to_pem(&pk).starts_with("-----BEGIN PUBLIC KEY-----\nMCowBQYDK2VwAyEA"));
        assert!(public_from_pem(&seed_to_pem(&seed)).is_err());
        assert!(
            public_from_pem("-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----").is_err()
        );
        assert!(seed_from_pem("junk").is_err());
    }
}
