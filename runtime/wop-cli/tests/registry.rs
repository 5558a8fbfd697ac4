//! Packs from a registry (issue 22), end to end: a loopback registry — a
//! static tree laid out as the protocol's registry lays it out, served by
//! a plain HTTP file server (`python3 -m http.server`) — built here from
//! our sample packs with `wop sign` and `wop pack --tgz`; then `wop
//! install` against it, good and hostile, and `wop run` of what it
//! installed. Signatures also cross-checked with `node:crypto`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod common;

use common::{serve_dir as serve, text, wop_in};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn ok(o: &Output) -> String {
    let t = text(o);
    assert_eq!(o.status.code(), Some(0), "{t}");
    t
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let p = e.path();
        if p.is_dir() {
            copy_dir(&p, &to.join(e.file_name()));
        } else {
            std::fs::copy(&p, to.join(e.file_name())).unwrap();
        }
    }
}

/// The registry tree under construction.
struct Tree {
    root: PathBuf,
    work: PathBuf,
    rows: std::collections::BTreeMap<String, Vec<Value>>,
}

impl Tree {
    /// Signs a copy of the built pack `sample` with `key` and publishes it
    /// as a version of its pack; `tamper` may change the archive's files
    /// (the published integrity is of what is served, unless
    /// `corrupt_after` flips a byte of the served archive afterwards).
    fn publish(
        &mut self,
        sample: &str,
        key: &str,
        yanked: bool,
        tamper: impl Fn(&mut std::collections::BTreeMap<String, Vec<u8>>),
        corrupt_after: bool,
    ) {
        let dir = self.work.join(format!("{sample}-{key}"));
        copy_dir(&wop_test_packs::pack_dir(sample), &dir);
        let key_file = self.work.join(format!("keys/{key}.key"));
        let d = dir.display().to_string();
        ok(&wop_in(
            &self.work,
            &["sign", &d, "--key", &key_file.display().to_string()],
        ));
        let out = self.work.join("out");
        ok(&wop_in(
            &self.work,
            &["pack", &d, "--tgz", "--out", &out.display().to_string()],
        ));
        let m: Value =
            serde_json::from_slice(&std::fs::read(dir.join("pack.json")).unwrap()).unwrap();
        let (name, version) = (m["name"].as_str().unwrap(), m["version"].as_str().unwrap());
        let built = out.join(format!("{name}-{version}.tgz"));
        let mut files = wop_core::archive::read_tgz(&std::fs::read(&built).unwrap()).unwrap();
        tamper(&mut files);
        let mut bytes = wop_core::archive::write_tgz(&files).unwrap();
        let integrity = wop_core::archive::integrity(&bytes);
        if corrupt_after {
            let n = bytes.len();
            bytes[n / 2] ^= 0xff;
        }
        let at = self.root.join(format!("v1/packs/{name}/-"));
        std::fs::create_dir_all(&at).unwrap();
        std::fs::write(at.join(format!("{version}.tgz")), &bytes).unwrap();
        self.rows.entry(name.to_owned()).or_default().push(json!({
            "version": version,
            "tarballUrl": format!("/v1/packs/{name}/-/{version}.tgz"),
            "signingMethod": "manual", "signingKeyId": key,
            "integrity": integrity, "deprecated": false, "yanked": yanked,
        }));
    }

    fn finish(&self) {
        for (name, rows) in &self.rows {
            let idx = json!({"name": name, "versions": rows});
            std::fs::write(
                self.root.join(format!("v1/packs/{name}/index.json")),
                serde_json::to_vec_pretty(&idx).unwrap(),
            )
            .unwrap();
        }
    }
}

#[test]
fn install_from_a_loopback_registry_good_and_hostile_then_run() {
    let tmp = tempfile::tempdir().unwrap();
    let work = tmp.path().to_path_buf();
    let root = work.join("registry");
    std::fs::create_dir_all(root.join(".well-known")).unwrap();
    std::fs::create_dir_all(root.join("keys")).unwrap();
    let keys = work.join("keys");
    for k in ["test-key", "other-key", "ghost-key", "wild-key"] {
        ok(&wop_in(
            &work,
            &["keygen", "--id", k, "--out", &keys.display().to_string()],
        ));
    }
    for k in ["test-key", "other-key", "wild-key"] {
        std::fs::copy(
            keys.join(format!("{k}.pub")),
            root.join(format!("keys/{k}.pub")),
        )
        .unwrap();
    }
    let discovery = json!({
        "registryVersion": "1.0.0",
        "endpoints": {
            "registryIndex": "/v1/index.json",
            "packMetadata": "/v1/packs/{name}/index.json",
            "versionManifest": "/v1/packs/{name}/-/{version}.json",
            "versionTarball": "/v1/packs/{name}/-/{version}.tgz",
            "versionSignature": "/v1/packs/{name}/-/{version}.sig",
            "publicKey": "/keys/{keyId}.pub"
        },
        "signingKeys": [
            {"keyId": "test-key", "algorithm": "ed25519", "publicKeyUrl": "/keys/test-key.pub",
             "permittedNamespaces": ["hello", "fetch", "tool-call", "kernels"], "status": "active"},
            {"keyId": "other-key", "algorithm": "ed25519", "publicKeyUrl": "/keys/other-key.pub",
             "permittedNamespaces": ["vendor.other.*"], "status": "active"},
            // A registry key claiming every name (issue 33.9).
            {"keyId": "wild-key", "algorithm": "ed25519", "publicKeyUrl": "/keys/wild-key.pub",
             "permittedNamespaces": ["*"], "status": "active"}
        ]
    });
    std::fs::write(
        root.join(".well-known/openwop-registry.json"),
        serde_json::to_vec_pretty(&discovery).unwrap(),
    )
    .unwrap();
    let mut tree = Tree {
        root: root.clone(),
        work: work.clone(),
        rows: Default::default(),
    };
    let none = |_: &mut std::collections::BTreeMap<String, Vec<u8>>| {};
    tree.publish("hello", "test-key", false, none, false);
    tree.publish("hello-v2", "test-key", true, none, false);
    tree.publish("fetch", "test-key", false, none, true);
    tree.publish(
        "tool-call",
        "test-key",
        false,
        |f| {
            let m = f.get_mut("pack.json").unwrap();
            let t = String::from_utf8(m.clone())
                .unwrap()
                .replacen("\"0.1.0\"", "\"0.1.0\" ", 1);
            *m = t.into_bytes();
        },
        false,
    );
    tree.publish("kernels", "ghost-key", false, none, false);
    tree.publish("spin", "other-key", false, none, false);
    tree.publish("transform", "wild-key", false, none, false);
    tree.finish();
    // An index for `alias` that serves hello's (validly signed) archive.
    let hello_row = tree.rows["hello"][0].clone();
    std::fs::create_dir_all(root.join("v1/packs/alias")).unwrap();
    std::fs::write(
        root.join("v1/packs/alias/index.json"),
        serde_json::to_vec(&json!({"name": "alias", "versions": [hello_row]})).unwrap(),
    )
    .unwrap();
    // A correctly hashed archive whose gzip stream has bytes after its
    // end (issue 33.11): the integrity matches, the archive is refused.
    let mut junk_row = tree.rows["hello"][0].clone();
    let hello_tgz = root.join(format!(
        "v1/packs/hello/-/{}.tgz",
        junk_row["version"].as_str().unwrap()
    ));
    let mut junk = std::fs::read(hello_tgz).unwrap();
    junk.extend_from_slice(b"junk");
    std::fs::create_dir_all(root.join("v1/packs/junky/-")).unwrap();
    std::fs::write(root.join("v1/packs/junky/-/0.1.0.tgz"), &junk).unwrap();
    junk_row["tarballUrl"] = json!("/v1/packs/junky/-/0.1.0.tgz");
    junk_row["integrity"] = json!(wop_core::archive::integrity(&junk));
    std::fs::write(
        root.join("v1/packs/junky/index.json"),
        serde_json::to_vec(&json!({"name": "junky", "versions": [junk_row]})).unwrap(),
    )
    .unwrap();
    // A registry document larger than the client's 4 MiB cap.
    std::fs::create_dir_all(root.join("v1/packs/huge")).unwrap();
    let pad = "x".repeat(5 << 20);
    std::fs::write(
        root.join("v1/packs/huge/index.json"),
        serde_json::to_vec(&json!({"name": "huge", "versions": [], "pad": pad})).unwrap(),
    )
    .unwrap();
    let (_server, port) = serve(&root);
    let registry = format!("http://127.0.0.1:{port}");
    let policy = work.join("policy.toml");
    std::fs::write(
        &policy,
        format!(
            "[egress]\nallowLoopback = true\n\n[trust.keys.test-key]\npublicKeyFile = \"{}\"\npacks = [\"hello\", \"fetch\", \"tool-call\", \"kernels\", \"transform\"]\n",
            keys.join("test-key.pub").display()
        ),
    )
    .unwrap();
    let p = policy.display().to_string();
    let install = |pack: &str, extra: &[&str]| {
        let mut args = vec!["install", pack, "--registry", &registry, "--policy", &p];
        args.extend_from_slice(extra);
        wop_in(&work, &args)
    };
    let refused = |o: &Output, code: &str| {
        let t = text(o);
        assert_eq!(o.status.code(), Some(3), "{t}");
        assert!(t.contains(code), "expected {code}: {t}");
        t
    };

    // By name: the highest version that is not yanked.
    let t = ok(&install("hello", &[]));
    assert!(t.contains("installed hello@0.1.0"), "{t}");
    assert!(t.contains("signed by `test-key`"), "{t}");
    let lock: Value =
        serde_json::from_slice(&std::fs::read(work.join("pack-lock.json")).unwrap()).unwrap();
    assert_eq!(lock["lockfileVersion"], 1);
    assert_eq!(lock["packs"][0]["name"], "hello");
    assert_eq!(lock["packs"][0]["version"], "0.1.0");
    assert!(
        lock["packs"][0]["integrity"]
            .as_str()
            .unwrap()
            .starts_with("sha256-")
    );
    // Then run it.
    let t = ok(&wop_in(
        &work,
        &[
            "run",
            "packs/hello",
            "wop.samples.hello",
            "--input",
            "{\"name\":\"Reg\"}",
            "--policy",
            &p,
        ],
    ));
    assert!(t.contains("Hello, Reg!"), "{t}");

    // A yanked version: only by an exact pin, with a warning.
    let t = ok(&install("hello@0.2.0", &[]));
    assert!(
        t.contains("is yanked") && t.contains("installed hello@0.2.0"),
        "{t}"
    );
    refused(&install("hello@9.9.9", &[]), "pack_version_not_found");
    // Over-size is its own code, not `not_found` (issue 33.11).
    let t = refused(&install("huge", &[]), "registry_document_too_large");
    assert!(t.contains("4194304-byte cap"), "{t}");
    assert!(!t.contains("not_found"), "{t}");
    let t = refused(&install("junky", &[]), "pack_archive_corrupt");
    assert!(t.contains("trailing-bytes"), "{t}");
    assert!(!work.join("packs/junky").exists());
    let t = refused(&install("alias", &[]), "pack_validation_failed");
    assert!(t.contains("holds a pack named `hello`"), "{t}");
    for bad in ["../../etc@1.0.0", "hello@1.0.0-../../x"] {
        let o = install(bad, &[]);
        assert_eq!(o.status.code(), Some(2), "{bad}: {}", text(&o));
    }
    let o = install("local.mine", &[]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("never published"), "{}", text(&o));

    // Hostile: a tarball that is not what the index says; a pack.json
    // changed inside a correctly hashed tarball; an unknown key; a key
    // outside its namespaces (trusting the registry's keys).
    refused(&install("fetch", &[]), "pack_integrity_failure");
    assert!(!work.join("packs/fetch").exists(), "nothing was unpacked");
    refused(&install("tool-call", &[]), "pack_signature_invalid");
    let t = refused(&install("kernels", &[]), "pack_signature_invalid");
    assert!(t.contains("ghost-key"), "{t}");
    let t = refused(
        &install("spin", &["--trust-registry"]),
        "pack_signature_invalid",
    );
    assert!(t.contains("not to sign packs named `spin`"), "{t}");
    // A registry key claiming `*` never signs a name an operator key's
    // pattern covers (issue 33.9): `transform` is the operator's.
    let t = refused(
        &install("transform", &["--trust-registry"]),
        "pack_signature_invalid",
    );
    assert!(
        t.contains("key-not-allowed") && t.contains("covered by an operator key"),
        "{t}"
    );
    for name in ["tool-call", "kernels", "spin", "transform"] {
        assert!(
            !work.join("packs").join(name).exists(),
            "{name} was not installed"
        );
    }

    // Reproducible and offline: the lockfile pins hello@0.2.0 now; a
    // reinstall from the kept archive needs no registry.
    drop(_server);
    std::fs::remove_dir_all(work.join("packs/hello")).unwrap();
    let t = ok(&wop_in(&work, &["install", "--offline", "--policy", &p]));
    assert!(t.contains("installed hello@0.2.0"), "{t}");
    let kept = work.join("packs/.archives/hello-0.2.0.tgz");
    let mut bytes = std::fs::read(&kept).unwrap();
    let n = bytes.len();
    bytes[n - 10] ^= 1;
    std::fs::write(&kept, bytes).unwrap();
    refused(
        &wop_in(&work, &["install", "--offline", "--policy", &p]),
        "pack_integrity_mismatch",
    );
}

#[test]
fn signatures_interoperate_with_node_crypto() {
    if Command::new("node").arg("--version").output().is_err() {
        panic!("node is needed for this test (installed by .ci/run)");
    }
    let tmp = tempfile::tempdir().unwrap();
    let work = tmp.path().to_path_buf();
    let script = work.join("ed25519.js");
    std::fs::write(
        &script,
        r#"
const crypto = require('node:crypto');
const fs = require('node:fs');
const [mode, dir, keyPath] = process.argv.slice(2);
const canon = (v) => Array.isArray(v) ? '[' + v.map(canon).join(',') + ']'
  : (v !== null && typeof v === 'object')
    ? '{' + Object.keys(v).sort().map((k) => JSON.stringify(k) + ':' + canon(v[k])).join(',') + '}'
    : JSON.stringify(v);
if (mode === 'verify') {
  const key = crypto.createPublicKey(fs.readFileSync(keyPath, 'utf8'));
  const ok = crypto.verify(null, fs.readFileSync(dir + '/pack.json'), key,
                           fs.readFileSync(dir + '/keys/pack.json.sig'));
  console.log(ok ? 'verified' : 'FAILED');
  process.exit(ok ? 0 : 1);
}
const m = JSON.parse(fs.readFileSync(dir + '/pack.json', 'utf8'));
m.signing = { method: 'manual', publicKeyRef: 'node-key', signatureRef: 'keys/pack.json.sig' };
const bytes = Buffer.from(canon(m), 'utf8');
const { privateKey, publicKey } = crypto.generateKeyPairSync('ed25519');
fs.writeFileSync(dir + '/pack.json', bytes);
fs.mkdirSync(dir + '/keys', { recursive: true });
fs.writeFileSync(dir + '/keys/pack.json.sig', crypto.sign(null, bytes, privateKey));
fs.writeFileSync(keyPath, publicKey.export({ type: 'spki', format: 'pem' }));
"#,
    )
    .unwrap();
    let node = |args: &[&str]| {
        Command::new("node")
            .arg(&script)
            .args(args)
            .output()
            .unwrap()
    };

    // wop signs, node verifies.
    let a = work.join("a");
    copy_dir(&wop_test_packs::pack_dir("hello"), &a);
    ok(&wop_in(&work, &["keygen", "--id", "k1", "--out", "keys"]));
    ok(&wop_in(&work, &["sign", "a", "--key", "keys/k1.key"]));
    let o = node(&[
        "verify",
        &a.display().to_string(),
        &work.join("keys/k1.pub").display().to_string(),
    ]);
    assert!(text(&o).contains("verified"), "{}", text(&o));

    // node signs, wop verifies (and refuses it once a byte changes).
    let b = work.join("b");
    copy_dir(&wop_test_packs::pack_dir("hello"), &b);
    let pem = work.join("node.pub");
    let o = node(&["sign", &b.display().to_string(), &pem.display().to_string()]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    std::fs::write(
        work.join("policy.toml"),
        format!(
            "[trust]\nrequireSignature = true\n[trust.keys.node-key]\npublicKeyFile = \"{}\"\npacks = [\"hello\"]\n",
            pem.display()
        ),
    )
    .unwrap();
    let t = ok(&wop_in(&work, &["verify", "b", "--policy", "policy.toml"]));
    assert!(t.contains("signed by `node-key` (trusted)"), "{t}");
    // The archive of it verifies too.
    ok(&wop_in(&work, &["pack", "b", "--tgz", "--out", "dist"]));
    let t = ok(&wop_in(
        &work,
        &["verify", "dist/hello-0.1.0.tgz", "--policy", "policy.toml"],
    ));
    assert!(t.contains("node-key"), "{t}");
    let mut m = std::fs::read(b.join("pack.json")).unwrap();
    let at = m.windows(5).position(|w| w == b"0.1.0").unwrap();
    m[at + 4] = b'9';
    std::fs::write(b.join("pack.json"), m).unwrap();
    let o = wop_in(&work, &["verify", "b", "--policy", "policy.toml"]);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    assert!(text(&o).contains("pack_signature_invalid"), "{}", text(&o));
}

#[test]
fn a_javascript_pack_that_exports_no_declared_node_is_refused_by_its_build() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("js");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("index.mjs"), "export default {}").unwrap();
    std::fs::write(
        dir.join("pack.json"),
        r#"{"kind":"node","name":"community.demo.js","version":"1.0.0","engines":{"openwop":">=1.0.0"},
            "nodes":[{"typeId":"community.demo.js.a","version":"1.0.0","category":"data","role":"pure"}],
            "runtime":{"language":"javascript","format":"esm","entry":"./index.mjs"}}"#,
    )
    .unwrap();
    let o = wop_in(tmp.path(), &["inspect", "js", "--no-cache"]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(3), "{t}");
    assert!(
        t.contains("pack_build_failed (js_node_not_exported)"),
        "{t}"
    );
    assert!(t.contains("community.demo.js.a"), "{t}");
}

#[test]
fn hostile_archives_are_refused_with_their_reason() {
    // Built by Python's tarfile, an independent writer that happily
    // produces what a hostile publisher would.
    let tmp = tempfile::tempdir().unwrap();
    let script = r#"
import io, sys, tarfile
out, kind = sys.argv[1], sys.argv[2]
with tarfile.open(out, 'w:gz', format=tarfile.GNU_FORMAT) as t:
    def add(name, data=b'', **kw):
        ti = tarfile.TarInfo(name)
        ti.size = len(data)
        for k, v in kw.items():
            setattr(ti, k, v)
        t.addfile(ti, io.BytesIO(data) if data else None)
    if kind == 'traversal':
        add('../../etc/x', b'x')
    elif kind == 'absolute':
        add('/etc/x', b'x')
    elif kind == 'symlink':
        add('pack.json', type=tarfile.SYMTYPE, linkname='/etc/passwd')
    elif kind == 'hardlink':
        add('pack.json', type=tarfile.LNKTYPE, linkname='/etc/passwd')
    elif kind == 'device':
        add('dev', type=tarfile.CHRTYPE, devmajor=1, devminor=3)
    elif kind == 'many':
        for i in range(100000):
            add('f%d' % i)
"#;
    for (kind, reason, code) in [
        ("traversal", "parent-path", "pack_archive_invalid"),
        ("absolute", "absolute-path", "pack_archive_invalid"),
        ("symlink", "link", "pack_archive_invalid"),
        ("hardlink", "link", "pack_archive_invalid"),
        ("device", "special-file", "pack_archive_invalid"),
        ("many", "too-many-entries", "pack_too_large"),
    ] {
        let path = tmp.path().join(format!("{kind}.tgz"));
        let o = Command::new("python3")
            .args(["-c", script])
            .arg(&path)
            .arg(kind)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        let o = wop_in(
            tmp.path(),
            &["verify", &path.display().to_string(), "--json"],
        );
        let t = text(&o);
        assert_eq!(o.status.code(), Some(3), "{kind}: {t}");
        let v: Value = serde_json::from_slice(&o.stdout).unwrap_or(Value::Null);
        assert_eq!(v["error"]["details"]["reason"], reason, "{kind}: {t}");
        assert_eq!(v["error"]["code"], code, "{kind}: {t}");
    }
    assert!(!tmp.path().join("../etc/x").exists());
}

#[test]
fn a_type_id_outside_the_mcp_rule_and_a_prefix_star_pattern_are_refused_with_codes() {
    // Issue 33.7: a real pack whose type id is markup.
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("hello");
    copy_dir(&wop_test_packs::pack_dir("hello"), &dir);
    let m = std::fs::read_to_string(dir.join("pack.json")).unwrap();
    let mut v: Value = serde_json::from_str(&m).unwrap();
    v["nodes"][0]["typeId"] = json!("x\"><svg/onload=alert(1)>");
    std::fs::write(dir.join("pack.json"), serde_json::to_vec(&v).unwrap()).unwrap();
    let o = wop_in(tmp.path(), &["inspect", "hello", "--no-cache", "--json"]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(3), "{t}");
    let doc: Value = serde_json::from_slice(&o.stdout).unwrap_or(Value::Null);
    assert_eq!(doc["error"]["code"], "invalid_type_id", "{t}");
    assert_eq!(doc["error"]["details"]["path"], "$.nodes[0].typeId", "{t}");

    // Issue 33.11 / decision 0021: `hel*` is not a pattern; refused when
    // the policy is loaded, naming the field.
    let policy = tmp.path().join("p.toml");
    std::fs::write(
        &policy,
        "[trust.keys.k]\npublicKey = \"ORLpnWQX+LXPEMbzfru6TnEolAq5bkg+mIcuoggEe/w=\"\npacks = [\"hel*\"]\n",
    )
    .unwrap();
    let o = wop_in(
        tmp.path(),
        &["verify", "hello", "--policy", policy.to_str().unwrap()],
    );
    let t = text(&o);
    assert_eq!(o.status.code(), Some(2), "{t}");
    assert!(
        t.contains("trust.keys.k.packs[0]") && t.contains("`hel*` is not a name pattern"),
        "{t}"
    );
}

#[test]
fn wop_pack_reads_its_inputs_bounded() {
    // Issue 33.11: `wop pack` read the template and the component with
    // plain std::fs; a template that is a symlink to /dev/zero, or a
    // component that is a device, is now refused by its kind, unread.
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    std::fs::create_dir_all(&src).unwrap();
    std::os::unix::fs::symlink("/dev/zero", src.join("pack.json")).unwrap();
    let wasm = wop_test_packs::wasm_path("hello");
    let o = wop_in(
        tmp.path(),
        &["pack", "src", "--wasm", wasm.to_str().unwrap()],
    );
    let t = text(&o);
    assert_eq!(o.status.code(), Some(2), "{t}");
    assert!(t.contains("symbolic link"), "{t}");

    std::fs::remove_file(src.join("pack.json")).unwrap();
    std::fs::copy(
        wop_test_packs::pack_dir("hello").join("pack.json"),
        src.join("pack.json"),
    )
    .unwrap();
    let o = wop_in(tmp.path(), &["pack", "src", "--wasm", "/dev/zero"]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(2), "{t}");
    assert!(t.contains("a device"), "{t}");
}
