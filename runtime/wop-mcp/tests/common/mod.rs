//! Shared helpers for wop-mcp integration tests: locating the pinned test
//! servers, free ports, and child processes killed on drop.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use wop_mcp::{McpHub, McpServerConfig};

pub const SETUP: &str = "bash runtime/wop-mcp/tests/setup.sh";

/// True (after printing why) when `WOP_MCP_TESTS=skip` is set.
pub fn skip(test: &str) -> bool {
    if std::env::var("WOP_MCP_TESTS").as_deref() == Ok("skip") {
        println!("SKIPPED {test}: WOP_MCP_TESTS=skip (unset it and run `{SETUP}` to run it)");
        return true;
    }
    false
}

pub fn tests_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests")
}

/// The pinned `@modelcontextprotocol/server-everything` entry point.
pub fn everything_js() -> PathBuf {
    let p =
        tests_dir().join("node/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    assert!(
        p.exists(),
        "missing npm test dependency {}; install it with: {SETUP}",
        p.display()
    );
    let node = Command::new("node").arg("--version").output();
    assert!(
        node.map(|o| o.status.success()).unwrap_or(false),
        "`node` not found on PATH; install Node.js (apt-get install -y nodejs npm), then run: {SETUP}"
    );
    p
}

/// The venv python with the pinned PyPI `mcp`.
pub fn venv_python() -> PathBuf {
    let p = tests_dir().join("python/.venv/bin/python");
    assert!(
        p.exists(),
        "missing PyPI test dependencies (venv {}); install them with: {SETUP}",
        p.display()
    );
    p
}

/// A system python3 for the stdlib-only fake servers.
pub fn python3() -> String {
    let ok = Command::new("python3")
        .arg("--version")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    assert!(
        ok,
        "`python3` not found on PATH; install it (apt-get install -y python3)"
    );
    "python3".into()
}

pub fn server_script(name: &str) -> String {
    tests_dir().join("servers").join(name).display().to_string()
}

/// A stdio config running one of our fake servers.
pub fn fake_stdio(mode: &str, version: Option<&str>, timeout_ms: u64) -> McpServerConfig {
    let mut args = vec![server_script("fake_stdio.py"), mode.to_owned()];
    if let Some(v) = version {
        args.push(v.to_owned());
    }
    let mut c = McpServerConfig::stdio(python3(), args);
    c.timeout_ms = timeout_ms;
    c
}

pub fn hub(servers: Vec<(&str, McpServerConfig)>) -> McpHub {
    let map: BTreeMap<String, McpServerConfig> = servers
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
    McpHub::new(map).expect("valid config")
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A child process killed (and reaped) on drop.
pub struct ChildGuard(pub Child);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `program args` and waits until 127.0.0.1:`port` accepts connections.
pub fn start_http(program: &str, args: &[String], port: u16) -> ChildGuard {
    start_http_env(program, args, &[], port)
}

/// [`start_http`] with extra environment variables.
pub fn start_http_env(
    program: &str,
    args: &[String],
    env: &[(&str, String)],
    port: u16,
) -> ChildGuard {
    let child = Command::new(program)
        .args(args)
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {program}: {e}"));
    let mut guard = ChildGuard(child);
    let end = Instant::now() + Duration::from_secs(30);
    while Instant::now() < end {
        if TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return guard;
        }
        if let Ok(Some(status)) = guard.0.try_wait() {
            panic!("{program} exited early: {status}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("{program} did not listen on port {port} within 30 s");
}

/// Starts `servers/hostile_http.py` on a free loopback port.
pub fn start_hostile_http() -> (ChildGuard, u16) {
    let port = free_port();
    let guard = start_http(
        &python3(),
        &[server_script("hostile_http.py"), port.to_string()],
        port,
    );
    (guard, port)
}

/// A Streamable HTTP config for `path` on the hostile server at `port`.
pub fn http_cfg(port: u16, path: &str, timeout_ms: u64) -> McpServerConfig {
    let mut c = McpServerConfig::streamable_http(format!("http://127.0.0.1:{port}/{path}"));
    c.timeout_ms = timeout_ms;
    c
}

/// Asserts that `elapsed` stays within `timeout_ms` × a generous factor.
pub fn assert_bounded(elapsed: Duration, timeout_ms: u64) {
    let bound = Duration::from_millis(timeout_ms * 5 + 5_000);
    assert!(elapsed < bound, "took {elapsed:?}, bound {bound:?}");
}
