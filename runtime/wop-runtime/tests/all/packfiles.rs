//! Pack files and pack identity (issue 19, decision 0016): one bounded,
//! no-follow reader for every pack file, used before anything else reads
//! it; a pack is the name it declares; two packs of one name in a packs
//! directory are both refused; no rollback below the approved version; no
//! manifest the canonical form cannot represent exactly.

use super::*;
use serde_json::{Value, json};
use std::process::Command;
use wop_core::trust;
use wop_runtime::{ErrorCode, LoadError};
use wop_testkit::abi_v1::Module;

/// A kB value of `/proc/self/status` (`VmHWM`, `VmRSS`).
fn status_kb(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no {field} in /proc/self/status"))
}

/// Restarts the peak-RSS count (`VmHWM`) from the current RSS.
fn reset_peak() {
    std::fs::write("/proc/self/clear_refs", "5").unwrap();
}

fn reason(e: &LoadError) -> String {
    e.details()["reason"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

fn mkfifo(p: &Path) {
    let ok = Command::new("mkfifo").arg(p).status().expect("mkfifo");
    assert!(ok.success(), "mkfifo {}", p.display());
}

/// `pack.json` as a symlink to `/dev/zero`, a FIFO, a directory and a
/// 4 GiB (sparse) file; the same for the entry and `pack.sig`; a bare
/// module that is a FIFO or a device. Each is refused with its own
/// `details.reason`, through `inspect_pack`, `load_pack` and
/// `load_packs_dir` (the ABI v1 detection reads `pack.json` first, so it is
/// the path under test), without blocking on the FIFO, and without the
/// host's peak RSS growing by anything like the files' sizes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pack_files_that_are_not_regular_or_too_large_are_refused_unread() {
    let tmp = tempfile::tempdir().unwrap();
    let packs = tmp.path().join("packs");
    std::fs::create_dir(&packs).unwrap();
    // A copy of the `hello` sample at `packs/<name>`.
    let mk = |name: &str| {
        let copy = copy_pack("hello", &packs);
        let to = packs.join(name);
        std::fs::rename(copy, &to).unwrap();
        to
    };

    let symlink = mk("symlink");
    std::fs::remove_file(symlink.join("pack.json")).unwrap();
    std::os::unix::fs::symlink("/dev/zero", symlink.join("pack.json")).unwrap();

    let fifo = mk("fifo");
    std::fs::remove_file(fifo.join("pack.json")).unwrap();
    mkfifo(&fifo.join("pack.json"));

    let directory = mk("directory");
    std::fs::remove_file(directory.join("pack.json")).unwrap();
    std::fs::create_dir(directory.join("pack.json")).unwrap();

    let large = mk("large");
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(large.join("pack.json"))
        .unwrap();
    f.set_len(4 << 30).unwrap();

    // The other pack files under the same rule (pack.json itself fine).
    let entry = mk("entry-fifo");
    std::fs::remove_file(entry.join("hello.wasm")).unwrap();
    mkfifo(&entry.join("hello.wasm"));
    let sig = mk("sig-symlink");
    std::os::unix::fs::symlink("/dev/zero", sig.join("pack.sig")).unwrap();

    // Bare modules: a FIFO named .wasm in the packs directory, a device.
    mkfifo(&packs.join("pipe.wasm"));
    let device = Path::new("/dev/zero");

    let cases: Vec<(&Path, &str, &str)> = vec![
        (&symlink, "symlink", "pack.json"),
        (&fifo, "fifo", "pack.json"),
        (&directory, "directory", "pack.json"),
        (&large, "too-large", "pack.json"),
        (&entry, "fifo", "hello.wasm"),
        (&sig, "symlink", "pack.sig"),
        (device, "device", "/dev/zero"),
    ];
    let rt = runtime("");
    let baseline = status_kb("VmRSS");
    reset_peak();
    for (dir, want, file) in &cases {
        let e = rt.inspect_pack(dir).await.unwrap_err();
        assert_eq!(e.code(), ErrorCode::PackValidationFailed, "{e}");
        assert_eq!(reason(&e), *want, "{}: {e}", dir.display());
        assert_eq!(e.details()["file"], json!(file), "{e}");
        let e = rt.load_pack(dir).await.unwrap_err();
        assert_eq!(reason(&e), *want, "{}: {e}", dir.display());
        if *want == "too-large" {
            let d = e.details();
            assert_eq!(d["limit"], json!(1 << 20), "{e}");
            assert_eq!(d["observed"], json!(4u64 << 30), "{e}");
        }
    }
    let all = rt.load_packs_dir(&packs).await.unwrap();
    assert!(all.loaded.is_empty(), "{:?}", all.loaded);
    let got: Vec<(String, String)> = all
        .refused
        .iter()
        .map(|(p, e)| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (name, reason(e))
        })
        .collect();
    let want: Vec<(String, String)> = [
        ("directory", "directory"),
        ("entry-fifo", "fifo"),
        ("fifo", "fifo"),
        ("large", "too-large"),
        ("pipe.wasm", "fifo"),
        ("sig-symlink", "symlink"),
        ("symlink", "symlink"),
    ]
    .iter()
    .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
    .collect();
    assert_eq!(got, want);
    // Nothing was read whole: a 4 GiB file and /dev/zero went through the
    // loaders three times each, and the peak RSS moved by less than 256 MiB
    // (other tests of this binary run alongside; the files are 16 times
    // that).
    let peak = status_kb("VmHWM");
    assert!(
        peak < baseline + 256 * 1024,
        "peak RSS {peak} kB against {baseline} kB before"
    );
}

/// A bare module whose file name is innocent but which declares a pack the
/// operator requires signed is refused for the name it declares; the same
/// module loads under its declared name when nothing is required.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bare_module_is_the_pack_it_declares() {
    let tmp = tempfile::tempdir().unwrap();
    let wasm = wat::parse_str(Module::new("bare", "acme-fetch").wat()).unwrap();
    let path = tmp.path().join("innocent.wasm");
    std::fs::write(&path, &wasm).unwrap();

    let rt = runtime("[packs.acme-fetch]\nrequireSignature = true\n");
    let e = rt.load_pack(&path).await.unwrap_err();
    assert_eq!(e.code(), ErrorCode::PackSignatureInvalid, "{e}");
    assert_eq!(reason(&e), "missing");
    assert!(e.to_string().contains("`acme-fetch`"), "{e}");
    assert!(rt.packs().is_empty());
    let insp = rt.inspect_pack(&path).await.unwrap();
    let refusal = insp.refusal.expect("inspect says it would be refused");
    assert_eq!(refusal.code, "pack_signature_invalid", "{refusal:?}");

    // The file name still counts when it names a pack requiring one
    // (refused before a byte is read), and a global requirement refuses
    // every bare module before it is compiled.
    let rt = runtime("[packs.innocent]\nrequireSignature = true\n");
    assert_eq!(
        rt.load_pack(&path).await.unwrap_err().code(),
        ErrorCode::PackSignatureInvalid
    );
    let rt = runtime("[trust]\nrequireSignature = true\n");
    let before = rt.stats();
    assert_eq!(
        rt.load_pack(&path).await.unwrap_err().code(),
        ErrorCode::PackSignatureInvalid
    );
    assert_eq!(rt.stats(), before, "nothing compiled or run");

    // Approval is decided on the declared name too: a bare module is
    // version 0.0.0, below any approved version.
    let approved =
        wop_testkit::abi_v1::write_pack(tmp.path(), "test", "acme-fetch", &wasm, &[]).unwrap();
    let rt = runtime(&format!(
        "[packs.acme-fetch]\napproved = {:?}\n",
        approved.join("pack.json")
    ));
    let e = rt.load_pack(&path).await.unwrap_err();
    assert_eq!(e.code(), ErrorCode::PackVersionRollback, "{e}");

    // Nothing required of that name: it loads as `acme-fetch`.
    let rt = runtime("");
    let s = rt.load_pack(&path).await.unwrap();
    assert_eq!(s.name, "acme-fetch");
}

/// Two packs in one packs directory declaring one name — a signed-looking
/// pack directory and a bare module with another file name — are both
/// refused, by the library's packs-directory load; an unrelated pack next
/// to them loads. (wop serve's start-up: `wop-serve/tests/e2e/packs_dir.rs`.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_packs_declaring_one_name_are_both_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let packs = tmp.path().join("packs");
    std::fs::create_dir(&packs).unwrap();
    let dir_wasm = wat::parse_str(Module::new("test", "acme").wat()).unwrap();
    wop_testkit::abi_v1::write_pack(&packs, "test", "acme", &dir_wasm, &[]).unwrap();
    let bare = wat::parse_str(Module::new("bare", "acme").wat()).unwrap();
    std::fs::write(packs.join("zz-shadow.wasm"), bare).unwrap();
    copy_pack("hello", &packs);

    let rt = runtime("");
    let r = rt.load_packs_dir(&packs).await.unwrap();
    let loaded: Vec<&str> = r.loaded.iter().map(|(_, s)| s.name.as_str()).collect();
    assert_eq!(loaded, ["hello"]);
    assert_eq!(r.refused.len(), 2, "{:?}", r.refused);
    for (p, e) in &r.refused {
        assert_eq!(e.code(), ErrorCode::PackValidationFailed, "{e}");
        assert_eq!(reason(e), "duplicate-name", "{}: {e}", p.display());
        let d = e.details();
        assert_eq!(d["name"], "acme");
        assert_eq!(d["paths"].as_array().map(Vec::len), Some(2), "{d:?}");
    }
    // Neither node type is served.
    for t in ["test.acme", "bare.acme"] {
        let r = invoke(&rt, t, json!({})).await;
        assert_eq!(r.outcome.unwrap_err().code, "not_found", "{t}");
    }
    // Alone, each loads.
    std::fs::remove_file(packs.join("zz-shadow.wasm")).unwrap();
    let r = runtime("").load_packs_dir(&packs).await.unwrap();
    assert_eq!(r.loaded.len(), 2, "{:?}", r.refused);
}

/// Approval refuses a version below the approved one (a rollback), unless
/// the operator allows it; the approved version and newer ones load.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approval_refuses_a_rollback_unless_allowed() {
    let (old, new) = (pack("hello"), pack("hello-v2"));
    let policy = |extra: &str| {
        format!(
            "[packs.hello]\napproved = {:?}\n{extra}",
            new.join("pack.json")
        )
    };
    let rt = runtime(&policy(""));
    let before = rt.stats().cache;
    let e = rt.load_pack(&old).await.unwrap_err();
    assert_eq!(e.code(), ErrorCode::PackVersionRollback, "{e}");
    assert_eq!(e.details()["version"], "0.1.0");
    assert_eq!(e.details()["approvedVersion"], "0.2.0");
    assert!(e.to_string().contains("allowRollback"), "{e}");
    assert_eq!(rt.stats().cache, before, "refused before compiling");
    // Before this check, 0.1.0 loaded: it requests less than 0.2.0.
    assert!(
        trust::diff::additions(
            &trust::read_approved(&new).unwrap(),
            &trust::read_approved(&old).unwrap()
        )
        .is_empty()
    );
    let rt = runtime(&policy("allowRollback = true\n"));
    assert_eq!(rt.load_pack(&old).await.unwrap().version, "0.1.0");
    let rt = runtime(&policy(""));
    assert_eq!(rt.load_pack(&new).await.unwrap().version, "0.2.0");
}

/// What the canonical form cannot represent is refused before the
/// signature is verified: a `pack.json` carrying a decoy `x-wop` block
/// (its signature valid over what a JSON parser keeps), and one whose
/// integer the canonical form maps onto another.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn manifests_the_canonical_form_cannot_bind_are_refused() {
    const SEED: [u8; 32] = [7; 32];
    let tmp = tempfile::tempdir().unwrap();
    let policy = format!(
        "[trust]\nrequireSignature = true\n[trust.keys.acme]\npublicKey = \"{}\"\npacks = [\"hello\"]\n",
        trust::public_key_of(&SEED)
    );
    let real: Value =
        serde_json::from_slice(&std::fs::read(pack("hello").join("pack.json")).unwrap()).unwrap();
    // A signature over the canonical form of what a JSON parser keeps of
    // `v`, made directly (`trust::sign` refuses to sign such manifests).
    let signed_over = |v: &Value, dir: &Path| {
        use base64::Engine as _;
        use ed25519_dalek::Signer as _;
        let canonical = wop_core::jcs::canonicalize(v);
        let key = ed25519_dalek::SigningKey::from_bytes(&SEED);
        let sig = trust::PackSig {
            algorithm: trust::ALGORITHM.to_owned(),
            key_id: "acme".to_owned(),
            signature: base64::engine::general_purpose::STANDARD
                .encode(key.sign(canonical.as_bytes()).to_bytes()),
        };
        std::fs::write(dir.join("pack.sig"), serde_json::to_vec(&sig).unwrap()).unwrap();
    };

    // The signed manifest loads.
    let good = copy_pack("hello", &tmp.path().join("good"));
    signed_over(&real, &good);
    runtime(&policy)
        .load_pack(&good)
        .await
        .expect("signed pack loads");

    // A decoy block first, the real one last: serde_json keeps the last.
    let decoy = copy_pack("hello", &tmp.path().join("decoy"));
    let body = real.to_string();
    let fake = json!({"sha256": real["x-wop"]["sha256"], "capabilities": ["log"], "tools": []});
    let text = format!("{{\"x-wop\":{fake},{}", &body[1..]);
    std::fs::write(decoy.join("pack.json"), &text).unwrap();
    let kept: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(kept, real, "a parser keeps the real block");
    signed_over(&kept, &decoy);
    let e = runtime(&policy).load_pack(&decoy).await.unwrap_err();
    assert_eq!(e.code(), ErrorCode::PackValidationFailed, "{e}");
    assert_eq!(reason(&e), "duplicate-member", "{e}");
    assert_eq!(e.details()["path"], "$.x-wop", "{e}");

    // 2^53 + 1 canonicalizes as 2^53: signed with one, shipped with the
    // other (the fuel limit the runtime would apply is not the signed one).
    let big = copy_pack("hello", &tmp.path().join("big"));
    let mut v = real.clone();
    v["x-wop"]["limits"] = json!({"fuel": 9_007_199_254_740_992u64});
    signed_over(&v, &big);
    let text = v
        .to_string()
        .replace("9007199254740992", "9007199254740993");
    std::fs::write(big.join("pack.json"), text).unwrap();
    let e = runtime(&policy).load_pack(&big).await.unwrap_err();
    assert_eq!(reason(&e), "unsafe-integer", "{e}");
    assert_eq!(e.details()["path"], "$.x-wop.limits.fuel", "{e}");
}
