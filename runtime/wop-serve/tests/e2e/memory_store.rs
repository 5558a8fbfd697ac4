//! `--memory-store` is process memory: a client cannot grow it past
//! `memoryStoreBytes` (decision 0046). Idempotent requests with fresh keys
//! each record their whole response; before the capacity, 1,000 of them
//! with a 200 KB input grew the server by 580 MiB in 4 s. Past it, a new
//! claim is `effect_store_full` before anything runs: an idempotent
//! request is `507`, an effectful tool call is refused without being
//! sent, and what was recorded still replays.

use super::*;
use serde_json::json;
use wop_testkit::{Mode, Server as Upstream};

const JSON: (&str, &str) = ("Content-Type", "application/json");

async fn keyed(addr: SocketAddr, key: &str, body: &Value) -> Resp {
    keyed_as(addr, None, key, body).await
}

async fn unkeyed(addr: SocketAddr, body: &Value) -> Resp {
    req(
        addr,
        "POST",
        "/host/wop/invocations",
        &[JSON],
        body.to_string().as_bytes(),
    )
    .await
}

/// A hello whose recorded response is about 200 KB (the greeting and its
/// log line).
fn big() -> Value {
    json!({"typeId": "wop.samples.hello", "inputs": {"name": "A".repeat(100_000)}})
}

/// Keyed [`big`] requests with fresh keys until one is refused: how many
/// were recorded, and the refusal. A 2 MiB store is full within 40.
async fn fill(addr: SocketAddr) -> (usize, Resp) {
    for ok in 0..40 {
        let r = keyed(addr, &format!("key-{ok}"), &big()).await;
        if r.status != 200 {
            return (ok, r);
        }
    }
    panic!("2 MiB still not full after 40 responses of ~200 KB");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_cannot_grow_the_memory_store_past_its_capacity() {
    let upstream = Upstream::start(Mode::Ok).await;
    let policy = format!(
        "[[tools]]\nid = \"crm:write\"\nurl = \"{}\"\nsafetyTier = \"write\"\n\n\
         [packs.tool-call]\ncapabilities = [\"tools\"]\ntools = [\"crm:*\"]\n",
        upstream.url("/w")
    );
    // The capacity is what is tested: no tenant's share refuses first.
    let cfg = &serve_toml(
        "anonymousLoopback = true\nmemoryStoreBytes = 2097152\nmaxStoreBytesPerTenant = 0",
    );
    let store = wop_serve::StoreChoice::Memory;
    let s = start_on(&policy, cfg, &["hello", "tool-call"], store).await;
    let big = big();
    let (ok, full) = fill(s.addr).await;
    assert!(ok >= 4, "only {ok} responses fit in 2 MiB");
    assert_eq!(full.status, 507, "{}", String::from_utf8_lossy(&full.body));
    let b = full.json();
    assert_eq!(b["error"], "effect_store_full", "{b}");
    assert!(
        b["message"].as_str().unwrap().contains("durable store"),
        "{b}"
    );
    // Operators see it: the refusal and what is left of the capacity.
    let gauge = |name: &str| format!("wop_store_{name}{{backend=\"memory\"}}");
    assert!(metric_of(s.addr, &gauge("refused_writes")).await >= Some(1));
    let free = metric_of(s.addr, &gauge("free_bytes")).await.unwrap();
    assert!(free < 2 << 20, "{free}");

    // What was recorded still replays.
    let again = keyed(s.addr, "key-0", &big).await;
    assert_eq!(again.status, 200);
    assert_eq!(again.header("idempotent-replayed"), Some("true"));

    // An effectful call is refused before it is sent.
    let write = json!({"typeId": "wop.samples.tool-call",
                       "inputs": {"tool": "crm:write", "arguments": {"x": 1}}});
    let r = unkeyed(s.addr, &write).await;
    assert_eq!(r.status, 200);
    let b = r.json();
    assert_eq!(b["outcome"], "failed", "{b}");
    assert_eq!(b["error"]["code"], "effect_store_full", "{b}");
    assert_eq!(upstream.count(), 0, "the write was sent without a claim");

    // An invocation that claims nothing still runs.
    let hello = json!({"typeId": "wop.samples.hello", "inputs": {"name": "Ada"}});
    let r = unkeyed(s.addr, &hello).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["outcome"], "completed");
    s.stop().await;
}

/// A keyed response too large to record even in the settling headroom:
/// with 1 MiB of capacity, a first keyed 600 KB response is recorded
/// (it replays); a second one is claimed (its claim is small) but its
/// response would take the store past capacity + an eighth. The caller
/// still gets it, the claim is given back, and a retry with that key runs
/// the node again at once — not `409 idempotency_in_flight` until the
/// lease expires, which is what a claim left behind would answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_response_that_does_not_fit_gives_its_claim_back() {
    let cfg = "anonymousLoopback = true\nmemoryStoreBytes = 1048576";
    let s = start_on("", cfg, &["hello"], wop_serve::StoreChoice::Memory).await;
    let big = json!({"typeId": "wop.samples.hello", "inputs": {"name": "A".repeat(600_000)}});
    for attempt in 0..2 {
        let r = keyed(s.addr, "fills", &big).await;
        assert_eq!(r.status, 200);
        let replayed = r.header("idempotent-replayed").map(str::to_owned);
        assert_eq!(
            replayed,
            (attempt == 1).then(|| "true".to_owned()),
            "recorded"
        );
    }
    for attempt in 0..2 {
        let r = keyed(s.addr, "too-big", &big).await;
        assert_eq!(r.status, 200, "attempt {attempt}: {}", r.json()["error"]);
        assert_eq!(r.json()["outcome"], "completed");
        assert_eq!(
            r.header("idempotent-replayed"),
            None,
            "attempt {attempt} ran"
        );
    }
    s.stop().await;
}

/// A store that is full refuses for its capacity even where a tenant's
/// share is set: the share (16 MiB) is larger than the store (2 MiB), so
/// the refusal is the store's, and it carries no share figures (a
/// `tenant`, `heldBytes` or `maxStoreBytesPerTenant` would blame the
/// tenant's share for a refusal it did not make).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_store_under_a_larger_share_refuses_without_share_figures() {
    let cfg = &serve_toml(
        "anonymousLoopback = true\nmemoryStoreBytes = 2097152\n\
         maxStoreBytesPerTenant = 16777216",
    );
    let s = start_on("", cfg, &["hello"], wop_serve::StoreChoice::Memory).await;
    let (_, full) = fill(s.addr).await;
    assert_eq!(full.status, 507, "{}", String::from_utf8_lossy(&full.body));
    let b = full.json();
    assert_eq!(b["error"], "effect_store_full", "{b}");
    let m = b["message"].as_str().unwrap();
    assert!(m.contains("durable store"), "{m}");
    assert!(!m.contains("maxStoreBytesPerTenant"), "{m}");
    let d = &b["details"];
    let figures = [
        "tenant",
        "heldBytes",
        "neededBytes",
        "maxStoreBytesPerTenant",
    ];
    let blamed: Vec<_> = figures.iter().filter(|f| d.get(**f).is_some()).collect();
    assert!(
        blamed.is_empty(),
        "share figures {blamed:?} on a full store: {b}"
    );
    // The share refused nothing: operators are not told it did.
    let shares = "wop_store_share_refused_writes{backend=\"memory\"}";
    assert_eq!(metric_of(s.addr, shares).await, Some(0));
    s.stop().await;
}
