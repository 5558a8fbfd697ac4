//! Hardening (issue 14), class 3: the shared persistent store does not
//! grow with what a pack chooses, and opening a store with a long history
//! does not load it.

use super::*;
use serde_json::json;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use wop_runtime::Outcome;
use wop_runtime::store::tap::{Op, Tap, Tapped};
use wop_runtime::store::{KvStore, SledStore};

/// Most bytes (keys + values) one invocation adds to the store with the
/// default meter options, whatever the pack passes to its host calls: the
/// kept usage record (identifiers cut to 128 bytes, 8 breakdown entries
/// with 64-byte targets, 32 tool ids) plus its share of the run's and the
/// pack's roll-ups. Documented in docs/SECURITY.md.
const MAX_PERSISTED_BYTES_PER_INVOCATION: u64 = 8 << 10;

/// What a tapped store read.
#[derive(Default)]
struct Reads {
    scans: AtomicU64,
    bytes_read: AtomicU64,
}

#[async_trait::async_trait]
impl Tap for Reads {
    async fn before(&self, op: Op<'_>) -> bool {
        if matches!(op, Op::ScanPrefix { .. } | Op::ScanRange { .. }) {
            self.scans.fetch_add(1, Ordering::Relaxed);
        }
        true
    }
    fn read(&self, bytes: usize) {
        self.bytes_read.fetch_add(bytes as u64, Ordering::Relaxed);
    }
}

fn runtime_on(store: Arc<dyn KvStore>, policy: &str) -> Runtime {
    let mut cfg = RuntimeConfig::new();
    cfg.policy(Policy::from_toml(policy).unwrap());
    cfg.effect_store(store);
    Runtime::new(&cfg).unwrap()
}

/// Bytes of every key and value in the store.
async fn live_bytes(kv: &dyn KvStore) -> u64 {
    kv.scan_range("", None, usize::MAX)
        .await
        .unwrap()
        .iter()
        .map(|(k, v)| (k.len() + v.len()) as u64)
        .sum()
}

/// A pack making 300 tool calls with 500-byte tool ids per invocation
/// (each kept in the in-memory breakdown) grows a real sled store by at
/// most [`MAX_PERSISTED_BYTES_PER_INVOCATION`] per invocation; then a new
/// process opening that store and running one invocation reads only its
/// own run's records — no scan, a few hundred bytes, whatever the history.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn persisted_usage_is_bounded_and_opening_reads_no_history() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("effects");
    let policy = "[packs.id-flood]\ncapabilities = [\"tools\"]\ntools = [\"crm:*\"]\n";
    const RUNS: u64 = 24;
    let history = {
        let store: Arc<dyn KvStore> = Arc::new(SledStore::open(&path).unwrap());
        let rt = runtime_on(store.clone(), policy);
        load(&rt, "id-flood").await;
        let before = live_bytes(&*store).await;
        let mut in_memory = 0;
        for i in 0..RUNS {
            let mut req = InvokeRequest::new(
                "wop.testing.id-flood",
                json!({"mode": "tools", "calls": 300, "idBytes": 500}),
            );
            req.context.run_id = format!("run-{i}");
            let r = rt.invoke(req).await;
            assert!(
                matches!(r.outcome, Ok(Outcome::Completed { .. })),
                "{:?}",
                r.outcome
            );
            in_memory = serde_json::to_vec(&r.usage).unwrap().len() as u64;
        }
        let added = live_bytes(&*store).await - before;
        let per = added / RUNS;
        assert!(
            per <= MAX_PERSISTED_BYTES_PER_INVOCATION,
            "{per} bytes persisted per invocation"
        );
        // What the bound saves: the invocation's own usage is far larger.
        assert!(in_memory > 16 * per, "usage {in_memory} vs {per} persisted");
        drop(rt);
        added
    };

    // A new process on the same store: the store is opened, a pack loaded
    // and one invocation of a new run recorded.
    let sled: Arc<dyn KvStore> = Arc::new(SledStore::open(&path).unwrap());
    let counting = Tapped::new(sled, Reads::default());
    let rt = runtime_on(counting.clone(), "");
    load(&rt, "hello").await;
    let mut req = InvokeRequest::new("wop.samples.hello", json!({"name": "Ada"}));
    req.context.run_id = "a-new-run".to_owned();
    let r = rt.invoke(req).await;
    assert!(r.outcome.is_ok(), "{:?}", r.outcome);
    let (scans, read) = (
        counting.tap.scans.load(Ordering::Relaxed),
        counting.tap.bytes_read.load(Ordering::Relaxed),
    );
    assert_eq!(scans, 0, "nothing scans the history");
    assert!(
        read <= 1024 && read * 50 < history,
        "read {read} bytes of a {history}-byte history"
    );
}

/// Issue 19, item 8: one invocation calling a write tool that answers
/// 300 KB, 40 times, grows the effect store by at most
/// `maxRecordsPerInvocation` records of at most `maxResultBytes` each: the
/// 9th effectful call is refused before it is sent, with its own code and
/// `cap.breached effect-records`; a result over `maxResultBytes` is refused
/// to the pack, recorded as that error, and breaches `tool-result-bytes`.
async fn effect_records_are_bounded(store: Arc<dyn KvStore>) {
    const RECORDS: u64 = 8;
    const RESULT_CAP: u64 = 800 << 10;
    let big = format!("{{\"blob\":\"{}\"}}", "x".repeat(300 << 10));
    let server = wop_testkit::Server::start(wop_testkit::Mode::Status(200, big)).await;
    let policy = format!(
        "[[tools]]\nid = \"crm:write\"\nurl = \"{}\"\nsafetyTier = \"write\"\n\
         [packs.tool-call]\ncapabilities = [\"tools\"]\ntools = [\"crm:*\"]\n\
         [effects]\nmaxRecordsPerInvocation = {RECORDS}\nmaxResultBytes = {RESULT_CAP}\n",
        server.url("/w")
    );
    let rt = runtime_on(store.clone(), &policy);
    load(&rt, "tool-call").await;
    let before = live_bytes(&*store).await;
    let r = rt
        .invoke(InvokeRequest::new(
            "wop.samples.tool-call",
            json!({"tool": "crm:write", "repeat": 40}),
        ))
        .await;
    let e = r.outcome.as_ref().unwrap_err();
    assert_eq!(e.code, "effect_records_exceeded", "{e}");
    assert!(e.message.contains("maxRecordsPerInvocation"), "{e}");
    assert!(breaches(&r).contains(&"effect-records".to_owned()));
    assert_eq!(
        server.count() as u64,
        RECORDS,
        "the 9th call was never sent"
    );
    let grew = live_bytes(&*store).await - before;
    // The documented bound: records × (result cap + 2 KiB of record), plus
    // the usage record and roll-ups (8 KiB).
    let bound = RECORDS * (RESULT_CAP + 2048) + (8 << 10);
    assert!(
        grew <= bound,
        "the store grew by {grew} bytes (bound {bound})"
    );

    // Over the result cap: refused to the pack, recorded as that error.
    let huge = format!("{{\"blob\":\"{}\"}}", "y".repeat(900 << 10));
    let server = wop_testkit::Server::start(wop_testkit::Mode::Status(200, huge)).await;
    let policy = format!(
        "[[tools]]\nid = \"crm:write\"\nurl = \"{}\"\nsafetyTier = \"write\"\n\
         [packs.tool-call]\ncapabilities = [\"tools\"]\ntools = [\"crm:*\"]\n\
         [effects]\nmaxResultBytes = {RESULT_CAP}\n",
        server.url("/w")
    );
    let rt = runtime_on(store.clone(), &policy);
    load(&rt, "tool-call").await;
    let mut req = InvokeRequest::new("wop.samples.tool-call", json!({"tool": "crm:write"}));
    req.context.run_id = "too-large".into();
    let r = rt.invoke(req.clone()).await;
    assert_eq!(
        r.outcome.as_ref().unwrap_err().code,
        "tool_result_too_large"
    );
    assert!(breaches(&r).contains(&"tool-result-bytes".to_owned()));
    let r = rt.invoke(req).await;
    assert_eq!(
        r.outcome.as_ref().unwrap_err().code,
        "tool_result_too_large"
    );
    assert!(breaches(&r).is_empty(), "a replay breaches nothing new");
    assert_eq!(server.count(), 1, "performed once, its error replayed");
}

/// Issue 33, item 10: one invocation calling a write tool that answers
/// 900 KiB, 46 times, under the default limits (`maxResultBytes` 1 MiB,
/// `maxRecordBytesPerInvocation` 4 MiB): the 5th call is refused before it
/// is sent — 3.6 MiB recorded plus one more result of up to 1 MiB would
/// pass 4 MiB — with its own code and `cap.breached effect-record-bytes`,
/// and the store grows by at most the budget plus each record's ~2 KiB. A
/// retry of the same run replays the 4 records, counts their bytes again
/// and stops at the same call.
async fn effect_record_bytes_are_bounded(store: Arc<dyn KvStore>) {
    const BUDGET: u64 = 4 << 20;
    let big = format!("{{\"blob\":\"{}\"}}", "x".repeat(900 << 10));
    let server = wop_testkit::Server::start(wop_testkit::Mode::Status(200, big)).await;
    let policy = format!(
        "[[tools]]\nid = \"crm:write\"\nurl = \"{}\"\nsafetyTier = \"write\"\n\
         [packs.tool-call]\ncapabilities = [\"tools\"]\ntools = [\"crm:*\"]\n",
        server.url("/w")
    );
    let rt = runtime_on(store.clone(), &policy);
    load(&rt, "tool-call").await;
    let before = live_bytes(&*store).await;
    let mut req = InvokeRequest::new(
        "wop.samples.tool-call",
        json!({"tool": "crm:write", "repeat": 46}),
    );
    req.context.run_id = "many-large-writes".into();
    let r = rt.invoke(req.clone()).await;
    let e = r.outcome.as_ref().unwrap_err();
    assert_eq!(e.code, "effect_record_bytes_exceeded", "{e}");
    assert!(e.message.contains("maxRecordBytesPerInvocation"), "{e}");
    let breach = r.events.iter().find_map(|e| match e {
        Event::CapBreached {
            kind,
            limit,
            observed,
            ..
        } if kind.as_str() == "effect-record-bytes" => Some((*limit, *observed)),
        _ => None,
    });
    let (limit, observed) = breach.expect("cap.breached effect-record-bytes");
    assert_eq!(limit, BUDGET);
    assert!(observed > BUDGET, "{observed}");
    assert_eq!(server.count(), 4, "the 5th call was never sent");
    let grew = live_bytes(&*store).await - before;
    let bound = BUDGET + 4 * 2048 + (8 << 10);
    assert!(
        grew <= bound,
        "the store grew by {grew} bytes (bound {bound})"
    );

    // The same run again: replayed, counted, stopped at the same call.
    let r = rt.invoke(req).await;
    assert_eq!(
        r.outcome.as_ref().unwrap_err().code,
        "effect_record_bytes_exceeded"
    );
    assert_eq!(server.count(), 4, "nothing sent again");
    let grew = live_bytes(&*store).await - before;
    assert!(grew <= bound + (8 << 10), "the store grew by {grew} bytes");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn effect_record_bytes_per_invocation_are_bounded_on_sled() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("fx");
    effect_record_bytes_are_bounded(Arc::new(SledStore::open(&path).unwrap())).await;
    // On disk too, sled's own overhead included (6.2 MiB measured; the
    // review saw 146 MiB for these 46 writes before the budget).
    let disk = disk_bytes(&path);
    assert!(
        disk <= 3 * (4 << 20),
        "the sled directory holds {disk} bytes"
    );
}

/// Bytes of every file under `dir`.
fn disk_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| {
            let m = e.metadata().unwrap();
            if m.is_dir() {
                disk_bytes(&e.path())
            } else {
                m.len()
            }
        })
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn effect_records_per_invocation_are_bounded_on_sled() {
    let tmp = tempfile::tempdir().unwrap();
    effect_records_are_bounded(Arc::new(SledStore::open(&tmp.path().join("fx")).unwrap())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn effect_records_per_invocation_are_bounded_on_postgres() {
    let Some(url) = wop_runtime::store::conformance::postgres_test_url("effect_records_bounded")
    else {
        return;
    };
    let store = wop_runtime::store::PostgresStore::connect(&url)
        .await
        .unwrap();
    effect_records_are_bounded(Arc::new(store)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn effect_record_bytes_per_invocation_are_bounded_on_postgres() {
    let Some(url) = wop_runtime::store::conformance::postgres_test_url("effect_record_bytes")
    else {
        return;
    };
    let store = wop_runtime::store::PostgresStore::connect(&url)
        .await
        .unwrap();
    effect_record_bytes_are_bounded(Arc::new(store)).await;
}
