//! Resident memory over time: `VmRSS` and `VmHWM` of a process from
//! `/proc/<pid>/status`, sampled every second on a thread of its own (so a
//! busy tokio runtime cannot delay a sample) and printed as it goes; the
//! verdict compares the RSS at two quiet points — after the warm-up and
//! after the run, each once the sandbox pool's kept memory went back to
//! the OS (decision 0030).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// One sample, KiB.
#[derive(Debug, Clone, Copy)]
pub struct Sample {
    /// Seconds since the sampler started.
    pub at_s: f64,
    /// `VmRSS`.
    pub rss_kib: u64,
    /// `VmHWM` (peak RSS so far).
    pub hwm_kib: u64,
}

/// `(VmRSS, VmHWM)` of `pid` in KiB (`None` without `/proc` or once the
/// process is gone).
pub fn read(pid: u32) -> Option<(u64, u64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| {
        status.lines().find_map(|l| {
            let rest = l.strip_prefix(name)?.strip_prefix(':')?;
            rest.trim()
                .trim_end_matches("kB")
                .trim()
                .parse::<u64>()
                .ok()
        })
    };
    Some((field("VmRSS")?, field("VmHWM")?))
}

/// A running sampler.
pub struct Sampler {
    stop: Arc<AtomicBool>,
    samples: Arc<Mutex<Vec<Sample>>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Sampler {
    /// Samples `pid` every second from `start` on, and prints `t, RSS,
    /// HWM` and `status()` (e.g. the answers so far) every `print_every`.
    pub fn start(
        pid: u32,
        start: Instant,
        print_every: Duration,
        status: impl Fn() -> String + Send + 'static,
    ) -> Sampler {
        let stop = Arc::new(AtomicBool::new(false));
        let samples = Arc::new(Mutex::new(Vec::new()));
        let (st, sm) = (stop.clone(), samples.clone());
        let thread = std::thread::Builder::new()
            .name("soak-rss".into())
            .spawn(move || {
                let (mut next, mut next_print) = (start, start);
                println!("|   t (s) |  RSS (MiB) |  HWM (MiB) | answers so far |");
                println!("|---|---|---|---|");
                while !st.load(Ordering::Relaxed) {
                    let now = Instant::now();
                    if now >= next {
                        next += Duration::from_secs(1);
                        let Some((rss, hwm)) = read(pid) else {
                            continue;
                        };
                        let s = Sample {
                            at_s: now.saturating_duration_since(start).as_secs_f64(),
                            rss_kib: rss,
                            hwm_kib: hwm,
                        };
                        sm.lock().unwrap_or_else(|p| p.into_inner()).push(s);
                        if now >= next_print {
                            next_print += print_every;
                            println!(
                                "| {:7.0} | {:10.1} | {:10.1} | {} |",
                                s.at_s,
                                rss as f64 / 1024.0,
                                hwm as f64 / 1024.0,
                                status()
                            );
                        }
                    }
                    std::thread::sleep(Duration::from_millis(50));
                }
            })
            .ok();
        Sampler {
            stop,
            samples,
            thread,
        }
    }

    /// Stops sampling; returns the samples.
    pub fn stop(mut self) -> Vec<Sample> {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.samples
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

/// The window over which the baseline and the end RSS are taken: 10 % of
/// the run, at least 5 s. Both are the **median** of the 1 s samples in
/// their window, so one transient peak (a 2 MB output being serialized, a
/// memory bomb's slot) does not decide the verdict.
pub fn window(run: Duration) -> Duration {
    (run / 10).max(Duration::from_secs(5))
}

/// Median RSS (KiB) of the samples taken in `[from, to]` seconds (0 if
/// none).
pub fn median_rss(samples: &[Sample], from: f64, to: f64) -> u64 {
    let mut v: Vec<u64> = samples
        .iter()
        .filter(|s| s.at_s >= from && s.at_s <= to)
        .map(|s| s.rss_kib)
        .collect();
    v.sort_unstable();
    v.get(v.len() / 2).copied().unwrap_or(0)
}

/// RSS under load, from the samples of a run of `run` whose warm-up ended
/// at `warm_s` seconds: baseline = median over `[warm, warm + window]`,
/// end = median over the last window, peak = the largest `VmHWM`. Printed
/// for information; the judged verdict is [`quiet_verdict`].
pub fn verdict(samples: &[Sample], warm_s: f64, run: Duration) -> Verdict {
    let (w, end) = (window(run).as_secs_f64(), run.as_secs_f64());
    Verdict {
        start_kib: median_rss(samples, warm_s, warm_s + w),
        end_kib: median_rss(samples, end - w, end + 1.0),
        hwm_kib: samples.iter().map(|s| s.hwm_kib).max().unwrap_or(0),
    }
}

/// The verdict from the two quiet points of a run (see
/// `soak::load_with_quiet_points`): baseline and end are the RSS there,
/// peak the largest `VmHWM` sampled.
pub fn quiet_verdict(samples: &[Sample], start_kib: u64, end_kib: u64) -> Verdict {
    Verdict {
        start_kib,
        end_kib,
        hwm_kib: samples.iter().map(|s| s.hwm_kib).max().unwrap_or(0),
    }
}

/// RSS of `pid` at a quiet point, KiB: the median of five reads 200 ms
/// apart (a freed buffer can trail the end of its request briefly).
pub async fn settled(pid: u32) -> u64 {
    let mut v = Vec::new();
    for _ in 0..5 {
        if let Some((rss, _)) = read(pid) {
            v.push(rss);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    v.sort_unstable();
    v.get(v.len() / 2).copied().unwrap_or(0)
}

/// Where `pid`'s resident memory is, from `/proc/<pid>/smaps`: every
/// mapping holding at least 1 MiB as `(virtual size, Rss, name)` in KiB,
/// largest Rss first, then the rest summed as `(0, Rss, "(smaller
/// mappings)")`. The sandbox pool's memories and stacks are each one
/// huge anonymous mapping; malloc arenas are 64 MiB ones.
pub fn by_mapping(pid: u32) -> Vec<(u64, u64, String)> {
    let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/smaps")) else {
        return Vec::new();
    };
    let mut out: Vec<(u64, u64, String)> = Vec::new();
    let mut rest = 0;
    let mut cur: Option<(u64, String)> = None;
    for line in text.lines() {
        if let Some(kib) = line.strip_prefix("Rss:") {
            let kib: u64 = kib
                .trim()
                .trim_end_matches("kB")
                .trim()
                .parse()
                .unwrap_or(0);
            if let Some((size, name)) = cur.take() {
                if kib >= 1024 {
                    out.push((size, kib, name));
                } else {
                    rest += kib;
                }
            }
            continue;
        }
        let mut f = line.split_whitespace();
        let Some(range) = f.next() else { continue };
        let Some((a, b)) = range.split_once('-') else {
            continue;
        };
        let (Ok(a), Ok(b)) = (u64::from_str_radix(a, 16), u64::from_str_radix(b, 16)) else {
            continue;
        };
        let name = f.nth(4).unwrap_or("[anon]").to_owned();
        cur = Some(((b - a) / 1024, name));
    }
    out.sort_by_key(|m| std::cmp::Reverse(m.1));
    out.push((0, rest, "(smaller mappings)".to_owned()));
    out
}

/// [`by_mapping`] as one line: `Rss MiB (virtual size) name` per mapping.
pub fn by_mapping_line(pid: u32) -> String {
    by_mapping(pid)
        .iter()
        .map(|(size, rss, name)| {
            let name = name.rsplit('/').next().unwrap_or(name);
            if *size == 0 {
                format!("{:.1} {name}", *rss as f64 / 1024.0)
            } else {
                format!(
                    "{:.1} ({:.0} MiB) {name}",
                    *rss as f64 / 1024.0,
                    *size as f64 / 1024.0
                )
            }
        })
        .collect::<Vec<_>>()
        .join(" · ")
}

/// How long the warm-up lasts before the baseline is taken: 30 % of the
/// run or 10 s, whichever is longer, at most a third of the run (and, in
/// the drivers, not before every kind has been answered once).
///
/// Why: RSS legitimately climbs at first while the process reaches its
/// working set — the compile cache holds every module, the allocator's
/// per-thread arenas and tokio's blocking pool grow to the concurrency, sled's page cache and the kv store fill.
/// Growth after that is what a leak looks like. Measured (10-minute runs,
/// fuel-benches/README.md): the climb lasts minutes, so the baseline is
/// taken late and short runs are not judged ([`JUDGED_FROM`]).
pub fn warmup(run: Duration) -> Duration {
    (run * 3 / 10).max(Duration::from_secs(10)).min(run / 3)
}

/// The shortest run whose RSS growth is judged. A shorter run still
/// reports it, but its caches are still filling at the rate of the run.
pub const JUDGED_FROM: Duration = Duration::from_secs(300);

/// The most RSS growth after the warm-up a judged run may show, percent
/// between the two quiet points (issue 33.12; decision 0030).
pub const MAX_GROWTH_PCT: f64 = 5.0;

/// RSS at the baseline and at the end, and the growth between them.
#[derive(Debug, Clone, Copy, Default)]
pub struct Verdict {
    /// RSS after the warm-up, KiB.
    pub start_kib: u64,
    /// RSS when the load stopped, KiB.
    pub end_kib: u64,
    /// Peak RSS of the process, KiB.
    pub hwm_kib: u64,
}

impl Verdict {
    /// `(end − start) / start`, percent.
    pub fn growth_pct(&self) -> f64 {
        if self.start_kib == 0 {
            return 0.0;
        }
        (self.end_kib as f64 - self.start_kib as f64) * 100.0 / self.start_kib as f64
    }

    /// End within [`MAX_GROWTH_PCT`] of the baseline (above it; shrinking
    /// is flat).
    pub fn flat(&self) -> bool {
        self.start_kib > 0 && self.growth_pct() <= MAX_GROWTH_PCT
    }

    /// `flat`, for a run long enough to be judged (see [`JUDGED_FROM`]);
    /// a shorter run passes with its growth reported, not judged.
    pub fn acceptable(&self, run: Duration) -> bool {
        run < JUDGED_FROM || self.flat()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(at_s: f64, rss_kib: u64) -> Sample {
        Sample {
            at_s,
            rss_kib,
            hwm_kib: rss_kib,
        }
    }

    #[test]
    fn verdict_is_medians_of_windows_and_ignores_one_peak() {
        // 100 s run: warm-up over at 10 s, windows of 10 s.
        let mut v: Vec<Sample> = (0..=100).map(|t| s(f64::from(t), 100_000)).collect();
        v[15] = s(15.0, 900_000); // one transient peak in the baseline window
        v[95] = s(95.0, 900_000); // and one at the end
        let r = verdict(&v, 10.0, Duration::from_secs(100));
        assert_eq!(
            (r.start_kib, r.end_kib, r.hwm_kib),
            (100_000, 100_000, 900_000)
        );
        assert!(r.flat());
        for x in v.iter_mut().filter(|x| x.at_s >= 90.0) {
            x.rss_kib = 111_000;
        }
        let r = verdict(&v, 10.0, Duration::from_secs(100));
        assert!(!r.flat(), "{:.1} %", r.growth_pct());
        assert_eq!(warmup(Duration::from_secs(600)), Duration::from_secs(180));
        assert_eq!(warmup(Duration::from_secs(40)), Duration::from_secs(12));
        assert!(!r.acceptable(Duration::from_secs(600)));
        assert!(r.acceptable(Duration::from_secs(40)), "too short to judge");
        // The limit is 5 %: 4 % passes, 6 % does not.
        for (end, flat) in [(104_000, true), (106_000, false)] {
            for x in v.iter_mut().filter(|x| x.at_s >= 90.0) {
                x.rss_kib = end;
            }
            let r = verdict(&v, 10.0, Duration::from_secs(100));
            assert_eq!(r.flat(), flat, "{:.1} %", r.growth_pct());
        }
    }
}
