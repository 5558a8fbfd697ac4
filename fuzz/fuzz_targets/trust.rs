//! Pack signatures: `keys/pack.json.sig` bytes (the protocol's format),
//! legacy `pack.sig` documents and `pack.json` bytes through
//! `trust::verify`, and sign → verify round trips (decisions 0009, 0021).
//!
//! Input: byte 0 is flags (bit 0: signature required, bit 1: sign the
//! first document ourselves), then two documents separated by the first
//! NUL byte: a `pack.json` and a `pack.sig` (or a second `pack.json`).
//!
//! Checks: never panics; only a key in `[trust.keys]` whose patterns
//! cover the name ever yields `trusted`; what we sign verifies; the same
//! signature never verifies a manifest with another canonical form.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::collections::BTreeMap;
use wop_core::trust::{
    SigFile, TrustSection, TrustVerdict, TrustedKey, decode_public_key, name_matches, protocol,
    public_key_of, sign, signed_bytes, verify,
};

const SEED: [u8; 32] = [7; 32];
const OTHER: [u8; 32] = [9; 32];

fn section() -> TrustSection {
    let mut keys = BTreeMap::new();
    keys.insert(
        "k1".to_owned(),
        TrustedKey {
            public_key: Some(public_key_of(&SEED)),
            public_key_file: None,
            packs: vec!["acme.*".to_owned(), "fuzz".to_owned()],
            never: Vec::new(),
        },
    );
    keys.insert(
        "other".to_owned(),
        TrustedKey {
            public_key: Some(public_key_of(&OTHER)),
            public_key_file: None,
            packs: vec!["*".to_owned()],
            // As `wop install --trust-registry` sets it: never over an
            // operator key's pattern.
            never: vec!["acme.*".to_owned()],
        },
    );
    TrustSection {
        require_signature: false,
        keys,
        registry_namespaces: None,
    }
}

fuzz_target!(|data: &[u8]| {
    let [flags, rest @ ..] = data else {
        return;
    };
    let required = flags & 1 != 0;
    let (a, b) = match rest.iter().position(|c| *c == 0) {
        Some(i) => (&rest[..i], &rest[i + 1..]),
        None => (rest, &[][..]),
    };
    let trust = section();
    let _ = decode_public_key(&String::from_utf8_lossy(b));
    for name in ["acme.crm", "fuzz", "evil"] {
        for file in [SigFile::Legacy(b), SigFile::Protocol(b)] {
            match verify(&trust, name, required, a, Some(file)) {
                Ok(TrustVerdict::Trusted { key_id, .. }) => {
                    let k = trust.keys.get(&key_id);
                    assert!(
                        k.is_some_and(|k| k.packs.iter().any(|p| name_matches(p, name))),
                        "{key_id} trusted for {name}"
                    );
                }
                Ok(TrustVerdict::Unsigned) => panic!("a present signature was not checked"),
                Err(_) => {}
            }
        }
    }
    assert!(matches!(
        verify(&trust, "fuzz", true, a, None),
        Err(wop_core::LoadError::Signature { .. })
    ));
    if flags & 2 == 0 {
        return;
    }
    let Ok(sig) = sign(a, &SEED, "k1") else {
        return;
    };
    let Ok(doc) = serde_json::to_vec(&sig) else {
        return;
    };
    assert_eq!(
        verify(&trust, "acme.crm", true, a, Some(SigFile::Legacy(&doc))).ok(),
        Some(TrustVerdict::Trusted {
            key_id: "k1".to_owned(),
            legacy: true,
        }),
        "what we sign verifies"
    );
    assert!(verify(&trust, "evil", false, a, Some(SigFile::Legacy(&doc))).is_err());
    if let (Ok(ca), Ok(cb)) = (signed_bytes(a), signed_bytes(b)) {
        let v = verify(&trust, "acme.crm", false, b, Some(SigFile::Legacy(&doc)));
        assert_eq!(v.is_ok(), ca == cb, "one signature, two canonical forms");
    }
    // The protocol's format: exactly the signed bytes verify.
    if let Ok((bytes, sig)) = protocol::sign(a, &SEED, "k1") {
        assert_eq!(
            verify(&trust, "acme.crm", true, &bytes, Some(SigFile::Protocol(&sig))).ok(),
            Some(TrustVerdict::Trusted {
                key_id: "k1".to_owned(),
                legacy: false,
            }),
            "what we sign in the protocol's format verifies"
        );
        if b != bytes.as_slice() {
            assert!(verify(&trust, "acme.crm", false, b, Some(SigFile::Protocol(&sig))).is_err());
        }
    }
});
