//! The idle release (decision 0030): after `idleReleaseMs` without an
//! invocation, the memory the sandbox pool keeps resident for idle slots
//! goes back to the OS — counted in `/healthz` and `/metrics`, visible in
//! the real process's RSS — and `idleReleaseMs = 0` never releases it.

use super::*;
use serde_json::json;
use std::time::{Duration, Instant};

/// `wop-serve` with `cfg`, anonymous on loopback with the operator scope
/// (for `/metrics`).
fn spawn(cfg: &str) -> ChildServe {
    ChildServe::spawn(
        &format!("anonymousScopes = [\"wop.operator\"]\nmaxInFlight = 64\n{cfg}"),
        &["huge-output"],
    )
}

async fn health(addr: SocketAddr) -> Value {
    req(addr, "GET", "/healthz", &[], b"").await.json()
}

/// 32 invocations at once, each writing a megabyte of output (so each
/// dirties pool memory), all answered.
async fn burst(addr: SocketAddr) {
    let body = r#"{"typeId":"wop.testing.huge-output","inputs":{"bytes":1000000}}"#;
    let mut all = Vec::new();
    for _ in 0..32 {
        all.push(tokio::spawn(async move {
            req(
                addr,
                "POST",
                "/host/wop/invocations",
                &[("Content-Type", "application/json")],
                body.as_bytes(),
            )
            .await
            .status
        }));
    }
    for t in all {
        assert_eq!(t.await.unwrap(), 200);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_server_gives_the_pools_kept_memory_back() {
    let serve = spawn("idleReleaseMs = 200\n");
    let (addr, pid) = (serve.addr, serve.pid());
    let releases = |h: Value| h["idleReleases"].as_u64().unwrap_or(0);
    // RSS while the pool keeps the burst's memory: read before the idle
    // release. On a loaded machine the 200 ms can pass between the last
    // answer and the read; then the reading is not "busy": burst again.
    let mut busy = None;
    for _ in 0..5 {
        let before = releases(health(addr).await);
        burst(addr).await;
        let rss = rss_kib(pid);
        if releases(health(addr).await) == before {
            busy = Some((rss, before));
            break;
        }
    }
    let (busy, before) = busy.expect("five bursts, each released before its RSS was read");
    let end = Instant::now() + Duration::from_secs(60);
    let h = loop {
        let h = health(addr).await;
        if h["idleReleases"].as_u64() > Some(before) {
            break h;
        }
        assert!(Instant::now() < end, "no idle release after 60 s: {h}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(h["inFlight"], 0);
    let rested = rss_kib(pid);
    let text = req(addr, "GET", "/metrics", &[], b"").await;
    assert_eq!(text.status, 200);
    let text = String::from_utf8_lossy(&text.body).into_owned();
    let released = metric(&text, "wop_pool_idle_released_bytes").expect("the bytes metric");
    assert!(
        metric(&text, "wop_pool_idle_releases") >= Some(1) && released > 0,
        "{text}"
    );
    eprintln!(
        "RSS after the burst {busy} KiB, after the idle release {rested} KiB ({released} bytes released)"
    );
    assert!(
        rested < busy,
        "RSS did not fall: {busy} KiB busy, {rested} KiB idle"
    );
    // Once per idle spell: without new invocations, no second release.
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(health(addr).await["idleReleases"], h["idleReleases"]);
    // A new burst re-arms it.
    burst(addr).await;
    let before = h["idleReleases"].as_u64().unwrap();
    let end = Instant::now() + Duration::from_secs(60);
    while health(addr).await["idleReleases"].as_u64() <= Some(before) {
        assert!(Instant::now() < end, "no second idle release after 60 s");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    drop(serve);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_release_0_keeps_the_pools_memory() {
    let serve = spawn("idleReleaseMs = 0\n");
    let addr = serve.addr;
    burst(addr).await;
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let h = health(addr).await;
    assert_eq!(
        (h["inFlight"].clone(), h["idleReleases"].clone()),
        (json!(0), json!(0)),
        "{h}"
    );
    drop(serve);
}
