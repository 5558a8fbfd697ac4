//! `wop run` / `wop inspect` with safe-fetch: a forbidden URL is refused with
//! `egress_denied` and its reason, and no connection is made.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use serde_json::Value;
use std::process::{Command, Output};
use wop_testkit::{Mode, Server};

fn wop(args: &[&str], policy: &str) -> Output {
    let data = tempfile::tempdir().unwrap();
    let file = data.path().join("policy.toml");
    std::fs::write(&file, policy).unwrap();
    Command::new(env!("CARGO_BIN_EXE_wop"))
        .args(args)
        .arg("--policy")
        .arg(&file)
        .arg("--no-cache")
        .env("WOP_DATA_DIR", data.path())
        .output()
        .expect("run wop")
}

fn fetch_pack() -> String {
    wop_test_packs::pack_dir("fetch").display().to_string()
}

const GRANT_ALL: &str = r#"
[packs.fetch]
capabilities = ["http"]
egress = ["*", "*:*", "http://*", "http://*:*"]
"#;

#[test]
fn run_against_a_forbidden_url_prints_egress_denied_without_connecting() {
    let server = Server::start_detached(Mode::Ok);
    let url = format!("http://127.0.0.1:{}/", server.addr.port());
    let input = serde_json::json!({ "url": url }).to_string();
    let o = wop(
        &["run", &fetch_pack(), "wop.samples.fetch", "--input", &input],
        GRANT_ALL,
    );
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(4), "{out}");
    assert!(out.contains("egress_denied"), "{out}");
    assert!(out.contains("ssrf-blocked"), "{out}");
    assert!(out.contains("egress.decided  denied"), "{out}");
    assert!(out.contains("status=Forbidden"), "{out}");

    for (u, reason) in [
        ("http://169.254.169.254/latest/meta-data/", "ssrf-blocked"),
        ("http://metadata.google.internal/", "ssrf-blocked"),
        (
            &format!("http://localhost:{}/", server.addr.port()),
            "ssrf-blocked",
        ),
        (
            &format!("http://[::ffff:127.0.0.1]:{}/", server.addr.port()),
            "ssrf-blocked",
        ),
        ("file:///etc/passwd", "scheme"),
    ] {
        let input = serde_json::json!({ "url": u }).to_string();
        let o = wop(
            &[
                "run",
                &fetch_pack(),
                "wop.samples.fetch",
                "--input",
                &input,
                "--json",
            ],
            GRANT_ALL,
        );
        assert_eq!(o.status.code(), Some(4));
        let v: Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(v["outcome"]["outcome"], "failed", "{v}");
        assert_eq!(v["outcome"]["error"]["code"], "egress_denied", "{u}: {v}");
        assert_eq!(
            v["outcome"]["error"]["details"]["reason"], reason,
            "{u}: {v}"
        );
    }
    assert_eq!(server.connections(), 0, "no connection was made");
}

#[test]
fn the_loopback_switch_is_loud_and_lets_a_granted_loopback_fetch_through() {
    let server = Server::start_detached(Mode::Status(200, "pong".to_owned()));
    let policy = format!(
        "[egress]\nallowLoopback = true\n[packs.fetch]\ncapabilities = [\"http\"]\negress = [\"http://127.0.0.1:{}\"]\n",
        server.addr.port()
    );
    let o = wop(&["inspect", &fetch_pack()], &policy);
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{out}");
    assert!(out.contains("egress (safe-fetch)"), "{out}");
    assert!(
        out.contains("!!! WARNING") && out.contains("TEST-ONLY"),
        "{out}"
    );
    assert!(String::from_utf8_lossy(&o.stderr).contains("TEST-ONLY"));

    let input = serde_json::json!({ "url": format!("http://127.0.0.1:{}/", server.addr.port()) })
        .to_string();
    let o = wop(
        &[
            "run",
            &fetch_pack(),
            "wop.samples.fetch",
            "--input",
            &input,
            "--json",
        ],
        &policy,
    );
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(o.status.code(), Some(0), "{v}");
    assert_eq!(v["outcome"]["output"]["status"], 200, "{v}");
    assert_eq!(v["outcome"]["output"]["bodyLength"], 4, "{v}");
    assert!(String::from_utf8_lossy(&o.stderr).contains("TEST-ONLY"));
    assert_eq!(server.count(), 1);

    // Without the switch the same grant is refused.
    let o = wop(
        &["inspect", &fetch_pack()],
        &policy.replace("allowLoopback = true", ""),
    );
    assert!(!String::from_utf8_lossy(&o.stdout).contains("TEST-ONLY"));
}
