//! A connection's own wake-ups handled in place (decision 0060).
//!
//! While hyper serves a request with a body, it wakes its own connection
//! task from inside that task's poll (the body's "want" signal, then the
//! chunk it reads). tokio treats a task woken while it runs as a yield: it
//! queues the task again and wakes a parked worker thread to come and steal
//! it. On an idle service that is one other thread woken, and on a VM
//! one inter-processor interrupt, per request, for no work at all.
//!
//! [`InlineWake`] gives the future it wraps a waker of its own. A wake that
//! arrives while the future is being polled only marks it, and the future
//! is polled again at once, on the same thread, at most [`MAX_INLINE`]
//! times per poll (after that the runtime schedules it as before, so a
//! cooperative yield still yields). A wake from anywhere else (the I/O
//! driver, a timer, another task) goes to the runtime's waker unchanged.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};

/// Polls of the wrapped future per poll of the wrapper, each after a wake
/// that arrived during the previous one.
pub(crate) const MAX_INLINE: usize = 8;

/// Not being polled: a wake goes to the runtime.
const IDLE: u8 = 0;
/// Being polled, not woken yet.
const POLLING: u8 = 1;
/// Woken while being polled: poll again.
const WOKEN: u8 = 2;

/// What the future's waker shares with the wrapper.
struct Shared {
    state: AtomicU8,
    /// The runtime's waker of the task polling the wrapper.
    outer: Mutex<Option<Waker>>,
}

impl Wake for Shared {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        let mut seen = self.state.load(Ordering::Acquire);
        loop {
            match seen {
                WOKEN => return,
                POLLING => match self.state.compare_exchange_weak(
                    POLLING,
                    WOKEN,
                    Ordering::AcqRel,
                    Ordering::Acquire,
                ) {
                    Ok(_) => return,
                    Err(now) => seen = now,
                },
                _ => {
                    let outer = self.outer.lock().unwrap_or_else(|p| p.into_inner());
                    if let Some(w) = outer.as_ref() {
                        w.wake_by_ref();
                    }
                    return;
                }
            }
        }
    }
}

/// See the module docs.
pub(crate) struct InlineWake<F> {
    inner: Pin<Box<F>>,
    shared: Arc<Shared>,
    waker: Waker,
}

impl<F: Future> InlineWake<F> {
    pub(crate) fn new(inner: F) -> Self {
        let shared = Arc::new(Shared {
            state: AtomicU8::new(IDLE),
            outer: Mutex::new(None),
        });
        InlineWake {
            inner: Box::pin(inner),
            waker: Waker::from(shared.clone()),
            shared,
        }
    }
}

impl<F: Future> Future for InlineWake<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        {
            // Before the state leaves IDLE: a wake that finds it IDLE again
            // must reach this poll's waker.
            let mut outer = self.shared.outer.lock().unwrap_or_else(|p| p.into_inner());
            if !outer.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                *outer = Some(cx.waker().clone());
            }
        }
        let this = &mut *self;
        let mut inner_cx = Context::from_waker(&this.waker);
        for _ in 0..MAX_INLINE {
            this.shared.state.store(POLLING, Ordering::Release);
            if let Poll::Ready(v) = this.inner.as_mut().poll(&mut inner_cx) {
                this.shared.state.store(IDLE, Ordering::Release);
                return Poll::Ready(v);
            }
            if this
                .shared
                .state
                .compare_exchange(POLLING, IDLE, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                return Poll::Pending;
            }
            // Woken while polled: poll again here.
        }
        // Still waking itself (a cooperative yield): let the runtime
        // schedule it like any other task.
        this.shared.state.store(IDLE, Ordering::Release);
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

#[cfg(test)]
mod tests;
