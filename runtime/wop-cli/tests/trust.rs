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
    // PKCS#8 and SPKI PEM, as openssl and a registry's `/keys/{keyId}.pub`.
    let pem_body = |file: &str| {
        let text = std::fs::read_to_string(keys.join(file)).unwrap();
        text.lines()
            .filter(|l| !l.starts_with("-----"))
            .collect::<String>()
    };
    let secret = pem_body("acme.key");
    let pubkey = pem_body("acme.pub");
    assert!(
        std::fs::read_to_string(keys.join("acme.key"))
            .unwrap()
            .starts_with("-----BEGIN PRIVATE KEY-----")
    );
    assert!(
        std::fs::read_to_string(keys.join("acme.pub"))
            .unwrap()
            .starts_with("-----BEGIN PUBLIC KEY-----")
    );
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
    // The protocol's layout: canonical pack.json with its signing block,
    // the raw signature in keys/pack.json.sig, no legacy pack.sig.
    assert_eq!(
        std::fs::read(dir.join("keys/pack.json.sig")).unwrap().len(),
        64
    );
    assert!(!dir.join("pack.sig").exists());
    let m = std::fs::read_to_string(dir.join("pack.json")).unwrap();
    assert!(
        m.contains(r#""signing":{"method":"manual","publicKeyRef":"acme""#),
        "{m}"
    );
    let policy = t.join("policy.toml");
    let write_policy = |pattern: &str| {
        std::fs::write(
            &policy,
            format!(
                "[trust]\nrequireSignature = true\n[trust.keys.acme]\npublicKeyFile = \"{}\"\npacks = [\"{pattern}\"]\n",
                keys.join("acme.pub").display()
            ),
        )
        .unwrap()
    };
    write_policy("hello");
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
    let mut seen = vec![o];

    // Running the signed pack with every log line on: its events, outcome
    // and the host's trace logs carry neither key.
    let o = Command::new(env!("CARGO_BIN_EXE_wop"))
        .env("WOP_LOG", "trace")
        .args([
            "run",
            dir.to_str().unwrap(),
            "wop.samples.hello",
            "--policy",
            p,
            "--store",
            store.to_str().unwrap(),
            "--json",
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{o:?}");
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("Hello, world!"), "{out}");
    assert!(out.contains("log.appended"), "events are printed: {out}");
    assert!(!o.stderr.is_empty(), "trace logging is on");
    seen.push(o);

    // Outside the key's namespace, unsigned, tampered: exit 3 with the code.
    write_policy("acme.*");
    let o = wop(&["verify", dir.to_str().unwrap(), "--policy", p, "--json"]);
    assert_eq!(o.status.code(), Some(3));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["error"]["code"], "pack_signature_invalid");
    write_policy("hello");
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
    seen.push(o);
    for o in &seen {
        for out in [&o.stdout, &o.stderr] {
            let s = String::from_utf8_lossy(out);
            assert!(!s.contains(&pubkey) && !s.contains(&secret), "{s}");
        }
    }

    // diff: two real releases of `hello` (0.1.0 and testing/hello-v2).
    let old = wop_testkit_pack("hello");
    let new = wop_testkit_pack("hello-v2");
    let o = wop(&[
        "diff",
        old.to_str().unwrap(),
        new.to_str().unwrap(),
        "--json",
    ]);
    assert!(o.status.success(), "{o:?}");
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let adds: Vec<(String, String)> = v["additions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            (
                a["kind"].as_str().unwrap().to_owned(),
                a["item"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    for (kind, item) in [
        ("capability", "tools"),
        ("tool", "kv.get"),
        ("egress", "api.example.com"),
    ] {
        assert!(
            adds.contains(&(kind.to_owned(), item.to_owned())),
            "{adds:?}"
        );
    }
    let o = wop(&["diff", old.to_str().unwrap(), old.to_str().unwrap()]);
    assert!(String::from_utf8_lossy(&o.stdout).contains("requests nothing new"));
}
