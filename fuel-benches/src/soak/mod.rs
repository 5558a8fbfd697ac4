//! The soak run (issue 14): one shared runtime — in this process
//! ([`library`]) or behind the real `wop serve` binary ([`serve`]) — driven
//! by `C` concurrent clients with a weighted mix of honest and hostile
//! invocations ([`mix`]) for a fixed time, recording every answer
//! ([`tally`]), host panics, and resident memory over time ([`rss`]).
//!
//! Run by `src/bin/soak.rs`; see the README's "Soak" section.

pub mod abi;
pub mod kinds;
pub mod kv;
pub mod library;
pub mod mix;
pub mod rss;
pub mod serve;
pub mod tally;

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// A run id of this soak's own: `soak-<pid>-<start ms>-<what>-<seq>`. A
/// second soak on the same store (a PostgreSQL database kept between
/// runs) must not find the first one's runs: their budgets, run clocks
/// and replay records would answer for it (`budget_exhausted`,
/// `run_timeout`, replays of another run's effects).
pub fn run_id(what: &str, seq: u64) -> String {
    static PREFIX: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    let prefix = PREFIX.get_or_init(|| {
        let ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis());
        format!("soak-{}-{ms}", std::process::id())
    });
    format!("{prefix}-{what}-{seq}")
}

/// How long one call may take before it counts as unanswered (the policy's
/// wall clock is 5 s; the rest is queueing under load).
pub const ANSWER_TIMEOUT: Duration = Duration::from_secs(60);

/// One soak run's settings.
#[derive(Debug, Clone)]
pub struct Settings {
    /// How long the load runs.
    pub duration: Duration,
    /// Concurrent clients.
    pub concurrency: usize,
    /// Effect store: `None` = sled in a temp dir, else a `postgres://` URL
    /// (or a directory).
    pub store: Option<String>,
    /// Serve mode: the `wop` binary (default: next to this executable).
    pub wop: Option<std::path::PathBuf>,
}

/// What a run found.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// `library` or `serve`.
    pub mode: &'static str,
    /// Answer counts.
    pub totals: tally::Totals,
    /// Host panics: the panic hook (every thread of this process) and, in
    /// serve mode, `panicked at` lines on the server's stderr.
    pub panics: u64,
    /// RSS baseline and end.
    pub rss: rss::Verdict,
    /// Serve mode: the server's exit code after SIGTERM (`Some(0)` wanted).
    pub exit_code: Option<Option<i32>>,
    /// Seconds the load ran.
    pub secs: f64,
}

impl Report {
    /// Everything answered as expected, no panic, RSS flat, clean exit.
    pub fn ok(&self) -> bool {
        self.totals.unexpected == 0
            && self.totals.unanswered == 0
            && self.totals.answered == self.totals.sent
            && self.panics == 0
            && self
                .rss
                .acceptable(std::time::Duration::from_secs_f64(self.secs))
            && self.exit_code.is_none_or(|c| c == Some(0))
    }

    /// The machine-readable line.
    pub fn line(&self) -> String {
        let judged = if self.secs < rss::JUDGED_FROM.as_secs_f64() {
            " (not judged: shorter than 300 s)"
        } else {
            ""
        };
        let exit = match self.exit_code {
            None => String::new(),
            Some(Some(c)) => format!(" exit={c}"),
            Some(None) => " exit=signal".to_owned(),
        };
        format!(
            "soak: mode={} seconds={:.0} invocations={} answered={} unexpected={} unanswered={} panics={} rss_start_kib={} rss_end_kib={} rss_peak_kib={} growth={:.1}%{judged}{exit} {}",
            self.mode,
            self.secs,
            self.totals.sent,
            self.totals.answered,
            self.totals.unexpected,
            self.totals.unanswered,
            self.panics,
            self.rss.start_kib,
            self.rss.end_kib,
            self.rss.hwm_kib,
            self.rss.growth_pct(),
            if self.ok() { "ok" } else { "FAIL" }
        )
    }
}

/// Runs `states.len()` client loops until `end` or until `stop` is set:
/// each picks a kind by weight, calls `op(state, kind, seq)` and records
/// the answer in `tally`. `op` returns the state back and the answer, or
/// why there was none. Returns when every loop has finished its call.
pub async fn drive<S, F, Fut>(
    tally: Arc<tally::Tally>,
    states: Vec<S>,
    end: Instant,
    stop: Arc<AtomicBool>,
    op: F,
) where
    S: Send + 'static,
    F: Fn(S, usize, u64) -> Fut + Send + Sync + Clone + 'static,
    Fut: Future<Output = (S, Result<tally::Answer, String>)> + Send,
{
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let mut tasks = Vec::new();
    for (i, mut state) in states.into_iter().enumerate() {
        let (tally, op, stop) = (tally.clone(), op.clone(), stop.clone());
        tasks.push(tokio::spawn(async move {
            let mut picker = mix::Picker::new(tally.kinds(), i as u64 + 1);
            while Instant::now() < end && !stop.load(Ordering::Relaxed) {
                let k = picker.pick();
                let seq = SEQ.fetch_add(1, Ordering::Relaxed);
                tally.sent();
                let t0 = Instant::now();
                let (s, r) = op(state, k, seq).await;
                state = s;
                match r {
                    Ok(a) => tally.answer(k, &a, t0.elapsed()),
                    Err(why) => tally.unanswered(k, &why),
                }
            }
        }));
    }
    for t in tasks {
        if let Err(e) = t.await {
            eprintln!("soak: a client loop ended abnormally: {e}");
        }
    }
}

/// Waits for the warm-up ([`rss::warmup`], and every kind answered once,
/// but no later than a third of the run); returns when it ended, in seconds
/// since `start`.
pub async fn warmed_up(tally: &tally::Tally, start: Instant, run: Duration) -> f64 {
    let (warm, latest) = (start + rss::warmup(run), start + run / 3);
    loop {
        let now = Instant::now();
        if now >= latest || (now >= warm && tally.every_kind_answered()) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let at = start.elapsed().as_secs_f64();
    println!("soak: warm-up over after {at:.0} s");
    at
}

/// Where the load paused: when the warm-up ended, and the RSS at the three
/// quiet points (after the warm-up, half-way through the rest, after the
/// run), KiB.
#[derive(Debug, Clone, Copy, Default)]
pub struct QuietPoints {
    /// Seconds since the start when the warm-up ended.
    pub warm_s: f64,
    /// RSS at the quiet point after the warm-up.
    pub warm_kib: u64,
    /// RSS at the quiet point half-way between the warm-up and the end
    /// (the judged baseline).
    pub mid_kib: u64,
    /// RSS at the quiet point after the run.
    pub end_kib: u64,
}

/// The load in three parts, each followed by a quiet point: [`drive`]
/// until the warm-up is over ([`warmed_up`]), then until half-way through
/// the rest of the run, then until `start + run`. At each quiet point
/// every call finishes, `quiet()` gives the sandbox pool's kept memory back
/// to the OS and returns the RSS then, and `pid`'s mappings are printed.
///
/// Judged: growth from the middle point to the end. Under load the pool
/// keeps up to 8 MiB of every slot an instance dirtied, and how many slots
/// the load has spread over depends on the machine (decision 0028), hence
/// quiet points; bounded caches (sled's 16 MiB) still fill after the
/// warm-up, a fill that slows down where a leak would not, hence the
/// later of two segments (decision 0030).
pub async fn load_with_quiet_points<S, F, Fut, Q, QF>(
    pid: u32,
    tally: Arc<tally::Tally>,
    states: Vec<S>,
    start: Instant,
    run: Duration,
    op: F,
    quiet: Q,
) -> QuietPoints
where
    S: Clone + Send + 'static,
    F: Fn(S, usize, u64) -> Fut + Send + Sync + Clone + 'static,
    Fut: Future<Output = (S, Result<tally::Answer, String>)> + Send + 'static,
    Q: Fn() -> QF,
    QF: Future<Output = u64>,
{
    let end = start + run;
    let stop = Arc::new(AtomicBool::new(false));
    let first = tokio::spawn(drive(
        tally.clone(),
        states.clone(),
        end,
        stop.clone(),
        op.clone(),
    ));
    let warm_s = warmed_up(&tally, start, run).await;
    stop.store(true, Ordering::Relaxed);
    let _ = first.await;
    let at_point = |name: &str, kib: u64| {
        println!(
            "soak: quiet point {name}: RSS {:.1} MiB ({:.0} s)",
            kib as f64 / 1024.0,
            start.elapsed().as_secs_f64()
        );
        println!("soak: RSS by mapping, MiB: {}", rss::by_mapping_line(pid));
    };
    let warm_kib = quiet().await;
    at_point("after the warm-up", warm_kib);
    let mid = Instant::now() + end.saturating_duration_since(Instant::now()) / 2;
    let never = Arc::new(AtomicBool::new(false));
    let second = drive(
        tally.clone(),
        states.clone(),
        mid,
        never.clone(),
        op.clone(),
    );
    let _ = tokio::spawn(second).await;
    let mid_kib = quiet().await;
    at_point("half-way (the judged baseline)", mid_kib);
    let _ = tokio::spawn(drive(tally, states, end, never, op)).await;
    let end_kib = quiet().await;
    at_point("after the run", end_kib);
    QuietPoints {
        warm_s,
        warm_kib,
        mid_kib,
        end_kib,
    }
}

/// Sample interval for a run of `run`: about 30 rows, 2 to 30 s apart.
pub fn sample_every(run: Duration) -> Duration {
    (run / 30).clamp(Duration::from_secs(2), Duration::from_secs(30))
}

/// Prints the RSS under load (medians after the warm-up and over the end),
/// for information beside the judged quiet points.
pub fn print_loaded(samples: &[rss::Sample], points: &QuietPoints, run: Duration) {
    let first = rss::Verdict {
        start_kib: points.warm_kib,
        end_kib: points.mid_kib,
        hwm_kib: 0,
    };
    println!(
        "RSS at the quiet points after the warm-up and half-way (not judged: caches still fill): {:.1} → {:.1} MiB ({:+.1} %)",
        first.start_kib as f64 / 1024.0,
        first.end_kib as f64 / 1024.0,
        first.growth_pct()
    );
    let v = rss::verdict(samples, points.warm_s, run);
    println!(
        "RSS under load (not judged; includes the pool's kept memory): median {:.1} MiB after the warm-up, {:.1} MiB over the end ({:+.1} %)",
        v.start_kib as f64 / 1024.0,
        v.end_kib as f64 / 1024.0,
        v.growth_pct()
    );
}

/// Prints the summary (per-kind table, RSS samples) of a finished run.
pub fn print_summary(report: &Report, tally: &tally::Tally, samples: &[rss::Sample]) {
    println!();
    println!("## soak, mode {}: answers by kind", report.mode);
    println!();
    print!("{}", tally.table());
    println!();
    if let (Some(first), Some(last)) = (samples.first(), samples.last()) {
        println!(
            "RSS samples: {} from {:.1} MiB (t={:.0} s) to {:.1} MiB (t={:.0} s)",
            samples.len(),
            first.rss_kib as f64 / 1024.0,
            first.at_s,
            last.rss_kib as f64 / 1024.0,
            last.at_s
        );
    }
    let t = report.totals;
    println!(
        "invocations {} · answered {} · unexpected {} · unanswered {} · panics {} · RSS at the quiet points half-way → end {:.1} → {:.1} MiB ({:+.1} %, peak {:.1} MiB) · {:.0} invocations/s",
        t.sent,
        t.answered,
        t.unexpected,
        t.unanswered,
        report.panics,
        report.rss.start_kib as f64 / 1024.0,
        report.rss.end_kib as f64 / 1024.0,
        report.rss.growth_pct(),
        report.rss.hwm_kib as f64 / 1024.0,
        t.sent as f64 / report.secs.max(0.001),
    );
}
