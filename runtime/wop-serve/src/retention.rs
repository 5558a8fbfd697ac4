//! Retention: every `retentionPurgeMinutes` (first that long after
//! start), finished effect records and usage records older than the
//! policy's retention (`effects.retentionDays`, at least 14 days) are
//! deleted, with the roll-ups and ledgers of runs idle since (decisions
//! 0044, 0057). Without
//! it a durable store only grew: nothing else ever ran the purges but
//! `wop effects purge` by hand. Every executor sharing a PostgreSQL store
//! runs it; the deletes are compare-and-delete, so they never race a
//! writer and a record deleted twice is deleted once.

use crate::state::AppState;
use std::sync::Arc;
use std::time::Duration;

/// Starts the purge for `state` (nothing if `retentionPurgeMinutes` is
/// 0). The task ends with the server's state.
pub(crate) fn spawn_purge(state: &AppState) {
    let minutes = state.cfg.retention_purge_minutes;
    if minutes == 0 {
        return;
    }
    let period = Duration::from_secs(minutes.saturating_mul(60));
    let weak = Arc::downgrade(state);
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(period).await;
            let Some(state) = weak.upgrade() else { return };
            let rt = state.rt.clone();
            drop(state);
            match rt.purge_effects().await {
                Ok(n) => tracing::info!(records = n, "retention: finished effect records purged"),
                Err(e) => tracing::error!(error = %e, "retention: cannot purge effect records"),
            }
            match rt.purge_usage().await {
                Ok(n) => tracing::info!(records = n, "retention: usage records purged"),
                Err(e) => tracing::error!(error = %e, "retention: cannot purge usage records"),
            }
        }
    });
}
