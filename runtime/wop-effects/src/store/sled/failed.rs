//! A sled store that has failed, and stays failed until it is opened
//! again (decision 0056).
//!
//! After an I/O error (a full disk that something else than the store
//! filled, a failing device) sled 0.34 keeps a global error and refuses
//! every later operation, reads included, until the process opens it
//! again. Worse, a flush that was waiting for the failed write is not
//! woken (seen in `gdb`: parked in `make_stable_inner`), and it holds the
//! store's group-commit lock, so every later write waited behind it and
//! requests hung.
//!
//! [`Failure`] remembers the first such error. From then on every
//! operation is answered at once with it, without entering sled; a write
//! waiting for a flush stops waiting (the flush's blocking thread stays
//! parked: the binaries shut their runtime down with a timeout, so that it
//! does not keep the process from exiting); and operators see it
//! ([`KvStore::failure`](super::super::KvStore::failure): `wop serve`'s
//! `/healthz` answers `503` so that a supervisor restarts the process).

use super::super::StoreError;
use std::sync::OnceLock;
use tokio::sync::Notify;

/// The first error that failed the store, once there was one.
#[derive(Debug, Default)]
pub(crate) struct Failure {
    first: OnceLock<StoreError>,
    failed: Notify,
}

impl Failure {
    /// Records `cause` as the store's failure, unless one is recorded
    /// already, and wakes every write waiting for a flush.
    pub(crate) fn set(&self, cause: StoreError) {
        let _ = self.first.set(cause);
        self.failed.notify_waiters();
    }

    /// `Err` with the store's failure once it has failed: what callers
    /// (tenants among them) see. It keeps the cause's kind, so a full disk
    /// is still answered as [`StoreError::Full`].
    pub(crate) fn check(&self) -> Result<(), StoreError> {
        match self.first.get() {
            None => Ok(()),
            Some(cause) => Err(refusal(cause)),
        }
    }

    /// The failure's description, for operators; `None` while the store
    /// works.
    pub(crate) fn describe(&self) -> Option<String> {
        self.first.get().map(|c| refusal(c).to_string())
    }

    /// Resolves once the store has failed (at once if it has).
    pub(crate) async fn wait(&self) {
        let notified = self.failed.notified();
        if self.first.get().is_some() {
            return;
        }
        notified.await;
    }
}

/// What every operation on a failed store is answered with.
fn refusal(cause: &StoreError) -> StoreError {
    let then = |m: &String| {
        format!(
            "{m}. The store has failed and serves nothing until the process is restarted \
             (sled does not recover from a failed write): fix the cause, then restart"
        )
    };
    match cause {
        StoreError::Full(m) => StoreError::Full(then(m)),
        // Not sled's own (a share wraps the store): passed on as it is.
        StoreError::OverShare(r) => StoreError::OverShare(r.clone()),
        StoreError::Corrupt(m) => StoreError::Corrupt(then(m)),
        StoreError::Io(m) | StoreError::Unavailable(m) => StoreError::Unavailable(then(m)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_first_cause_is_kept_and_waiters_wake() {
        let f = std::sync::Arc::new(Failure::default());
        assert!(f.check().is_ok());
        assert!(f.describe().is_none());
        let waiter = tokio::spawn({
            let f = f.clone();
            async move { f.wait().await }
        });
        tokio::task::yield_now().await;
        f.set(StoreError::Full("no room".into()));
        f.set(StoreError::Io("later".into()));
        waiter.await.expect("the waiter woke");
        let e = f.check().expect_err("failed");
        assert!(e.is_full(), "a full disk stays Full: {e}");
        assert!(e.to_string().contains("no room") && e.to_string().contains("restart"));
        assert!(!f.describe().unwrap_or_default().contains("later"));
        // A waiter that comes after the failure does not wait.
        f.wait().await;
    }

    /// sled never raises a share's refusal itself; if a failure ever
    /// carried one, its figures are passed on as they are (a tenant's
    /// `details` are not rewritten into another kind of error).
    #[test]
    fn a_share_refusal_is_passed_on_with_its_figures() {
        let refusal = crate::store::ShareRefusal {
            message: "tenant `acme` holds 10 bytes".into(),
            tenant: "acme".into(),
            held_bytes: 10,
            needed_bytes: Some(5),
            share_bytes: 12,
        };
        let f = Failure::default();
        f.set(StoreError::OverShare(Box::new(refusal.clone())));
        let e = f.check().expect_err("failed");
        assert!(e.is_full(), "{e}");
        assert_eq!(e.share_refusal(), Some(&refusal));
    }

    #[test]
    fn an_io_failure_is_unavailable() {
        let f = Failure::default();
        f.set(StoreError::Io("EIO".into()));
        assert!(matches!(f.check(), Err(StoreError::Unavailable(_))));
    }
}
