//! Signed packs and the capability-escalation refusal (decision 0009):
//! every refusal happens before any pack code is compiled.

use crate::{copy_pack, pack, runtime};
use std::path::Path;
use wop_core::trust;
use wop_runtime::{ErrorCode, Runtime};

const SEED: [u8; 32] = [7; 32];
const OTHER: [u8; 32] = [9; 32];

fn policy(patterns: &str, extra: &str) -> String {
    format!(
        "[trust]\nrequireSignature = true\n[trust.keys.acme]\npublicKey = \"{}\"\npacks = [{patterns}]\n{extra}",
        trust::public_key_of(&SEED)
    )
}

/// Signs in the protocol's format: canonical `pack.json` with its
/// `signing` block, the raw signature in `keys/pack.json.sig`.
fn sign(dir: &Path, seed: &[u8; 32], id: &str) {
    let m = std::fs::read(dir.join("pack.json")).unwrap();
    let (bytes, sig) = trust::protocol::sign(&m, seed, id).unwrap();
    std::fs::write(dir.join("pack.json"), bytes).unwrap();
    std::fs::create_dir_all(dir.join("keys")).unwrap();
    std::fs::write(dir.join("keys/pack.json.sig"), sig).unwrap();
}

/// Signs in the earlier format (`pack.sig`), still verified.
fn sign_legacy(dir: &Path, seed: &[u8; 32], id: &str) {
    let m = std::fs::read(dir.join("pack.json")).unwrap();
    let sig = trust::sign(&m, seed, id).unwrap();
    std::fs::write(dir.join("pack.sig"), serde_json::to_vec(&sig).unwrap()).unwrap();
}

#[tokio::test]
async fn a_legacy_signature_still_loads_but_not_next_to_a_protocol_one() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = copy_pack("hello", tmp.path());
    sign_legacy(&dir, &SEED, "acme");
    let rt = runtime(&policy("\"hello\"", ""));
    let verdict = wop_core::pack::trust_verdict(&dir, rt.policy()).unwrap();
    assert!(verdict.to_string().contains("legacy pack.sig"), "{verdict}");
    rt.load_pack(&dir).await.unwrap();
    let both = copy_pack("hello", &tmp.path().join("both"));
    sign(&both, &SEED, "acme");
    sign_legacy(&both, &SEED, "acme");
    let rt = runtime(&policy("\"hello\"", ""));
    let text = refused(&rt, &both, ErrorCode::PackSignatureInvalid).await;
    assert!(
        text.contains("both keys/pack.json.sig and the legacy pack.sig"),
        "{text}"
    );
}

async fn refused(rt: &Runtime, dir: &Path, code: ErrorCode) -> String {
    let before = rt.stats().cache;
    let e = rt.load_pack(dir).await.expect_err("must be refused");
    assert_eq!(e.code(), code, "{e}");
    assert_eq!(rt.stats().cache, before, "compiled before refusing: {e}");
    assert_eq!(rt.stats().cache.compilations, 0);
    let text = format!("{e} {}", serde_json::to_string(&e.to_node_error()).unwrap());
    assert!(!text.contains(&trust::public_key_of(&SEED)), "{text}");
    text
}

#[tokio::test]
async fn signed_pack_loads_and_tampering_is_refused_before_compiling() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = copy_pack("hello", tmp.path());
    sign(&dir, &SEED, "acme");
    let rt = runtime(&policy("\"hello\"", ""));
    rt.load_pack(&dir).await.expect("a signed pack loads");

    // Tampered pack.json (signature no longer verifies).
    let t = copy_pack("hello", &tmp.path().join("t"));
    sign(&t, &SEED, "acme");
    let text = std::fs::read_to_string(t.join("pack.json")).unwrap();
    let rt = runtime(&policy("\"hello\"", ""));
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let mut v2 = v.clone();
    v2["x-wop"]["capabilities"] = serde_json::json!(["log", "clock", "random", "tools"]);
    std::fs::write(t.join("pack.json"), serde_json::to_vec(&v2).unwrap()).unwrap();
    let msg = refused(&rt, &t, ErrorCode::PackSignatureInvalid).await;
    assert!(msg.contains("bad-signature"), "{msg}");

    // Swapped .wasm (signature fine, entry bytes changed).
    let s = copy_pack("hello", &tmp.path().join("s"));
    sign(&s, &SEED, "acme");
    std::fs::copy(crate::pack("spin").join("spin.wasm"), s.join("hello.wasm")).unwrap();
    refused(&rt, &s, ErrorCode::PackIntegrityMismatch).await;

    // Untrusted key.
    let u = copy_pack("hello", &tmp.path().join("u"));
    sign(&u, &OTHER, "mallory");
    let msg = refused(&rt, &u, ErrorCode::PackSignatureInvalid).await;
    assert!(msg.contains("unknown-key"), "{msg}");
    // A trusted id, but the signature was made by another key.
    sign(&u, &OTHER, "acme");
    refused(&rt, &u, ErrorCode::PackSignatureInvalid).await;

    // Trusted key outside its namespace.
    let rt = runtime(&policy("\"acme.*\"", ""));
    let msg = refused(&rt, &dir, ErrorCode::PackSignatureInvalid).await;
    assert!(msg.contains("key-not-allowed"), "{msg}");

    // Missing signature when required.
    let rt = runtime(&policy("\"hello\"", ""));
    let msg = refused(&rt, &pack("hello"), ErrorCode::PackSignatureInvalid).await;
    assert!(msg.contains("missing"), "{msg}");
    // ... and per pack.
    let rt = runtime("[packs.hello]\nrequireSignature = true\n");
    refused(&rt, &pack("hello"), ErrorCode::PackSignatureInvalid).await;
}

#[tokio::test]
async fn diff_and_escalation_refusal() {
    // Two real releases of one pack: `hello` 0.1.0 (the sample) and 0.2.0
    // (testing/hello-v2), which asks for the tools capability, a tool and an
    // egress destination.
    let (old, new) = (pack("hello"), pack("hello-v2"));
    let old_m = trust::read_approved(&old).unwrap();
    let new_m = trust::read_approved(&new).unwrap();
    assert_eq!(
        (old_m.version.as_str(), new_m.version.as_str()),
        ("0.1.0", "0.2.0")
    );
    let adds: Vec<String> = trust::diff::additions(&old_m, &new_m)
        .iter()
        .map(ToString::to_string)
        .collect();
    for want in [
        "capability: tools",
        "tool: kv.get",
        "egress: api.example.com",
    ] {
        assert!(
            adds.contains(&want.to_owned()),
            "{want} missing from {adds:?}"
        );
    }
    // Nothing is an addition relative to itself, nor when going back.
    assert!(trust::diff::additions(&new_m, &new_m).is_empty());
    assert!(trust::diff::additions(&new_m, &old_m).is_empty());

    let approve = |p: &Path| format!("[packs.hello]\napproved = \"{}\"\n", p.display());
    let rt = runtime(&approve(&old));
    let msg = refused(&rt, &new, ErrorCode::PackCapabilityEscalation).await;
    for want in [
        "capability: tools",
        "tool: kv.get",
        "egress: api.example.com",
    ] {
        assert!(msg.contains(want), "{want} missing from {msg}");
    }
    // The approved version itself loads; so does the new one once approved.
    rt.load_pack(&old).await.expect("approved version loads");
    let rt = runtime(&approve(&new));
    let loaded = rt
        .load_pack(&new)
        .await
        .expect("newly approved version loads");
    assert_eq!(loaded.version, "0.2.0");
}
