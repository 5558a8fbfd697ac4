//! Library mode: one shared [`Runtime`] in this process (durable effect
//! store, the soak policy, every pack loaded), a 2-worker tokio runtime,
//! each invocation in a task of its own (a panic is a `JoinError`).

use super::mix::{self, Call, Invoke};
use super::tally::{self, Answer, Tally};
use super::{Report, Settings, rss};
use anyhow::{Context as _, Result};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;
use wop_runtime::{InvokeRequest, Outcome, Policy, Principal, RunContext, Runtime, RuntimeConfig};

/// Host panics seen as `JoinError::is_panic` (the hook counts them too).
static JOIN_PANICS: AtomicU64 = AtomicU64::new(0);

/// Writes the soak's pack directory under `root`: symlinks to the built
/// component packs and the ABI v1 packs built from WAT. Returns it.
pub fn packs_dir(root: &Path) -> Result<std::path::PathBuf> {
    let dir = root.join("packs");
    std::fs::create_dir_all(&dir)?;
    for name in mix::COMPONENT_PACKS {
        let src = wop_test_packs::pack_dir(name);
        std::os::unix::fs::symlink(&src, dir.join(name))
            .with_context(|| format!("linking {}", src.display()))?;
    }
    super::abi::write_packs(&dir)?;
    Ok(dir)
}

/// The request of one invocation of `i` in run `run_id`, as the service
/// builds it for an anonymous loopback caller.
pub fn request(i: &Invoke, seq: u64, run_id: String) -> InvokeRequest {
    let mut req = InvokeRequest::new(i.type_id, (i.inputs)(seq));
    let extra = i.extra();
    if let Some(c) = extra.get("config") {
        req.config = c.clone();
    }
    req.budget = extra
        .get("budget")
        .and_then(|b| serde_json::from_value(b.clone()).ok());
    req.bounds = extra
        .get("bounds")
        .and_then(|b| serde_json::from_value(b.clone()).ok());
    req.context = RunContext {
        run_id,
        node_id: "n".to_owned(),
        tenant_id: "anon:local".to_owned(),
        attempt: 1,
    };
    req.principal = Principal {
        id: "anonymous".to_owned(),
        tenant: "anon:local".to_owned(),
        scopes: Vec::new(),
    };
    req
}

fn answer(report: wop_runtime::InvocationReport) -> Answer {
    match report.outcome {
        Ok(Outcome::Completed { output }) => Answer::Completed(output),
        Ok(Outcome::Suspended { interrupt }) => Answer::Failed {
            code: "suspended".into(),
            message: interrupt.to_string(),
        },
        Err(e) => Answer::Failed {
            code: e.code.clone(),
            message: e.message.clone(),
        },
    }
}

/// Both answers of a replayed invocation: the second must equal the first.
pub fn replayed(first: Answer, second: Answer) -> Answer {
    match (&first, &second) {
        (Answer::Completed(a), Answer::Completed(b)) if a == b => first,
        (Answer::Completed(a), Answer::Completed(b)) => Answer::Failed {
            code: "replay_mismatch".into(),
            message: format!("first {a}, then {b}"),
        },
        (Answer::Completed(_), _) => second,
        _ => first,
    }
}

/// One call of `kind` on `rt`, in a task of its own.
async fn call(rt: &Runtime, kind: &mix::Kind, seq: u64) -> Result<Answer, String> {
    let rt = rt.clone();
    let call = kind.call;
    let task = tokio::spawn(async move {
        match call {
            Call::Invoke(i) => Ok(answer(
                rt.invoke(request(&i, seq, super::run_id("run", seq))).await,
            )),
            Call::Replay(i) => {
                let run = super::run_id("replay", seq);
                let first = answer(rt.invoke(request(&i, seq, run.clone())).await);
                let second = answer(rt.invoke(request(&i, seq, run)).await);
                Ok(replayed(first, second))
            }
            Call::Load(pack) => Ok(match rt.load_pack(&wop_test_packs::pack_dir(pack)).await {
                Ok(s) => Answer::Completed(serde_json::json!({"loaded": s.name})),
                Err(e) => Answer::Failed {
                    code: e.code().as_str().to_owned(),
                    message: e.to_string(),
                },
            }),
            Call::Mcp(_) | Call::Raw { .. } => Err("not sent in library mode".to_owned()),
        }
    });
    let abort = task.abort_handle();
    match tokio::time::timeout(super::ANSWER_TIMEOUT, task).await {
        Ok(Ok(r)) => r,
        Ok(Err(e)) if e.is_panic() => {
            JOIN_PANICS.fetch_add(1, Ordering::Relaxed);
            Err(format!("host panic: {e}"))
        }
        Ok(Err(e)) => Err(format!("task ended: {e}")),
        Err(_) => {
            abort.abort();
            Err(format!("no answer within {:?}", super::ANSWER_TIMEOUT))
        }
    }
}

/// Runs the library soak.
pub fn run(settings: &Settings) -> Result<Report> {
    tally::install_panic_counter();
    let tmp = tempfile::tempdir()?;
    let packs = packs_dir(tmp.path())?;
    let kv = super::kv::KvServer::start()?;
    let policy = Policy::from_toml(&mix::policy(&kv.url("")))?;
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let store_spec = match &settings.store {
        Some(s) => s.clone(),
        None => tmp.path().join("effects").display().to_string(),
    };
    let rt = tokio.block_on(async {
        let store = wop_runtime::store::open(&store_spec)
            .map_err(|e| anyhow::anyhow!("effect store: {e}"))?;
        let mut cfg = RuntimeConfig::new();
        cfg.policy(policy).effect_store(store);
        let rt = Runtime::new(&cfg)?;
        let mut dirs: Vec<_> = std::fs::read_dir(&packs)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .collect();
        dirs.sort();
        for d in dirs {
            rt.load_pack(&d)
                .await
                .with_context(|| format!("loading {}", d.display()))?;
        }
        anyhow::Ok(rt)
    })?;
    let kinds = super::kinds::for_mode(true);
    println!(
        "soak: library mode, {} s, concurrency {}, {} kinds, store {}",
        settings.duration.as_secs(),
        settings.concurrency,
        kinds.len(),
        if settings.store.is_some() {
            "given"
        } else {
            "sled (temp dir)"
        }
    );
    let op_kinds = Arc::new(kinds.clone());
    let tally = Arc::new(Tally::new(kinds));
    let pid = std::process::id();
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
    let states: Vec<Runtime> = (0..settings.concurrency).map(|_| rt.clone()).collect();
    let quiet_rt = rt.clone();
    let points = tokio.block_on(super::load_with_quiet_points(
        pid,
        tally.clone(),
        states,
        start,
        settings.duration,
        move |rt: Runtime, k: usize, seq: u64| {
            let kind = op_kinds.get(k).copied();
            async move {
                let r = match kind {
                    Some(kind) => call(&rt, &kind, seq).await,
                    None => Err("no such kind".to_owned()),
                };
                (rt, r)
            }
        },
        || {
            let rt = quiet_rt.clone();
            async move {
                let _ = tokio::task::spawn_blocking(move || rt.release_idle_memory()).await;
                rss::settled(pid).await
            }
        },
    ));
    let secs = start.elapsed().as_secs_f64();
    let samples = sampler.stop();
    let report = Report {
        mode: "library",
        totals: tally.totals(),
        panics: tally::panics().max(JOIN_PANICS.load(Ordering::Relaxed)),
        rss: rss::quiet_verdict(&samples, points.mid_kib, points.end_kib),
        exit_code: None,
        secs,
    };
    super::print_summary(&report, &tally, &samples);
    super::print_loaded(&samples, &points, settings.duration);
    println!("kv service: {} requests", kv.requests());
    drop(rt);
    tokio.shutdown_timeout(std::time::Duration::from_secs(10));
    Ok(report)
}
