//! The conformance suite every [`KvStore`] backend must pass.
//!
//! Backends call [`run_all`] from their tests with a fresh, empty store on
//! a multi-threaded tokio runtime. Failures panic.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::KvStore;
use std::sync::Arc;

mod scans;

/// The PostgreSQL URL for tests, from `WOP_TEST_POSTGRES_URL`, with a
/// `wop_schema` parameter naming a schema of its own (fresh per call, from
/// `name`, the process id and a counter) so tests never share tables.
///
/// When the variable is unset, **panics** with a message naming
/// `.ci/postgres.sh start` — unless `WOP_POSTGRES_TESTS=skip`, then prints
/// `SKIPPED` and returns `None`.
pub fn postgres_test_url(name: &str) -> Option<String> {
    static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let url = match std::env::var("WOP_TEST_POSTGRES_URL") {
        Ok(u) if !u.is_empty() => u,
        _ => {
            if std::env::var("WOP_POSTGRES_TESTS").as_deref() == Ok("skip") {
                // Straight to fd 2 (not `eprintln!`), so that the test
                // harness's output capture does not hide it.
                use std::io::Write as _;
                let _ = writeln!(
                    std::io::stderr(),
                    "SKIPPED {name}: no PostgreSQL (WOP_TEST_POSTGRES_URL unset, \
                     WOP_POSTGRES_TESTS=skip)"
                );
                return None;
            }
            panic!(
                "{name} needs a PostgreSQL: run `export WOP_TEST_POSTGRES_URL=\"$(bash \
                 .ci/postgres.sh start)\"` first (or set WOP_POSTGRES_TESTS=skip to skip the \
                 PostgreSQL tests)"
            );
        }
    };
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let clean: String = name
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '_')
        .take(24)
        .collect();
    let schema = format!("t_{clean}_{}_{n}_{nanos}", std::process::id()).to_ascii_lowercase();
    let sep = if url.contains('?') { '&' } else { '?' };
    Some(format!("{url}{sep}wop_schema={schema}"))
}

/// Runs every conformance check against `store`, which must be empty.
pub async fn run_all(store: Arc<dyn KvStore>) {
    assert!(!store.backend().is_empty());
    cas_insert_if_absent_wins_once(&*store).await;
    cas_stale_expected_fails_with_current(&*store).await;
    cas_delete(&*store).await;
    get_put_remove(&*store).await;
    scans::scan_prefix_order_isolation_limit(&*store).await;
    scans::scan_range_bounds_and_paging(&*store).await;
    scans::scans_order_keys_sharing_a_long_prefix(&*store).await;
    scans::scan_range_keys_are_scan_ranges_keys(&*store).await;
    put_then_insert_writes_the_marker_either_way(&*store).await;
    cas_race_single_winner(store.clone(), false).await;
    cas_race_single_winner(store.clone(), true).await;
    put_then_insert_many_at_once(store.clone()).await;
    cas_increment_race_loses_nothing(store.clone()).await;
    remove_unchanged_deletes_only_what_is_unchanged(&*store).await;
    remove_unchanged_races_delete_each_key_once(store.clone()).await;
}

async fn cas_insert_if_absent_wins_once(store: &dyn KvStore) {
    let k = "conf/insert";
    assert_eq!(store.get(k).await.unwrap(), None);
    assert_eq!(
        store
            .compare_and_swap(k, None, Some(b"a".to_vec()))
            .await
            .unwrap(),
        Ok(())
    );
    assert_eq!(
        store
            .compare_and_swap(k, None, Some(b"b".to_vec()))
            .await
            .unwrap(),
        Err(Some(b"a".to_vec()))
    );
    assert_eq!(store.get(k).await.unwrap(), Some(b"a".to_vec()));
    // An empty value is a value, distinct from absence.
    let e = "conf/insert-empty";
    assert_eq!(
        store
            .compare_and_swap(e, None, Some(Vec::new()))
            .await
            .unwrap(),
        Ok(())
    );
    assert_eq!(store.get(e).await.unwrap(), Some(Vec::new()));
    assert_eq!(
        store
            .compare_and_swap(e, None, Some(b"x".to_vec()))
            .await
            .unwrap(),
        Err(Some(Vec::new()))
    );
}

async fn cas_stale_expected_fails_with_current(store: &dyn KvStore) {
    let k = "conf/stale";
    store.put(k, b"v1".to_vec()).await.unwrap();
    assert_eq!(
        store
            .compare_and_swap(k, Some(b"v1"), Some(b"v2".to_vec()))
            .await
            .unwrap(),
        Ok(())
    );
    // v1 is now stale.
    assert_eq!(
        store
            .compare_and_swap(k, Some(b"v1"), Some(b"v3".to_vec()))
            .await
            .unwrap(),
        Err(Some(b"v2".to_vec()))
    );
    assert_eq!(store.get(k).await.unwrap(), Some(b"v2".to_vec()));
    // Expecting a value on an absent key fails with None.
    assert_eq!(
        store
            .compare_and_swap("conf/stale-absent", Some(b"v1"), Some(b"x".to_vec()))
            .await
            .unwrap(),
        Err(None)
    );
    assert_eq!(store.get("conf/stale-absent").await.unwrap(), None);
}

async fn cas_delete(store: &dyn KvStore) {
    let k = "conf/delete";
    store.put(k, b"v".to_vec()).await.unwrap();
    assert_eq!(
        store
            .compare_and_swap(k, Some(b"other"), None)
            .await
            .unwrap(),
        Err(Some(b"v".to_vec()))
    );
    assert_eq!(store.get(k).await.unwrap(), Some(b"v".to_vec()));
    assert_eq!(
        store.compare_and_swap(k, Some(b"v"), None).await.unwrap(),
        Ok(())
    );
    assert_eq!(store.get(k).await.unwrap(), None);
    // Deleting again with a stale expectation reports absence.
    assert_eq!(
        store.compare_and_swap(k, Some(b"v"), None).await.unwrap(),
        Err(None)
    );
    // The key can be re-created after deletion.
    assert_eq!(
        store
            .compare_and_swap(k, None, Some(b"w".to_vec()))
            .await
            .unwrap(),
        Ok(())
    );
    assert_eq!(store.get(k).await.unwrap(), Some(b"w".to_vec()));
}

async fn get_put_remove(store: &dyn KvStore) {
    let k = "conf/gpr";
    assert_eq!(store.get(k).await.unwrap(), None);
    store.put(k, b"1".to_vec()).await.unwrap();
    assert_eq!(store.get(k).await.unwrap(), Some(b"1".to_vec()));
    store.put(k, b"2".to_vec()).await.unwrap();
    assert_eq!(store.get(k).await.unwrap(), Some(b"2".to_vec()));
    store.remove(k).await.unwrap();
    assert_eq!(store.get(k).await.unwrap(), None);
    // Removing an absent key succeeds.
    store.remove(k).await.unwrap();
    // Binary values and non-ASCII keys round-trip.
    let bin: Vec<u8> = (0..=255).collect();
    store.put("conf/gpr/ключ/😀", bin.clone()).await.unwrap();
    assert_eq!(store.get("conf/gpr/ключ/😀").await.unwrap(), Some(bin));
    store.remove("conf/gpr/ключ/😀").await.unwrap();
    // `remove_returning` answers what it deleted, once.
    store.put(k, b"3".to_vec()).await.unwrap();
    assert_eq!(
        store.remove_returning(k).await.unwrap(),
        Some(b"3".to_vec())
    );
    assert_eq!(store.get(k).await.unwrap(), None);
    assert_eq!(store.remove_returning(k).await.unwrap(), None);
    assert!(store.scan_prefix(k, 10).await.unwrap().is_empty());
}

async fn put_then_insert_writes_the_marker_either_way(store: &dyn KvStore) {
    let (m1, m2, k) = ("conf/pti/marker-1", "conf/pti/marker-2", "conf/pti/key");
    assert_eq!(
        store
            .put_then_insert(m1, b"m".to_vec(), k, b"first".to_vec())
            .await
            .unwrap(),
        Ok(())
    );
    assert_eq!(store.get(m1).await.unwrap(), Some(b"m".to_vec()));
    assert_eq!(store.get(k).await.unwrap(), Some(b"first".to_vec()));
    // The key is taken: the insert loses with the current value, the
    // marker is still written (and an existing marker overwritten).
    store.put(m2, b"old".to_vec()).await.unwrap();
    assert_eq!(
        store
            .put_then_insert(m2, Vec::new(), k, b"second".to_vec())
            .await
            .unwrap(),
        Err(Some(b"first".to_vec()))
    );
    assert_eq!(store.get(m2).await.unwrap(), Some(Vec::new()));
    assert_eq!(store.get(k).await.unwrap(), Some(b"first".to_vec()));
    // The same key as marker and key: the marker write, then the insert
    // loses to it.
    let same = "conf/pti/same";
    assert_eq!(
        store
            .put_then_insert(same, b"m".to_vec(), same, b"v".to_vec())
            .await
            .unwrap(),
        Err(Some(b"m".to_vec()))
    );
}

/// 64 tasks at once, 48 distinct keys (16 of them wanted twice), a marker
/// each: 48 winners, every loser sees its key's winner, every marker is
/// written (PostgreSQL: concurrent calls share statements).
async fn put_then_insert_many_at_once(store: Arc<dyn KvStore>) {
    const N: usize = 64;
    const KEYS: usize = 48;
    let barrier = Arc::new(tokio::sync::Barrier::new(N));
    let mut tasks = Vec::new();
    for i in 0..N {
        let store = store.clone();
        let barrier = barrier.clone();
        tasks.push(tokio::spawn(async move {
            let key = format!("conf/many/k{}", i % KEYS);
            let mine = format!("v{i}").into_bytes();
            barrier.wait().await;
            let r = store
                .put_then_insert(
                    &format!("conf/many-marker/{i}"),
                    mine.clone(),
                    &key,
                    mine.clone(),
                )
                .await
                .unwrap();
            (key, mine, r)
        }));
    }
    let mut winners = std::collections::BTreeMap::new();
    let mut losers = Vec::new();
    for t in tasks {
        let (key, mine, r) = t.await.unwrap();
        match r {
            Ok(()) => assert!(winners.insert(key, mine).is_none(), "two winners"),
            Err(current) => losers.push((key, current)),
        }
    }
    assert_eq!(winners.len(), KEYS);
    assert_eq!(losers.len(), N - KEYS);
    for (key, current) in losers {
        assert_eq!(current.as_ref(), winners.get(&key), "{key}");
    }
    for (key, v) in &winners {
        assert_eq!(store.get(key).await.unwrap().as_ref(), Some(v));
    }
    for i in 0..N {
        let m = store.get(&format!("conf/many-marker/{i}")).await.unwrap();
        assert_eq!(m, Some(format!("v{i}").into_bytes()));
    }
}

/// N tasks insert the same absent key at once (by `compare_and_swap`, or by
/// `put_then_insert` with a marker of their own): one wins, every loser
/// sees the winner's value, every marker is written.
async fn cas_race_single_winner(store: Arc<dyn KvStore>, with_marker: bool) {
    const N: usize = 32;
    let key = if with_marker {
        "conf/race-marked"
    } else {
        "conf/race"
    };
    let barrier = Arc::new(tokio::sync::Barrier::new(N));
    let mut tasks = Vec::new();
    for i in 0..N {
        let store = store.clone();
        let barrier = barrier.clone();
        tasks.push(tokio::spawn(async move {
            let mine = format!("task-{i}").into_bytes();
            barrier.wait().await;
            let r = if with_marker {
                let marker = format!("conf/race-marker/{i}");
                let r = store
                    .put_then_insert(&marker, mine.clone(), key, mine.clone())
                    .await
                    .unwrap();
                assert_eq!(store.get(&marker).await.unwrap(), Some(mine.clone()));
                r
            } else {
                store
                    .compare_and_swap(key, None, Some(mine.clone()))
                    .await
                    .unwrap()
            };
            (mine, r)
        }));
    }
    let mut winners = Vec::new();
    let mut losers = Vec::new();
    for t in tasks {
        let (mine, r) = t.await.unwrap();
        match r {
            Ok(()) => winners.push(mine),
            Err(current) => losers.push(current),
        }
    }
    assert_eq!(winners.len(), 1, "exactly one CAS insert must win");
    assert_eq!(losers.len(), N - 1);
    let winner = winners.pop().unwrap();
    for current in losers {
        assert_eq!(
            current.as_ref(),
            Some(&winner),
            "a loser must see the winner's value"
        );
    }
    assert_eq!(store.get(key).await.unwrap(), Some(winner));
}

async fn cas_increment_race_loses_nothing(store: Arc<dyn KvStore>) {
    const TASKS: u64 = 16;
    const PER_TASK: u64 = 16;
    let key = "conf/counter";
    let barrier = Arc::new(tokio::sync::Barrier::new(TASKS as usize));
    let mut tasks = Vec::new();
    for _ in 0..TASKS {
        let store = store.clone();
        let barrier = barrier.clone();
        tasks.push(tokio::spawn(async move {
            barrier.wait().await;
            let mut retries = 0u64;
            for _ in 0..PER_TASK {
                let mut current = store.get(key).await.unwrap();
                loop {
                    let n = current
                        .as_deref()
                        .map(|b| u64::from_be_bytes(b.try_into().unwrap()))
                        .unwrap_or(0);
                    let next = (n + 1).to_be_bytes().to_vec();
                    match store
                        .compare_and_swap(key, current.as_deref(), Some(next))
                        .await
                        .unwrap()
                    {
                        Ok(()) => break,
                        Err(actual) => {
                            retries += 1;
                            current = actual;
                        }
                    }
                }
            }
            retries
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let v = store.get(key).await.unwrap().unwrap();
    assert_eq!(
        u64::from_be_bytes(v.as_slice().try_into().unwrap()),
        TASKS * PER_TASK,
        "no increment may be lost"
    );
}

async fn remove_unchanged_deletes_only_what_is_unchanged(store: &dyn KvStore) {
    for (k, v) in [("conf/ru/a", "1"), ("conf/ru/b", "2"), ("conf/ru/c", "3")] {
        store.put(k, v.as_bytes().to_vec()).await.unwrap();
    }
    let pairs = |p: &[(&str, &str)]| -> Vec<(String, Vec<u8>)> {
        p.iter()
            .map(|(k, v)| (k.to_string(), v.as_bytes().to_vec()))
            .collect()
    };
    let mut gone = store
        .remove_unchanged(pairs(&[
            ("conf/ru/a", "1"),
            ("conf/ru/b", "changed"),
            ("conf/ru/absent", "x"),
        ]))
        .await
        .unwrap();
    gone.sort();
    assert_eq!(gone, vec!["conf/ru/a".to_owned()]);
    assert_eq!(store.get("conf/ru/a").await.unwrap(), None);
    assert_eq!(store.get("conf/ru/b").await.unwrap(), Some(b"2".to_vec()));
    assert_eq!(store.get("conf/ru/c").await.unwrap(), Some(b"3".to_vec()));
    assert!(store.remove_unchanged(Vec::new()).await.unwrap().is_empty());
    let gone = store
        .remove_unchanged(pairs(&[("conf/ru/b", "2"), ("conf/ru/c", "3")]))
        .await
        .unwrap();
    assert_eq!(gone.len(), 2);
}

/// Executors purging the same page at once, in opposite orders: no
/// error (on PostgreSQL: no deadlock), and every key deleted exactly
/// once across them.
async fn remove_unchanged_races_delete_each_key_once(store: Arc<dyn KvStore>) {
    const KEYS: usize = 200;
    for round in 0..5 {
        let mut pairs = Vec::new();
        for i in 0..KEYS {
            let k = format!("conf/rur/{round}/{i:03}");
            store.put(&k, b"v".to_vec()).await.unwrap();
            pairs.push((k, b"v".to_vec()));
        }
        let mut reversed = pairs.clone();
        reversed.reverse();
        let barrier = Arc::new(tokio::sync::Barrier::new(4));
        let mut tasks = Vec::new();
        for p in [pairs.clone(), reversed.clone(), pairs, reversed] {
            let (store, barrier) = (store.clone(), barrier.clone());
            tasks.push(tokio::spawn(async move {
                barrier.wait().await;
                store.remove_unchanged(p).await.unwrap().len()
            }));
        }
        let mut total = 0;
        for t in tasks {
            total += t.await.unwrap();
        }
        assert_eq!(total, KEYS, "round {round}");
        let left = store
            .scan_prefix(&format!("conf/rur/{round}/"), usize::MAX)
            .await
            .unwrap();
        assert!(left.is_empty());
    }
}
