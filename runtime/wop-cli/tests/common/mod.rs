//! What the CLI's end-to-end tests share: running the real `wop` binary,
//! a plain HTTP file server for registry trees, the real registry
//! fixtures and an operator policy trusting their keys, a raw HTTP POST.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use wop_testkit::ChildGuard;

/// Runs `wop args…` in `dir` with its data and cache directories there.
pub fn wop_in(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_wop"))
        .args(args)
        .current_dir(dir)
        .env("WOP_DATA_DIR", dir.join("data"))
        .env("WOP_CACHE_DIR", dir.join("cache"))
        .output()
        .expect("run wop")
}

/// stdout then stderr.
pub fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// `root` served by a plain HTTP file server (`python3 -m http.server`)
/// on a free loopback port; stopped when the guard drops.
pub fn serve_dir(root: &Path) -> (ChildGuard, u16) {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = Command::new("python3")
        .args([
            "-m",
            "http.server",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--directory",
        ])
        .arg(root)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("python3 (the plain HTTP file server of this test)");
    let g = ChildGuard(child);
    for _ in 0..100 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return (g, port);
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    panic!("the file server did not listen");
}

/// The real registry's files kept as fixtures.
pub fn registry_fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/openwop-registry")
}

/// `dir/policy.toml`: `extra` TOML, then the registry's keys trusted as
/// its discovery document limits them (`permittedNamespaces`), as an
/// operator would.
pub fn registry_policy(dir: &Path, extra: &str) -> PathBuf {
    let disc: Value = serde_json::from_slice(
        &std::fs::read(registry_fixtures().join(".well-known/openwop-registry.json")).unwrap(),
    )
    .unwrap();
    let mut doc = format!("{extra}\n[trust]\nrequireSignature = true\n");
    for k in disc["signingKeys"].as_array().unwrap() {
        let id = k["keyId"].as_str().unwrap();
        let file = registry_fixtures().join(format!("keys/{id}.pub"));
        if !file.exists() {
            continue;
        }
        let packs: Vec<String> = k["permittedNamespaces"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| format!("{:?}", p.as_str().unwrap()))
            .collect();
        doc.push_str(&format!(
            "[trust.keys.\"{id}\"]\npublicKeyFile = {:?}\npacks = [{}]\n",
            file.display().to_string(),
            packs.join(", ")
        ));
    }
    let p = dir.join("policy.toml");
    std::fs::write(&p, doc).unwrap();
    p
}

/// `POST path` with a JSON body over a fresh connection: the raw response.
pub fn post(addr: std::net::SocketAddr, path: &str, body: &str) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    write!(
        s,
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}
