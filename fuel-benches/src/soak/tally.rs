//! Counting answers: per (kind, answer label), with latency, the first
//! detail of every unexpected answer, unanswered calls, and host panics
//! (a process-wide panic hook plus `JoinError::is_panic`).

use super::mix::{Expect, Kind};
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// What one call got back.
#[derive(Debug, Clone)]
pub enum Answer {
    /// Completed with this output.
    Completed(Value),
    /// Failed or refused with this code (`message` for the report).
    Failed {
        /// The error code.
        code: String,
        /// Its message (first unexpected one is printed).
        message: String,
    },
    /// Serve: an HTTP status answered before any invocation (`body` kept
    /// for the report).
    Status(u16, String),
    /// Serve: the connection was reset while sending (see
    /// [`Expect::Refused`]).
    Reset(String),
}

impl Answer {
    /// The tally label: `completed`, the code, or `http <status>`.
    pub fn label(&self) -> String {
        match self {
            Answer::Completed(_) => "completed".into(),
            Answer::Failed { code, .. } => code.clone(),
            Answer::Status(s, _) => format!("http {s}"),
            Answer::Reset(_) => "reset while sending".into(),
        }
    }

    /// Whether this is the answer `expect` names.
    pub fn matches(&self, expect: &Expect) -> bool {
        match (self, expect) {
            (Answer::Completed(o), Expect::Completed(check)) => check(o),
            (Answer::Failed { code, .. }, Expect::Failed(c)) => code == c,
            (Answer::Status(s, _), Expect::Status(e) | Expect::Refused(e)) => s == e,
            (Answer::Reset(_), Expect::Refused(_)) => true,
            _ => false,
        }
    }

    fn detail(&self) -> String {
        let mut s = match self {
            Answer::Completed(o) => format!("completed: {o}"),
            Answer::Failed { code, message } => format!("{code}: {message}"),
            Answer::Status(s, b) => format!("HTTP {s}: {b}"),
            Answer::Reset(e) => format!("reset while sending: {e}"),
        };
        if s.len() > 600 {
            let mut cut = 600;
            while !s.is_char_boundary(cut) {
                cut -= 1;
            }
            s.truncate(cut);
            s.push('…');
        }
        s
    }
}

/// The expected answer, as a label.
pub fn expected_label(e: &Expect) -> String {
    match e {
        Expect::Completed(_) => "completed".into(),
        Expect::Failed(c) => (*c).into(),
        Expect::Status(s) => format!("http {s}"),
        Expect::Refused(s) => format!("http {s} or reset"),
    }
}

#[derive(Debug, Default)]
struct Row {
    labels: BTreeMap<String, u64>,
    unexpected: u64,
    unanswered: u64,
    total_us: u128,
    max_us: u128,
}

/// The counts of one run.
#[derive(Debug)]
pub struct Tally {
    kinds: Vec<Kind>,
    rows: Mutex<Vec<Row>>,
    sent: AtomicU64,
}

/// Totals at the end.
#[derive(Debug, Clone, Copy, Default)]
pub struct Totals {
    /// Calls sent.
    pub sent: u64,
    /// Calls answered (expected or not).
    pub answered: u64,
    /// Answered, but not with the expected answer.
    pub unexpected: u64,
    /// Not answered (panicked task, timeout, connection error).
    pub unanswered: u64,
}

impl Tally {
    /// An empty tally over `kinds`.
    pub fn new(kinds: Vec<Kind>) -> Tally {
        let rows = kinds.iter().map(|_| Row::default()).collect();
        Tally {
            kinds,
            rows: Mutex::new(rows),
            sent: AtomicU64::new(0),
        }
    }

    /// The kinds.
    pub fn kinds(&self) -> &[Kind] {
        &self.kinds
    }

    /// Counts one call sent.
    pub fn sent(&self) {
        self.sent.fetch_add(1, Ordering::Relaxed);
    }

    fn rows(&self) -> std::sync::MutexGuard<'_, Vec<Row>> {
        self.rows.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records the answer of kind `k`, which took `took`.
    pub fn answer(&self, k: usize, answer: &Answer, took: Duration) {
        let Some(kind) = self.kinds.get(k) else {
            return;
        };
        let ok = answer.matches(&kind.expect);
        let label = answer.label();
        let mut rows = self.rows();
        let Some(row) = rows.get_mut(k) else { return };
        let first = !row.labels.contains_key(&label);
        *row.labels.entry(label).or_default() += 1;
        let us = took.as_micros();
        row.total_us += us;
        row.max_us = row.max_us.max(us);
        if !ok {
            row.unexpected += 1;
            if first || row.unexpected == 1 {
                eprintln!(
                    "soak: UNEXPECTED answer for `{}` (expected {}): {}",
                    kind.name,
                    expected_label(&kind.expect),
                    answer.detail()
                );
            }
        }
    }

    /// Records a call of kind `k` that got no answer (`why`).
    pub fn unanswered(&self, k: usize, why: &str) {
        let name = self.kinds.get(k).map_or("?", |k| k.name);
        let mut rows = self.rows();
        let Some(row) = rows.get_mut(k) else { return };
        row.unanswered += 1;
        if row.unanswered == 1 {
            eprintln!("soak: UNANSWERED `{name}`: {why}");
        }
    }

    /// Totals so far.
    pub fn totals(&self) -> Totals {
        let rows = self.rows();
        let mut t = Totals {
            sent: self.sent.load(Ordering::Relaxed),
            ..Totals::default()
        };
        for r in rows.iter() {
            t.answered += r.labels.values().sum::<u64>();
            t.unexpected += r.unexpected;
            t.unanswered += r.unanswered;
        }
        t
    }

    /// Answers so far of every kind (to know when each ran at least once).
    pub fn every_kind_answered(&self) -> bool {
        self.rows().iter().all(|r| !r.labels.is_empty())
    }

    /// The per-kind table (Markdown).
    pub fn table(&self) -> String {
        let rows = self.rows();
        let mut out = String::from(
            "| kind | honest | expected | answers | unexpected | unanswered | mean ms | max ms |\n|---|---|---|---|---|---|---|---|\n",
        );
        for (kind, row) in self.kinds.iter().zip(rows.iter()) {
            let n: u64 = row.labels.values().sum();
            let answers = row
                .labels
                .iter()
                .map(|(l, c)| format!("{l} × {c}"))
                .collect::<Vec<_>>()
                .join(", ");
            let mean = if n > 0 {
                row.total_us as f64 / n as f64 / 1000.0
            } else {
                0.0
            };
            out.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} | {:.2} | {:.1} |\n",
                kind.name,
                if kind.honest { "yes" } else { "no" },
                expected_label(&kind.expect),
                if answers.is_empty() {
                    "—".into()
                } else {
                    answers
                },
                row.unexpected,
                row.unanswered,
                mean,
                row.max_us as f64 / 1000.0
            ));
        }
        out
    }
}

static PANICS: AtomicU64 = AtomicU64::new(0);

/// Installs (once) a panic hook that counts every panic on any thread of
/// this process, then runs the previous hook (which prints it).
pub fn install_panic_counter() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let prev = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            PANICS.fetch_add(1, Ordering::Relaxed);
            prev(info);
        }));
    });
}

/// Panics counted by the hook so far.
pub fn panics() -> u64 {
    PANICS.load(Ordering::Relaxed)
}
