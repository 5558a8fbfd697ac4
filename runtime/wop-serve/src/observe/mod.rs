//! What the service keeps of each finished invocation for its operators:
//! the `/metrics` families ([`metrics`]) and the console's recent
//! invocations and cost series ([`recent`]). Both are fed by one call,
//! [`Observers::observe`], from the report the runtime returns.

pub(crate) mod metrics;
pub(crate) mod recent;
pub(crate) mod store;

use wop_runtime::InvocationReport;

/// The operator's views of finished invocations.
pub(crate) struct Observers {
    /// What `/metrics` shows.
    pub metrics: metrics::Metrics,
    /// The console's recent invocations and cost series.
    pub recent: recent::Recent,
}

impl Observers {
    /// Empty views whose metric labels are limited to `vocab`.
    pub(crate) fn new(vocab: metrics::Vocab) -> Self {
        Observers {
            metrics: metrics::Metrics::new(vocab),
            recent: recent::Recent::default(),
        }
    }

    /// Records one finished invocation of `type_id` for `tenant` in every
    /// view.
    pub(crate) fn observe(
        &self,
        invocation_id: &str,
        type_id: &str,
        tenant: &str,
        report: &InvocationReport,
    ) {
        self.metrics.record(type_id, tenant, report);
        self.recent.record(invocation_id, type_id, tenant, report);
    }
}
