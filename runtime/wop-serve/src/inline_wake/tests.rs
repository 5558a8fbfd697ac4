#![allow(clippy::unwrap_used)]

use super::*;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Wake, Waker};

/// The runtime's waker in these tests: counts its wakes.
#[derive(Default)]
struct Counting(AtomicUsize);

impl Wake for Counting {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// A real hyper connection over an in-memory pipe, answering a `POST`
/// whose handler reads the body (as every JSON route does), polled once
/// with `outer` as the runtime's waker. Returns the wakes of `outer`
/// during that poll and the bytes written back.
fn serve_one_post(wrapped: bool, outer: &Arc<Counting>) -> (usize, Vec<u8>) {
    use http_body_util::BodyExt as _;
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let (mut client, server) = tokio::io::duplex(64 * 1024);
    rt.block_on(client.write_all(
        b"POST /x HTTP/1.1\r\nhost: a\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}",
    ))
    .unwrap();
    let svc = hyper::service::service_fn(|req: hyper::Request<hyper::body::Incoming>| async move {
        let body = req.into_body().collect().await?.to_bytes();
        Ok::<_, hyper::Error>(hyper::Response::new(http_body_util::Full::new(body)))
    });
    let conn = hyper::server::conn::http1::Builder::new()
        .serve_connection(hyper_util::rt::TokioIo::new(server), svc);
    let waker = Waker::from(outer.clone());
    let mut cx = Context::from_waker(&waker);
    // Polled once; the wakes counted before the connection is dropped
    // (dropping it wakes its peers).
    let (pending, woken) = if wrapped {
        let mut conn = connection(conn);
        let p = Pin::new(&mut conn).poll(&mut cx);
        (p.is_pending(), outer.0.load(Ordering::SeqCst))
    } else {
        let mut conn = std::pin::pin!(conn);
        let p = conn.as_mut().poll(&mut cx);
        (p.is_pending(), outer.0.load(Ordering::SeqCst))
    };
    // The connection stays open for the next request.
    assert!(pending);
    let mut out = vec![0u8; 4096];
    let n = rt
        .block_on(async {
            tokio::time::timeout(std::time::Duration::ZERO, client.read(&mut out)).await
        })
        .map_or(0, Result::unwrap);
    out.truncate(n);
    (woken, out)
}

#[test]
fn hyper_wakes_its_own_task_for_a_body_and_the_wrapper_keeps_it_in_place() {
    // Unwrapped, hyper wakes the task from inside its poll (the runtime
    // would poll it again, waking an idle worker to steal it).
    let (woken, _) = serve_one_post(false, &Arc::new(Counting::default()));
    assert!(woken >= 1);
    // Wrapped: the same request is answered within the one poll, and the
    // runtime is never asked to schedule the task again.
    let (woken, answer) = serve_one_post(true, &Arc::new(Counting::default()));
    assert_eq!(woken, 0);
    let text = String::from_utf8(answer).unwrap();
    assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "{text}");
    assert!(text.ends_with("\r\n\r\n{}"), "{text}");
}
