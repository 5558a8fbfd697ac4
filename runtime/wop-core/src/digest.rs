//! Domain-separated SHA-256: one helper for every identity the runtime
//! derives by hashing (replay seeds, effect ids, call ids), so each is
//! `sha256(tag ‖ 0 ‖ part₁ ‖ 0 ‖ … ‖ 0 ‖ partₙ)` and no two derivations
//! can produce each other's input.

use sha2::{Digest, Sha256};

/// SHA-256 over `tag`, then each of `parts`, each preceded by a NUL byte.
pub fn tagged(tag: &str, parts: &[&[u8]]) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(tag.as_bytes());
    for p in parts {
        h.update([0u8]);
        h.update(p);
    }
    h.finalize().into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tag_and_parts_are_separated() {
        let manual: [u8; 32] = Sha256::digest(b"t:v1\0a\0bc").into();
        assert_eq!(tagged("t:v1", &[b"a", b"bc"]), manual);
        assert_ne!(tagged("t:v1", &[b"ab", b"c"]), manual);
        assert_ne!(tagged("t:v2", &[b"a", b"bc"]), manual);
        let bare: [u8; 32] = Sha256::digest(b"t:v1").into();
        assert_eq!(tagged("t:v1", &[]), bare);
    }
}
