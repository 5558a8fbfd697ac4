//! The policy's judgements of a pack: approval (rollback) and the
//! provenance of bare modules.

use super::{check_bare, check_rollback, signature_required_for_all};
use crate::error::LoadError;
use crate::manifest::Manifest;
use crate::policy::Policy;

fn manifest_v(version: &str) -> Manifest {
    let text = format!(
        r#"{{"kind":"node","name":"p","version":"{version}","engines":{{"openwop":">=1.0.0"}},
        "nodes":[{{"typeId":"p.a","version":"1.0.0","category":"transform","role":"worker"}}],
        "runtime":{{"language":"wasm-component","entry":"p.wasm","format":"wasm-component"}},
        "x-wop":{{"sha256":"{}","capabilities":[]}}}}"#,
        "a".repeat(64)
    );
    Manifest::parse(text.as_bytes()).unwrap()
}

#[test]
fn rollback_case_table() {
    let approved = manifest_v("1.2.0");
    let cases: &[(&str, bool, Result<(), &str>)] = &[
        ("1.2.0", false, Ok(())),
        ("1.2.1", false, Ok(())),
        ("2.0.0-rc.1", false, Ok(())),
        ("1.1.9", false, Err("pack_version_rollback")),
        ("1.2.0-rc.1", false, Err("pack_version_rollback")),
        ("0.0.0", false, Err("pack_version_rollback")),
        ("1.1.9", true, Ok(())),
        ("0.0.0", true, Ok(())),
    ];
    for (v, allow, want) in cases {
        let got = check_rollback(&approved, &manifest_v(v), *allow).map_err(|e| e.code().as_str());
        assert_eq!(got, *want, "{v} allow={allow}");
    }
}

#[test]
fn bare_modules_are_judged_by_their_declared_name() {
    let p = Policy::from_toml("[packs.\"acme.fetch\"]\nrequireSignature = true\n").unwrap();
    let mut m = manifest_v("0.0.0");
    m.name = "acme.fetch".to_owned();
    let e = check_bare(&p, &m, "innocent.wasm").unwrap_err();
    assert!(
        matches!(
            e,
            LoadError::Signature {
                reason: "missing",
                ..
            }
        ),
        "{e}"
    );
    assert!(e.to_string().contains("acme.fetch"), "{e}");
    m.name = "innocent".to_owned();
    assert!(check_bare(&p, &m, "acme.fetch.wasm").is_ok());
    assert!(!signature_required_for_all(&p));
    let all = Policy::from_toml("[trust]\nrequireSignature = true\n").unwrap();
    assert!(signature_required_for_all(&all));
    let exempt = Policy::from_toml(
        "[trust]\nrequireSignature = true\n[packs.x]\nrequireSignature = false\n",
    )
    .unwrap();
    assert!(!signature_required_for_all(&exempt));
}
