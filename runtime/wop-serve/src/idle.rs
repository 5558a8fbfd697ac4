//! The idle release: once the service has admitted no invocation for
//! `idleReleaseMs` and none is running, the memory the sandbox's instance
//! pool keeps resident for idle slots goes back to the OS
//! (`Runtime::release_idle_memory`; decision 0030). Once per idle spell:
//! the next admitted invocation re-arms it.

use crate::state::AppState;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

/// Whether an idle spell has lasted a whole period: fed the admitted count
/// and the in-flight count once per period.
#[derive(Debug, Default)]
struct IdleWatch {
    /// The admitted count at the previous tick.
    last_admitted: Option<u64>,
    /// The admitted count when memory was last released.
    released_at: Option<u64>,
}

impl IdleWatch {
    /// True when nothing was admitted since the previous tick, nothing
    /// runs, and this idle spell has not been released yet.
    fn tick(&mut self, admitted: u64, in_flight: usize) -> bool {
        let quiet = self.last_admitted == Some(admitted) && in_flight == 0;
        self.last_admitted = Some(admitted);
        let release = quiet && self.released_at != Some(admitted);
        if release {
            self.released_at = Some(admitted);
        }
        release
    }
}

/// Starts the idle release for `state` (nothing if `idleReleaseMs` is 0).
/// The task ends with the server's state.
pub(crate) fn spawn_release(state: &AppState) {
    let ms = state.cfg.idle_release_ms;
    if ms == 0 {
        return;
    }
    let period = Duration::from_millis(ms);
    let weak = Arc::downgrade(state);
    tokio::spawn(async move {
        let mut watch = IdleWatch::default();
        loop {
            tokio::time::sleep(period).await;
            let Some(state) = weak.upgrade() else { return };
            if !watch.tick(state.admitted.load(Ordering::Relaxed), state.in_flight()) {
                continue;
            }
            let rt = state.rt.clone();
            drop(state);
            // madvise over every warm slot, and the allocator's free
            // pages: off the async workers.
            let release = move || {
                let bytes = rt.release_idle_memory();
                crate::allocator::purge_free_memory();
                bytes
            };
            if let Ok(bytes) = tokio::task::spawn_blocking(release).await {
                tracing::info!(
                    bytes,
                    "idle: the sandbox pool's kept memory went back to the OS"
                );
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::IdleWatch;

    #[test]
    fn releases_once_per_idle_spell_and_never_while_busy() {
        let mut w = IdleWatch::default();
        assert!(!w.tick(0, 0), "the first tick has nothing to compare");
        assert!(w.tick(0, 0), "a whole quiet period");
        assert!(!w.tick(0, 0), "already released for this spell");
        assert!(!w.tick(3, 0), "admitted since the last tick");
        assert!(!w.tick(3, 1), "one still running");
        assert!(w.tick(3, 0), "quiet again: a new spell");
        assert!(!w.tick(3, 0));
    }
}
