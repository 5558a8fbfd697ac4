//! Broken manifests name the field; paths cannot leave the pack directory.

use super::*;
use wop_runtime::{ErrorCode, LoadError};

fn edit(dir: &Path, f: impl FnOnce(&mut Value)) {
    let p = dir.join("pack.json");
    let mut v: Value = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
    f(&mut v);
    std::fs::write(p, serde_json::to_vec_pretty(&v).unwrap()).unwrap();
}

fn path_of(e: &LoadError) -> String {
    match e {
        LoadError::Validation { path, .. } | LoadError::PackFile { path, .. } => path.clone(),
        other => panic!("expected pack_validation_failed, got {other}"),
    }
}

#[tokio::test]
async fn broken_manifest_names_the_field() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = copy_pack("hello", tmp.path());
    edit(&dir, |v| v["nodes"][0]["version"] = "one".into());
    let e = runtime("").load_pack(&dir).await.unwrap_err();
    assert_eq!(e.code(), ErrorCode::PackValidationFailed);
    assert_eq!(path_of(&e), "$.nodes[0].version");
    assert_eq!(e.details()["path"], "$.nodes[0].version");
}

#[tokio::test]
async fn entry_paths_cannot_escape() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = copy_pack("hello", tmp.path());
    std::fs::copy(dir.join("hello.wasm"), tmp.path().join("outside.wasm")).unwrap();
    for entry in ["../outside.wasm", "/etc/passwd", "sub/../../outside.wasm"] {
        edit(&dir, |v| v["runtime"]["entry"] = entry.into());
        let e = runtime("").load_pack(&dir).await.unwrap_err();
        assert_eq!(path_of(&e), "$.runtime.entry", "{entry}");
    }
    // A symlink inside the pack pointing outside it: never followed.
    std::os::unix::fs::symlink(tmp.path().join("outside.wasm"), dir.join("link.wasm")).unwrap();
    edit(&dir, |v| v["runtime"]["entry"] = "link.wasm".into());
    let e = runtime("").load_pack(&dir).await.unwrap_err();
    assert_eq!(path_of(&e), "$.runtime.entry");
    assert_eq!(e.details()["reason"], "symlink", "{e}");
}

#[tokio::test]
async fn describe_must_match_the_manifest() {
    let e = runtime("")
        .load_pack(&pack("describe-mismatch"))
        .await
        .unwrap_err();
    assert_eq!(path_of(&e), "$.nodes");
    assert!(e.to_string().contains("wop.testing.other"), "{e}");
}

#[tokio::test]
async fn a_core_module_is_not_a_component() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = copy_pack("hello", tmp.path());
    let core = b"\0asm\x01\0\0\0";
    std::fs::write(dir.join("hello.wasm"), core).unwrap();
    let sha = {
        use sha2::Digest;
        use std::fmt::Write;
        sha2::Sha256::digest(core)
            .iter()
            .fold(String::new(), |mut s, b| {
                let _ = write!(s, "{b:02x}");
                s
            })
    };
    edit(&dir, |v| v["x-wop"]["sha256"] = sha.into());
    let e = runtime("").load_pack(&dir).await.unwrap_err();
    assert_eq!(e.code(), ErrorCode::PackValidationFailed);
    assert!(e.to_string().contains("component"), "{e}");
}
