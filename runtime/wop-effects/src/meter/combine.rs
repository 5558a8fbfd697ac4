//! Group commit of roll-up updates. Recorders of one key in this process
//! queue their deltas; whichever holds the key's writer folds every queued
//! delta into **one** compare-and-swap. Each caller still returns only
//! after the write carrying its own delta is done (and gets that write's
//! error if it failed), so nothing is acknowledged before it is stored.
//! Across processes the compare-and-swap itself keeps the record exact.
//!
//! Without it, N concurrent recorders of one run made N compare-and-swaps
//! on the same record, N−1 of which lost and retried: the run roll-up
//! serialized every invocation of a busy run (decision 0010).

use super::MeterError;
use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex, OnceLock};
use tokio::sync::Notify;

/// The outcome of one batch, shared by its members.
struct Done<O> {
    result: OnceLock<Result<Vec<O>, String>>,
    /// Woken when `result` is set, or when the writer role is handed off.
    wake: Notify,
}

/// The deltas queued for one key and the outcome they will share.
struct Batch<D, O> {
    deltas: Vec<D>,
    done: Arc<Done<O>>,
}

impl<D, O> Default for Batch<D, O> {
    fn default() -> Self {
        Self {
            deltas: Vec::new(),
            done: Arc::new(Done {
                result: OnceLock::new(),
                wake: Notify::new(),
            }),
        }
    }
}

/// One key: what is queued, and whether someone is writing it.
struct State<D, O> {
    pending: Batch<D, O>,
    writing: bool,
}

type Slot<D, O> = Arc<Mutex<State<D, O>>>;

/// Per-key group commit (see the module docs).
pub(super) struct Combiner<D, O> {
    slots: Mutex<HashMap<String, Slot<D, O>>>,
}

impl<D, O> Default for Combiner<D, O> {
    fn default() -> Self {
        Self {
            slots: Mutex::new(HashMap::new()),
        }
    }
}

/// Sets a taken batch's outcome and wakes its members; if dropped unset
/// (the write was cancelled or panicked), the outcome is an error, so no
/// member waits forever.
struct Finish<O>(Arc<Done<O>>);

impl<O> Finish<O> {
    fn set(&self, r: Result<Vec<O>, String>) {
        let _ = self.0.result.set(r);
        self.0.wake.notify_waiters();
    }
}

impl<O> Drop for Finish<O> {
    fn drop(&mut self) {
        if self.0.result.get().is_none() {
            self.set(Err("the roll-up write was abandoned".to_owned()));
        }
    }
}

/// The writer role. Dropped while armed (the writer's caller was
/// cancelled), it hands the role off: the next batch's members are woken
/// and one of them writes.
struct Role<'a, D, O> {
    slot: &'a Slot<D, O>,
    armed: bool,
}

impl<D, O> Drop for Role<'_, D, O> {
    fn drop(&mut self) {
        if self.armed {
            let wake = {
                let mut st = lock(self.slot);
                st.writing = false;
                st.pending.done.clone()
            };
            wake.wake.notify_waiters();
        }
    }
}

impl<D: Send + 'static, O: Clone + Send + Sync + 'static> Combiner<D, O> {
    /// Queues `delta` for `key` and returns its output once the write that
    /// carries it is done. `write` gets a whole batch (in queue order) and
    /// returns one output per delta; it must write the same key the same
    /// way whoever calls it. The caller that finds nobody writing becomes
    /// the writer of the queued batch, then hands the role to the next
    /// batch's members; its own batch of one runs inline, any batch
    /// carrying other callers' deltas runs on its own task, so a cancelled
    /// writer never loses theirs.
    pub(super) async fn submit<W, F>(&self, key: &str, delta: D, write: W) -> Result<O, MeterError>
    where
        W: Fn(Vec<D>) -> F,
        F: Future<Output = Result<Vec<O>, MeterError>> + Send + 'static,
    {
        let slot = self.slot(key);
        let (index, done, mut lead) = {
            let mut st = lock(&slot);
            st.pending.deltas.push(delta);
            let lead = !std::mem::replace(&mut st.writing, true);
            (st.pending.deltas.len() - 1, st.pending.done.clone(), lead)
        };
        loop {
            if lead {
                let mut role = Role {
                    slot: &slot,
                    armed: true,
                };
                Self::write_one(&slot, &write, &done).await;
                role.armed = false;
            }
            if done.result.get().is_some() {
                break;
            }
            // Wait for our batch, or take over a role that was handed off.
            let woken = done.wake.notified();
            tokio::pin!(woken);
            woken.as_mut().enable();
            lead = self.take_role(&slot, &done);
            if !lead && done.result.get().is_none() {
                woken.await;
                lead = self.take_role(&slot, &done);
            }
        }
        self.release(key, slot);
        match done.result.get() {
            Some(Ok(outs)) => outs.get(index).cloned().ok_or_else(|| {
                MeterError::Batch(format!(
                    "the roll-up write of {key} returned too few results"
                ))
            }),
            Some(Err(e)) => Err(MeterError::Batch(e.clone())),
            None => Err(MeterError::Batch(format!(
                "the roll-up write of {key} did not finish"
            ))),
        }
    }

    /// The role, if nobody holds it, our batch is not done, and there is a
    /// queued batch to write. With nothing queued, our batch is in flight
    /// (on the task a cancelled writer spawned): taking the role then would
    /// only spin — write nothing, loop, take it again — without ever
    /// yielding, so a caller waits for its batch instead.
    fn take_role(&self, slot: &Slot<D, O>, done: &Arc<Done<O>>) -> bool {
        let mut st = lock(slot);
        if done.result.get().is_none() && !st.writing && !st.pending.deltas.is_empty() {
            st.writing = true;
            return true;
        }
        false
    }

    /// Writes the queued batch, then gives up the role: handed to the next
    /// batch's members if one is queued (so no caller writes for others
    /// indefinitely under sustained load: each writes at most one batch).
    async fn write_one<W, F>(slot: &Slot<D, O>, write: &W, own: &Arc<Done<O>>)
    where
        W: Fn(Vec<D>) -> F,
        F: Future<Output = Result<Vec<O>, MeterError>> + Send + 'static,
    {
        let batch = {
            let mut st = lock(slot);
            if st.pending.deltas.is_empty() {
                st.writing = false;
                return;
            }
            std::mem::take(&mut st.pending)
        };
        let alone = batch.deltas.len() == 1 && Arc::ptr_eq(&batch.done, own);
        let finish = Finish(batch.done);
        let fut = write(batch.deltas);
        if alone {
            // Only our own delta: nobody else to protect from our
            // cancellation.
            let r = fut.await.map_err(|e| e.to_string());
            finish.set(r);
        } else {
            let task = tokio::spawn(async move {
                let r = fut.await.map_err(|e| e.to_string());
                finish.set(r);
            });
            let _ = task.await;
        }
        let next = {
            let mut st = lock(slot);
            st.writing = false;
            (!st.pending.deltas.is_empty()).then(|| st.pending.done.clone())
        };
        if let Some(next) = next {
            next.wake.notify_waiters();
        }
    }

    fn slot(&self, key: &str) -> Slot<D, O> {
        lock(&self.slots)
            .entry(key.to_owned())
            .or_insert_with(|| {
                Arc::new(Mutex::new(State {
                    pending: Batch::default(),
                    writing: false,
                }))
            })
            .clone()
    }

    /// Forgets an idle key (nobody else holds it, nothing queued or being
    /// written), so the map holds only keys in use.
    fn release(&self, key: &str, slot: Slot<D, O>) {
        let mut slots = lock(&self.slots);
        // Two holders: the map and `slot`. Others take theirs under this lock.
        if Arc::strong_count(&slot) == 2 {
            let st = lock(&slot);
            if st.pending.deltas.is_empty() && !st.writing {
                drop(st);
                slots.remove(key);
            }
        }
    }

    /// Keys currently tracked (tests).
    #[cfg(test)]
    pub(super) fn tracked(&self) -> usize {
        lock(&self.slots).len()
    }

    /// Deltas queued (not yet taken) for `key` (tests).
    #[cfg(test)]
    pub(super) fn queued(&self, key: &str) -> usize {
        lock(&self.slots)
            .get(key)
            .map_or(0, |s| lock(s).pending.deltas.len())
    }
}

/// A poisoned lock still holds consistent data here (every critical
/// section is a push, a take or a map edit): keep going.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::time::Duration;

    /// A boxed write future (tests).
    type Write = std::pin::Pin<Box<dyn Future<Output = Result<Vec<u64>, MeterError>> + Send>>;

    /// A write that sums its batch into `total` after `delay`.
    fn summing(
        total: &Arc<AtomicU64>,
        writes: &Arc<AtomicU64>,
        delay: Duration,
    ) -> impl Fn(Vec<u64>) -> Write + Clone + Send + Sync + use<> {
        let (total, writes) = (total.clone(), writes.clone());
        move |batch| {
            let (total, writes) = (total.clone(), writes.clone());
            Box::pin(async move {
                writes.fetch_add(1, Ordering::Relaxed);
                tokio::time::sleep(delay).await;
                total.fetch_add(batch.iter().sum::<u64>(), Ordering::Relaxed);
                Ok(batch.iter().map(|d| d * 2).collect())
            })
        }
    }

    /// A write that reports each batch on `seen`, then waits for a permit
    /// of `gate` before summing it into `total`.
    struct Gated<W> {
        total: Arc<AtomicU64>,
        seen: tokio::sync::mpsc::UnboundedReceiver<Vec<u64>>,
        gate: Arc<tokio::sync::Semaphore>,
        write: W,
    }

    fn gated() -> Gated<impl Fn(Vec<u64>) -> Write + Clone + Send + Sync + use<>> {
        let total = Arc::new(AtomicU64::new(0));
        let (started, seen) = tokio::sync::mpsc::unbounded_channel::<Vec<u64>>();
        let gate = Arc::new(tokio::sync::Semaphore::new(0));
        let write = {
            let (total, gate) = (total.clone(), gate.clone());
            move |batch: Vec<u64>| -> Write {
                let (total, gate, started) = (total.clone(), gate.clone(), started.clone());
                Box::pin(async move {
                    let _ = started.send(batch.clone());
                    gate.acquire()
                        .await
                        .map_err(|e| MeterError::Batch(e.to_string()))?
                        .forget();
                    total.fetch_add(batch.iter().sum::<u64>(), Ordering::Relaxed);
                    Ok(batch.iter().map(|d| d * 2).collect())
                })
            }
        };
        Gated {
            total,
            seen,
            gate,
            write,
        }
    }

    /// 64 tasks × 50 deltas on one key: every delta is written exactly
    /// once, each caller gets its own output, and overlapping callers share
    /// writes.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_delta_is_written_once_and_answered() {
        let c: Arc<Combiner<u64, u64>> = Arc::new(Combiner::default());
        let total = Arc::new(AtomicU64::new(0));
        let writes = Arc::new(AtomicU64::new(0));
        let mut tasks = Vec::new();
        for t in 0..64u64 {
            let c = c.clone();
            let write = summing(&total, &writes, Duration::from_micros(200));
            tasks.push(tokio::spawn(async move {
                for i in 0..50u64 {
                    let v = t * 1000 + i;
                    let out = c.submit("k", v, &write).await.unwrap();
                    assert_eq!(out, v * 2, "each caller gets its own output");
                }
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        let expected: u64 = (0..64u64)
            .flat_map(|t| (0..50u64).map(move |i| t * 1000 + i))
            .sum();
        assert_eq!(total.load(Ordering::Relaxed), expected);
        assert!(
            writes.load(Ordering::Relaxed) < 64 * 50,
            "writes were shared: {}",
            writes.load(Ordering::Relaxed)
        );
        assert_eq!(c.tracked(), 0, "idle keys are forgotten");
    }

    /// Under sustained load no caller keeps writing for others: one that
    /// submits while eight others submit in a loop returns long before
    /// they run out of work.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_writer_is_not_kept_writing_for_others() {
        const ROUNDS: u64 = 2_000;
        let c: Arc<Combiner<u64, u64>> = Arc::new(Combiner::default());
        let total = Arc::new(AtomicU64::new(0));
        let writes = Arc::new(AtomicU64::new(0));
        let write = summing(&total, &writes, Duration::from_micros(50));
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let mut busy = Vec::new();
        for t in 0..8u64 {
            let (c, write, stop) = (c.clone(), write.clone(), stop.clone());
            busy.push(tokio::spawn(async move {
                let mut rounds = 0;
                while !stop.load(Ordering::Relaxed) && rounds < ROUNDS {
                    c.submit("k", t, &write).await.unwrap();
                    rounds += 1;
                }
                rounds
            }));
        }
        tokio::task::yield_now().await;
        c.submit("k", 1, &write).await.unwrap();
        stop.store(true, Ordering::Relaxed);
        for b in busy {
            assert!(
                b.await.unwrap() < ROUNDS,
                "the caller waited for the others to finish"
            );
        }
    }

    #[tokio::test]
    async fn a_failed_write_fails_every_member() {
        let c: Combiner<u8, ()> = Combiner::default();
        let e = c
            .submit("k", 1, |_| async {
                Err(MeterError::Contended("k".to_owned()))
            })
            .await
            .unwrap_err();
        assert!(e.to_string().contains("changing too fast"), "{e}");
        // The key is usable again.
        c.submit("k", 2, |b| async move { Ok(vec![(); b.len()]) })
            .await
            .unwrap();
    }

    /// The writer of a batch carrying other callers' deltas is cancelled
    /// (here every member is): the write still completes.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_cancelled_writer_does_not_lose_others_deltas() {
        let c: Arc<Combiner<u64, u64>> = Arc::new(Combiner::default());
        let Gated {
            total,
            mut seen,
            gate,
            write,
        } = gated();
        let (c1, w1) = (c.clone(), write.clone());
        let first = tokio::spawn(async move { c1.submit("k", 5, &w1).await });
        assert_eq!(
            seen.recv().await.unwrap(),
            vec![5],
            "the first caller's own batch"
        );
        // Two more queue behind it, forming the next batch.
        let members: Vec<_> = [7u64, 11]
            .into_iter()
            .map(|v| {
                let (c, w) = (c.clone(), write.clone());
                tokio::spawn(async move { c.submit("k", v, &w).await })
            })
            .collect();
        while c.queued("k") < 2 {
            tokio::task::yield_now().await;
        }
        gate.add_permits(1); // the first write completes; the role passes on
        assert_eq!(first.await.unwrap().unwrap(), 10);
        let mut next = seen.recv().await.unwrap();
        next.sort_unstable();
        assert_eq!(next, vec![7, 11], "one member writes the whole batch");
        // Cancel both members, the writer among them, mid-write.
        for m in members {
            m.abort();
            let _ = m.await;
        }
        gate.add_permits(1);
        for _ in 0..1000 {
            if total.load(Ordering::Relaxed) == 23 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(total.load(Ordering::Relaxed), 23, "the batch was written");
        // The key is usable again.
        gate.add_permits(1);
        assert_eq!(c.submit("k", 1, &write).await.unwrap(), 2);
    }

    /// The writer is cancelled during its own write: the role is handed to
    /// the queued caller, who writes its batch.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_cancelled_writer_hands_the_role_off() {
        let c: Arc<Combiner<u64, u64>> = Arc::new(Combiner::default());
        let Gated {
            total,
            mut seen,
            gate,
            write,
        } = gated();
        let (c1, w1) = (c.clone(), write.clone());
        let writer = tokio::spawn(async move { c1.submit("k", 5, &w1).await });
        assert_eq!(seen.recv().await.unwrap(), vec![5]);
        let (c2, w2) = (c.clone(), write.clone());
        let member = tokio::spawn(async move { c2.submit("k", 7, &w2).await });
        while c.queued("k") == 0 {
            tokio::task::yield_now().await;
        }
        // Cancelled during its own inline write: its delta is lost (as a
        // cancelled caller's always was), the member's is not.
        writer.abort();
        let _ = writer.await;
        assert_eq!(seen.recv().await.unwrap(), vec![7], "the member took over");
        gate.add_permits(1);
        assert_eq!(member.await.unwrap().unwrap(), 14);
        assert_eq!(total.load(Ordering::Relaxed), 7);
        assert_eq!(c.tracked(), 0);
    }
}
