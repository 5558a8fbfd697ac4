//! The real OpenWOP registry's signed archives through the real `wop`
//! binary (issue 32, "First"; decision 0025): a few of its tarballs, keys
//! and index documents are kept byte for byte under
//! `tests/fixtures/openwop-registry/` (see its README for the source
//! commit). Verification comes first and works for every kind; what can
//! run here is said after, with its own code; a changed byte is a
//! signature refusal, never a manifest error; damaged gzip streams and
//! over-long paths get codes.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod common;

use common::{registry_fixtures as fixtures, text, wop_in};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

fn archive(name: &str, version: &str) -> PathBuf {
    fixtures().join(format!("v1/packs/{name}/-/{version}.tgz"))
}

/// The integrity the registry published for a version.
fn published_integrity(name: &str, version: &str) -> String {
    let p = fixtures().join(format!("v1/packs/{name}/-/{version}.json"));
    let v: Value = serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap();
    v["integrity"].as_str().unwrap().to_owned()
}

/// An operator policy trusting the registry's keys as its discovery
/// document limits them (`permittedNamespaces`), as an operator would.
fn policy(dir: &Path) -> PathBuf {
    common::registry_policy(dir, "")
}

/// `wop verify --json`: exit code and document.
fn verify(dir: &Path, pack: &Path, extra: &[&str]) -> (Option<i32>, Value, String) {
    let pol = policy(dir);
    let mut args = vec![
        "verify".to_owned(),
        pack.display().to_string(),
        "--policy".to_owned(),
        pol.display().to_string(),
        "--json".to_owned(),
    ];
    args.extend(extra.iter().map(|s| (*s).to_owned()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = wop_in(dir, &args);
    let v = serde_json::from_slice(&o.stdout).unwrap_or(Value::Null);
    (o.status.code(), v, text(&o))
}

#[test]
fn real_signed_archives_verify_whatever_their_kind_then_say_whether_they_can_run() {
    let tmp = tempfile::tempdir().unwrap();
    // JavaScript node packs run here (issue 32).
    for (name, version, key) in [
        (
            "community.openwop-team.demo",
            "0.1.0",
            "community-openwop-team-demo-1",
        ),
        // 65 and 74 entries: over the old cap of 64.
        ("core.openwop.storage", "1.0.0", "openwop-team-1"),
    ] {
        let integrity = published_integrity(name, version);
        let (exit, v, t) = verify(
            tmp.path(),
            &archive(name, version),
            &["--integrity", &integrity],
        );
        assert_eq!(exit, Some(0), "{name}: {t}");
        assert_eq!(v["verified"], true, "{name}: {t}");
        assert_eq!(v["trust"]["keyId"], key, "{name}: {t}");
        assert_eq!(v["runnable"], true, "{name}: {t}");
    }
    // A JavaScript pack that `requires` network access the policy does
    // not grant: verified, and refused until the operator grants it.
    let integrity = published_integrity("core.openwop.http", "2.0.0");
    let (exit, v, t) = verify(
        tmp.path(),
        &archive("core.openwop.http", "2.0.0"),
        &["--integrity", &integrity],
    );
    assert_eq!(exit, Some(3), "{t}");
    assert_eq!(v["verified"], true, "{t}");
    assert_eq!(v["error"]["code"], "pack_runtime_requirement_unmet", "{t}");
    for (name, version, key, code) in [
        (
            "core.openwop.workflows.kicktodo-accountability",
            "1.0.0",
            "openwop-team-1",
            "unsupported_pack_kind",
        ),
        (
            "core.openwop.agent-examples",
            "1.0.0",
            "openwop-team-1",
            "unsupported_runtime",
        ),
    ] {
        let integrity = published_integrity(name, version);
        let (exit, v, t) = verify(
            tmp.path(),
            &archive(name, version),
            &["--integrity", &integrity],
        );
        assert_eq!(exit, Some(0), "{name}: {t}");
        assert_eq!(v["verified"], true, "{name}: {t}");
        assert_eq!(v["trust"]["verdict"], "trusted", "{name}: {t}");
        assert_eq!(v["trust"]["keyId"], key, "{name}: {t}");
        assert_eq!(v["name"], name, "{name}: {t}");
        assert_eq!(v["integrity"], integrity.as_str(), "{name}: {t}");
        assert_eq!(v["runnable"], false, "{name}: {t}");
        assert_eq!(v["error"]["code"], code, "{name}: {t}");
    }
    // The text form says both things.
    let pol = policy(tmp.path());
    let o = wop_in(
        tmp.path(),
        &[
            "verify",
            &archive("core.openwop.agent-examples", "1.0.0")
                .display()
                .to_string(),
            "--policy",
            &pol.display().to_string(),
        ],
    );
    let t = text(&o);
    assert_eq!(o.status.code(), Some(0), "{t}");
    assert!(
        t.contains("verified: signed by `openwop-team-1` (trusted)"),
        "{t}"
    );
    assert!(
        t.contains("not runnable here: unsupported_runtime") && t.contains("`remote`"),
        "{t}"
    );
}

/// The demo archive's files, with `edit` applied, written back as a
/// `.tgz` (the registry's layout, other bytes than the original).
fn rebuilt(dir: &Path, edit: impl Fn(&mut Vec<u8>)) -> PathBuf {
    let bytes = std::fs::read(archive("community.openwop-team.demo", "0.1.0")).unwrap();
    let mut files = wop_core::archive::read_tgz(&bytes).unwrap();
    edit(files.get_mut("pack.json").unwrap());
    let out = dir.join(format!("rebuilt-{}.tgz", files.len()));
    let _ = std::fs::remove_file(&out);
    std::fs::write(&out, wop_core::archive::write_tgz(&files).unwrap()).unwrap();
    out
}

#[test]
fn one_changed_byte_of_a_real_pack_json_is_a_signature_refusal_not_a_manifest_error() {
    let tmp = tempfile::tempdir().unwrap();
    // Control: the same files rebuilt into another archive still verify
    // (the signature covers pack.json's bytes, not the archive's).
    let same = rebuilt(tmp.path(), |_| {});
    let (exit, v, t) = verify(tmp.path(), &same, &[]);
    assert_eq!((exit, &v["verified"]), (Some(0), &Value::Bool(true)), "{t}");

    // One byte of the description changed, the integrity "fixed up" (we
    // give the new archive's own): the signature refuses it. Before
    // decision 0025 this was `pack_validation_failed at $.kind`.
    let tampered = rebuilt(tmp.path(), |m| {
        let at = m
            .windows(5)
            .position(|w| w == b"First")
            .expect("the description");
        m[at + 4] = b'u';
    });
    let fixed_up = wop_core::archive::integrity(&std::fs::read(&tampered).unwrap());
    let (exit, v, t) = verify(tmp.path(), &tampered, &["--integrity", &fixed_up]);
    assert_eq!(exit, Some(3), "{t}");
    assert_eq!(v["verified"], false, "{t}");
    assert_eq!(v["error"]["code"], "pack_signature_invalid", "{t}");
    assert_eq!(v["error"]["details"]["reason"], "bad-signature", "{t}");
    assert!(!t.contains("$.kind"), "{t}");

    // The same archive against the integrity the registry published.
    let published = published_integrity("community.openwop-team.demo", "0.1.0");
    let (exit, v, t) = verify(tmp.path(), &tampered, &["--integrity", &published]);
    assert_eq!(exit, Some(3), "{t}");
    assert_eq!(v["error"]["code"], "pack_integrity_failure", "{t}");

    // A change that would also break the manifest is still judged by the
    // signature first.
    let broken = rebuilt(tmp.path(), |m| {
        let at = m.windows(12).position(|w| w == b"\"javascript\"").unwrap();
        m[at + 10] = b'u';
    });
    let (exit, v, t) = verify(tmp.path(), &broken, &[]);
    assert_eq!(exit, Some(3), "{t}");
    assert_eq!(v["error"]["code"], "pack_signature_invalid", "{t}");
}

#[test]
fn damaged_gzip_streams_are_refused_by_verify_inspect_and_run() {
    let tmp = tempfile::tempdir().unwrap();
    let good = std::fs::read(archive("community.openwop-team.demo", "0.1.0")).unwrap();
    let n = good.len();
    let mut crc = good.clone();
    crc[n - 8] ^= 0x01;
    let mut size = good.clone();
    size[n - 1] ^= 0x01;
    let cut = good[..n - 8].to_vec();
    let mut junk = good.clone();
    junk.extend_from_slice(b"junk after the gzip stream");
    let mut second_member = good.clone();
    second_member.extend_from_slice(&good);
    for (what, bytes, reason) in [
        ("crc-flipped", crc, "gzip-trailer"),
        ("isize-flipped", size, "gzip-trailer"),
        ("trailer-cut", cut, "gzip-truncated"),
        ("junk-appended", junk, "trailing-bytes"),
        ("two-members", second_member, "trailing-bytes"),
    ] {
        let p = tmp.path().join(format!("{what}.tgz"));
        std::fs::write(&p, &bytes).unwrap();
        let (exit, v, t) = verify(tmp.path(), &p, &[]);
        assert_eq!(exit, Some(3), "{what}: {t}");
        assert_eq!(v["error"]["code"], "pack_archive_corrupt", "{what}: {t}");
        assert_eq!(v["error"]["details"]["reason"], reason, "{what}: {t}");
        for cmd in ["inspect", "run"] {
            let mut args = vec![cmd, p.to_str().unwrap()];
            if cmd == "run" {
                args.push("community.openwop-team.demo.uppercase");
            }
            args.push("--json");
            let o = wop_in(tmp.path(), &args);
            let t = text(&o);
            assert_eq!(o.status.code(), Some(3), "{cmd} {what}: {t}");
            assert!(t.contains("pack_archive_corrupt"), "{cmd} {what}: {t}");
        }
    }
}

#[test]
fn a_path_segment_too_long_to_unpack_gets_a_code_not_an_os_error() {
    let tmp = tempfile::tempdir().unwrap();
    let script = r#"
import io, sys, tarfile
with tarfile.open(sys.argv[1], 'w:gz', format=tarfile.PAX_FORMAT) as t:
    for name, data in [('a' * 305, b'x'), ('pack.json', b'{}')]:
        ti = tarfile.TarInfo(name)
        ti.size = len(data)
        t.addfile(ti, io.BytesIO(data))
"#;
    let p = tmp.path().join("long.tgz");
    let o = Command::new("python3")
        .args(["-c", script])
        .arg(&p)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let (exit, v, t) = verify(tmp.path(), &p, &[]);
    assert_eq!(exit, Some(3), "{t}");
    assert_eq!(v["error"]["code"], "pack_archive_invalid", "{t}");
    assert_eq!(v["error"]["details"]["reason"], "path-too-long", "{t}");
    assert_eq!(v["error"]["details"]["limit"], 255, "{t}");
    assert_eq!(v["error"]["details"]["observed"], 305, "{t}");
    let o = wop_in(tmp.path(), &["inspect", p.to_str().unwrap()]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(3), "{t}");
    assert!(t.contains("pack_archive_invalid"), "{t}");
    assert!(!t.contains("os error"), "{t}");
}
