//! `hello` in every pack language (Rust, C, JavaScript, Python), a fresh
//! instance per call, through the runtime (library) and through a real
//! `wop serve` process, in the same run. Reports each language's time and
//! its ratio to Rust's, the fuel each one burns, and the two engine-side
//! figures that explain the gap (decision 0023): minor page faults per
//! call, and the instantiate share.
//!
//! Rows: `rust` (the test-packs sample), `c`, `js` and `python` (the WIT
//! SDK samples), and two JavaScript packs in the protocol's format that
//! `wop` builds with its own engine (decision 0029): `registry-js`, the
//! registry's demo `uppercase` from its real archive, and `new-js`, the
//! hello that `wop new js` scaffolds.
//!
//! Columns:
//! - `library`: `Runtime::invoke` timed by the caller (instantiate, run,
//!   classify, report), effects and usage in memory;
//! - `instantiate`: the same calls' `usage.instantiateTimeUs`;
//! - `faults`: minor page faults of this process per library call after
//!   a block's first (the steady state), and `1st`: on a block's first
//!   call (its instance may take a pool slot another language's used, and
//!   fault that pack's image in again);
//! - `+sled`: the library on a durable sled store, as `wop serve` runs by
//!   default, and the store flushes (fsyncs) per call;
//! - `serve`: the service's own `usage.wallTimeUs` (what the issue
//!   measured) and the client's HTTP round trip at one client, over one
//!   keep-alive connection; the HTTP floor is `GET /healthz` on it.
//!
//! Blocks of calls per language and path, languages in turn, so machine
//! noise hits all alike while each block runs with its own pack warm (one
//! call at a time would measure Python evicting Rust from the caches).
//!
//! Run (release; the JavaScript, Python and C packs come from
//! `sdk/build-all.sh <built-dir>`, the Rust one from the test-packs crate;
//! a language whose pack is missing is skipped):
//!
//! ```text
//! cargo build --release -p wop-cli -p fuel-benches --bin languages --bin wop
//! target/release/languages <built-dir> [N] [--serve-memory-store]
//! ```
//!
//! `--serve-memory-store` runs `wop serve --memory-store`, which separates
//! what HTTP costs from what the durable store costs.
//!
//! `--profile <lang> <seconds> [--idle-us N]` loads every pack, warms up,
//! prints `profiling <pid>` and then only calls `<lang>`'s hello through
//! the library for `<seconds>`, so a profiler attached at that line sees
//! the invocations and not the compile (`fuel-benches/profile-language.sh`).
//! It ends with the p50 and the process's CPU per call (utime + stime:
//! what the library costs a host, its deferred usage writes included).
//! `--profile bare-rust` runs the Rust hello through a bare wasmtime
//! configured like wop instead (the `latency` bench's baseline), so the
//! two paths' profiles come from one binary.
//! `--new-run-per-call` makes each call a run of its own, as every
//! `wop serve` request without a `runId` is: its run roll-up and usage
//! record are new (in one run, past its first 1,000 calls, no record is
//! kept) — the library's share of `http-cpu.sh`'s invoke requests.
//! `--idle-us N` sleeps N µs before each call, so the CPU may idle between
//! calls as a service's does between one client's requests (decision 0040:
//! on this machine a call after 100 µs idle takes ~1.7× a call in a tight
//! loop).
//! `--pollute-kib N` writes over N KiB between calls (one byte per cache
//! line, outside the measured call and inside the process's CPU), as the
//! rest of a service's work takes the caches between two invocations.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

/// The allocator `wop serve` runs on (decision 0040), so that library and
/// service figures compare like for like.
#[global_allocator]
static ALLOCATOR: wop_serve::allocator::Allocator = wop_serve::allocator::Allocator;

use anyhow::{Context as _, Result, bail};
use fuel_benches::stats;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};
use wop_runtime::store::SledStore;
use wop_runtime::{InvokeRequest, Outcome, Runtime, RuntimeConfig};

/// Calls per language and path in one block.
const BLOCK: usize = 50;

/// One language's `hello` pack.
struct Lang {
    name: &'static str,
    dir: PathBuf,
    type_id: String,
    bytes: u64,
}

/// What one language measured.
#[derive(Default)]
struct Samples {
    lib: Vec<Duration>,
    instantiate: Vec<Duration>,
    faults: u64,
    first_faults: u64,
    sled: Vec<Duration>,
    flushes: u64,
    serve_wall: Vec<Duration>,
    serve_rtt: Vec<Duration>,
    fuel: u64,
}

fn langs(built: &Path, scratch: &Path) -> Result<Vec<Lang>> {
    let mut out = vec![lang(
        "rust",
        wop_test_packs::pack_dir("hello"),
        "wop.samples.hello",
    )?];
    for name in ["c", "js", "python"] {
        let dir = built.join(name).join(format!("{name}-hello"));
        if !dir.join("pack.json").is_file() {
            eprintln!(
                "languages: no {name} hello under {} (sdk/build-all.sh builds it); skipped",
                dir.display()
            );
            continue;
        }
        out.push(lang(name, dir, &format!("wop.samples.{name}.hello"))?);
    }
    out.push(registry_js(scratch)?);
    out.push(new_js(scratch)?);
    Ok(out)
}

/// What `wop new js` scaffolds (the protocol's format, built by `wop`
/// into a component at load): the JavaScript hello a pack author writes.
fn new_js(scratch: &Path) -> Result<Lang> {
    let wop = fuel_benches::wop_next_to_exe()?;
    let ok = std::process::Command::new(&wop)
        .args(["new", "js", "hello-js", "--dir"])
        .arg(scratch)
        .stdout(std::process::Stdio::null())
        .status()?
        .success();
    anyhow::ensure!(ok, "`{} new js` failed", wop.display());
    lang("new-js", scratch.join("hello-js"), "hello-js.hello")
}

/// The registry's own JavaScript demo pack (`uppercase`), unpacked from
/// the real archive kept as a test fixture, its signing block and
/// signature removed (this bench trusts no key): the protocol's JavaScript as it is, built
/// by `wop` into a component at load.
fn registry_js(scratch: &Path) -> Result<Lang> {
    let tgz = Path::new(env!("CARGO_MANIFEST_DIR")).join(
        "../runtime/wop-cli/tests/fixtures/openwop-registry/v1/packs/community.openwop-team.demo/-/0.1.0.tgz",
    );
    let dir = scratch.join("registry-js");
    std::fs::create_dir_all(&dir)?;
    let ok = std::process::Command::new("tar")
        .arg("-xzf")
        .arg(&tgz)
        .arg("-C")
        .arg(&dir)
        .status()?
        .success();
    anyhow::ensure!(ok, "cannot unpack {}", tgz.display());
    let mut m: Value = serde_json::from_slice(&std::fs::read(dir.join("pack.json"))?)?;
    if let Some(o) = m.as_object_mut() {
        o.remove("signing");
    }
    std::fs::write(dir.join("pack.json"), serde_json::to_vec(&m)?)?;
    std::fs::remove_dir_all(dir.join("keys"))?;
    lang("registry-js", dir, "community.openwop-team.demo.uppercase")
}

fn lang(name: &'static str, dir: PathBuf, type_id: &str) -> Result<Lang> {
    let manifest: Value = serde_json::from_slice(&std::fs::read(dir.join("pack.json"))?)?;
    let entry = manifest["runtime"]["entry"]
        .as_str()
        .context("pack.json has no runtime.entry")?;
    let bytes = std::fs::metadata(dir.join(entry))?.len();
    Ok(Lang {
        name,
        dir,
        type_id: type_id.to_owned(),
        bytes,
    })
}

/// A hello's inputs; the registry's uppercase takes `text` (its schema,
/// checked at admission, allows nothing else).
fn inputs(l: &Lang) -> Value {
    if l.name == "registry-js" {
        json!({"text": "Ada"})
    } else {
        json!({"name": "Ada"})
    }
}

/// Minor page faults of this process so far (`/proc/self/stat` field 10).
fn minor_faults() -> u64 {
    stat_field(10)
}

/// Field `n` of this process's `/proc/self/stat` (proc(5) numbering).
fn stat_field(n: usize) -> u64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // The first field after the command's closing ')' is field 3.
    stat.rfind(')')
        .and_then(|i| stat[i + 1..].split_whitespace().nth(n - 3))
        .and_then(|f| f.parse().ok())
        .unwrap_or(0)
}

/// This process's CPU time so far (utime + stime), in clock ticks.
fn cpu_ticks() -> u64 {
    stat_field(14) + stat_field(15)
}

fn clock_ticks_per_second() -> u64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(100)
}

/// One library invocation: (caller-side time, instantiate time, fuel).
async fn lib_once(rt: &Runtime, l: &Lang) -> Result<(Duration, Duration, u64)> {
    lib_once_in(rt, l, None).await
}

/// [`lib_once`] in run `run` (`None`: the request's default run, the same
/// for every call).
async fn lib_once_in(
    rt: &Runtime,
    l: &Lang,
    run: Option<String>,
) -> Result<(Duration, Duration, u64)> {
    let mut req = InvokeRequest::new(&l.type_id, inputs(l));
    if let Some(run) = run {
        req.context.run_id = run;
    }
    let t = Instant::now();
    let report = rt.invoke(req).await;
    let took = t.elapsed();
    match report.outcome {
        Ok(Outcome::Completed { .. }) => Ok((
            took,
            Duration::from_micros(report.usage.instantiate_time_us),
            report.usage.fuel_consumed,
        )),
        other => bail!("{} hello did not complete: {other:?}", l.name),
    }
}

/// One invocation through `wop serve`: (usage.wallTimeUs, round trip).
async fn serve_once(http: &reqwest::Client, base: &str, l: &Lang) -> Result<(Duration, Duration)> {
    let body = json!({"typeId": l.type_id, "inputs": inputs(l)});
    let t = Instant::now();
    let r = http
        .post(format!("{base}/host/wop/invocations"))
        .header("accept", "application/json")
        .json(&body)
        .send()
        .await?;
    let status = r.status();
    let v: Value = r.json().await?;
    let rtt = t.elapsed();
    if !status.is_success() || v["outcome"] != "completed" {
        bail!("{} hello through serve: {status} {v}", l.name);
    }
    let wall = v["usage"]["wallTimeUs"]
        .as_u64()
        .context("no usage.wallTimeUs")?;
    Ok((Duration::from_micros(wall), rtt))
}

/// A runtime with every pack loaded (default policy).
async fn runtime(cfg: &RuntimeConfig, langs: &[Lang]) -> Result<Runtime> {
    let rt = Runtime::new(cfg)?;
    for l in langs {
        rt.load_pack(&l.dir)
            .await
            .with_context(|| format!("loading {}", l.dir.display()))?;
    }
    Ok(rt)
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<()> {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    if let Some(i) = args.iter().position(|a| a == "--profile") {
        let lang = args
            .get(i + 1)
            .context("--profile <lang> <seconds>")?
            .clone();
        let secs: u64 = args
            .get(i + 2)
            .and_then(|s| s.parse().ok())
            .context("--profile <lang> <seconds>")?;
        let built = PathBuf::from(
            args.first()
                .context("languages <built-dir> --profile <lang> <seconds>")?,
        );
        let idle = match args.iter().position(|a| a == "--idle-us") {
            Some(j) => args
                .get(j + 1)
                .and_then(|s| s.parse().ok())
                .map(Duration::from_micros)
                .context("--idle-us <microseconds>")?,
            None => Duration::ZERO,
        };
        let pollute_kib: usize = match args.iter().position(|a| a == "--pollute-kib") {
            Some(j) => args
                .get(j + 1)
                .and_then(|s| s.parse().ok())
                .context("--pollute-kib <KiB>")?,
            None => 0,
        };
        let new_runs = args.iter().any(|a| a == "--new-run-per-call");
        let gap = Gap {
            idle,
            pollute: vec![0u8; pollute_kib * 1024],
        };
        return profile(&built, &lang, Duration::from_secs(secs), gap, new_runs).await;
    }
    let serve_memory = args.iter().any(|a| a == "--serve-memory-store");
    args.retain(|a| a != "--serve-memory-store");
    let built = PathBuf::from(args.first().context(
        "usage: languages <built-dir> [N] [--serve-memory-store]   (<built-dir>: the out-dir of sdk/build-all.sh)",
    )?);
    let n: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(500);
    let tmp = tempfile::tempdir()?;
    let langs = langs(&built, tmp.path())?;

    let rt = runtime(&RuntimeConfig::new(), &langs).await?;
    let sled = Arc::new(SledStore::open(&tmp.path().join("library-store"))?);
    let mut sled_cfg = RuntimeConfig::new();
    sled_cfg.effect_store(sled.clone());
    let rt_sled = runtime(&sled_cfg, &langs).await?;

    // The service: a real `wop serve` with the same packs, default store.
    let packs = tmp.path().join("packs");
    std::fs::create_dir(&packs)?;
    for l in &langs {
        std::os::unix::fs::symlink(&l.dir, packs.join(l.name))?;
    }
    let wop = fuel_benches::wop_next_to_exe()?;
    let mut cmd = std::process::Command::new(&wop);
    cmd.arg("serve").arg("--packs").arg(&packs);
    if serve_memory {
        cmd.arg("--memory-store");
    } else {
        cmd.arg("--store").arg(tmp.path().join("serve-store"));
    }
    cmd.args(["--listen", "127.0.0.1:0", "--anonymous-loopback"])
        .stdin(std::process::Stdio::null());
    let (_child, addr, _stdout) = wop_testkit::spawn_serve(&mut cmd)
        .with_context(|| format!("starting {} serve", wop.display()))?;
    let base = format!("http://{addr}");
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(1)
        .build()?;

    let mut samples: Vec<Samples> = langs.iter().map(|_| Samples::default()).collect();
    let mut healthz = Vec::new();
    let rounds = n.div_ceil(BLOCK);
    // Round 0 is the warm-up.
    for round in 0..=rounds {
        let keep = round > 0;
        for _ in 0..BLOCK {
            let t = Instant::now();
            http.get(format!("{base}/healthz"))
                .send()
                .await?
                .bytes()
                .await?;
            if keep {
                healthz.push(t.elapsed());
            }
        }
        for (l, s) in langs.iter().zip(samples.iter_mut()) {
            let mut faults = minor_faults();
            for i in 0..BLOCK {
                let (took, inst, fuel) = lib_once(&rt, l).await?;
                if keep {
                    s.lib.push(took);
                    s.instantiate.push(inst);
                    s.fuel = fuel;
                }
                if i == 0 {
                    let now = minor_faults();
                    if keep {
                        s.first_faults += now - faults;
                    }
                    faults = now;
                }
            }
            let flushes = sled.flushes();
            if keep {
                s.faults += minor_faults() - faults;
            }
            for _ in 0..BLOCK {
                let (took, _, _) = lib_once(&rt_sled, l).await?;
                if keep {
                    s.sled.push(took);
                }
            }
            if keep {
                s.flushes += sled.flushes() - flushes;
            }
            for _ in 0..BLOCK {
                let (wall, rtt) = serve_once(&http, &base, l).await?;
                if keep {
                    s.serve_wall.push(wall);
                    s.serve_rtt.push(rtt);
                }
            }
        }
    }
    let n = rounds * BLOCK;
    let store = if serve_memory { "memory" } else { "sled" };
    report(&langs, samples, &stats(healthz), n, store);
    Ok(())
}

/// `--profile`: one language's library calls, in a loop, for a profiler.
async fn profile(built: &Path, name: &str, secs: Duration, gap: Gap, new_runs: bool) -> Result<()> {
    if name == BARE_RUST {
        return profile_bare(secs, gap).await;
    }
    let tmp = tempfile::tempdir()?;
    let langs = langs(built, tmp.path())?;
    let l = langs
        .iter()
        .find(|l| l.name == name)
        .with_context(|| format!("no language {name} (built: {})", built.display()))?;
    let rt = runtime(&RuntimeConfig::new(), std::slice::from_ref(l)).await?;
    let (rt, l) = (&rt, l);
    let what = gap.describe();
    let (calls, lib, cpu) = profile_loop(secs, gap, |i| {
        let run = new_runs.then(|| format!("inv-{i}"));
        async move { Ok(lib_once_in(rt, l, run).await?.0) }
    })
    .await?;
    println!(
        "{name}: {calls} calls{}{what}, library p50 {:.1} µs, process CPU {cpu:.1} µs per call",
        if new_runs { " each in a new run" } else { "" },
        stats(lib).p50_us,
    );
    Ok(())
}

/// `--profile bare-rust`: the Rust hello through a bare wasmtime
/// configured like wop (`fuel_benches::bare::invoke_like_wop`, the
/// `latency` bench's baseline), so that a profile of wop's path and one of
/// the baseline come from the same binary and the same loop.
const BARE_RUST: &str = "bare-rust";

async fn profile_bare(secs: Duration, gap: Gap) -> Result<()> {
    use fuel_benches::bare;
    let bare_err = |e: wasmtime::Error| anyhow::anyhow!("bare hello: {e}");
    let hello = wop_test_packs::wasm_path("hello");
    let pre = bare::pre(&bare::engine_like_wop().map_err(bare_err)?, &hello).map_err(bare_err)?;
    let req = bare::request("wop.samples.hello", &json!({"name": "Ada"}));
    let (pre, req) = (&pre, &req);
    let what = gap.describe();
    let (calls, times, cpu) = profile_loop(secs, gap, |_| async move {
        let t = Instant::now();
        bare::invoke_like_wop(pre, req).await.map_err(bare_err)?;
        Ok(t.elapsed())
    })
    .await?;
    println!(
        "{BARE_RUST}: {calls} calls{what}, bare wasmtime configured like wop p50 {:.1} µs, process CPU {cpu:.1} µs per call",
        stats(times).p50_us,
    );
    Ok(())
}

/// What `--profile` does between two calls (outside the call's time).
struct Gap {
    /// Sleeps this long.
    idle: Duration,
    /// Then writes over this buffer ([`fuel_benches::pollute`]).
    pollute: Vec<u8>,
}

impl Gap {
    fn describe(&self) -> String {
        let mut s = String::new();
        if !self.idle.is_zero() {
            s += &format!(" each after {} µs idle", self.idle.as_micros());
        }
        if !self.pollute.is_empty() {
            s += &format!(" each after {} KiB written", self.pollute.len() / 1024);
        }
        s
    }
}

/// The loop a profiler attaches to: `call(i)` (which times itself) a
/// block of times to warm up, then `profiling <pid>`, then for `secs`,
/// each call after `gap`. Returns the calls, their times and the
/// process's CPU per call in µs (its deferred work included, the gap's
/// writes not: their time is taken out).
async fn profile_loop<F, Fut>(
    secs: Duration,
    mut gap: Gap,
    mut call: F,
) -> Result<(u64, Vec<Duration>, f64)>
where
    F: FnMut(u64) -> Fut,
    Fut: std::future::Future<Output = Result<Duration>>,
{
    for i in 0..BLOCK {
        call(i as u64).await?;
    }
    println!("profiling {}", std::process::id());
    // Give the profiler a moment to attach.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (start, mut calls) = (Instant::now(), 0u64);
    let mut times = Vec::new();
    let mut writing = Duration::ZERO;
    let cpu0 = cpu_ticks();
    while start.elapsed() < secs {
        if !gap.idle.is_zero() {
            // The thread sleeps: its CPU may idle, as a service's does
            // between one client's requests.
            std::thread::sleep(gap.idle);
        }
        let w = Instant::now();
        fuel_benches::pollute(&mut gap.pollute);
        writing += w.elapsed();
        // Past the warm-up's indices: a call's index names its run.
        times.push(call(BLOCK as u64 + calls).await?);
        calls += 1;
    }
    let cpu = (cpu_ticks() - cpu0) as f64 * 1e6 / clock_ticks_per_second() as f64;
    let cpu = cpu - writing.as_secs_f64() * 1e6;
    Ok((calls, times, cpu / calls.max(1) as f64))
}

fn report(
    langs: &[Lang],
    samples: Vec<Samples>,
    floor: &fuel_benches::Stats,
    n: usize,
    serve_store: &str,
) {
    println!(
        "hello per language, fresh instance per call: {n} calls per language and path, in blocks of {BLOCK}, languages in turn, after one warm-up round; {} CPUs",
        std::thread::available_parallelism().map_or(0, usize::from)
    );
    println!(
        "wop serve on a {serve_store} store; HTTP floor (GET /healthz round trip, same connection): p50 {:.1} µs",
        floor.p50_us
    );
    println!();
    println!(
        "{:<7} {:>8} {:>7} | {:>9} {:>6} {:>9} {:>11} {:>7} {:>6} | {:>9} {:>8} | {:>9} {:>6} {:>9}",
        "", "", "", "library", "", "", "", "", "", "+sled", "", "serve", "", "HTTP"
    );
    println!(
        "{:<7} {:>8} {:>7} | {:>9} {:>6} {:>9} {:>11} {:>7} {:>6} | {:>9} {:>8} | {:>9} {:>6} {:>9}",
        "lang",
        "size",
        "fuel",
        "p50 µs",
        "×Rust",
        "p99 µs",
        "instant. µs",
        "faults",
        "1st",
        "p50 µs",
        "flushes",
        "p50 µs",
        "×Rust",
        "p50 µs"
    );
    let p50 = |d: &[Duration]| stats(d.to_vec()).p50_us;
    let (rust_lib, rust_serve) = (p50(&samples[0].lib), p50(&samples[0].serve_wall));
    for (l, s) in langs.iter().zip(&samples) {
        let per_call = |x: u64| x as f64 / s.lib.len().max(1) as f64;
        let blocks = (s.lib.len() / BLOCK).max(1);
        let steady = |x: u64| x as f64 / (s.lib.len() - s.lib.len() / BLOCK).max(1) as f64;
        let lib = stats(s.lib.clone());
        println!(
            "{:<7} {:>6.1}MB {:>6}k | {:>9.1} {:>5.1}× {:>9.1} {:>11.1} {:>7.1} {:>6.0} | {:>9.1} {:>8.2} | {:>9.1} {:>5.1}× {:>9.1}",
            l.name,
            l.bytes as f64 / 1e6,
            s.fuel / 1000,
            lib.p50_us,
            lib.p50_us / rust_lib,
            lib.p99_us,
            p50(&s.instantiate),
            steady(s.faults),
            s.first_faults as f64 / blocks as f64,
            p50(&s.sled),
            per_call(s.flushes),
            p50(&s.serve_wall),
            p50(&s.serve_wall) / rust_serve,
            p50(&s.serve_rtt),
        );
    }
}
