//! One caller's `text/event-stream` answer: the invocation's own events
//! (the runtime hands them to this sink only: `Runtime::invoke_streaming`,
//! nothing routed by run or node id), then `event: outcome`.
//!
//! What waits for the client is bounded: events queue up to
//! `sseQueueBytes`; a client that falls further behind is dropped (the
//! stream ends with an error, hyper closes the connection) and later events
//! are not queued. The final outcome frame is always queued (it is bounded
//! by the output and log caps). A client that stops reading altogether is
//! dropped by the connection's write timeout (`crate::io`). So one stalled
//! connection holds at most `sseQueueBytes` plus one outcome frame, for at
//! most `writeTimeoutMs` (docs/SECURITY.md).

use axum::body::Body;
use bytes::Bytes;
use serde_json::Value;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use tokio::sync::mpsc;
use wop_runtime::{Event, EventSink};

/// One server-sent event frame.
pub(crate) fn frame(event: &str, data: &Value) -> Bytes {
    Bytes::from(format!("event: {event}\ndata: {data}\n\n"))
}

fn event_frame(e: &Event) -> Bytes {
    let v = serde_json::to_value(e).unwrap_or(Value::Null);
    let name = v
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("event")
        .to_owned();
    frame(&name, &v)
}

/// State shared by the producer ([`SseSink`]) and the body.
struct Queue {
    /// Bytes queued and not yet taken by the connection.
    queued: AtomicUsize,
    /// The client fell behind by more than the cap: dropped.
    overrun: AtomicBool,
    cap: usize,
}

/// The producing side: the invocation's event sink, and the final frame.
#[derive(Clone)]
pub(crate) struct SseSink {
    tx: mpsc::UnboundedSender<Bytes>,
    q: Arc<Queue>,
}

impl SseSink {
    /// Queues `frame` unless the client is dropped or it would pass the
    /// cap (`always`: the final frame, queued whatever the backlog).
    pub(crate) fn push(&self, frame: Bytes, always: bool) {
        if self.q.overrun.load(Ordering::Relaxed) {
            return;
        }
        let len = frame.len();
        let before = self.q.queued.fetch_add(len, Ordering::Relaxed);
        if !always && before + len > self.q.cap {
            self.q.queued.fetch_sub(len, Ordering::Relaxed);
            self.q.overrun.store(true, Ordering::Relaxed);
            // An empty chunk tells the body to end with an error.
            let _ = self.tx.send(Bytes::new());
            tracing::debug!(
                cap = self.q.cap,
                "a server-sent-events client fell behind: dropping it"
            );
            return;
        }
        if self.tx.send(frame).is_err() {
            // The connection is gone: nothing is queued for it.
            self.q.queued.fetch_sub(len, Ordering::Relaxed);
        }
    }
}

impl EventSink for SseSink {
    fn emit(&self, _run_id: &str, _node_id: &str, event: &Event) {
        self.push(event_frame(event), false);
    }
}

/// A sink and the response body it feeds, with events queued up to `cap`
/// bytes.
pub(crate) fn channel(cap: usize) -> (SseSink, Body) {
    let (tx, rx) = mpsc::unbounded_channel::<Bytes>();
    let q = Arc::new(Queue {
        queued: AtomicUsize::new(0),
        overrun: AtomicBool::new(false),
        cap,
    });
    let sink = SseSink { tx, q: q.clone() };
    let stream = futures_util::stream::unfold((rx, q), |(mut rx, q)| async move {
        let chunk = rx.recv().await?;
        if chunk.is_empty() {
            let e = std::io::Error::other(format!(
                "the client fell more than {} bytes behind the event stream",
                q.cap
            ));
            return Some((Err(e), (rx, q)));
        }
        q.queued.fetch_sub(chunk.len(), Ordering::Relaxed);
        Some((Ok(chunk), (rx, q)))
    });
    (sink, Body::from_stream(stream))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use http_body_util::BodyExt as _;

    #[tokio::test]
    async fn a_client_that_falls_behind_is_cut_and_the_final_frame_always_fits() {
        let (sink, body) = channel(100);
        sink.push(Bytes::from(vec![b'a'; 60]), false);
        sink.push(Bytes::from(vec![b'b'; 60]), false); // 120 > 100: overrun
        sink.push(Bytes::from(vec![b'c'; 10]), false); // dropped
        drop(sink);
        let mut body = body;
        let first = body.frame().await.unwrap().unwrap();
        assert_eq!(first.into_data().unwrap().len(), 60);
        assert!(
            body.frame().await.unwrap().is_err(),
            "then the stream fails"
        );

        let (sink, body) = channel(100);
        sink.push(Bytes::from(vec![b'a'; 60]), false);
        sink.push(Bytes::from(vec![b'z'; 1000]), true);
        drop(sink);
        let all = body.collect().await.unwrap().to_bytes();
        assert_eq!(all.len(), 1060);
    }
}
