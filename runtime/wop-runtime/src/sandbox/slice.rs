//! A guest under its wall-clock deadline, its fuel yields resumed in place
//! for a slice ([`InPlace`], decision 0039).

use crate::in_place::InPlace;
use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, Instant};

/// `work` under the wall-clock `limit`: tokio's timeout (which ends a
/// guest that waits in a host call as well as one that runs) around
/// [`InPlace`].
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
    tokio::time::timeout(limit, InPlace::new(work, deadline)).await
}

#[cfg(test)]
mod tests;
