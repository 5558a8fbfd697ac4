//! `wop serve`: the executor service from the main CLI (same flags as the
//! `wop-serve` binary), over a real socket, stopped by SIGTERM.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod common;

use common::post;
use std::io::BufRead;
use std::process::{Command, Stdio};

#[test]
fn wop_serve_runs_a_pack_and_stops_on_sigterm() {
    let tmp = tempfile::tempdir().unwrap();
    let packs = tmp.path().join("packs").join("hello");
    std::fs::create_dir_all(&packs).unwrap();
    for e in std::fs::read_dir(wop_test_packs::pack_dir("hello")).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), packs.join(e.file_name())).unwrap();
    }
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_wop"));
    cmd.args(["serve", "--packs"])
        .arg(tmp.path().join("packs"))
        .args([
            "--listen",
            "127.0.0.1:0",
            "--memory-store",
            "--anonymous-loopback",
        ])
        .stderr(Stdio::null());
    let (mut child, addr, mut out) = wop_testkit::spawn_serve(&mut cmd).unwrap();

    let r = post(
        addr,
        "/host/wop/invocations",
        r#"{"typeId":"wop.samples.hello","inputs":{"name":"Ada"}}"#,
    );
    assert!(r.starts_with("HTTP/1.1 200"), "{r}");
    assert!(r.contains("Hello, Ada!"), "{r}");
    let r = post(
        addr,
        "/host/wop/invocations",
        r#"{"typeId":"nope","inputs":{}}"#,
    );
    assert!(r.starts_with("HTTP/1.1 404"), "unknown typeId: {r}");

    let pid = child.0.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );
    let status = child.0.wait().unwrap();
    assert_eq!(status.code(), Some(0));
    let mut rest = String::new();
    out.read_line(&mut rest).unwrap();
    assert_eq!(rest.trim(), "wop-serve stopped");
}
