//! What the console remembers of recent work, in memory and bounded: the
//! last [`RING`] invocations, and cost per pack per minute for the last
//! [`MINUTES`] minutes.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Mutex;
use wop_runtime::{InvocationReport, Outcome};

/// Invocations kept.
pub(crate) const RING: usize = 200;
/// Minutes of cost history kept.
pub(crate) const MINUTES: u64 = 60;

/// One finished invocation, as the console lists it.
#[derive(Debug, Clone)]
pub(crate) struct Row {
    pub at_ms: u64,
    pub invocation_id: String,
    pub tenant: String,
    pub type_id: String,
    pub pack: String,
    pub code: String,
    pub wall_us: u64,
    pub fuel: u64,
    pub cost: f64,
    pub currency: String,
}

#[derive(Default)]
struct Inner {
    rows: VecDeque<Row>,
    /// minute (ms / 60 000) → pack → cost.
    cost: BTreeMap<u64, BTreeMap<String, f64>>,
}

/// The ring and the cost series.
#[derive(Default)]
pub(crate) struct Recent {
    inner: Mutex<Inner>,
}

impl Recent {
    /// Records one finished invocation.
    pub(crate) fn record(
        &self,
        invocation_id: &str,
        type_id: &str,
        tenant: &str,
        report: &InvocationReport,
    ) {
        let u = &report.usage;
        let at_ms = wop_runtime::effects::now_ms();
        let code = match &report.outcome {
            Ok(Outcome::Completed { .. }) => "completed".to_owned(),
            Ok(Outcome::Suspended { .. }) => "suspended".to_owned(),
            Err(e) => e.code.clone(),
        };
        let row = Row {
            at_ms,
            invocation_id: invocation_id.to_owned(),
            tenant: tenant.to_owned(),
            type_id: type_id.to_owned(),
            pack: u.pack.clone(),
            code,
            wall_us: u.wall_time_us,
            fuel: u.fuel_consumed,
            cost: u.cost,
            currency: u.currency.clone(),
        };
        let Ok(mut g) = self.inner.lock() else { return };
        if g.rows.len() == RING {
            g.rows.pop_front();
        }
        if !row.pack.is_empty() {
            let minute = at_ms / 60_000;
            *g.cost
                .entry(minute)
                .or_default()
                .entry(row.pack.clone())
                .or_default() += row.cost;
            let oldest = minute.saturating_sub(MINUTES);
            while g.cost.first_key_value().is_some_and(|(m, _)| *m <= oldest) {
                g.cost.pop_first();
            }
        }
        g.rows.push_back(row);
    }

    /// The most recent invocations first, at most `n`.
    pub(crate) fn latest(&self, n: usize) -> Vec<Row> {
        self.inner
            .lock()
            .map(|g| g.rows.iter().rev().take(n).cloned().collect())
            .unwrap_or_default()
    }

    /// Cost per pack per minute, oldest minute first (minutes without
    /// invocations are absent).
    pub(crate) fn cost_series(&self) -> BTreeMap<u64, BTreeMap<String, f64>> {
        self.inner
            .lock()
            .map(|g| g.cost.clone())
            .unwrap_or_default()
    }
}
