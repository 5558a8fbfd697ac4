//! `wop keygen`, `wop sign`, `wop verify`, `wop diff` (decision 0009).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::path::Path;
use std::process::{Command, Output};

fn wop(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_wop"))
        .args(args)
        .output()
        .unwrap()
}

fn copy(name: &str, to: &Path) -> std::path::PathBuf {
    let dst = to.join(name);
    std::fs::create_dir_all(&dst).unwrap();
    for e in std::fs::read_dir(wop_testkit_pack(name)).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), dst.join(e.file_name())).unwrap();
    }
    dst
}

fn wop_testkit_pack(name: &str) -> std::path::PathBuf {
    wop_test_packs::pack_dir(name)
}

#[test]
fn keygen_sign_verify_diff() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let keys = t.join("keys");
    let o = wop(&["keygen", "--out", keys.to_str().unwrap(), "--id", "acme"]);
    assert!(o.status.success(), "{o:?}");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(keys.join("acme.key"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    let private: serde_json::Value =
        serde_json::from_slice(&std::fs::read(keys.join("acme.key")).unwrap()).unwrap();
    let public: serde_json::Value =
        serde_json::from_slice(&std::fs::read(keys.join("acme.pub")).unwrap()).unwrap();
    let secret = private["privateKey"].as_str().unwrap().to_owned();
    let pubkey = public["publicKey"].as_str().unwrap().to_owned();
    // The private key is never printed.
    assert!(!String::from_utf8_lossy(&o.stdout).contains(&secret));

    let dir = copy("hello", t);
    let o = wop(&[
        "sign",
        dir.to_str().unwrap(),
        "--key",
        keys.join("acme.key").to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{o:?}");
    let policy = t.join("policy.toml");
    let write_policy = |pattern: &str| {
        std::fs::write(
            &policy,
            format!("[trust]\nrequireSignature = true\n[trust.keys.acme]\npublicKey = \"{pubkey}\"\npacks = [\"{pattern}\"]\n"),
        )
        .unwrap()
    };
    write_policy("hel*");
    let p = policy.to_str().unwrap();
    let o = wop(&["verify", dir.to_str().unwrap(), "--policy", p, "--json"]);
    assert!(o.status.success(), "{o:?}");
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["trust"]["keyId"], "acme");

    // inspect shows the verdict.
    let store = t.join("store");
    let o = wop(&[
        "inspect",
        dir.to_str().unwrap(),
        "--policy",
        p,
        "--no-cache",
        "--store",
        store.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{o:?}");
    assert!(String::from_utf8_lossy(&o.stdout).contains("trust: signed by `acme`"));

    // Outside the key's namespace, unsigned, tampered: exit 3 with the code.
    write_policy("acme.*");
    let o = wop(&["verify", dir.to_str().unwrap(), "--policy", p, "--json"]);
    assert_eq!(o.status.code(), Some(3));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["error"]["code"], "pack_signature_invalid");
    write_policy("hel*");
    let o = wop(&[
        "verify",
        wop_testkit_pack("hello").to_str().unwrap(),
        "--policy",
        p,
    ]);
    assert_eq!(o.status.code(), Some(3));
    std::fs::copy(
        wop_testkit_pack("spin").join("spin.wasm"),
        dir.join("hello.wasm"),
    )
    .unwrap();
    let o = wop(&["verify", dir.to_str().unwrap(), "--policy", p, "--json"]);
    assert_eq!(o.status.code(), Some(3));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["error"]["code"], "pack_integrity_mismatch");
    for out in [&o.stdout, &o.stderr] {
        let s = String::from_utf8_lossy(out);
        assert!(!s.contains(&pubkey) && !s.contains(&secret), "{s}");
    }

    // diff
    let new = copy("hello", &t.join("v2"));
    let mut m: serde_json::Value =
        serde_json::from_slice(&std::fs::read(new.join("pack.json")).unwrap()).unwrap();
    m["x-wop"]["capabilities"] = serde_json::json!(["tools"]);
    std::fs::write(new.join("pack.json"), serde_json::to_vec(&m).unwrap()).unwrap();
    let old = wop_testkit_pack("hello");
    let o = wop(&[
        "diff",
        old.to_str().unwrap(),
        new.to_str().unwrap(),
        "--json",
    ]);
    assert!(o.status.success(), "{o:?}");
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["additions"][0]["kind"], "capability");
    assert_eq!(v["additions"][0]["item"], "tools");
    let o = wop(&["diff", old.to_str().unwrap(), old.to_str().unwrap()]);
    assert!(String::from_utf8_lossy(&o.stdout).contains("requests nothing new"));
}
