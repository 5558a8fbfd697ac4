use super::*;
use std::task::{Context, Poll};

/// Wakes itself and returns `Pending`, forever: a guest that never stops
/// yielding.
struct Yields;

impl Future for Yields {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guest_that_never_stops_yielding_still_times_out() {
    // Yields forever, each time inside the slice: the timeout must still
    // end it (the slice hands the yield to the executor every millisecond
    // and at the deadline).
    let work = Yields;
    let r = within(Duration::from_millis(30), std::pin::pin!(work)).await;
    assert!(r.is_err(), "the deadline ended it");
}
