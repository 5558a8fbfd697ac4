use super::*;
use std::sync::atomic::AtomicUsize;

/// A task waker that counts its wakes.
#[derive(Default)]
struct Count(AtomicUsize);

impl Wake for Count {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// Yields (wakes itself, then `Pending`) `n` times, then completes with
/// the number of polls it took.
struct Yields {
    left: usize,
    polls: usize,
}

impl Future for Yields {
    type Output = usize;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<usize> {
        self.polls += 1;
        if self.left == 0 {
            return Poll::Ready(self.polls);
        }
        self.left -= 1;
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

fn far() -> Option<Instant> {
    Instant::now().checked_add(Duration::from_secs(3600))
}

#[test]
fn yields_within_the_slice_are_resumed_in_place() {
    let task = Arc::new(Count::default());
    let waker = Waker::from(task.clone());
    let mut cx = Context::from_waker(&waker);
    let mut work = Yields { left: 5, polls: 0 };
    let mut s = Slices::new(Pin::new(&mut work), far());
    // One poll of the task: all five yields and the completion.
    assert_eq!(Pin::new(&mut s).poll(&mut cx), Poll::Ready(6));
    assert_eq!(
        task.0.load(Ordering::SeqCst),
        0,
        "no yield reached the task"
    );
}

#[test]
fn past_the_deadline_every_yield_goes_to_the_executor() {
    let task = Arc::new(Count::default());
    let waker = Waker::from(task.clone());
    let mut cx = Context::from_waker(&waker);
    let mut work = Yields { left: 2, polls: 0 };
    let mut s = Slices::new(Pin::new(&mut work), Some(Instant::now()));
    assert_eq!(Pin::new(&mut s).poll(&mut cx), Poll::Pending);
    assert_eq!(task.0.load(Ordering::SeqCst), 1);
    assert_eq!(Pin::new(&mut s).poll(&mut cx), Poll::Pending);
    assert_eq!(task.0.load(Ordering::SeqCst), 2);
    assert_eq!(Pin::new(&mut s).poll(&mut cx), Poll::Ready(3));
}

#[test]
fn a_wake_from_elsewhere_reaches_the_task() {
    let task = Arc::new(Count::default());
    let waker = Waker::from(task.clone());
    let mut cx = Context::from_waker(&waker);
    // Waits for a wake that comes later, from outside its own poll.
    let (tx, rx) = std::sync::mpsc::channel::<Waker>();
    let mut ready = false;
    let mut work = std::future::poll_fn(|cx| {
        if ready {
            return Poll::Ready(());
        }
        ready = true;
        tx.send(cx.waker().clone()).ok();
        Poll::Pending
    });
    let mut s = Slices::new(Pin::new(&mut work), far());
    assert_eq!(Pin::new(&mut s).poll(&mut cx), Poll::Pending);
    assert_eq!(task.0.load(Ordering::SeqCst), 0);
    let later = rx.recv().expect("the work's waker");
    std::thread::spawn(move || later.wake())
        .join()
        .expect("waker thread");
    assert_eq!(task.0.load(Ordering::SeqCst), 1, "the wake was passed on");
    assert_eq!(Pin::new(&mut s).poll(&mut cx), Poll::Ready(()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guest_that_never_stops_yielding_still_times_out() {
    // Yields forever, each time inside the slice: the timeout must still
    // end it (the slice hands the yield to the executor every millisecond
    // and at the deadline).
    let work = Yields {
        left: usize::MAX,
        polls: 0,
    };
    let r = within(Duration::from_millis(30), std::pin::pin!(work)).await;
    assert!(r.is_err(), "the deadline ended it");
}
