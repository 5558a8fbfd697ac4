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
    let mut s = InPlace::new(Pin::new(&mut work), far());
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
    let mut s = InPlace::new(Pin::new(&mut work), Some(Instant::now()));
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
    let mut s = InPlace::new(Pin::new(&mut work), far());
    assert_eq!(Pin::new(&mut s).poll(&mut cx), Poll::Pending);
    assert_eq!(task.0.load(Ordering::SeqCst), 0);
    let later = rx.recv().expect("the work's waker");
    std::thread::spawn(move || later.wake())
        .join()
        .expect("waker thread");
    assert_eq!(task.0.load(Ordering::SeqCst), 1, "the wake was passed on");
    assert_eq!(Pin::new(&mut s).poll(&mut cx), Poll::Ready(()));
}

/// Runs for `each` on every poll, then wakes itself: a guest that keeps
/// the CPU between its fuel yields.
struct Busy {
    each: Duration,
    polls: usize,
}

impl Future for Busy {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        self.polls += 1;
        let until = Instant::now() + self.each;
        while Instant::now() < until {
            std::hint::spin_loop();
        }
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

#[test]
fn nested_the_inner_slice_ending_ends_the_outer_one() {
    // A guest (inner) inside a connection (outer, no deadline): when the
    // guest's slice is over, its yield must reach the executor, not be
    // resumed by the connection.
    let task = Arc::new(Count::default());
    let waker = Waker::from(task.clone());
    let mut cx = Context::from_waker(&waker);
    let mut busy = Busy {
        each: SLICE / 4,
        polls: 0,
    };
    let mut inner = InPlace::new(Pin::new(&mut busy), far());
    let mut outer = InPlace::new(Pin::new(&mut inner), None);
    assert!(Pin::new(&mut outer).poll(&mut cx).is_pending());
    assert_eq!(
        task.0.load(Ordering::SeqCst),
        1,
        "one yield to the executor"
    );
    drop(outer);
    drop(inner);
    // At most the slice's worth of polls (fewer if the machine preempted
    // a spin): the outer did not poll the inner again after the inner's
    // slice ended, which would have started it a new one.
    assert!(busy.polls <= 5, "{} polls", busy.polls);
}
