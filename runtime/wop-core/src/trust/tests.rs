use super::*;
use crate::error::LoadError;
use crate::manifest::Manifest;
use crate::pack::signature_required;
use crate::policy::Policy;
use std::collections::BTreeMap;

const SEED: [u8; 32] = [1; 32];
const OTHER: [u8; 32] = [2; 32];
const MANIFEST: &[u8] = br#"{"name":"acme.fetch","version":"1.0.0","x-wop":{"sha256":"00"}}"#;

fn section(patterns: &[&str]) -> TrustSection {
    let mut keys = BTreeMap::new();
    keys.insert(
        "k".to_owned(),
        TrustedKey {
            public_key: Some(public_key_of(&SEED)),
            public_key_file: None,
            packs: patterns.iter().map(|p| (*p).to_owned()).collect(),
            never: Vec::new(),
        },
    );
    TrustSection {
        require_signature: false,
        keys,
        registry_namespaces: None,
    }
}

fn sig(seed: &[u8; 32], id: &str, manifest: &[u8]) -> Vec<u8> {
    serde_json::to_vec(&sign(manifest, seed, id).unwrap()).unwrap()
}

/// (what, key patterns, required, manifest, pack.sig, Ok or the reason)
type Case<'a> = (
    &'a str,
    &'a [&'a str],
    bool,
    &'a [u8],
    Option<Vec<u8>>,
    Result<(), &'a str>,
);

#[test]
fn protocol_signatures_verify_over_the_exact_bytes() {
    let m = br#"{"name":"vendor.acme.fetch","version":"1.0.0","x-wop":{"sha256":"00"}}"#;
    let (bytes, sig) = protocol::sign(m, &SEED, "k").unwrap();
    // Canonical, with the v1 `manual` block naming the key.
    let text = String::from_utf8(bytes.clone()).unwrap();
    assert!(
        text.contains(r#""signing":{"method":"manual","publicKeyRef":"k","signatureRef":"keys/pack.json.sig"}"#),
        "{text}"
    );
    assert_eq!(
        crate::json::jcs::canonicalize(&serde_json::from_slice(&bytes).unwrap()),
        text
    );
    let pem = pem::public_to_pem(
        &ed25519_dalek::SigningKey::from_bytes(&SEED)
            .verifying_key()
            .to_bytes(),
    );
    let trust = |pats: &[&str]| {
        let mut t = section(pats);
        t.keys.get_mut("k").unwrap().public_key = Some(pem.clone());
        t
    };
    let run = |t: &TrustSection, name: &str, bytes: &[u8], sig: Option<&[u8]>| {
        verify(t, name, false, bytes, sig.map(SigFile::Protocol))
    };
    let reason = |r: Result<TrustVerdict, LoadError>| match r {
        Err(LoadError::Signature { reason, .. }) => reason,
        Ok(v) => panic!("verified: {v:?}"),
        Err(e) => panic!("{e}"),
    };
    let ok = run(
        &trust(&["vendor.acme.*"]),
        "vendor.acme.fetch",
        &bytes,
        Some(&sig),
    )
    .unwrap();
    assert_eq!(
        ok,
        TrustVerdict::Trusted {
            key_id: "k".into(),
            legacy: false
        }
    );
    // One changed byte, the signature of other bytes, a short signature.
    let mut tampered = bytes.clone();
    let at = text.find("1.0.0").unwrap() + 4;
    tampered[at] = b'1';
    assert_eq!(
        reason(run(
            &trust(&["vendor.acme.*"]),
            "vendor.acme.fetch",
            &tampered,
            Some(&sig)
        )),
        "bad-signature"
    );
    // Pretty-printed, the same manifest is other bytes: not what was signed.
    let pretty =
        serde_json::to_vec_pretty(&serde_json::from_slice::<serde_json::Value>(&bytes).unwrap())
            .unwrap();
    assert_eq!(
        reason(run(
            &trust(&["vendor.acme.*"]),
            "vendor.acme.fetch",
            &pretty,
            Some(&sig)
        )),
        "bad-signature"
    );
    assert_eq!(
        reason(run(
            &trust(&["vendor.acme.*"]),
            "vendor.acme.fetch",
            &bytes,
            Some(&sig[..63])
        )),
        "bad-signature"
    );
    // Namespaces: `vendor.acme.*` is any depth below, never the prefix
    // itself nor a longer sibling.
    assert_eq!(
        reason(run(
            &trust(&["vendor.acme.*"]),
            "vendor.acme",
            &bytes,
            Some(&sig)
        )),
        "key-not-allowed"
    );
    assert_eq!(
        reason(run(
            &trust(&["vendor.acme.*"]),
            "vendor.acmeco.fetch",
            &bytes,
            Some(&sig)
        )),
        "key-not-allowed"
    );
    assert!(name_matches("vendor.acme.*", "vendor.acme.a.b"));
    // Keys and blocks.
    let mut unknown = trust(&["vendor.acme.*"]);
    unknown.keys = unknown
        .keys
        .into_values()
        .map(|k| ("other".to_owned(), k))
        .collect();
    assert_eq!(
        reason(run(&unknown, "vendor.acme.fetch", &bytes, Some(&sig))),
        "unknown-key"
    );
    assert_eq!(
        reason(run(&trust(&["*"]), "vendor.acme.fetch", m, Some(&sig))),
        "malformed"
    );
    assert_eq!(
        reason(run(&trust(&["*"]), "vendor.acme.fetch", &bytes, None)),
        "missing"
    );
    let retired = br#"{"name":"a","signing":{"method":"ed25519","keyId":"k"}}"#;
    assert_eq!(
        reason(run(&trust(&["*"]), "a", retired, Some(&sig))),
        "malformed"
    );
    // As the registry ships it: no keys/pack.json.sig at all.
    assert_eq!(reason(run(&trust(&["*"]), "a", retired, None)), "malformed");
    let v2 = br#"{"name":"a","signing":{"keyId":"k","scheme":"ed25519-canonical-json"}}"#;
    assert_eq!(protocol::signing_key_id(v2).unwrap(), "k");
}

#[test]
fn verification_case_table() {
    let reordered = br#"{ "version":"1.0.0", "x-wop":{"sha256":"00"}, "name":"acme.fetch" }"#;
    let tampered = br#"{"name":"acme.fetch","version":"1.0.1","x-wop":{"sha256":"00"}}"#;
    let good = sig(&SEED, "k", MANIFEST);
    let cases: Vec<Case> = vec![
        (
            "unsigned, not required",
            &["acme.*"],
            false,
            MANIFEST,
            None,
            Ok(()),
        ),
        (
            "unsigned, required",
            &["acme.*"],
            true,
            MANIFEST,
            None,
            Err("missing"),
        ),
        (
            "good",
            &["acme.*"],
            true,
            MANIFEST,
            Some(good.clone()),
            Ok(()),
        ),
        (
            "JCS: key order and whitespace do not matter",
            &["acme.*"],
            true,
            reordered,
            Some(good.clone()),
            Ok(()),
        ),
        (
            "exact name",
            &["acme.fetch"],
            true,
            MANIFEST,
            Some(good.clone()),
            Ok(()),
        ),
        ("star", &["*"], true, MANIFEST, Some(good.clone()), Ok(())),
        (
            "tampered manifest",
            &["acme.*"],
            true,
            tampered,
            Some(good.clone()),
            Err("bad-signature"),
        ),
        (
            "outside namespace",
            &["other.*"],
            true,
            MANIFEST,
            Some(good.clone()),
            Err("key-not-allowed"),
        ),
        (
            "no patterns",
            &[],
            false,
            MANIFEST,
            Some(good.clone()),
            Err("key-not-allowed"),
        ),
        (
            "unknown key id",
            &["acme.*"],
            false,
            MANIFEST,
            Some(sig(&OTHER, "x", MANIFEST)),
            Err("unknown-key"),
        ),
        (
            "known id, other key",
            &["acme.*"],
            false,
            MANIFEST,
            Some(sig(&OTHER, "k", MANIFEST)),
            Err("bad-signature"),
        ),
        (
            "garbage sig file",
            &["acme.*"],
            false,
            MANIFEST,
            Some(b"nope".to_vec()),
            Err("malformed"),
        ),
        (
            "other algorithm",
            &["acme.*"],
            false,
            MANIFEST,
            Some(br#"{"algorithm":"rsa","keyId":"k","signature":"AA=="}"#.to_vec()),
            Err("malformed"),
        ),
        (
            "short signature",
            &["acme.*"],
            false,
            MANIFEST,
            Some(br#"{"algorithm":"ed25519","keyId":"k","signature":"AA=="}"#.to_vec()),
            Err("bad-signature"),
        ),
    ];
    for (what, pats, required, manifest, s, want) in cases {
        let got = verify(
            &section(pats),
            "acme.fetch",
            required,
            manifest,
            s.as_deref().map(SigFile::Legacy),
        );
        match (got, want) {
            (Ok(_), Ok(())) => {}
            (
                Err(LoadError::Signature {
                    reason, message, ..
                }),
                Err(r),
            ) => {
                assert_eq!(reason, r, "{what}: {message}");
                assert!(
                    !message.contains(&public_key_of(&SEED)),
                    "{what}: key leaked"
                );
            }
            (got, want) => panic!("{what}: got {got:?}, want {want:?}"),
        }
    }
}

#[test]
fn name_patterns() {
    for (p, n, want) in [
        ("acme.*", "acme.fetch", true),
        ("acme.*", "acme", false),
        ("acme.*", "acmex.fetch", false),
        ("*", "anything", true),
        ("hello", "hello", true),
        ("hello", "hello2", false),
    ] {
        assert_eq!(name_matches(p, n), want, "{p} vs {n}");
    }
    assert!(check_pattern("a*b").is_err());
    assert!(check_pattern("").is_err());
    assert!(check_pattern("acme.*").is_ok());
    // Decision 0021: `*` is `*` alone or the `.*` suffix; `hel*` would be
    // a prefix here and exact at the registry, so it is refused.
    for bad in ["hel*", "acme*", ".*", "*.acme", "a.*.b"] {
        assert!(check_pattern(bad).is_err(), "{bad}");
    }
    assert!(check_pattern("*").is_ok());
    assert!(!name_matches("acme.*", "acme."));
}

#[test]
fn a_key_never_signs_what_its_never_list_covers() {
    let mut t = section(&["*"]);
    t.keys.get_mut("k").unwrap().never = vec!["acme.*".to_owned()];
    let (bytes, raw) = protocol::sign(MANIFEST, &SEED, "k").unwrap();
    match verify(
        &t,
        "acme.fetch",
        true,
        &bytes,
        Some(SigFile::Protocol(&raw)),
    ) {
        Err(LoadError::Signature { reason, .. }) => assert_eq!(reason, "key-not-allowed"),
        other => panic!("{other:?}"),
    }
    t.keys.get_mut("k").unwrap().never = vec!["other.*".to_owned()];
    assert!(
        verify(
            &t,
            "acme.fetch",
            true,
            &bytes,
            Some(SigFile::Protocol(&raw))
        )
        .is_ok()
    );
}

#[test]
fn policy_load_refuses_a_prefix_star_pattern() {
    let doc = format!(
        "[trust.keys.k]\npublicKey = \"{}\"\npacks = [\"hel*\"]\n",
        public_key_of(&SEED)
    );
    let e = crate::policy::Policy::from_toml(&doc)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("trust.keys.k.packs[0]") && e.contains("hel*"),
        "{e}"
    );
}

#[test]
fn policy_trust_section_is_checked() {
    let ok = format!(
        "[trust]\nrequireSignature = true\n[trust.keys.k]\npublicKey = \"{}\"\npacks = [\"acme.*\"]\n[packs.x]\nrequireSignature = false\n",
        public_key_of(&SEED)
    );
    let p = Policy::from_toml(&ok).unwrap();
    assert!(signature_required(&p, "acme.fetch"));
    assert!(!signature_required(&p, "x"));
    let e = Policy::from_toml("[trust.keys.k]\npublicKey = \"bm9wZQ==\"\n").unwrap_err();
    assert!(e.to_string().contains("trust.keys.k.publicKey"), "{e}");
    let e = Policy::from_toml("[trust]\nrequireSignatures = true\n").unwrap_err();
    assert!(e.to_string().contains("requireSignatures"), "{e}");
}

#[test]
fn diff_lists_only_additions() {
    let m = |caps: &str, extra: &str| {
        let text = format!(
            r#"{{"kind":"node","name":"p","version":"1.0.0","engines":{{"openwop":">=1.0.0"}},
            "nodes":[{{"typeId":"p.a","version":"1.0.0","category":"transform","role":"worker"}}],
            "runtime":{{"language":"wasm-component","entry":"p.wasm","format":"wasm-component"}},
            "x-wop":{{"sha256":"{}","capabilities":{caps}{extra}}}}}"#,
            "a".repeat(64)
        );
        Manifest::parse(text.as_bytes()).unwrap()
    };
    let old = m(r#"["tools"]"#, r#","tools":["a:b"],"limits":{"fuel":10}"#);
    let same = m(r#"["tools"]"#, r#","tools":["a:b"],"limits":{"fuel":5}"#);
    assert!(diff::additions(&old, &same).is_empty());
    let more = m(
        r#"["tools","http"]"#,
        r#","tools":["a:b","c:d"],"egress":["api.example.com"],"limits":{"fuel":20},"mcp":{"servers":["ev"],"tools":["ev/echo"],"resources":{"ev":["test://a/*"]}}"#,
    );
    let adds: Vec<String> = diff::additions(&old, &more)
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        adds,
        [
            "capability: http",
            "tool: c:d",
            "egress: api.example.com",
            "mcp-server: ev",
            "mcp-resource: ev: test://a/*",
            "limit: fuel: 10 -> 20"
        ]
    );
    let secret = old.clone();
    let mut with_secret = old.clone();
    with_secret.nodes[0]
        .requires_secrets
        .push(crate::secrets::SecretRequirement {
            id: "stripe".into(),
            kind: crate::secrets::SecretKind::ApiKey,
            provider: None,
            scope: None,
        });
    let adds: Vec<String> = diff::additions(&secret, &with_secret)
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(adds, ["secret: p.a: stripe"]);
    assert!(diff::additions(&with_secret, &secret).is_empty());
    let dropped = m(r#"["tools"]"#, r#","tools":["a:b"]"#);
    let adds = diff::additions(&old, &dropped);
    assert_eq!(
        adds.len(),
        1,
        "dropping a limit request asks for the ceiling"
    );
}

#[test]
fn the_canonical_form_has_no_bytes_for_non_i_json_manifests() {
    // A decoy block: serde_json keeps the last `x-wop`, a reader the first.
    let decoy = br#"{"name":"acme.fetch","version":"1.0.0","x-wop":{"sha256":"00"},"x-wop":{"sha256":"11"}}"#;
    let big = br#"{"name":"acme.fetch","version":"1.0.0","n":9007199254740993}"#;
    for doc in [&decoy[..], &big[..]] {
        assert!(signed_bytes(doc).is_err());
        assert!(sign(doc, &SEED, "k").is_err(), "nothing to sign");
    }
    // Before the fix these two canonicalized alike, so one signature
    // covered both.
    let other = br#"{"name":"acme.fetch","version":"1.0.0","n":9007199254740992}"#;
    assert!(signed_bytes(other).is_err(), "2^53 is beyond 2^53-1 too");
}

#[test]
fn pattern_intersections() {
    for (a, b, want) in [
        ("*", "acme.*", Some("acme.*")),
        ("acme.*", "*", Some("acme.*")),
        ("acme.*", "acme.x.*", Some("acme.x.*")),
        ("acme.x.*", "acme.*", Some("acme.x.*")),
        ("acme.*", "acme.*", Some("acme.*")),
        ("acme.*", "other.*", None),
        ("acme.*", "acmex.*", None),
        ("acme.fetch", "acme.*", Some("acme.fetch")),
        ("acme.*", "acme.fetch", Some("acme.fetch")),
        ("acme", "acme.*", None),
        ("a.b", "a.b", Some("a.b")),
        ("a.b", "a.c", None),
    ] {
        assert_eq!(pattern_meet(a, b).as_deref(), want, "{a} ∩ {b}");
    }
}

#[test]
fn registry_keys_get_the_intersection_and_never_an_operator_namespace() {
    let mut t = section(&["acme.*"]);
    // The registry claims everything.
    let (k, dropped) = t.registry_key(public_key_of(&OTHER), &["*".to_owned(), "hel*".to_owned()]);
    assert_eq!(k.packs, ["*"]);
    assert_eq!(dropped, ["hel*"]);
    assert!(
        !key_allows(&k, "acme.widget"),
        "an operator key covers acme.*"
    );
    assert!(key_allows(&k, "community.x"));
    // The operator narrows what registry keys may sign.
    t.registry_namespaces = Some(vec!["community.*".to_owned()]);
    let (k, _) = t.registry_key(
        public_key_of(&OTHER),
        &["*".to_owned(), "core.openwop.*".to_owned()],
    );
    assert_eq!(k.packs, ["community.*"]);
    assert!(!key_allows(&k, "core.openwop.http"));
    assert!(key_allows(&k, "community.demo"));
}

#[test]
fn an_approved_manifest_is_read_bounded_and_never_from_a_device_or_fifo() {
    // Old code: std::fs::read, which reads /dev/zero until memory runs out.
    let e = read_approved(std::path::Path::new("/dev/zero")).unwrap_err();
    assert!(e.contains("device"), "{e}");
    let dir = std::env::temp_dir().join(format!("wop-approved-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let fifo = dir.join("pack.json");
    let _ = std::fs::remove_file(&fifo);
    let made = std::process::Command::new("mkfifo").arg(&fifo).status();
    if made.is_ok_and(|s| s.success()) {
        // Never opened for reading (that would block): refused by its kind.
        let e = read_approved(&dir).unwrap_err();
        assert!(e.contains("FIFO"), "{e}");
        std::fs::remove_file(&fifo).unwrap();
    }
    let big = dir.join("big.json");
    std::fs::write(
        &big,
        vec![b' '; (crate::files::packfile::MAX_MANIFEST_BYTES + 1) as usize],
    )
    .unwrap();
    let e = read_approved(&big).unwrap_err();
    assert!(e.contains("the limit is"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}
