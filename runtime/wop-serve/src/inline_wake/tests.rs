#![allow(clippy::unwrap_used)]

use super::*;
use std::sync::atomic::AtomicUsize;

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

/// Wakes itself from inside its poll `left` times, then is ready; counts
/// its polls.
struct SelfWaking {
    left: usize,
    polls: Arc<AtomicUsize>,
}

impl Future for SelfWaking {
    type Output = &'static str;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<&'static str> {
        self.polls.fetch_add(1, Ordering::SeqCst);
        if self.left == 0 {
            return Poll::Ready("done");
        }
        self.left -= 1;
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

fn poll_once<F: Future>(f: &mut InlineWake<F>, outer: &Arc<Counting>) -> Poll<F::Output> {
    let waker = Waker::from(outer.clone());
    Pin::new(f).poll(&mut Context::from_waker(&waker))
}

#[test]
fn wakes_during_the_poll_are_polled_again_in_place() {
    let polls = Arc::new(AtomicUsize::new(0));
    let outer = Arc::new(Counting::default());
    let mut f = InlineWake::new(SelfWaking {
        left: 3,
        polls: polls.clone(),
    });
    assert_eq!(poll_once(&mut f, &outer), Poll::Ready("done"));
    assert_eq!(polls.load(Ordering::SeqCst), 4);
    // The runtime was never asked to schedule the task again.
    assert_eq!(outer.0.load(Ordering::SeqCst), 0);
}

#[test]
fn a_future_that_keeps_waking_itself_still_yields_to_the_runtime() {
    let polls = Arc::new(AtomicUsize::new(0));
    let outer = Arc::new(Counting::default());
    let mut f = InlineWake::new(SelfWaking {
        left: usize::MAX,
        polls: polls.clone(),
    });
    assert!(poll_once(&mut f, &outer).is_pending());
    assert_eq!(polls.load(Ordering::SeqCst), MAX_INLINE);
    // Scheduled again by the runtime, as a yield is.
    assert_eq!(outer.0.load(Ordering::SeqCst), 1);
    assert!(poll_once(&mut f, &outer).is_pending());
    assert_eq!(polls.load(Ordering::SeqCst), 2 * MAX_INLINE);
    assert_eq!(outer.0.load(Ordering::SeqCst), 2);
}

#[test]
fn a_wake_after_the_poll_reaches_the_latest_runtime_waker() {
    let (tx, rx) = tokio::sync::oneshot::channel::<u8>();
    let mut f = InlineWake::new(rx);
    let first = Arc::new(Counting::default());
    assert!(poll_once(&mut f, &first).is_pending());
    // Polled again by another task's waker (the task moved): wakes go there.
    let second = Arc::new(Counting::default());
    assert!(poll_once(&mut f, &second).is_pending());
    std::thread::spawn(move || tx.send(7).unwrap())
        .join()
        .unwrap();
    assert_eq!(first.0.load(Ordering::SeqCst), 0);
    assert_eq!(second.0.load(Ordering::SeqCst), 1);
    assert_eq!(poll_once(&mut f, &second), Poll::Ready(Ok(7)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wakes_from_other_threads_complete_the_future_on_a_runtime() {
    let (tx, rx) = tokio::sync::oneshot::channel::<u8>();
    let task = tokio::spawn(InlineWake::new(async move {
        tokio::task::yield_now().await;
        rx.await.unwrap() + 1
    }));
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    std::thread::spawn(move || tx.send(41).unwrap());
    assert_eq!(task.await.unwrap(), 42);
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
        let mut conn = InlineWake::new(conn);
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
