//! A connection's own wake-ups polled in place (decision 0060).
//!
//! While hyper serves a request with a body, it wakes its own connection
//! task from inside that task's poll (the body's "want" signal, then the
//! bytes it read). tokio treats a task woken while it runs as a yield: it
//! queues the task again and wakes a parked worker thread to come and steal
//! it. On an idle service that was one other thread woken, and on a VM one
//! inter-processor interrupt, per request, for no work at all. Each
//! connection's task runs under [`InPlace`], which polls it again at once
//! instead, within a slice and tokio's cooperative budget (see there).

use std::future::Future;
use wop_runtime::in_place::InPlace;

/// `conn` as a task of its own, its own wakes resumed in place.
pub(crate) fn connection<F: Future>(conn: F) -> InPlace<Box<F>> {
    InPlace::new(Box::pin(conn), None)
}

#[cfg(test)]
mod tests;
