//! Futures that wake themselves, resumed in place for a slice.
//!
//! A future that wakes its own task from inside its poll and then returns
//! `Pending` is, to tokio's multi-threaded scheduler, a `yield_now`: the
//! task goes to the back of its worker's queue and a parked worker is
//! woken to steal it. That is a futex wake of another thread (on a VM an
//! inter-processor interrupt), and often a move of the task, its caches
//! cold, to the other core. Two places do it on every invocation:
//!
//! - a guest's fuel yields: the guest yields to the executor every
//!   [`FUEL_YIELD_INTERVAL`] units of fuel (decision 0001) so that its
//!   wall-clock deadline is noticed. A JavaScript hello (about 200–300k
//!   fuel) paid two or three of those round trips (decision 0039);
//! - hyper, when a handler reads a request body: it wakes the connection's
//!   task while polling it (the body's "want" signal, then the bytes it
//!   read), once or twice per request with a body (decision 0060).
//!
//! [`InPlace`] polls the future again at once when it woke itself, as long
//! as its slice ([`SLICE`]) lasts, an optional deadline has not passed and
//! the task still has tokio's cooperative budget; otherwise the yield goes
//! to the executor as before. A wake from elsewhere (I/O, a timer, another
//! task) is passed on to the task unchanged. A deadline stays exactly as
//! precise (checked at every yield, inline or not), and no task waits
//! behind another for longer than a slice. Nested (a guest inside a
//! connection), the inner one's yield to the executor ends the outer one's
//! slice too: the outer poll has lasted at least as long.
//!
//! [`FUEL_YIELD_INTERVAL`]: crate::engine::FUEL_YIELD_INTERVAL

use std::future::Future;
use std::ops::DerefMut;
use std::pin::Pin;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

/// The longest a future runs before its own wake goes to the executor.
pub const SLICE: Duration = Duration::from_millis(1);

const IDLE: u8 = 0;
const POLLING: u8 = 1;
const WOKEN: u8 = 2;

/// The waker the future sees: notes a wake during its own poll (a yield),
/// passes any other to the task's waker.
struct Relay {
    state: AtomicU8,
    task: Mutex<Option<Waker>>,
}

impl Wake for Relay {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        match self
            .state
            .compare_exchange(POLLING, WOKEN, Ordering::AcqRel, Ordering::Acquire)
        {
            // During the future's poll: the poll loop decides.
            Ok(_) | Err(WOKEN) => {}
            Err(_) => {
                let task = self.task.lock().unwrap_or_else(|p| p.into_inner());
                if let Some(w) = task.as_ref() {
                    w.wake_by_ref();
                }
            }
        }
    }
}

/// See the module docs. `P` is how the future is held: `&mut F` where
/// the caller pins it (no move), `Box<F>` for a task of its own.
pub struct InPlace<P>
where
    P: DerefMut<Target: Future>,
{
    work: Pin<P>,
    /// `None`: no deadline, or one too far to represent (only the slice
    /// and the budget apply).
    deadline: Option<Instant>,
    relay: Arc<Relay>,
    waker: Waker,
}

impl<P> InPlace<P>
where
    P: DerefMut<Target: Future>,
{
    /// `work`, resumed in place for a slice at a time and never past
    /// `deadline` (a timeout around it is what ends it there).
    pub fn new(work: Pin<P>, deadline: Option<Instant>) -> Self {
        let relay = Arc::new(Relay {
            state: AtomicU8::new(IDLE),
            task: Mutex::new(None),
        });
        InPlace {
            work,
            deadline,
            waker: Waker::from(relay.clone()),
            relay,
        }
    }
}

impl<P> Future for InPlace<P>
where
    P: DerefMut<Target: Future> + Unpin,
{
    type Output = <P::Target as Future>::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        {
            let mut task = this.relay.task.lock().unwrap_or_else(|p| p.into_inner());
            if !task.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                *task = Some(cx.waker().clone());
            }
        }
        let mut inner = Context::from_waker(&this.waker);
        let started = Instant::now();
        loop {
            this.relay.state.store(POLLING, Ordering::Release);
            let r = this.work.as_mut().poll(&mut inner);
            let woken = this.relay.state.swap(IDLE, Ordering::AcqRel) == WOKEN;
            match r {
                Poll::Ready(v) => return Poll::Ready(v),
                Poll::Pending if !woken => return Poll::Pending,
                Poll::Pending => {
                    let now = Instant::now();
                    if this.deadline.is_some_and(|d| now >= d)
                        || now.duration_since(started) >= SLICE
                        || !tokio::task::coop::has_budget_remaining()
                    {
                        cx.waker().wake_by_ref();
                        return Poll::Pending;
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
