use super::super::counting_store::Counting;
use super::super::tests::usage;
use super::super::{MeterOptions, UsageCommit, UsageScope};
use super::*;
use crate::store::KvStore;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;
use wop_core::budget::Prices;

/// A meter on `kv` whose queue is written only by `flush` (or a read).
fn deferred(kv: &Arc<Counting>, cap: u64) -> Meter {
    commit(
        kv,
        cap,
        UsageCommit::Deferred {
            window: Duration::from_secs(3600),
            max_records: 10_000,
        },
    )
}

fn commit(kv: &Arc<Counting>, cap: u64, usage_commit: UsageCommit) -> Meter {
    let options = MeterOptions {
        usage_records_per_run: cap,
        usage_commit,
        ..Default::default()
    };
    let kv: Arc<dyn KvStore> = kv.clone();
    Meter::with_options(kv, Prices::default(), options)
}

fn run(name: &str) -> UsageScope<'_> {
    UsageScope::Run {
        tenant: "tenant",
        run: name,
    }
}

/// The roll-ups of `all`, one record at a time: per run, per pack.
fn one_by_one(all: &[Usage]) -> (BTreeMap<String, Rollup>, BTreeMap<String, Rollup>) {
    super::super::tests::reference(all, None, None)
}

/// A flushed batch of 600 invocations (3 runs × 2 packs, interleaved) is
/// written with one compare-and-swap per run roll-up and pack shard — a
/// handful, not one per invocation, and none read first (the roll-ups
/// are new) — and its roll-ups and records are those of recording the
/// 600 one by one.
#[tokio::test]
async fn a_flushed_batch_writes_each_rollup_once() {
    let kv = Arc::new(Counting::default());
    let m = deferred(&kv, 1000);
    let mut all = Vec::new();
    for i in 0..600 {
        let u = usage(
            ["r1", "r2", "r3"][i % 3],
            ["alpha", "beta"][(i / 3) % 2],
            i as u64,
        );
        m.record(&u, &u.node_id).await.unwrap();
        all.push(u);
    }
    assert_eq!(kv.counts(), (0, 0, 0), "queued, nothing written yet");
    // (`record` read each run's ledger: it was not told the run has none.)
    let gets_before = kv.tap.gets.load(Ordering::Relaxed);
    m.flush().await.unwrap();
    let (swaps, puts, removes) = kv.counts();
    // 6 run-and-pack sums (their run's two may share one swap) and 2
    // pack shards.
    assert!((5..=8).contains(&swaps), "{swaps} compare-and-swaps");
    assert_eq!((puts, removes), (600, 0), "every record kept, once");
    // The roll-ups are new: swapped in without reading them first.
    assert_eq!(
        kv.tap.gets.load(Ordering::Relaxed) - gets_before,
        0,
        "reads"
    );
    assert_eq!(
        m.rollup(UsageScope::All, None).await.unwrap(),
        one_by_one(&all)
    );
    for r in ["r1", "r2", "r3"] {
        let roll = m.run_rollup("tenant", r).await.unwrap().unwrap();
        assert_eq!((roll.invocations(), roll.records_kept), (200, 200));
        assert_eq!(m.usage(run(r), None).await.unwrap().len(), 200);
    }
}

/// A run a flushed batch writes once is created without being remembered
/// (in `wop serve` nearly every such run is an anonymous request's, never
/// written again); when a later batch writes it again, that write starts
/// from one failed swap instead, the roll-up and records come out the
/// same as one by one, and from then on the run is remembered. (A run a
/// batch writes twice, for two packs, is remembered at once, so that its
/// second write needs no extra swap: `a_flushed_batch_writes_each_rollup_once`
/// counts them.)
#[tokio::test]
async fn a_run_written_once_by_a_batch_is_not_remembered_until_written_again() {
    let kv = Arc::new(Counting::default());
    let m = deferred(&kv, 1000);
    let key = |r: &str| keys::run_rollup("tenant", r);
    let first = usage("once", "alpha", 1);
    m.record(&first, &first.node_id).await.unwrap();
    m.flush().await.unwrap();
    assert!(!m.rollups.run_last.holds(&key("once")), "created: not kept");

    let again = usage("once", "alpha", 2);
    m.record(&again, &again.node_id).await.unwrap();
    let (swaps, _, _) = kv.counts();
    m.flush().await.unwrap();
    // The run's failed swap (it was not remembered) and its write; the
    // pack shard's write (remembered: this process wrote it before).
    assert_eq!(kv.counts().0 - swaps, 3, "compare-and-swaps");
    assert!(m.rollups.run_last.holds(&key("once")), "updated: kept");
    let roll = m.run_rollup("tenant", "once").await.unwrap().unwrap();
    assert_eq!((roll.invocations(), roll.records_kept), (2, 2));
    assert_eq!(m.usage(run("once"), None).await.unwrap().len(), 2);
    assert_eq!(
        m.rollup(UsageScope::All, None).await.unwrap(),
        one_by_one(&[first, again])
    );
}

/// A run's batch crossing its cap keeps exactly the cap's worth of
/// records; once this process knows the run is full, a later batch of it
/// writes no record at all.
#[tokio::test]
async fn a_batch_keeps_exactly_the_runs_first_records_up_to_its_cap() {
    let kv = Arc::new(Counting::default());
    let m = deferred(&kv, 5);
    let mut all = Vec::new();
    for i in 0..12 {
        all.push(usage("a", ["p", "q"][i % 2], i as u64));
    }
    all.extend((0..3).map(|i| usage("b", "p", i)));
    for u in &all {
        m.record(u, &u.node_id).await.unwrap();
    }
    m.flush().await.unwrap();
    assert_eq!(m.usage(run("a"), None).await.unwrap().len(), 5);
    assert_eq!(m.usage(run("b"), None).await.unwrap().len(), 3);
    let a = m.run_rollup("tenant", "a").await.unwrap().unwrap();
    assert_eq!((a.invocations(), a.records_kept), (12, 5));
    let (_, puts_before, removes_before) = kv.counts();
    for i in 12..16 {
        let u = usage("a", "p", i);
        m.record(&u, &u.node_id).await.unwrap();
        all.push(u);
    }
    m.flush().await.unwrap();
    let (_, puts, removes) = kv.counts();
    assert_eq!((puts, removes), (puts_before, removes_before));
    let a = m.run_rollup("tenant", "a").await.unwrap().unwrap();
    assert_eq!((a.invocations(), a.records_kept), (16, 5));
    assert_eq!(m.usage(run("a"), None).await.unwrap().len(), 5);
    assert_eq!(
        m.rollup(UsageScope::All, None).await.unwrap(),
        one_by_one(&all)
    );
}

/// Another process filled the run: this one, not knowing, writes its
/// batch's records with the roll-ups, then removes them all.
#[tokio::test]
async fn records_written_past_another_processs_cap_are_removed() {
    let kv = Arc::new(Counting::default());
    let (a, b) = (deferred(&kv, 3), deferred(&kv, 3));
    for i in 0..3 {
        let u = usage("r", "p", i);
        b.record(&u, &u.node_id).await.unwrap();
    }
    b.flush().await.unwrap();
    for i in 3..7 {
        let u = usage("r", "p", i);
        a.record(&u, &u.node_id).await.unwrap();
    }
    let (_, puts_before, _) = kv.counts();
    a.flush().await.unwrap();
    let (_, puts, removes) = kv.counts();
    assert_eq!((puts - puts_before, removes), (3, 3));
    let kept = a.usage(run("r"), None).await.unwrap();
    let mut fuel: Vec<u64> = kept.iter().map(|u| u.fuel_consumed).collect();
    fuel.sort();
    assert_eq!(fuel, [1000, 1001, 1002], "the run's first three");
    let roll = a.run_rollup("tenant", "r").await.unwrap().unwrap();
    assert_eq!((roll.invocations(), roll.records_kept), (7, 3));
}

/// A run whose roll-up was purged after this process saw it full starts
/// over: its next invocations keep their records again, on both commits.
#[tokio::test]
async fn a_run_purged_since_it_was_full_keeps_its_records_again() {
    for usage_commit in [UsageCommit::Durable, UsageCommit::DEFERRED] {
        let kv = Arc::new(Counting::default());
        let m = commit(&kv, 2, usage_commit);
        for i in 0..3 {
            let u = usage("r", "p", i);
            m.record(&u, &u.node_id).await.unwrap();
        }
        m.flush().await.unwrap();
        assert_eq!(m.usage(run("r"), None).await.unwrap().len(), 2);
        m.purge(wop_core::time::now_ms() + 1).await.unwrap();
        assert!(m.run_rollup("tenant", "r").await.unwrap().is_none());
        for i in 3..5 {
            let u = usage("r", "p", i);
            m.record(&u, &u.node_id).await.unwrap();
        }
        m.flush().await.unwrap();
        let roll = m.run_rollup("tenant", "r").await.unwrap().unwrap();
        assert_eq!(
            (roll.invocations(), roll.records_kept),
            (2, 2),
            "{usage_commit:?}"
        );
        let kept = m.usage(run("r"), None).await.unwrap();
        assert_eq!(kept.len(), 2, "{usage_commit:?}: the records it kept");
    }
}

/// A batch is summed per run and pack in the order it was recorded: each
/// run's groups, one per pack (and version) of it, hold their members in
/// order, and only the groups of a run with more than one pack in the
/// batch share its roll-up.
#[test]
fn a_batch_is_grouped_per_run_and_pack_in_order() {
    let at = |run: &str, pack: &str, i: u64, version: &str| {
        let mut usage = usage(run, pack, i);
        usage.pack_version = version.to_owned();
        Queued {
            usage,
            dropped: 0,
            at_ms: 100 + i,
        }
    };
    let batch = [
        at("r1", "alpha", 0, "1.0.0"),
        at("r2", "alpha", 1, "1.0.0"),
        at("r1", "beta", 2, "1.0.0"),
        at("r1", "alpha", 3, "1.0.0"),
        at("r1", "alpha", 4, "2.0.0"),
        at("r3", "beta", 5, "1.0.0"),
        at("r1", "beta", 6, "1.0.0"),
    ];
    let sums = Sums::of(&batch, "USD");
    let got: Vec<_> = sums
        .runs
        .iter()
        .map(|g| {
            let u = g.first;
            let id = format!("{}/{}@{}", u.run_id, u.pack, u.pack_version);
            (
                id,
                g.members.clone(),
                g.shares_key,
                g.at_ms,
                g.delta.invocations,
            )
        })
        .collect();
    let want = |id: &str, m: &[usize], shared: bool, at: u64| {
        (id.to_owned(), m.to_vec(), shared, at, m.len() as u64)
    };
    assert_eq!(
        got,
        [
            want("r1/alpha@1.0.0", &[0, 3], true, 103),
            want("r2/alpha@1.0.0", &[1], false, 101),
            want("r1/beta@1.0.0", &[2, 6], true, 106),
            want("r1/alpha@2.0.0", &[4], true, 104),
            want("r3/beta@1.0.0", &[5], false, 105),
        ]
    );
    assert_eq!(sums.runs[0].run_key, keys::run_rollup("tenant", "r1"));
    let packs: Vec<_> = sums
        .packs
        .iter()
        .map(|p| {
            (
                p.first.pack.as_str(),
                p.first.pack_version.as_str(),
                p.delta.invocations,
            )
        })
        .collect();
    assert_eq!(
        packs,
        [
            ("alpha", "1.0.0", 3),
            ("beta", "1.0.0", 3),
            ("alpha", "2.0.0", 1)
        ]
    );
}
