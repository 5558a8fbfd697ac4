//! Listings (a run's effects, usage) are read a page per request
//! (decision 0052), and at most `LISTINGS` (16) at once in all and 4 per
//! tenant: past them a listing is refused with `Retry-After` (`429
//! rate_limited` for the tenant's share, `503` for all), apart from the
//! invocation slots, so neither crowds out the other. The listings are
//! held in the middle of their read by a store whose scans of run `held`
//! wait for the test.

use super::*;
use serde_json::json;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use wop_runtime::store::MemoryStore;
use wop_runtime::store::tap::{Op, Tap, Tapped};

/// Holds a range scan naming run `held` until the test lets it go.
struct Held {
    gate: tokio::sync::Semaphore,
    waiting: AtomicUsize,
}

#[async_trait::async_trait]
impl Tap for Held {
    async fn before(&self, op: Op<'_>) -> bool {
        if let Op::ScanRange { start, .. } = op
            && start.contains("/held/")
        {
            self.waiting.fetch_add(1, Ordering::SeqCst);
            let _go = self.gate.acquire().await;
        }
        true
    }
}

/// Three more tenants' tokens, for `serve_toml`'s `extra`.
fn more_tenants() -> String {
    (1..=3)
        .map(|i| {
            format!(
                "[[tokens]]\nsha256 = \"{}\"\nprincipal = \"host-t{i}\"\ntenant = \"t{i}\"\n",
                token_sha256(&format!("token-t{i}"))
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listings_are_bounded_at_once_per_tenant_and_in_all() {
    let store = Tapped::new(
        Arc::new(MemoryStore::new()),
        Held {
            gate: tokio::sync::Semaphore::new(0),
            waiting: AtomicUsize::new(0),
        },
    );
    let choice = wop_serve::StoreChoice::Custom(store.clone());
    let cfg = serve_toml(&format!("retryAfterSecs = 2\n{}", more_tenants()));
    let s = start_on("", &cfg, &["hello"], choice).await;
    let addr = s.addr;
    let hold =
        |token: String| tokio::spawn(async move { get(addr, &token, "/runs/held/effects").await });
    let until_waiting = |n: usize| {
        let store = store.clone();
        async move {
            for _ in 0..1000 {
                if store.tap.waiting.load(Ordering::SeqCst) >= n {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            panic!("{n} listings never reached the store");
        }
    };
    // A tenant reading four listings gets 429 for a fifth.
    let mut held: Vec<_> = (0..4).map(|_| hold(TOKEN.to_owned())).collect();
    until_waiting(4).await;
    for path in [
        "/runs/other/effects",
        "/host/wop/usage",
        "/host/wop/usage?run=r",
    ] {
        let r = get(addr, TOKEN, path).await;
        let b = r.json();
        assert_eq!(r.status, 429, "{path}: {b}");
        assert_eq!(r.header("retry-after"), Some("2"), "{path}");
        assert_eq!(b["error"], "rate_limited", "{b}");
        assert_eq!(b["details"]["maxListingsPerTenant"], 4, "{b}");
        assert!(
            b["message"]
                .as_str()
                .unwrap_or_default()
                .contains("listings"),
            "{b}"
        );
    }
    // Its invocations do not wait on its listings, nor another tenant's
    // listings on them.
    let hello = json!({"typeId": "wop.samples.hello", "inputs": {"name": "Ada"}});
    let r = post_json(addr, "/host/wop/invocations", TOKEN, &hello).await;
    assert_eq!(r.status, 200, "{}", r.json());
    let r = get(addr, OTHER_TOKEN, "/runs/other/effects").await;
    assert_eq!(r.status, 200, "{}", r.json());
    // Sixteen at once in all: four tenants at their share, the fifth 503.
    for i in 1..=3 {
        held.extend((0..4).map(|_| hold(format!("token-t{i}"))));
    }
    until_waiting(16).await;
    // A request that is refused for what it asks is refused for that
    // first: a tenant without the operator scope at its share gets `403`.
    let r = get(addr, "token-t1", "/host/wop/usage").await;
    assert_eq!(r.status, 403, "{}", r.json());
    let r = get(addr, OTHER_TOKEN, "/runs/other/effects").await;
    let b = r.json();
    assert_eq!(r.status, 503, "{b}");
    assert_eq!(r.header("retry-after"), Some("2"));
    assert_eq!(b["error"], "service_unavailable", "{b}");
    assert!(
        b["message"]
            .as_str()
            .unwrap_or_default()
            .contains("16 listings"),
        "{b}"
    );
    // Once they are read, every one is answered, and listings are served
    // again.
    store.tap.gate.add_permits(16);
    for h in held {
        let r = h.await.unwrap();
        assert_eq!(r.status, 200, "{}", r.json());
    }
    let r = get(addr, OTHER_TOKEN, "/runs/other/effects").await;
    assert_eq!(r.status, 200, "{}", r.json());
    let r = get(addr, TOKEN, "/runs/other/effects").await;
    assert_eq!(r.status, 200, "{}", r.json());
    s.stop().await;
}
