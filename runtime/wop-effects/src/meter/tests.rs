use super::stored::{Record, StoredUsage, pack_label};
use super::*;
use crate::store::{MemoryStore, SledStore};
use std::collections::BTreeMap;
use wop_core::model::{HostCallRecord, Usage};

pub(super) fn usage(run: &str, pack: &str, i: u64) -> Usage {
    Usage {
        pack: pack.into(),
        pack_version: "1.0.0".into(),
        type_id: "hello".into(),
        tenant_id: "tenant".into(),
        run_id: run.into(),
        node_id: format!("node-{i}"),
        attempt: 1,
        fuel_limit: 1_000_000,
        fuel_consumed: 1000 + i,
        wall_time_us: 20 + i,
        tool_calls: i % 3,
        effect_claims: i % 2,
        egress_bytes_in: 7,
        log_bytes: 11,
        cost: 0.25 * (i % 4) as f64,
        currency: "USD".into(),
        host_calls: [("log".to_owned(), 2)].into(),
        host_call_breakdown: (0..40)
            .map(|j| HostCallRecord {
                interface: "log".into(),
                target: Some("t".repeat(300)),
                fuel_before: j,
                wall_us: 1,
            })
            .collect(),
        ..Default::default()
    }
}

/// The roll-ups as the old meter computed them: over every record.
pub(super) fn reference(
    all: &[Usage],
    run: Option<&str>,
    pack: Option<&str>,
) -> (BTreeMap<String, Rollup>, BTreeMap<String, Rollup>) {
    let mut by_run: BTreeMap<String, Rollup> = BTreeMap::new();
    let mut by_pack: BTreeMap<String, Rollup> = BTreeMap::new();
    for u in all {
        if run.is_some_and(|r| r != u.run_id) || pack.is_some_and(|p| p != u.pack) {
            continue;
        }
        // Across tenants (no run), runs are labelled `<tenant>/<run>`.
        let run_label = match run {
            Some(_) => u.run_id.clone(),
            None => format!("{}/{}", u.tenant_id, u.run_id),
        };
        for (map, key) in [(&mut by_run, run_label), (&mut by_pack, pack_label(u))] {
            map.entry(key)
                .or_insert_with(|| Rollup {
                    currency: "USD".into(),
                    ..Default::default()
                })
                .add(u);
        }
    }
    (by_run, by_pack)
}

/// One run of the tests' tenant, or every run.
fn scope(run: Option<&str>) -> UsageScope<'_> {
    match run {
        Some(run) => UsageScope::Run {
            tenant: "tenant",
            run,
        },
        None => UsageScope::All,
    }
}

async fn record_all(meter: &Meter, plan: &[(&str, &str, u64)]) -> Vec<Usage> {
    let mut all = Vec::new();
    for (run, pack, n) in plan {
        for i in 0..*n {
            let u = usage(run, pack, i);
            meter.record(&u, &u.node_id).await.unwrap();
            all.push(u);
        }
    }
    all
}

/// Every tenant's runs, a page at a time: the pages joined are the whole
/// roll-up (with and without a pack filter), each page at most its limit,
/// the packs' totals on every page, and the limit clamped to 1..=MAX.
#[tokio::test]
async fn runs_across_tenants_are_read_a_page_at_a_time() {
    let kv: Arc<dyn KvStore> = Arc::new(MemoryStore::new());
    let meter = Meter::new(kv, Prices::default());
    let mut plan: Vec<(String, &str, u64)> =
        (0..7).map(|i| (format!("run-{i}"), "alpha", 2)).collect();
    plan.push(("run-3".into(), "beta", 1));
    plan.push(("only-beta".into(), "beta", 1));
    let plan: Vec<(&str, &str, u64)> = plan.iter().map(|(r, p, n)| (r.as_str(), *p, *n)).collect();
    let all = record_all(&meter, &plan).await;
    for pack in [None, Some("alpha"), Some("beta")] {
        let (whole, packs) = reference(&all, None, pack);
        let mut joined = BTreeMap::new();
        let mut after: Option<String> = None;
        let mut pages = 0;
        loop {
            let p = meter.rollup_page(pack, after.as_deref(), 3).await.unwrap();
            assert!(p.runs.len() <= 3, "{pack:?}: {:?}", p.runs);
            assert_eq!(p.packs, packs, "{pack:?}");
            pages += 1;
            joined.extend(p.runs);
            match p.next {
                Some(n) => after = Some(n),
                None => break,
            }
        }
        assert_eq!(joined, whole, "{pack:?}");
        assert!(pages >= whole.len().div_ceil(3), "{pack:?}: {pages} pages");
    }
    let one = meter.rollup_page(None, None, 0).await.unwrap();
    assert_eq!(one.runs.len(), 1);
    assert!(one.next.is_some());
    let most = meter.rollup_page(None, None, usize::MAX).await.unwrap();
    assert_eq!(most.runs.len(), 8);
    assert_eq!(most.next, None);
}

/// The direct encoding is the tree encoding's JSON, with and without a
/// dropped-breakdown count, for a full and an empty usage.
#[test]
fn stored_usage_direct_encoding_is_the_tree_encoding() {
    for (usage, dropped) in [
        (usage("run", "alpha", 3), 0),
        (usage("run", "alpha", 3), 7),
        (Usage::default(), 0),
        (Usage::default(), 2),
    ] {
        let s = StoredUsage {
            usage,
            host_call_breakdown_dropped: dropped,
        };
        let direct: serde_json::Value = serde_json::from_slice(&s.encode()).unwrap();
        let tree: serde_json::Value = serde_json::from_slice(&s.encode_tree()).unwrap();
        assert_eq!(direct, tree);
        assert_eq!(StoredUsage::decode(&s.encode()).unwrap().usage, s.usage);
    }
}

#[test]
fn stored_usage_round_trips_compactly() {
    let mut u = usage("run", "alpha", 3);
    u.host_call_breakdown.truncate(2);
    let s = StoredUsage {
        usage: u.clone(),
        host_call_breakdown_dropped: 0,
    };
    let compact = s.encode();
    assert!(compact.len() < serde_json::to_vec(&u).unwrap().len());
    assert_eq!(StoredUsage::decode(&compact).unwrap().usage, u);
    // A record of the previous version (plain `Usage`) still reads.
    let old = serde_json::to_vec(&u).unwrap();
    assert_eq!(StoredUsage::decode(&old).unwrap().usage, u);
    let zero = StoredUsage::default();
    assert_eq!(zero.encode(), b"{}");
    assert_eq!(StoredUsage::decode(b"{}").unwrap().usage, Usage::default());
    assert!(StoredUsage::decode(b"[1]").is_none());
}

#[test]
fn run_rollup_round_trips_compactly() {
    let mut r = RunRollup {
        run_id: "r".into(),
        records_kept: 1,
        last_at_ms: 5,
        ..Default::default()
    };
    let mut roll = Rollup {
        currency: "USD".into(),
        ..Default::default()
    };
    roll.add(&usage("r", "alpha", 1));
    r.by_pack.insert("alpha@1.0.0".into(), roll);
    r.by_pack.insert("zero@1".into(), Rollup::default());
    let bytes = r.encode();
    assert!(bytes.len() < serde_json::to_vec(&r).unwrap().len());
    assert_eq!(RunRollup::decode(&bytes).unwrap(), r);
    assert_eq!(
        RunRollup::decode(&serde_json::to_vec(&r).unwrap()).unwrap(),
        r
    );
    assert!(RunRollup::decode(b"{\"byPack\":{\"a\":1}}").is_none());
}

#[tokio::test]
async fn rollups_exact_records_capped_bounded_and_purged() {
    let kv: Arc<dyn KvStore> = Arc::new(MemoryStore::new());
    let meter = Meter::with_options(
        kv.clone(),
        Prices::default(),
        MeterOptions {
            usage_records_per_run: 5,
            ..Default::default()
        },
    );
    let long_run = "r".repeat(400);
    let plan = [
        ("run/1", "alpha", 12),
        ("run", "beta", 3),
        ("run/1", "beta", 2),
        (long_run.as_str(), "alpha", 1),
    ];
    let all = record_all(&meter, &plan).await;
    // Roll-ups equal the old full computation, for every filter.
    for (run, pack) in [
        (None, None),
        (Some("run/1"), None),
        (Some("run"), None),
        (None, Some("alpha")),
        (None, Some("beta")),
        (Some("run/1"), Some("beta")),
        (Some(long_run.as_str()), None),
        (Some("nope"), None),
    ] {
        assert_eq!(
            meter.rollup(scope(run), pack).await.unwrap(),
            reference(&all, run, pack),
            "rollup({run:?}, {pack:?})"
        );
    }
    // The cap: the first 5 invocations of a run are kept; one run's
    // prefix never reaches another's ("run" vs "run/1").
    assert_eq!(
        meter.usage(scope(Some("run/1")), None).await.unwrap().len(),
        5
    );
    assert_eq!(
        meter.usage(scope(Some("run")), None).await.unwrap().len(),
        3
    );
    assert_eq!(
        meter.usage(scope(None), Some("beta")).await.unwrap().len(),
        3
    );
    let r = meter.run_rollup("tenant", "run/1").await.unwrap().unwrap();
    assert_eq!((r.invocations(), r.records_kept), (14, 5));
    // Bounded size: 40 breakdown entries of 300-byte targets and a
    // 400-byte run id are cut.
    let stored = kv.scan_prefix("usage/", usize::MAX).await.unwrap();
    let max = stored.iter().map(|(_, v)| v.len()).max().unwrap();
    assert!(max < 2000, "a stored usage record has {max} bytes");
    let kept = meter
        .usage(scope(Some(long_run.as_str())), None)
        .await
        .unwrap();
    assert_eq!(kept.len(), 1);
    assert_eq!(kept[0].host_call_breakdown.len(), 8);
    assert!(kept[0].run_id.len() <= 128 && kept[0].run_id.ends_with('…'));
    let raw: serde_json::Value = serde_json::from_slice(&stored[0].1).unwrap();
    assert_eq!(raw["hostCallBreakdownDropped"], 32);
    assert!(
        stored.iter().all(|(k, _)| k.len() < 200),
        "keys are bounded"
    );
    // Roll-ups never read usage records: deleting them changes nothing.
    let before = meter.rollup(scope(None), None).await.unwrap();
    for (k, _) in &stored {
        kv.remove(k).await.unwrap();
    }
    assert_eq!(meter.rollup(scope(None), None).await.unwrap(), before);
    // Retention.
    let all = record_all(&meter, &plan).await;
    assert_eq!(meter.purge(0).await.unwrap(), 0);
    let n = meter.purge(wop_core::time::now_ms() + 1).await.unwrap();
    // Round two kept only what the caps still allowed: run/1 was full,
    // "run" had 2 of 5 left, the long run 4.
    assert_eq!(n, 2 + 1 + 3, "usage records and the 3 idle runs' roll-ups");
    assert!(meter.usage(scope(None), None).await.unwrap().is_empty());
    let (by_run, by_pack) = meter.rollup(scope(None), None).await.unwrap();
    assert!(by_run.is_empty(), "idle runs' roll-ups are purged");
    // Pack totals are all-time: both rounds of records.
    let mut twice = all.clone();
    twice.extend(all);
    assert_eq!(by_pack, reference(&twice, None, None).1);
}

async fn concurrent_records_are_exact(kv: Arc<dyn KvStore>) {
    const TASKS: u64 = 32;
    let meter = Meter::new(kv, Prices::default());
    let barrier = Arc::new(tokio::sync::Barrier::new(TASKS as usize));
    let mut tasks = Vec::new();
    for i in 0..TASKS {
        let meter = meter.clone();
        let barrier = barrier.clone();
        tasks.push(tokio::spawn(async move {
            let u = usage("shared-run", "alpha", i);
            barrier.wait().await;
            meter.record(&u, &u.node_id).await.unwrap();
            u
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.push(t.await.unwrap());
    }
    let got = meter.rollup(scope(None), None).await.unwrap();
    let want = reference(&all, None, None);
    assert_eq!(got.0["tenant/shared-run"].invocations, TASKS);
    assert_eq!(
        got.0["tenant/shared-run"].fuel,
        want.0["tenant/shared-run"].fuel
    );
    assert_eq!(got.1["alpha@1.0.0"].invocations, TASKS);
    assert_eq!(got.1["alpha@1.0.0"].fuel, want.1["alpha@1.0.0"].fuel);
    assert_eq!(
        meter
            .usage(scope(Some("shared-run")), None)
            .await
            .unwrap()
            .len(),
        32
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_records_are_exact_on_sled() {
    let dir = tempfile::tempdir().unwrap();
    let kv = Arc::new(SledStore::open(&dir.path().join("db")).unwrap());
    concurrent_records_are_exact(kv).await;
}

#[cfg(feature = "postgres")]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_records_are_exact_on_postgres() {
    let Some(url) = crate::store::conformance::postgres_test_url("meter_records") else {
        return;
    };
    let kv = Arc::new(crate::store::PostgresStore::connect(&url).await.unwrap());
    concurrent_records_are_exact(kv).await;
}

/// Charges `attempts` tool calls against run `run`; returns how many
/// were allowed.
async fn charge(meter: &Meter, run: &str, attempts: u64) -> u64 {
    let mut ok = 0;
    for _ in 0..attempts {
        let (_, verdict) = meter
            .charge_tool_call("tenant", run, "node", "t:x")
            .await
            .unwrap();
        if verdict.is_ok() {
            ok += 1;
        }
    }
    ok
}

const BUDGET: u64 = 25;

fn budget() -> RunBudget {
    RunBudget {
        max_tool_calls: Some(BUDGET),
        ..Default::default()
    }
}

/// The same budget math on the embedded store: 8 meters over one sled
/// store, 32 tasks, 320 charges, exactly 25 allowed.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn budget_is_shared_by_meters_on_sled() {
    let dir = tempfile::tempdir().unwrap();
    let kv: Arc<dyn KvStore> = Arc::new(SledStore::open(&dir.path().join("db")).unwrap());
    let meters: Vec<Meter> = (0..8)
        .map(|_| Meter::new(kv.clone(), Prices::default()))
        .collect();
    meters[0]
        .open_run("tenant", "run-s", &budget(), false)
        .await
        .unwrap();
    let mut tasks = Vec::new();
    for t in 0..32 {
        let meter = meters[t % 8].clone();
        tasks.push(tokio::spawn(
            async move { charge(&meter, "run-s", 10).await },
        ));
    }
    let mut allowed = 0;
    for t in tasks {
        allowed += t.await.unwrap();
    }
    assert_eq!(allowed, BUDGET);
}

/// Several executors (each its own `Meter` and connection pool) on one
/// PostgreSQL store, in concurrent tasks, charge one run's budget of 25
/// tool calls 320 times: exactly 25 succeed.
#[cfg(feature = "postgres")]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn budget_is_shared_by_meters_on_postgres() {
    let Some(url) = crate::store::conformance::postgres_test_url("budget_tasks") else {
        return;
    };
    let mut meters = Vec::new();
    for _ in 0..8 {
        let kv = Arc::new(crate::store::PostgresStore::connect(&url).await.unwrap());
        meters.push(Meter::new(kv, Prices::default()));
    }
    meters[0]
        .open_run("tenant", "run-b", &budget(), false)
        .await
        .unwrap();
    let barrier = Arc::new(tokio::sync::Barrier::new(32));
    let mut tasks = Vec::new();
    for t in 0..32 {
        let meter = meters[t % 8].clone();
        let barrier = barrier.clone();
        tasks.push(tokio::spawn(async move {
            barrier.wait().await;
            charge(&meter, "run-b", 10).await
        }));
    }
    let mut allowed = 0;
    for t in tasks {
        allowed += t.await.unwrap();
    }
    assert_eq!(allowed, BUDGET);
    let ledger = meters[3].ledger("tenant", "run-b").await.unwrap().unwrap();
    assert_eq!(ledger.consumed.tool_calls, BUDGET);
    assert_eq!(ledger.exhausted, Some(Dimension::ToolCalls));
}

/// The same across processes: this test binary re-runs itself as 4
/// workers (the ignored test below), each with its own store, charging
/// 15 times in 4 tasks; exactly 25 of the 240 charges succeed.
#[cfg(feature = "postgres")]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn budget_is_shared_by_processes_on_postgres() {
    let Some(url) = crate::store::conformance::postgres_test_url("budget_procs") else {
        return;
    };
    let kv = Arc::new(crate::store::PostgresStore::connect(&url).await.unwrap());
    let meter = Meter::new(kv, Prices::default());
    meter
        .open_run("tenant", "run-p", &budget(), false)
        .await
        .unwrap();
    let exe = std::env::current_exe().unwrap();
    let mut children = Vec::new();
    for _ in 0..4 {
        children.push(
            tokio::process::Command::new(&exe)
                .args([
                    "--exact",
                    "meter::tests::budget_worker_process",
                    "--ignored",
                    "--nocapture",
                    "--test-threads=1",
                ])
                .env("WOP_BUDGET_WORKER_URL", &url)
                .output(),
        );
    }
    let mut allowed = 0;
    for c in children {
        let out = c.await.unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "worker failed: {stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let n: u64 = stdout
            .lines()
            .find_map(|l| l.split("WORKER_ALLOWED ").nth(1))
            .unwrap_or_else(|| panic!("no count from worker: {stdout}"))
            .trim()
            .parse()
            .unwrap();
        allowed += n;
    }
    assert_eq!(allowed, BUDGET);
    let ledger = meter.ledger("tenant", "run-p").await.unwrap().unwrap();
    assert_eq!(ledger.consumed.tool_calls, BUDGET);
}

/// The worker of `budget_is_shared_by_processes_on_postgres`; does
/// nothing unless started by it.
#[cfg(feature = "postgres")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a worker process started by budget_is_shared_by_processes_on_postgres"]
async fn budget_worker_process() {
    let Ok(url) = std::env::var("WOP_BUDGET_WORKER_URL") else {
        return;
    };
    let kv = Arc::new(crate::store::PostgresStore::connect(&url).await.unwrap());
    let meter = Meter::new(kv, Prices::default());
    let mut tasks = Vec::new();
    for _ in 0..4 {
        let meter = meter.clone();
        tasks.push(tokio::spawn(
            async move { charge(&meter, "run-p", 15).await },
        ));
    }
    let mut allowed = 0;
    for t in tasks {
        allowed += t.await.unwrap();
    }
    println!("WORKER_ALLOWED {allowed}");
}

/// The hand-written compact form is exactly the serde form without its
/// default-valued fields (every field set, so a misspelt name shows).
#[test]
fn compact_run_rollup_is_the_serde_form_without_defaults() {
    let full_rollup = Rollup {
        invocations: 1,
        fuel: 2,
        wall_time_us: 3,
        tool_calls: 4,
        effect_claims: 5,
        egress_bytes: 6,
        log_bytes: 7,
        cost: 8.5,
        currency: "USD".into(),
    };
    let mut r = RunRollup {
        run_id: "r".into(),
        records_kept: 3,
        last_at_ms: 9,
        ..Default::default()
    };
    r.by_pack.insert("alpha@1".into(), full_rollup);
    r.by_pack.insert("zero@1".into(), Rollup::default());
    let compact: serde_json::Value = serde_json::from_slice(&r.encode()).unwrap();
    let zeroish = |v: &serde_json::Value| {
        v.as_f64() == Some(0.0)
            || v.as_str() == Some("")
            || v.as_object().is_some_and(|o| o.is_empty())
    };
    let mut want = serde_json::to_value(&r).unwrap();
    for p in want["byPack"].as_object_mut().unwrap().values_mut() {
        p.as_object_mut().unwrap().retain(|_, v| !zeroish(v));
    }
    want.as_object_mut().unwrap().retain(|_, v| !zeroish(v));
    assert_eq!(compact, want);
    assert_eq!(RunRollup::decode(&r.encode()).unwrap(), r);
    let empty = RunRollup::default();
    assert_eq!(empty.encode(), b"{}");
    assert_eq!(RunRollup::decode(b"{}").unwrap(), empty);
}

/// Concurrent recorders of one run in one process: exact roll-ups, and
/// exactly the first `cap` records kept, with group commit in between.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_recorders_of_one_run_are_exact() {
    let meter = Meter::with_options(
        Arc::new(MemoryStore::new()),
        Prices::default(),
        MeterOptions {
            usage_records_per_run: 100,
            ..Default::default()
        },
    );
    let mut tasks = Vec::new();
    for t in 0..32 {
        let meter = meter.clone();
        tasks.push(tokio::spawn(async move {
            for i in 0..20 {
                let u = usage("hot", "alpha", t * 100 + i);
                meter.record(&u, &u.node_id).await.unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let (by_run, by_pack) = meter.rollup(scope(Some("hot")), None).await.unwrap();
    let run = &by_run["hot"];
    assert_eq!(run.invocations, 640);
    assert_eq!(by_pack.values().map(|r| r.invocations).sum::<u64>(), 640);
    assert_eq!(
        meter.usage(scope(Some("hot")), None).await.unwrap().len(),
        100
    );
}

/// Two meters on one store (two processes, each starting its roll-up
/// updates from what it wrote last) take turns on one run: each one's
/// starting point is stale every time, the compare-and-swap notices, and
/// the roll-ups stay exact.
#[tokio::test]
async fn meters_taking_turns_on_one_run_stay_exact() {
    let kv: Arc<dyn KvStore> = Arc::new(MemoryStore::new());
    let meters = [
        Meter::new(kv.clone(), Prices::default()),
        Meter::new(kv.clone(), Prices::default()),
    ];
    let mut all = Vec::new();
    for i in 0..20 {
        let u = usage("turns", "alpha", i);
        // 0, 1, 1, 0, 0, 1, 1, ...: both stale and fresh starting points.
        let m = &meters[usize::from((i + 1) % 4 >= 2)];
        m.record(&u, &u.node_id).await.unwrap();
        all.push(u);
    }
    let want = reference(&all, None, None);
    for m in &meters {
        let got = m.rollup(scope(None), None).await.unwrap();
        assert_eq!(got.0["tenant/turns"].invocations, 20);
        assert_eq!(got.0["tenant/turns"].fuel, want.0["tenant/turns"].fuel);
        assert_eq!(got.1["alpha@1.0.0"].invocations, 20);
        assert_eq!(got.1["alpha@1.0.0"].fuel, want.1["alpha@1.0.0"].fuel);
    }
}

/// One flush makes an invocation's two roll-ups and its usage record
/// durable together on sled (group commit; it took 2.4 on average when
/// the record waited for the roll-ups), also once the run is past its
/// cap; and the cap still keeps exactly the first records when a second
/// meter (as another process would) records past it without having seen
/// the run: its record is written, then removed.
#[tokio::test]
async fn one_flush_per_recorded_invocation_on_sled() {
    let dir = tempfile::tempdir().unwrap();
    let sled = Arc::new(SledStore::open(&dir.path().join("db")).unwrap());
    let kv: Arc<dyn KvStore> = sled.clone();
    let options = MeterOptions {
        usage_records_per_run: 3,
        ..Default::default()
    };
    let a = Meter::with_options(kv.clone(), Prices::default(), options);
    let b = Meter::with_options(kv.clone(), Prices::default(), options);
    for i in 0..5 {
        let before = sled.flushes();
        let u = usage("run/flush", "alpha", i);
        a.record(&u, &u.node_id).await.unwrap();
        assert_eq!(sled.flushes() - before, 1, "invocation {i}");
    }
    let u = usage("run/flush", "alpha", 9);
    b.record(&u, &u.node_id).await.unwrap();
    let kept = a.usage(scope(Some("run/flush")), None).await.unwrap();
    assert_eq!(kept.len(), 3);
    let (_, by_pack) = a.rollup(scope(Some("run/flush")), None).await.unwrap();
    assert_eq!(by_pack.values().map(|r| r.invocations).sum::<u64>(), 6);
}

/// The stored copy of a usage record as it was built before identifiers
/// were cut in place: every identifier and map rebuilt.
fn bounded_as_before(o: &MeterOptions, u: &Usage, dropped: u64) -> (Usage, u64) {
    // The cut as it was: a new string, marked with `…`.
    let cut = |s: &str, max: usize| {
        if s.len() <= max {
            return s.to_owned();
        }
        let mut end = max.saturating_sub('…'.len_utf8());
        while end > 0 && !s.is_char_boundary(end) {
            end -= 1;
        }
        format!("{}…", &s[..end])
    };
    let id = |s: &str| cut(s, o.identifier_bytes);
    let mut v = u.clone();
    for s in [
        &mut v.pack,
        &mut v.pack_version,
        &mut v.type_id,
        &mut v.tenant_id,
        &mut v.run_id,
        &mut v.node_id,
        &mut v.currency,
    ] {
        *s = id(s);
    }
    v.host_calls = u.host_calls.iter().map(|(k, n)| (id(k), *n)).collect();
    let mut tools = BTreeMap::new();
    let mut other = 0;
    for (i, (k, n)) in u.tool_calls_by_id.iter().enumerate() {
        if i < o.tool_ids {
            *tools.entry(id(k)).or_insert(0) += n;
        } else {
            other += n;
        }
    }
    if other > 0 {
        *tools.entry("(other)".to_owned()).or_insert(0) += other;
    }
    v.tool_calls_by_id = tools;
    let dropped = dropped
        + u.host_call_breakdown
            .len()
            .saturating_sub(o.breakdown_entries) as u64;
    v.host_call_breakdown.truncate(o.breakdown_entries);
    for r in &mut v.host_call_breakdown {
        r.interface = id(&r.interface);
        r.target = r
            .target
            .as_deref()
            .map(|t| cut(t, o.identifier_bytes.min(64)));
    }
    (v, dropped)
}

/// A stored record cuts exactly what is over its bound, and copies the
/// rest as it is: identifiers, host-call interfaces and tool ids over the
/// identifier bound (on a character boundary), tool ids past the count,
/// breakdown entries past theirs — the same record as the construction
/// that rebuilt everything.
#[test]
fn a_stored_record_cuts_what_is_over_its_bounds_and_nothing_else() {
    let meter = Meter::new(Arc::new(MemoryStore::new()), Prices::default());
    let o = MeterOptions::default();
    let long = |c: char| std::iter::repeat_n(c, 200).collect::<String>();
    let within = usage("run", "alpha", 1);
    let mut over = usage(&long('r'), &long('é'), 2);
    over.node_id = long('n');
    over.host_calls.insert(long('h'), 3);
    over.tool_calls_by_id = (0..40u64).map(|i| (format!("tool-{i:02}"), i)).collect();
    over.tool_calls_by_id
        .insert(format!("tool-00{}", long('€')), 5);
    over.host_call_breakdown[0].interface = long('i');
    let mut few_long_tools = usage("run", "alpha", 3);
    few_long_tools.tool_calls_by_id = [(long('t'), 1), ("short".to_owned(), 2)].into();
    let mut many_short_tools = usage("run", "alpha", 4);
    many_short_tools.tool_calls_by_id = (0..40u64).map(|i| (format!("t{i:02}"), 1)).collect();
    for (u, dropped) in [
        (&within, 0),
        (&over, 4),
        (&few_long_tools, 1),
        (&many_short_tools, 0),
    ] {
        let stored = meter.bounded(u, dropped);
        let (expected, expected_dropped) = bounded_as_before(&o, u, dropped);
        assert_eq!(stored.usage, expected);
        assert_eq!(stored.host_call_breakdown_dropped, expected_dropped);
    }
    // And the cuts are real: bounded, marked, on character boundaries.
    let stored = meter.bounded(&over, 0).usage;
    assert!(stored.pack.len() <= o.identifier_bytes && stored.pack.ends_with('…'));
    assert_eq!(stored.tool_calls_by_id.len(), o.tool_ids + 1);
    assert_eq!(
        stored.tool_calls_by_id["(other)"],
        (0..40u64).skip(o.tool_ids - 1).sum::<u64>()
    );
    assert!(
        stored
            .host_calls
            .keys()
            .all(|k| k.len() <= o.identifier_bytes)
    );
    assert_eq!(meter.bounded(&within, 0).usage.run_id, "run");
}

/// Retention holds one page at a time: with 1,300 old records (three
/// pages), the first delete comes right after the first page is read. It
/// used to read every page first, holding every old record (key and
/// value) in memory at once: on a store that never ran retention, all of
/// its history.
#[tokio::test]
async fn retention_deletes_a_page_at_a_time() {
    use super::counting_store::Counting;
    use std::sync::atomic::Ordering;
    let kv = Arc::new(Counting::default());
    for i in 0..1300u64 {
        let key = format!("usage/t/r{}/{:013}-1-{i}", i % 7, 1_000 + i);
        kv.put(&key, b"{}".to_vec()).await.unwrap();
    }
    kv.put("usage/t/new/9999999999999-1-0", b"{}".to_vec())
        .await
        .unwrap();
    let store: Arc<dyn KvStore> = kv.clone();
    let meter = Meter::with_options(store, Prices::default(), MeterOptions::default());
    assert_eq!(meter.purge(1_000_000).await.unwrap(), 1300);
    assert_eq!(kv.tap.scans_before_first_delete.load(Ordering::Relaxed), 1);
    let left = kv.scan_prefix("usage/", usize::MAX).await.unwrap();
    assert_eq!(left.len(), 1, "the newer record stays");
}

/// A ledger as an earlier process left it: `run` started at
/// `started_at_ms` with the tests' budget.
async fn old_ledger(kv: &Arc<dyn KvStore>, tenant: &str, run: &str, started_at_ms: u64) {
    let mut l = wop_core::budget::Ledger::new(run, budget());
    l.started_at_ms = started_at_ms;
    let key = crate::keys::ledger(tenant, run);
    kv.put(&key, serde_json::to_vec(&l).unwrap()).await.unwrap();
}

/// Retention deletes the ledgers of runs idle since the cut-off (decision
/// 0057): started before it, nothing recorded since (no roll-up left).
/// A run that recorded since keeps its ledger, as does a run started
/// since, whatever the tenant. A run invoked again after its ledger went
/// reserves its budget again. Through the real path too: a budgeted run
/// opened and recorded, then idle past the cut-off, leaves nothing. On
/// sled under a tenant share, what the ledgers held is given back.
#[tokio::test]
async fn retention_deletes_the_ledgers_of_idle_runs_only() {
    idle_ledgers_are_purged(Arc::new(MemoryStore::new()), None).await;
    let dir = tempfile::tempdir().unwrap();
    let sled = Arc::new(SledStore::open(&dir.path().join("db")).unwrap());
    let share = Arc::new(
        crate::store::TenantShare::open(sled, 1 << 20)
            .await
            .unwrap(),
    );
    idle_ledgers_are_purged(share.clone(), Some(share)).await;
}

/// The same on PostgreSQL (a page of deletes is one statement there).
#[cfg(feature = "postgres")]
#[tokio::test]
async fn retention_deletes_the_ledgers_of_idle_runs_only_on_postgres() {
    let Some(url) = crate::store::conformance::postgres_test_url("ledger_retention") else {
        return;
    };
    let kv = Arc::new(crate::store::PostgresStore::connect(&url).await.unwrap());
    idle_ledgers_are_purged(kv, None).await;
}

async fn idle_ledgers_are_purged(
    kv: Arc<dyn KvStore>,
    share: Option<Arc<crate::store::TenantShare>>,
) {
    let held = |t: &str| share.as_ref().map(|s| s.held(t));
    let meter = Meter::new(kv.clone(), Prices::default());
    let now = wop_core::time::now_ms();
    let cut = now - 60_000;
    old_ledger(&kv, "tenant", "idle", 1_000).await;
    old_ledger(&kv, "other/tenant", "idle%", 1_000).await;
    // Started long ago, recorded just now: its roll-up is recent.
    old_ledger(&kv, "tenant", "active", 1_000).await;
    let u = usage("active", "alpha", 1);
    meter.record_with(&u, &u.node_id, Some(true)).await.unwrap();
    let (young, _) = meter
        .open_run("tenant", "young", &budget(), false)
        .await
        .unwrap();
    assert!(young.started_at_ms >= cut);
    assert!(held("other/tenant").is_none_or(|b| b > 0));
    assert_eq!(meter.purge(cut).await.unwrap(), 2, "the two idle ledgers");
    assert!(held("other/tenant").is_none_or(|b| b == 0));
    for (tenant, run, kept) in [
        ("tenant", "idle", false),
        ("other/tenant", "idle%", false),
        ("tenant", "active", true),
        ("tenant", "young", true),
    ] {
        let l = meter.ledger(tenant, run).await.unwrap();
        assert_eq!(l.is_some(), kept, "{tenant}/{run}");
    }
    let active = meter.ledger("tenant", "active").await.unwrap().unwrap();
    assert_eq!(active.invocations, 1, "the recorded invocation was charged");
    // Invoked again, an idle run starts afresh: its budget is reserved.
    let (l, events) = meter
        .open_run("tenant", "idle", &budget(), false)
        .await
        .unwrap();
    assert!(l.started_at_ms >= now && l.consumed.tool_calls == 0);
    assert!(
        events.iter().any(|e| serde_json::to_string(e)
            .unwrap()
            .contains("budget.reserved")),
        "{events:?}"
    );
    // Everything idle since a cut-off after now: nothing of a run stays.
    let later = wop_core::time::now_ms() + 1;
    meter.purge(later).await.unwrap();
    let left = kv.scan_prefix("ledger/", usize::MAX).await.unwrap();
    assert!(left.is_empty(), "{left:?}");
    assert!(kv.scan_prefix("rollup/run/", 10).await.unwrap().is_empty());
    assert!(
        held("tenant").is_none_or(|b| b == 0),
        "{:?}",
        held("tenant")
    );
}

/// A ledger retention cannot read is not deleted blindly: the purge
/// stops with `Corrupt` naming its key, and the record stays for an
/// operator to look at.
#[tokio::test]
async fn retention_stops_at_a_ledger_it_cannot_read() {
    let kv: Arc<dyn KvStore> = Arc::new(MemoryStore::new());
    let meter = Meter::new(kv.clone(), Prices::default());
    let key = crate::keys::ledger("tenant", "bad");
    kv.put(&key, b"not a ledger".to_vec()).await.unwrap();
    match meter.purge(wop_core::time::now_ms()).await {
        Err(MeterError::Corrupt(k)) => assert_eq!(k, key),
        other => panic!("expected Corrupt({key}), got {other:?}"),
    }
    assert!(kv.get(&key).await.unwrap().is_some());
}
