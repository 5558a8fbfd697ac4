//! The binary: SIGTERM stops accepting, drains in-flight work, exits 0.

use super::*;
use serde_json::json;
use std::io::BufRead;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_drains_in_flight_and_exits_zero() {
    let packs = packs(&["hello", "spin"]);
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("policy.toml");
    std::fs::write(&policy, "[limits]\nwallClockMs = 1500\n").unwrap();
    let store = dir.path().join("store");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_wop-serve"));
    cmd.args([
        "--policy",
        policy.to_str().unwrap(),
        "--packs",
        packs.path().to_str().unwrap(),
    ])
    .args([
        "--listen",
        "127.0.0.1:0",
        "--store",
        store.to_str().unwrap(),
        "--anonymous-loopback",
    ])
    .stderr(Stdio::null());
    let (mut child, addr, mut out) = wop_testkit::spawn_serve(&mut cmd).unwrap();
    let h = [("Content-Type", "application/json")];
    let r = req(
        addr,
        "POST",
        "/host/wop/invocations",
        &h,
        br#"{"typeId":"wop.samples.hello","inputs":{}}"#,
    )
    .await;
    assert_eq!(r.status, 200);
    // A slow invocation in flight when SIGTERM arrives.
    let slow = tokio::spawn(async move {
        req(
            addr,
            "POST",
            "/host/wop/invocations",
            &h,
            br#"{"typeId":"wop.testing.spin","inputs":{}}"#,
        )
        .await
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let pid = child.0.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );
    let started = Instant::now();
    let slow = slow.await.unwrap();
    assert_eq!(slow.status, 200, "the in-flight request was answered");
    assert_eq!(slow.json()["outcome"], "failed");
    assert_eq!(slow.json()["error"]["code"], "sandbox_timeout");
    // New connections are refused once it stopped accepting.
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(
        tokio::net::TcpStream::connect(addr).await.is_err(),
        "still accepting after SIGTERM"
    );
    let status = loop {
        if let Some(s) = child.0.try_wait().unwrap() {
            break s;
        }
        assert!(started.elapsed() < Duration::from_secs(20), "did not exit");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(status.code(), Some(0));
    let mut rest = String::new();
    out.read_line(&mut rest).unwrap();
    assert_eq!(rest.trim(), "wop-serve stopped");
    let _ = json!(null);
}
