//! Running an invocation on the caller's task without letting the caller
//! cancel it. [`DetachOnDrop`] polls the work inline: no task spawn and no
//! hand-off to another worker thread on the common path (measured in
//! `fuel-benches` `languages`, see decision 0023). If the caller is dropped
//! before the work completes (the client went away), what remains of the
//! work moves to a task of its own and runs to the end, exactly as if it
//! had been spawned from the start. A panic in the work is caught and
//! reported as an error, as a spawned task's would be.

use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::task::{Context, Poll};

/// See the module docs.
pub(crate) struct DetachOnDrop<F>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    /// `None` once the work has completed (or panicked).
    work: Option<Pin<Box<F>>>,
    /// Where the rest of the work runs if the caller goes away.
    handle: tokio::runtime::Handle,
}

impl<F> DetachOnDrop<F>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    /// Wraps `work`. Must be called on a tokio runtime (the service's).
    pub(crate) fn new(work: F) -> Self {
        DetachOnDrop {
            work: Some(Box::pin(work)),
            handle: tokio::runtime::Handle::current(),
        }
    }
}

impl<F> Future for DetachOnDrop<F>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    /// The work's output, or a panic's message.
    type Output = Result<F::Output, String>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let Some(work) = self.work.as_mut() else {
            return Poll::Ready(Err("polled after completion".to_owned()));
        };
        match catch_unwind(AssertUnwindSafe(|| work.as_mut().poll(cx))) {
            Ok(Poll::Pending) => Poll::Pending,
            Ok(Poll::Ready(v)) => {
                self.work = None;
                Poll::Ready(Ok(v))
            }
            Err(panic) => {
                self.work = None;
                let what = panic
                    .downcast_ref::<&str>()
                    .map(|s| (*s).to_owned())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "a panic".to_owned());
                Poll::Ready(Err(format!("the invocation panicked: {what}")))
            }
        }
    }
}

impl<F> Drop for DetachOnDrop<F>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    fn drop(&mut self) {
        if let Some(work) = self.work.take() {
            // The caller went away mid-invocation: finish it on its own.
            drop(self.handle.spawn(work));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    #[tokio::test]
    async fn completes_inline() {
        let r = DetachOnDrop::new(async { 7 }).await;
        assert_eq!(r, Ok(7));
    }

    #[tokio::test]
    async fn a_dropped_caller_does_not_cancel_the_work() {
        let (go, wait) = tokio::sync::oneshot::channel::<()>();
        let (done_tx, done_rx) = tokio::sync::oneshot::channel::<()>();
        let finished = Arc::new(AtomicBool::new(false));
        let f = finished.clone();
        let work = DetachOnDrop::new(async move {
            let _ = wait.await;
            f.store(true, Ordering::SeqCst);
            let _ = done_tx.send(());
        });
        // The caller polls once, then goes away (a client disconnect).
        let caller = tokio::spawn(work);
        tokio::task::yield_now().await;
        caller.abort();
        let _ = caller.await;
        assert!(!finished.load(Ordering::SeqCst));
        go.send(()).unwrap();
        done_rx.await.unwrap();
        assert!(finished.load(Ordering::SeqCst));
    }

    #[tokio::test]
    async fn a_panic_is_an_error_not_a_crash() {
        let r = DetachOnDrop::new(async {
            if std::hint::black_box(true) {
                panic!("boom");
            }
        })
        .await;
        assert_eq!(r, Err("the invocation panicked: boom".to_owned()));
    }
}
