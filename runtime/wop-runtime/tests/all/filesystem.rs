//! The one filesystem grant: a directory at /data, nothing else.

use super::*;
use serde_json::json;
use wop_runtime::Outcome;

async fn probe(rt: &Runtime, inputs: Value) -> Value {
    match invoke(rt, "wop.testing.fs-probe", inputs).await.outcome {
        Ok(Outcome::Completed { output }) => output,
        other => panic!("{other:?}"),
    }
}

fn policy(dir: &Path, read_only: bool) -> String {
    format!("[packs.fs-probe.filesystem]\npath = {dir:?}\nreadOnly = {read_only}\n")
}

#[tokio::test]
async fn granted_directory_is_reachable_and_nothing_else() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    std::fs::create_dir(&data).unwrap();
    std::fs::write(data.join("hello.txt"), "inside").unwrap();
    std::fs::write(tmp.path().join("secret.txt"), "outside").unwrap();
    std::os::unix::fs::symlink(tmp.path().join("secret.txt"), data.join("link.txt")).unwrap();
    std::os::unix::fs::symlink("/etc", data.join("etc")).unwrap();

    let rt = runtime(&policy(&data, true));
    load(&rt, "fs-probe").await;
    let ok = probe(&rt, json!({"op": "read", "path": "/data/hello.txt"})).await;
    assert_eq!(ok, json!({"ok": true, "content": "inside"}));

    for path in [
        "/data/../secret.txt",
        "/data/link.txt",
        "/data/etc/passwd",
        "/etc/passwd",
        "secret.txt",
        "../secret.txt",
        "/proc/self/environ",
    ] {
        let r = probe(&rt, json!({"op": "read", "path": path})).await;
        assert_eq!(r["ok"], json!(false), "{path}: {r}");
        assert!(!r.to_string().contains("outside"), "{path}: {r}");
    }
    let r = probe(
        &rt,
        json!({"op": "write", "path": "/data/new.txt", "content": "x"}),
    )
    .await;
    assert_eq!(r["ok"], json!(false), "read-only grant: {r}");
    assert!(!data.join("new.txt").exists());
}

#[tokio::test]
async fn read_write_grant_allows_writes_inside_only() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    std::fs::create_dir(&data).unwrap();
    let rt = runtime(&policy(&data, false));
    load(&rt, "fs-probe").await;
    let r = probe(
        &rt,
        json!({"op": "write", "path": "/data/new.txt", "content": "x"}),
    )
    .await;
    assert_eq!(r["ok"], json!(true), "{r}");
    assert_eq!(std::fs::read_to_string(data.join("new.txt")).unwrap(), "x");
    let r = probe(
        &rt,
        json!({"op": "write", "path": "/data/../escaped.txt", "content": "x"}),
    )
    .await;
    assert_eq!(r["ok"], json!(false), "{r}");
    assert!(!tmp.path().join("escaped.txt").exists());
}

#[tokio::test]
async fn without_a_grant_there_is_no_filesystem() {
    let rt = runtime("");
    load(&rt, "fs-probe").await;
    let r = probe(&rt, json!({"op": "list", "path": "/"})).await;
    assert_eq!(r["ok"], json!(false), "{r}");
    let r = probe(&rt, json!({"op": "read", "path": "/etc/passwd"})).await;
    assert_eq!(r["ok"], json!(false), "{r}");
}

/// A granted directory that cannot be opened fails the invocation at
/// set-up, before the pack runs (the WASI context is otherwise built on
/// the pack's first WASI call; a grant is opened at once).
#[tokio::test]
async fn a_granted_directory_that_cannot_be_opened_fails_before_the_pack_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    std::fs::create_dir(&data).unwrap();
    let rt = runtime(&policy(&data, true));
    load(&rt, "fs-probe").await;
    std::fs::remove_dir(&data).unwrap();
    let report = invoke(
        &rt,
        "wop.testing.fs-probe",
        json!({"op": "list", "path": "/data"}),
    )
    .await;
    let err = report.outcome.expect_err("the invocation must fail");
    assert!(
        err.message.contains("cannot prepare the sandbox"),
        "{err:?}"
    );
    assert_eq!(report.usage.fuel_consumed, 0, "the pack did not run");
}
