use super::*;
use std::path::Path;
use std::sync::Arc;

#[tokio::test]
async fn durable_across_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nested/db");
    {
        let store = SledStore::open(&path).unwrap();
        assert_eq!(store.backend(), "sled");
        assert_eq!(
            store
                .compare_and_swap("claim/1", None, Some(b"claimed".to_vec()))
                .await
                .unwrap(),
            Ok(())
        );
        store.put("other", b"x".to_vec()).await.unwrap();
        store.put("gone", b"y".to_vec()).await.unwrap();
        store.remove("gone").await.unwrap();
        assert!(store.flushes() >= 1);
    }
    let store = SledStore::open(&path).unwrap();
    assert_eq!(
        store.get("claim/1").await.unwrap().as_deref(),
        Some(&b"claimed"[..])
    );
    assert_eq!(
        store.get("other").await.unwrap().as_deref(),
        Some(&b"x"[..])
    );
    assert_eq!(store.get("gone").await.unwrap(), None);
}

#[tokio::test]
async fn second_open_of_locked_path_is_unavailable() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let _first = SledStore::open(&path).unwrap();
    match SledStore::open(&path) {
        Err(StoreError::Unavailable(msg)) => {
            assert!(msg.contains(&path.display().to_string()), "{msg}");
            assert!(msg.contains("another wop process"), "{msg}");
        }
        other => panic!("expected Unavailable, got {other:?}"),
    }
}

#[tokio::test]
async fn failed_cas_does_not_flush() {
    let dir = tempfile::tempdir().unwrap();
    let store = SledStore::open(&dir.path().join("db")).unwrap();
    store
        .compare_and_swap("k", None, Some(b"1".to_vec()))
        .await
        .unwrap()
        .unwrap();
    let before = store.flushes();
    assert_eq!(
        store
            .compare_and_swap("k", None, Some(b"2".to_vec()))
            .await
            .unwrap(),
        Err(Some(b"1".to_vec()))
    );
    assert_eq!(store.flushes(), before);
}

/// Item: a read must not return another writer's value before it is
/// durable. The writer's flush is slowed down (`flush_delay`) so that
/// its value sits in sled's index, visible but not flushed, for 300 ms;
/// readers poll meanwhile. Without the pending-key rule, the first read
/// that sees the value returns while no flush has completed (the
/// assertion on `flushes_completed` fails); with it, the read returns
/// only after a flush that started after the write completed.
///
/// Limits: this proves ordering against sled's flush, not against a
/// real power loss (the process is not crashed, and the OS page cache
/// is not bypassed); it relies on `flush()` covering every write that
/// completed in the index before it started, as group commit does.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn reads_never_see_values_before_they_are_durable() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(
        SledStore::open(&dir.path().join("db"))
            .unwrap()
            .with_flush_delay(std::time::Duration::from_millis(300)),
    );
    for round in 0..3u64 {
        let key = format!("effect/e{round}");
        let before = store.flushes_completed();
        let writer = {
            let store = store.clone();
            let key = key.clone();
            tokio::spawn(async move {
                store
                    .compare_and_swap(&key, None, Some(b"completed".to_vec()))
                    .await
                    .unwrap()
                    .unwrap();
            })
        };
        // Three ways to read: get, a losing claim, a scan.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            let seen = match round {
                0 => store.get(&key).await.unwrap().is_some(),
                // A CAS that never wins: it reports the current value.
                1 => store
                    .compare_and_swap(&key, Some(b"never"), Some(b"mine".to_vec()))
                    .await
                    .unwrap()
                    .is_err_and(|cur| cur.as_deref() == Some(&b"completed"[..])),
                _ => !store.scan_prefix("effect/e2", 10).await.unwrap().is_empty(),
            };
            if seen {
                assert!(
                    store.flushes_completed() > before,
                    "round {round}: a read returned a value before any flush covered it"
                );
                break;
            }
            assert!(std::time::Instant::now() < deadline);
            tokio::task::yield_now().await;
        }
        writer.await.unwrap();
    }
    assert!(
        store.read_waits() >= 3,
        "reads waited: {}",
        store.read_waits()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn idle_reads_do_not_flush() {
    let dir = tempfile::tempdir().unwrap();
    let store = SledStore::open(&dir.path().join("db")).unwrap();
    store.put("a", b"1".to_vec()).await.unwrap();
    let flushes = store.flushes();
    for _ in 0..100 {
        assert_eq!(store.get("a").await.unwrap(), Some(b"1".to_vec()));
        assert_eq!(store.scan_prefix("", 10).await.unwrap().len(), 1);
    }
    assert_eq!(store.flushes(), flushes);
    assert_eq!(store.read_waits(), 0);
    assert!(store.pending().is_empty());
}

async fn concurrent_inserts(path: &Path, options: SledOptions, n: usize) -> u64 {
    let store = Arc::new(SledStore::open_with(path, options).unwrap());
    let barrier = Arc::new(tokio::sync::Barrier::new(n));
    let mut tasks = Vec::new();
    for i in 0..n {
        let store = store.clone();
        let barrier = barrier.clone();
        tasks.push(tokio::spawn(async move {
            barrier.wait().await;
            store
                .compare_and_swap(&format!("k/{i:03}"), None, Some(i.to_string().into_bytes()))
                .await
                .unwrap()
                .unwrap();
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    store.flushes()
}

async fn assert_all_present(path: &Path, n: usize) {
    let store = SledStore::open(path).unwrap();
    let all = store.scan_prefix("k/", usize::MAX).await.unwrap();
    assert_eq!(all.len(), n);
    for (i, (k, v)) in all.into_iter().enumerate() {
        assert_eq!(k, format!("k/{i:03}"));
        assert_eq!(v, i.to_string().into_bytes());
    }
}

// A current-thread runtime makes the count deterministic: every task
// finishes its CAS and queues for the flush lock while the first flush
// runs on sled's thread pool, so the rest share one further flush.
#[tokio::test(flavor = "current_thread")]
async fn group_commit_shares_flushes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let flushes = concurrent_inserts(&path, SledOptions::default(), 64).await;
    assert!(flushes >= 1);
    assert!(
        flushes < 64,
        "group commit issued {flushes} flushes for 64 writes"
    );
    assert_all_present(&path, 64).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn without_group_commit_every_write_flushes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let flushes = concurrent_inserts(
        &path,
        SledOptions {
            group_commit: false,
            ..SledOptions::default()
        },
        64,
    )
    .await;
    assert_eq!(flushes, 64);
    assert_all_present(&path, 64).await;
}

/// A write that fails for want of room (disk full, quota, file size
/// limit) is `StoreError::Full`, so a node's invocation and a keyed
/// request answer `effect_store_full` (`507`) rather than
/// `internal_error`, with what to do; any other I/O error stays an I/O
/// error. No message names the store's path.
#[test]
fn no_room_is_store_full_and_other_io_errors_are_not() {
    let dir = tempfile::tempdir().unwrap();
    // Tenants read these messages: the store's path on this host stays in
    // the log.
    let here = dir.path().display().to_string();
    let io = |errno| sled::Error::Io(std::io::Error::from_raw_os_error(errno));
    // Each I/O error fails its store for good: a store per error.
    let store = |n: i32| SledStore::open(&dir.path().join(n.to_string())).unwrap();
    for errno in [
        28,  /* ENOSPC */
        122, /* EDQUOT */
        27,  /* EFBIG */
    ] {
        let e = store(errno).write_error("put", io(errno));
        assert!(e.is_full(), "{errno}: {e}");
        assert!(e.to_string().contains("has no room"), "{e}");
        assert!(e.to_string().contains("restart"), "{e}");
        assert!(!e.to_string().contains(&here), "{e}");
    }
    let e = store(5).write_error("put", io(5 /* EIO */));
    assert!(
        !e.is_full() && matches!(e, StoreError::Unavailable(_)),
        "{e}"
    );
    assert!(!e.to_string().contains(&here), "{e}");
    let e = store(0).decode_key(&[0xff, b'k']).unwrap_err();
    assert!(
        matches!(e, StoreError::Corrupt(_)) && !e.to_string().contains(&here),
        "{e}"
    );
}

/// Bytes available on the filesystem holding `dir` now.
fn free_bytes(dir: &Path) -> u64 {
    let s = rustix::fs::statvfs(dir).unwrap();
    s.f_bavail * s.f_frsize
}

fn with_reserve(path: &Path, reserve: u64) -> SledStore {
    let options = SledOptions {
        reserve: Some(reserve),
        ..SledOptions::default()
    };
    SledStore::open_with(path, options).unwrap()
}

/// With less free space on its disk than its reserve (decision 0053), the
/// store refuses every write that could grow it with `StoreError::Full`
/// before it reaches sled (so sled never meets a full disk, which it does
/// not recover from), and writes nothing; reads and removals go on.
/// Checked against the real disk's free space (`statvfs`): a reserve no
/// disk can meet.
#[tokio::test]
async fn below_the_reserve_nothing_grows_and_removals_go_on() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    {
        let store = with_reserve(&path, 0);
        assert_eq!(store.reserve(), 0);
        store.put("old", b"v".to_vec()).await.unwrap();
        store.put("gone", b"v".to_vec()).await.unwrap();
    }
    let store = with_reserve(&path, u64::MAX / 4);
    let refused = [
        store
            .compare_and_swap("new", None, Some(b"claim".to_vec()))
            .await
            .map(|_| ()),
        store.put("new", b"usage".to_vec()).await,
        store
            .compare_and_swap("old", Some(b"v"), Some(b"settled".to_vec()))
            .await
            .map(|_| ()),
        store.put("old", b"over".to_vec()).await,
    ];
    for r in refused {
        let e = r.unwrap_err();
        assert!(e.is_full(), "{e}");
        let msg = e.to_string();
        assert!(
            msg.contains("kept free") && msg.contains("diskReserveBytes"),
            "{msg}"
        );
        assert!(msg.contains("resume by themselves"), "{msg}");
        assert!(!msg.contains(&dir.path().display().to_string()), "{msg}");
    }
    assert_eq!(store.get("new").await.unwrap(), None);
    assert_eq!(store.get("old").await.unwrap().as_deref(), Some(&b"v"[..]));
    // Writes that would change nothing answer as before: a swap that
    // cannot happen reports the current value (a replay finds its claim),
    // and a put of the value already there succeeds.
    assert_eq!(
        store
            .compare_and_swap("old", None, Some(b"claim".to_vec()))
            .await
            .unwrap(),
        Err(Some(b"v".to_vec()))
    );
    assert_eq!(
        store
            .compare_and_swap("new", Some(b"x"), Some(b"y".to_vec()))
            .await
            .unwrap(),
        Err(None)
    );
    store.put("old", b"v".to_vec()).await.unwrap();
    store.remove("gone").await.unwrap();
    assert_eq!(
        store
            .compare_and_swap("old", Some(b"v"), None)
            .await
            .unwrap(),
        Ok(())
    );
    assert_eq!(store.scan_prefix("", 10).await.unwrap(), Vec::new());
}

/// Between the reserve and half of it, a write that creates a key is
/// refused and one that replaces a value goes ahead, so work already
/// admitted (a claim's outcome, a ledger's debit) can finish.
#[tokio::test]
async fn between_the_reserve_and_its_half_only_replacements_go_ahead() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    {
        with_reserve(&path, 0)
            .put("claim", b"claimed".to_vec())
            .await
            .unwrap();
    }
    // Free space is about two thirds of the reserve: below it, and well
    // above its half however the shared disk moves meanwhile.
    let store = with_reserve(&path, free_bytes(dir.path()) / 2 * 3);
    let e = store
        .compare_and_swap("claim2", None, Some(b"claimed".to_vec()))
        .await
        .unwrap_err();
    assert!(e.is_full(), "{e}");
    assert_eq!(
        store
            .compare_and_swap("claim", Some(b"claimed"), Some(b"settled".to_vec()))
            .await
            .unwrap(),
        Ok(())
    );
    assert_eq!(
        store.get("claim").await.unwrap().as_deref(),
        Some(&b"settled"[..])
    );
}

/// The default reserve is a tenth of the disk, within 16 MiB to 256 MiB.
#[test]
fn the_default_reserve_is_a_tenth_of_the_disk_within_bounds() {
    assert_eq!(default_reserve(24 << 20), DEFAULT_RESERVE_MIN);
    assert_eq!(default_reserve(1 << 30), (1 << 30) / 10);
    assert_eq!(default_reserve(1 << 40), DEFAULT_RESERVE_MAX);
    let dir = tempfile::tempdir().unwrap();
    let store = SledStore::open(&dir.path().join("db")).unwrap();
    let size = {
        let s = rustix::fs::statvfs(dir.path()).unwrap();
        s.f_blocks * s.f_frsize
    };
    assert_eq!(store.reserve(), default_reserve(size));
}

/// After an I/O error sled refuses every operation until it is opened
/// again, and a flush that waited for the failed write is never woken
/// (decision 0056). So the store fails for good: every operation is
/// answered at once with the failure, writes waiting for a flush stop
/// waiting, `failure()` says why. Opened again, it works.
#[tokio::test]
async fn after_an_io_error_the_store_fails_fast_until_it_is_opened_again() {
    use std::time::Duration;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    {
        // Flushes that never end, as sled's after its failed write.
        let store = Arc::new(
            SledStore::open(&path)
                .unwrap()
                .with_flush_delay(Duration::from_secs(3600)),
        );
        assert_eq!(store.failure(), None);
        let writers: Vec<_> = ["a", "b", "c"]
            .into_iter()
            .map(|k| {
                let s = store.clone();
                tokio::spawn(async move { s.put(k, b"v".to_vec()).await })
            })
            .collect();
        while store.flushes() == 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let io = sled::Error::Io(std::io::Error::from_raw_os_error(5 /* EIO */));
        let _ = store.write_error("put", io);
        // A liveness bound, not a timing: without the failure they wait
        // for the hour-long flush.
        for w in writers {
            let r = tokio::time::timeout(Duration::from_secs(60), w)
                .await
                .expect("a write waiting for a flush stops waiting")
                .expect("no panic");
            let e = r.expect_err("the write failed");
            assert!(matches!(e, StoreError::Unavailable(_)), "{e}");
        }
        let why = store.failure().expect("the store says it failed");
        assert!(why.contains("EIO") || why.contains("os error 5"), "{why}");
        assert!(why.contains("restart"), "{why}");
        // Every operation, reads included, is answered with the failure
        // without entering sled.
        let fails = |r: Result<(), StoreError>, what: &str| {
            let e = r.expect_err(what);
            assert!(e.to_string().contains("restart"), "{what}: {e}");
        };
        fails(store.get("a").await.map(drop), "get");
        fails(store.put("d", b"v".to_vec()).await, "put");
        fails(store.remove("a").await, "remove");
        let cas = store.compare_and_swap("e", None, Some(b"v".to_vec()));
        fails(cas.await.map(drop), "compare-and-swap");
        fails(store.scan_prefix("", 10).await.map(drop), "scan");
        fails(store.scan_range("a", None, 10).await.map(drop), "range");
    }
    // A read's I/O error fails nothing: sled keeps no error from it.
    {
        let dir = tempfile::tempdir().unwrap();
        let store = SledStore::open(&dir.path().join("db")).unwrap();
        for what in ["get", "scan"] {
            let io = sled::Error::Io(std::io::Error::from_raw_os_error(5));
            assert!(matches!(store.error(what, io), StoreError::Io(_)));
        }
        assert_eq!(store.failure(), None);
        store.put("k", b"v".to_vec()).await.unwrap();
    }
    // Opened again (once the failed store's database, dropped on a
    // thread of its own, let go of the directory), it works.
    let mut reopened = SledStore::open(&path);
    for _ in 0..400 {
        if reopened.is_ok() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
        reopened = SledStore::open(&path);
    }
    let store = reopened.expect("the store opens again");
    assert_eq!(store.failure(), None);
    store.put("d", b"v".to_vec()).await.unwrap();
    assert_eq!(store.get("d").await.unwrap().as_deref(), Some(&b"v"[..]));
}
