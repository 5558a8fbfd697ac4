//! What the in-memory store's searches cost when it holds its bound of
//! usage (decision 0058): the store operations one invocation of a new
//! run makes on `wop serve --memory-store` (the run's ledger read, its
//! roll-up and usage record written, the oldest run's scan and removal),
//! against `MemoryStore` and against a plain `BTreeMap<String, Vec<u8>>`
//! behind a mutex (the store's layout before 0058), with the same keys and
//! values, interleaved in one run.
//!
//! ```text
//! cargo run --release -p fuel-benches --bin memory_store -- [runs, default 200000] [resident runs, default 50000] [KiB, default 1024]
//! ```
//!
//! Between two runs the bench writes over a buffer (1 MiB by default, the
//! third argument in KiB; 0 for none), as the rest of a request (HTTP,
//! the sandbox) does to the caches in the service; only the store
//! operations are timed. The two stores must end up holding
//! the same keys: the bench fails otherwise.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use fuel_benches::pollute;
use std::collections::BTreeMap;
use std::collections::btree_map::Entry;
use std::ops::Bound;
use std::sync::Mutex;
use std::time::{Duration, Instant};
use wop_runtime::store::{CasResult, KvStore, MemoryStore, StoreError};

/// The layout before decision 0058: a plain map behind a mutex, the
/// operations the bench makes as `MemoryStore` made them.
#[derive(Default)]
struct Plain(Mutex<BTreeMap<String, Vec<u8>>>);

impl Plain {
    /// `f` of each entry in `[start, end)`, at most `limit`.
    fn range<T>(
        &self,
        start: &str,
        end: Option<&str>,
        limit: usize,
        f: impl Fn(&String, &Vec<u8>) -> T,
    ) -> Vec<T> {
        let upper = end.map_or(Bound::Unbounded, Bound::Excluded);
        self.0
            .lock()
            .unwrap()
            .range::<str, _>((Bound::Included(start), upper))
            .take(limit)
            .map(|(k, v)| f(k, v))
            .collect()
    }
}

#[async_trait::async_trait]
impl KvStore for Plain {
    async fn compare_and_swap(
        &self,
        key: &str,
        expected: Option<&[u8]>,
        new: Option<Vec<u8>>,
    ) -> Result<CasResult, StoreError> {
        let mut map = self.0.lock().unwrap();
        // The bench only inserts with a swap.
        assert!(expected.is_none());
        match map.entry(key.to_owned()) {
            Entry::Occupied(e) => Ok(Err(Some(e.get().clone()))),
            Entry::Vacant(e) => {
                if let Some(v) = new {
                    e.insert(v);
                }
                Ok(Ok(()))
            }
        }
    }
    async fn get(&self, k: &str) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self.0.lock().unwrap().get(k).cloned())
    }
    async fn put(&self, k: &str, v: Vec<u8>) -> Result<(), StoreError> {
        self.0.lock().unwrap().insert(k.to_owned(), v);
        Ok(())
    }
    async fn remove(&self, k: &str) -> Result<(), StoreError> {
        self.0.lock().unwrap().remove(k);
        Ok(())
    }
    async fn scan_prefix(
        &self,
        prefix: &str,
        limit: usize,
    ) -> Result<Vec<(String, Vec<u8>)>, StoreError> {
        let mut page = self.scan_range(prefix, None, usize::MAX).await?;
        page.retain(|(k, _)| k.starts_with(prefix));
        page.truncate(limit);
        Ok(page)
    }
    async fn scan_range(
        &self,
        start: &str,
        end: Option<&str>,
        limit: usize,
    ) -> Result<Vec<(String, Vec<u8>)>, StoreError> {
        Ok(self.range(start, end, limit, |k, v| (k.clone(), v.clone())))
    }
    async fn scan_range_keys(
        &self,
        start: &str,
        end: Option<&str>,
        limit: usize,
    ) -> Result<Vec<String>, StoreError> {
        Ok(self.range(start, end, limit, |k, _| k.clone()))
    }
    fn backend(&self) -> &'static str {
        "plain"
    }
}

/// One run's keys, as the meter makes them (`wop_effects::keys`).
struct RunKeys {
    ledger: String,
    rollup: String,
    usage_prefix: String,
    usage_end: String,
    record: String,
}

fn keys(i: u64) -> RunKeys {
    // `wop serve` names a run without a `runId` after its invocation's
    // UUID; a multiplicative hash spreads them like random ones.
    let h = i.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    let run = format!(
        "inv-{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}",
        h >> 32,
        (h >> 16) & 0xffff,
        h & 0xfff,
        (h >> 48) & 0xffff,
        h & 0xffff_ffff_ffff
    );
    let scope = format!("anon:local/{run}");
    RunKeys {
        ledger: format!("ledger/{scope}"),
        rollup: format!("rollup/run/{scope}"),
        usage_prefix: format!("usage/{scope}/"),
        usage_end: format!("usage/{scope}0"),
        record: format!("usage/{scope}/{:013}-4242-{i}", 1_796_000_000_000 + i),
    }
}

/// One new run's operations on `store`; their time.
async fn one_run(
    store: &dyn KvStore,
    k: &RunKeys,
    old: Option<&RunKeys>,
    (rollup, record): (&[u8], &[u8]),
) -> Duration {
    let t = Instant::now();
    assert!(store.get(&k.ledger).await.unwrap().is_none());
    let swapped = store
        .compare_and_swap(&k.rollup, None, Some(rollup.to_vec()))
        .await
        .unwrap();
    assert!(swapped.is_ok());
    store.put(&k.record, record.to_vec()).await.unwrap();
    if let Some(o) = old {
        // Keys only, as the usage bound forgets a run.
        let page = store
            .scan_range_keys(&o.usage_prefix, Some(&o.usage_end), 1000)
            .await
            .unwrap();
        assert_eq!(page.len(), 1);
        let next = format!("{}\0", page[0]);
        let rest = store.scan_range_keys(&next, Some(&o.usage_end), 1000).await;
        assert!(rest.unwrap().is_empty());
        store.remove(&page[0]).await.unwrap();
        store.remove(&o.rollup).await.unwrap();
    }
    t.elapsed()
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let mut args = std::env::args().skip(1);
    let runs: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(200_000);
    let resident: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(50_000);
    let store = MemoryStore::new();
    let plain = Plain::default();
    let rollup = vec![b'r'; 300];
    let record = vec![b'u'; 400];
    let kib: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(1024);
    let mut buf = vec![0u8; kib << 10];
    let (mut t_store, mut t_plain) = (Duration::ZERO, Duration::ZERO);
    for i in 0..runs {
        let k = keys(i);
        let old = i.checked_sub(resident).map(keys);
        let v = (&rollup[..], &record[..]);
        // Each first in every other run, so neither always follows the
        // other's work.
        let order: [(&dyn KvStore, &mut Duration); 2] = if i % 2 == 0 {
            [(&store, &mut t_store), (&plain, &mut t_plain)]
        } else {
            [(&plain, &mut t_plain), (&store, &mut t_store)]
        };
        for (kv, total) in order {
            pollute(&mut buf);
            let took = one_run(kv, &k, old.as_ref(), v).await;
            if i >= resident {
                *total += took;
            }
        }
    }
    let all = store.scan_range("", None, usize::MAX).await.unwrap();
    let plain_all = plain.scan_range("", None, usize::MAX).await.unwrap();
    assert_eq!(all.len() as u64, 2 * resident.min(runs));
    assert!(
        all.iter()
            .map(|(k, _)| k)
            .eq(plain_all.iter().map(|(k, _)| k)),
        "the two stores hold different keys"
    );
    let timed = runs.saturating_sub(resident).max(1) as f64;
    let (s, p) = (
        t_store.as_nanos() as f64 / timed,
        t_plain.as_nanos() as f64 / timed,
    );
    println!(
        "{runs} runs, {resident} resident ({} entries), {kib} KiB written between runs; \
         store operations of one new run:",
        all.len()
    );
    println!("| store | ns per run |");
    println!("|---|---|");
    println!("| BTreeMap<String, Vec<u8>> (before decision 0058) | {p:.0} |");
    println!("| MemoryStore | {s:.0} |");
    println!("| ratio MemoryStore / before | {:.2}× |", s / p);
}
