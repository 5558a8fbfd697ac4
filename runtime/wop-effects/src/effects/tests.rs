use super::identity::b64;
use super::*;
use sha2::{Digest, Sha256};

#[tokio::test]
async fn purge_pages_through_finished_records() {
    let kv: Arc<dyn KvStore> = Arc::new(crate::store::MemoryStore::new());
    let fx = Effects::new(kv.clone(), "ex");
    for i in 0..1100u32 {
        let claimed = claim(&fx, "t", "r", format!("e{i:05}")).await;
        // Leave the last one claimed: it needs attention, it stays.
        if i < 1099 {
            assert!(fx.complete(&claimed, Ok(Value::Null)).await.unwrap());
        }
    }
    assert_eq!(fx.purge(0).await.unwrap(), 0);
    assert_eq!(fx.purge(now_ms() + 1).await.unwrap(), 1099);
    let left = fx.list_run("t", "r").await.unwrap();
    assert_eq!(left.len(), 1);
    assert_eq!(left[0].state, EffectState::Claimed);
    assert_eq!(
        kv.scan_prefix("effect/", usize::MAX).await.unwrap().len(),
        1
    );
    // The purged records' listing entries went with them.
    assert_eq!(kv.scan_prefix("run/", usize::MAX).await.unwrap().len(), 1);
}

#[test]
fn identities() {
    let a = activity_id("t", "r", "n", 1, "crm:update");
    assert_eq!(a, activity_id("t", "r", "n", 1, "crm:update"));
    assert_ne!(a, activity_id("t", "r", "n", 2, "crm:update"));
    assert_ne!(a, activity_id("t", "r2", "n", 1, "crm:update"));
    assert_eq!(a.len(), 43, "base64url of 32 bytes, unpadded");
    assert!(!a.contains(['+', '/', '=']));
    let b = business_id("t", "crm:update", "order-7");
    assert_eq!(b, business_id("t", "crm:update", "order-7"));
    assert_ne!(b, business_id("t2", "crm:update", "order-7"));
    assert_ne!(b, business_id("t", "crm:other", "order-7"));
    // The protocol recipe, spelled out.
    let mut h = Sha256::new();
    h.update(b"openwop:activity:v2\0t\0r\0n\x001\0crm:update");
    assert_eq!(a, b64(&h.finalize()));
}

/// A fresh claim of the effect `id` in `tenant`'s run `run`.
async fn claim(fx: &Effects, tenant: &str, run: &str, id: String) -> Box<EffectRecord> {
    let t = EffectTimings {
        lease: Duration::from_secs(60),
        in_flight_wait: Duration::from_millis(10),
        poll: Duration::from_millis(1),
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let req = ClaimRequest {
        effect_id: id,
        keying: Keying::ActivityRecipe,
        tenant_id: tenant.into(),
        run_id: run.into(),
        node_id: "n".into(),
        attempt: 1,
        tool_id: "t:x".into(),
        digest: "d".into(),
        idempotent: false,
    };
    let Begin::Perform { claimed, .. } = fx.begin(&req, t, deadline).await.unwrap() else {
        panic!("fresh claim not performed");
    };
    claimed
}

/// Claims and completes `n` effects `<tag>00000…` in `tenant`'s run `run`.
async fn claim_many(fx: &Effects, tenant: &str, run: &str, tag: &str, n: u32) {
    claim_sized(fx, (tenant, run), tag, n, 4096).await;
}

/// [`claim_many`], each with a result of `bytes` characters (the listing
/// must not carry them).
async fn claim_sized(fx: &Effects, (tenant, run): (&str, &str), tag: &str, n: u32, bytes: usize) {
    for i in 0..n {
        let claimed = claim(fx, tenant, run, format!("{tag}{i:05}")).await;
        let big = Value::String("r".repeat(bytes));
        assert!(fx.complete(&claimed, Ok(big)).await.unwrap());
    }
}

/// The pages of `tenant`'s run `run` at `limit`, following `next`: their
/// sizes and the effect ids in order.
async fn pages(
    fx: &Effects,
    (tenant, run): (&str, &str),
    limit: usize,
) -> (Vec<usize>, Vec<String>) {
    let (mut sizes, mut ids, mut after) = (Vec::new(), Vec::new(), None::<String>);
    loop {
        let page = fx
            .list_run_page(tenant, run, after.as_deref(), limit)
            .await
            .unwrap();
        sizes.push(page.effects.len());
        ids.extend(page.effects.into_iter().map(|e| e.effect_id));
        match page.next {
            Some(n) => after = Some(n),
            None => return (sizes, ids),
        }
    }
}

/// A page ends once it has read PAGE_READ_BYTES of records, whatever its
/// limit: twelve records of just over 1 MiB are listed 8 + 4 at the
/// largest limit, and nothing is lost or repeated; a smaller limit binds
/// first; a single record larger than the bound is still listed.
#[tokio::test]
async fn a_page_ends_after_reading_its_bytes() {
    let kv: Arc<dyn KvStore> = Arc::new(crate::store::MemoryStore::new());
    let fx = Effects::new(kv.clone(), "ex");
    claim_sized(&fx, ("t", "r"), "a", 12, 1 << 20).await;
    let want: Vec<String> = (0..12).map(|i| format!("a{i:05}")).collect();
    let (sizes, ids) = pages(&fx, ("t", "r"), MAX_PAGE).await;
    assert_eq!(PAGE_READ_BYTES, 8 << 20);
    assert_eq!(sizes, [8, 4]);
    assert_eq!(ids, want);
    assert_eq!(pages(&fx, ("t", "r"), 5).await, (vec![5, 5, 2], want));
    claim_sized(&fx, ("t", "huge"), "h", 2, PAGE_READ_BYTES + 1).await;
    let (sizes, _) = pages(&fx, ("t", "huge"), MAX_PAGE).await;
    assert_eq!(sizes, [1, 1]);
}

#[tokio::test]
async fn a_run_is_listed_a_page_at_a_time_and_only_its_own() {
    let kv: Arc<dyn KvStore> = Arc::new(crate::store::MemoryStore::new());
    let fx = Effects::new(kv.clone(), "ex");
    claim_many(&fx, "t", "r", "a", 2100).await;
    // Neighbours: another tenant's run of the same id, another run of the
    // tenant whose id extends this one's.
    claim_many(&fx, "t2", "r", "b", 3).await;
    claim_many(&fx, "t", "r2", "c", 3).await;
    let (sizes, all) = pages(&fx, ("t", "r"), MAX_PAGE).await;
    for e in fx.list_run("t", "r").await.unwrap() {
        assert_eq!(e.tool_id, "t:x");
        assert_eq!(e.state, EffectState::Completed);
    }
    assert_eq!(sizes, [1000, 1000, 100]);
    let want: Vec<String> = (0..2100).map(|i| format!("a{i:05}")).collect();
    assert_eq!(all, want);
    assert_eq!(fx.list_run("t", "r").await.unwrap().len(), 2100);
    // A page is never larger than MAX_PAGE, never empty-limited.
    let p = fx.list_run_page("t", "r", None, usize::MAX).await.unwrap();
    assert_eq!(p.effects.len(), MAX_PAGE);
    let p = fx.list_run_page("t", "r", None, 0).await.unwrap();
    assert_eq!(p.effects.len(), 1);
    assert_eq!(p.next.as_deref(), Some("a00000"));
    // Whatever `after` says, the scan stays within the run's index.
    for hostile in ["\u{10FFFF}", "../../t2/r/b00000", "", "/", "\0"] {
        let p = fx
            .list_run_page("t", "r", Some(hostile), MAX_PAGE)
            .await
            .unwrap();
        assert!(
            p.effects.iter().all(|e| e.effect_id.starts_with('a')),
            "{hostile:?}"
        );
    }
    // An index entry pointing at another tenant's record is not listed.
    kv.put("run/t/r/b00000", Vec::new()).await.unwrap();
    let listed = fx.list_run("t", "r").await.unwrap();
    assert_eq!(listed.len(), 2100);
    assert!(listed.iter().all(|e| e.effect_id.starts_with('a')));
}
