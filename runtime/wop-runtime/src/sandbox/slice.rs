//! Running a guest in time slices: its fuel yields resumed in place.
//!
//! The guest yields to the executor every [`FUEL_YIELD_INTERVAL`] units of
//! fuel (decision 0001) so that its wall-clock deadline is noticed. Each
//! such yield wakes the task before returning `Pending`, and tokio's
//! multi-threaded scheduler treats that as `yield_now`: the task goes to
//! the back of its worker's queue and a parked worker is woken to steal
//! it. A JavaScript hello (about 200–300k fuel) paid two or three of those
//! round trips, each a futex wake of the other worker and often a move of
//! the invocation, its caches cold, to the other core (decision 0039).
//!
//! [`Slices`] polls the guest again at once when it woke itself, as long
//! as its slice ([`SLICE`]) lasts, the deadline has not passed and the
//! task still has tokio's cooperative budget; otherwise the yield goes to
//! the executor as before. A wake from elsewhere (a host call's I/O, a
//! timer) is passed on to the task unchanged. The deadline stays exactly
//! as precise (checked at every yield, inline or not), and no task waits
//! behind a guest for longer than a slice.
//!
//! [`FUEL_YIELD_INTERVAL`]: crate::engine::FUEL_YIELD_INTERVAL

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

/// The longest a guest runs before its fuel yield goes to the executor.
pub(crate) const SLICE: Duration = Duration::from_millis(1);

const IDLE: u8 = 0;
const POLLING: u8 = 1;
const WOKEN: u8 = 2;

/// The waker the guest sees: notes a wake during its own poll (a yield),
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
            // During the guest's poll: the poll loop decides.
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

/// `work` under the wall-clock `limit`: tokio's timeout (which ends a
/// guest that waits in a host call as well as one that runs) around
/// [`Slices`].
///
/// `work` comes pinned where the caller built it: an execution's future
/// (instantiate and call) is about 1.4 KB, and taking it by value moved
/// it three times per invocation (into this future's arguments, into its
/// pinned state, and with this future into the caller's).
pub(crate) async fn within<F: Future>(
    limit: Duration,
    work: Pin<&mut F>,
) -> Result<F::Output, tokio::time::error::Elapsed> {
    let deadline = Instant::now().checked_add(limit);
    tokio::time::timeout(limit, Slices::new(work, deadline)).await
}

/// See the module docs.
pub(crate) struct Slices<'a, F: Future> {
    work: Pin<&'a mut F>,
    /// `None`: too far to represent (only the slice and budget apply).
    deadline: Option<Instant>,
    relay: Arc<Relay>,
    waker: Waker,
}

impl<'a, F: Future> Slices<'a, F> {
    /// `work`, resumed in place until `deadline` (the timeout around it
    /// ends it).
    pub(crate) fn new(work: Pin<&'a mut F>, deadline: Option<Instant>) -> Self {
        let relay = Arc::new(Relay {
            state: AtomicU8::new(IDLE),
            task: Mutex::new(None),
        });
        Slices {
            work,
            deadline,
            waker: Waker::from(relay.clone()),
            relay,
        }
    }
}

impl<F: Future> Future for Slices<'_, F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
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
