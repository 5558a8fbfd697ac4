//! Serve mode: the real `wop serve` binary (sled store and policy in a temp
//! dir, anonymous loopback, `127.0.0.1:0`) driven over HTTP keep-alive
//! (`POST /host/wop/invocations`, `POST /mcp` `tools/call`, and requests
//! from hostile clients), RSS from `/proc/<pid>/status` of the server, and
//! a SIGTERM at the end that must exit 0.

use super::library::{packs_dir, replayed};
use super::mix::{self, Call, Invoke};
use super::tally::{self, Answer, Tally};
use super::{Report, Settings, rss};
use anyhow::{Context as _, Result, anyhow, bail};
use serde_json::{Value, json};
use std::io::BufRead as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The `wop` binary: `settings.wop`, else `wop` next to this executable
/// (`target/<profile>/`).
fn wop_binary(settings: &Settings) -> Result<PathBuf> {
    if let Some(p) = &settings.wop {
        return Ok(p.clone());
    }
    let exe = std::env::current_exe()?;
    let dir = exe.parent().context("this executable has no directory")?;
    let wop = dir.join("wop");
    if !wop.is_file() {
        bail!(
            "{} is missing: build it first with `cargo build -p wop-cli` (add `--release` for a release soak), or pass --wop PATH",
            wop.display()
        );
    }
    Ok(wop)
}

/// The body of `POST /host/wop/invocations` for `i`.
fn invoke_body(i: &Invoke, seq: u64, run_id: Option<&str>) -> Value {
    let mut body = i.extra();
    body.insert("typeId".into(), json!(i.type_id));
    body.insert("inputs".into(), (i.inputs)(seq));
    if let Some(r) = run_id {
        body.insert("nodeContext".into(), json!({"runId": r, "nodeId": "n"}));
    }
    Value::Object(body)
}

/// An invoke API response as an answer.
fn invoke_answer(status: u16, body: &[u8]) -> Answer {
    let text = || String::from_utf8_lossy(body).into_owned();
    if status != 200 {
        return Answer::Status(status, text());
    }
    let Ok(v) = serde_json::from_slice::<Value>(body) else {
        return Answer::Status(status, format!("not JSON: {}", text()));
    };
    match v.get("outcome").and_then(Value::as_str) {
        Some("completed") => Answer::Completed(v.get("output").cloned().unwrap_or(Value::Null)),
        Some("failed") => Answer::Failed {
            code: v["error"]["code"].as_str().unwrap_or("?").to_owned(),
            message: v["error"]["message"].as_str().unwrap_or("").to_owned(),
        },
        other => Answer::Failed {
            code: format!("outcome {other:?}"),
            message: text(),
        },
    }
}

/// An MCP `tools/call` response as an answer.
fn mcp_answer(status: u16, body: &[u8]) -> Answer {
    let text = || String::from_utf8_lossy(body).into_owned();
    if status != 200 {
        return Answer::Status(status, text());
    }
    let Ok(v) = serde_json::from_slice::<Value>(body) else {
        return Answer::Status(status, format!("not JSON: {}", text()));
    };
    if let Some(e) = v.get("error") {
        return Answer::Failed {
            code: format!("jsonrpc {}", e["code"]),
            message: e["message"].as_str().unwrap_or("").to_owned(),
        };
    }
    let r = &v["result"];
    if r["isError"] == true {
        return Answer::Failed {
            code: r["structuredContent"]["code"]
                .as_str()
                .unwrap_or("?")
                .to_owned(),
            message: r["structuredContent"]["message"]
                .as_str()
                .unwrap_or("")
                .to_owned(),
        };
    }
    match r.get("structuredContent") {
        Some(o) => Answer::Completed(o.clone()),
        None => Answer::Completed(
            r["content"][0]["text"]
                .as_str()
                .and_then(|t| serde_json::from_str(t).ok())
                .unwrap_or(Value::Null),
        ),
    }
}

/// Bodies above this (the service's default `maxBodyBytes`) are sent on a
/// connection of their own.
const BIG_BODY: usize = 1 << 20;

/// One client: a keep-alive connection (reqwest pools one per client).
#[derive(Clone)]
struct Client {
    http: reqwest::Client,
    base: String,
}

impl Client {
    /// `POST path` with `body`; the MCP mount gets the Streamable HTTP
    /// `Accept`, the invoke API plain JSON (`text/event-stream` would
    /// stream events).
    async fn post(&self, path: &str, body: Vec<u8>) -> Result<(u16, Vec<u8>), String> {
        let accept = if path == "/mcp" {
            "application/json, text/event-stream"
        } else {
            "application/json"
        };
        let mut req = self
            .http
            .post(format!("{}{path}", self.base))
            .header("content-type", "application/json")
            .header("accept", accept);
        if body.len() > BIG_BODY {
            // The service answers 413 without reading the body and then
            // closes the connection, but without `Connection: close`: a
            // keep-alive client that reuses it gets an error on its next
            // request. Ask for the close up front.
            req = req.header("connection", "close");
        }
        let r = req
            .body(body)
            .send()
            .await
            .map_err(|e| format!("POST {path}: {e}"))?;
        let status = r.status().as_u16();
        let bytes = r
            .bytes()
            .await
            .map_err(|e| format!("POST {path} body: {e}"))?;
        Ok((status, bytes.to_vec()))
    }

    async fn call(&self, kind: &mix::Kind, seq: u64) -> Result<Answer, String> {
        const INVOKE: &str = "/host/wop/invocations";
        let enc = |v: Value| v.to_string().into_bytes();
        match kind.call {
            Call::Invoke(i) => {
                let (s, b) = self.post(INVOKE, enc(invoke_body(&i, seq, None))).await?;
                Ok(invoke_answer(s, &b))
            }
            Call::Replay(i) => {
                let run = super::run_id("replay", seq);
                let body = enc(invoke_body(&i, seq, Some(&run)));
                let (s, b) = self.post(INVOKE, body.clone()).await?;
                let first = invoke_answer(s, &b);
                let (s, b) = self.post(INVOKE, body).await?;
                Ok(replayed(first, invoke_answer(s, &b)))
            }
            Call::Mcp(i) => {
                let body = json!({"jsonrpc": "2.0", "id": seq, "method": "tools/call",
                    "params": {"name": i.type_id, "arguments": (i.inputs)(seq)}});
                let (s, b) = self.post("/mcp", enc(body)).await?;
                Ok(mcp_answer(s, &b))
            }
            Call::Raw { path, body } => {
                let body = body();
                let big = body.len() > BIG_BODY;
                match self.post(path, body).await {
                    Ok((s, b)) => Ok(invoke_answer(s, &b)),
                    Err(e) if big => Ok(Answer::Reset(e)),
                    Err(e) => Err(e),
                }
            }
            Call::Load(_) => Err("not sent in serve mode".to_owned()),
        }
    }
}

/// Reads the server's stderr: counts `panicked at` lines, keeps the first
/// few.
fn watch_stderr(stderr: std::process::ChildStderr, panics: Arc<AtomicU64>) {
    let _ = std::thread::Builder::new()
        .name("soak-serve-stderr".into())
        .spawn(move || {
            for line in std::io::BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if line.contains("panicked at") && panics.fetch_add(1, Ordering::Relaxed) < 5 {
                    eprintln!("soak: SERVER PANIC: {line}");
                }
            }
        });
}

/// Runs the serve soak.
pub fn run(settings: &Settings) -> Result<Report> {
    tally::install_panic_counter();
    let wop = wop_binary(settings)?;
    let tmp = tempfile::tempdir()?;
    let packs = packs_dir(tmp.path())?;
    let kv = super::kv::KvServer::start()?;
    let policy = tmp.path().join("policy.toml");
    std::fs::write(&policy, mix::policy(&kv.url("")))?;
    let store = match &settings.store {
        Some(s) => s.clone(),
        None => tmp.path().join("store").display().to_string(),
    };
    let in_flight = (settings.concurrency * 2).max(64).to_string();
    // A short idle release, so that each quiet point sees the pool's kept
    // memory go back to the OS within a second or two (under load it never
    // fires: nothing is idle for a whole second).
    let serve_toml = tmp.path().join("serve.toml");
    std::fs::write(&serve_toml, format!("idleReleaseMs = {IDLE_RELEASE_MS}\n"))?;
    let mut cmd = std::process::Command::new(&wop);
    cmd.arg("serve")
        .arg("--policy")
        .arg(&policy)
        .arg("--packs")
        .arg(&packs)
        .args(["--listen", "127.0.0.1:0", "--store", &store])
        .args(["--anonymous-loopback", "--max-in-flight", &in_flight])
        .arg("--config")
        .arg(&serve_toml)
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
    let (mut child, addr, mut stdout) = wop_testkit::spawn_serve(&mut cmd)
        .with_context(|| format!("starting {} serve", wop.display()))?;
    let server_panics = Arc::new(AtomicU64::new(0));
    if let Some(e) = child.0.stderr.take() {
        watch_stderr(e, server_panics.clone());
    }
    let pid = child.0.id();
    let kinds = super::kinds::for_mode(false);
    println!(
        "soak: serve mode against {} serve (pid {pid}) on {addr}, {} s, concurrency {}, {} kinds",
        wop.display(),
        settings.duration.as_secs(),
        settings.concurrency,
        kinds.len()
    );
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let op_kinds = Arc::new(kinds.clone());
    let tally = Arc::new(Tally::new(kinds));
    let t2 = tally.clone();
    let start = Instant::now();
    let sampler = rss::Sampler::start(
        pid,
        start,
        super::sample_every(settings.duration),
        move || {
            let t = t2.totals();
            format!(
                "{} answered, {} unexpected, {} unanswered",
                t.answered, t.unexpected, t.unanswered
            )
        },
    );
    let clients = (0..settings.concurrency)
        .map(|_| client(addr))
        .collect::<Result<Vec<_>>>()?;
    let probe = clients.first().cloned().context("concurrency 0")?;
    let seen = Arc::new(AtomicU64::new(0));
    let points = tokio.block_on(super::load_with_quiet_points(
        pid,
        tally.clone(),
        clients,
        start,
        settings.duration,
        move |c: Client, k: usize, seq: u64| {
            let kind = op_kinds.get(k).copied();
            async move {
                let r = match kind {
                    Some(kind) => c.call(&kind, seq).await,
                    None => Err("no such kind".to_owned()),
                };
                (c, r)
            }
        },
        || quiet(probe.clone(), pid, seen.clone()),
    ));
    let secs = start.elapsed().as_secs_f64();
    let samples = sampler.stop();
    let exit = sigterm(&mut child.0, &mut stdout)?;
    let report = Report {
        mode: "serve",
        totals: tally.totals(),
        panics: tally::panics() + server_panics.load(Ordering::Relaxed),
        rss: rss::quiet_verdict(&samples, points.mid_kib, points.end_kib),
        exit_code: Some(exit),
        secs,
    };
    super::print_summary(&report, &tally, &samples);
    super::print_loaded(&samples, &points, settings.duration);
    println!(
        "kv service: {} requests; server exit code after SIGTERM: {exit:?}",
        kv.requests()
    );
    tokio.shutdown_timeout(Duration::from_secs(10));
    Ok(report)
}

/// The serve soak's `idleReleaseMs`.
const IDLE_RELEASE_MS: u64 = 1000;

/// A quiet point of the serve soak: waits for the server's idle release
/// (`/healthz` `idleReleases` above what the previous quiet point saw),
/// then returns its settled RSS. If a release already happened since then
/// (the load stopped just before a tick), a new one cannot come for this
/// idle spell: wait three periods for one, then measure.
async fn quiet(c: Client, pid: u32, seen: Arc<AtomicU64>) -> u64 {
    let releases = |c: Client| async move {
        let r = c
            .http
            .get(format!("{}/healthz", c.base))
            .send()
            .await
            .ok()?;
        let v: Value = r.json().await.ok()?;
        v["idleReleases"].as_u64()
    };
    let now = releases(c.clone()).await.unwrap_or(0);
    let already = now > seen.load(Ordering::Relaxed);
    let wait = if already {
        Duration::from_millis(3 * IDLE_RELEASE_MS)
    } else {
        Duration::from_secs(60)
    };
    let deadline = Instant::now() + wait;
    let mut last = now;
    while last <= now && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
        last = releases(c.clone()).await.unwrap_or(last);
    }
    if last <= now && !already {
        eprintln!("soak: no idle release within 60 s of the load stopping; RSS measured anyway");
    }
    seen.store(last, Ordering::Relaxed);
    rss::settled(pid).await
}

fn client(addr: SocketAddr) -> Result<Client> {
    let http = reqwest::Client::builder()
        .no_proxy()
        .pool_max_idle_per_host(1)
        .timeout(super::ANSWER_TIMEOUT)
        .build()?;
    Ok(Client {
        http,
        base: format!("http://{addr}"),
    })
}

/// Sends SIGTERM and waits (30 s at most) for the exit; returns its code
/// (`None`: killed by a signal).
fn sigterm(
    child: &mut std::process::Child,
    stdout: &mut std::io::BufReader<std::process::ChildStdout>,
) -> Result<Option<i32>> {
    let pid = child.id().to_string();
    let sent = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()?;
    if !sent.success() {
        bail!("kill -TERM {pid} failed: {sent}");
    }
    let started = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait()? {
            break s;
        }
        if started.elapsed() > Duration::from_secs(30) {
            return Err(anyhow!("wop serve did not exit within 30 s of SIGTERM"));
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut last = String::new();
    let _ = stdout.read_line(&mut last);
    if status.code() == Some(0) && last.trim() != "wop-serve stopped" {
        eprintln!("soak: wop serve exited 0 but printed {last:?}");
    }
    Ok(status.code())
}
