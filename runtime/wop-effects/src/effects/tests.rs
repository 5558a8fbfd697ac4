use super::identity::b64;
use super::*;
use sha2::{Digest, Sha256};

#[tokio::test]
async fn purge_pages_through_finished_records() {
    let kv: Arc<dyn KvStore> = Arc::new(crate::store::MemoryStore::new());
    let fx = Effects::new(kv.clone(), "ex");
    let t = EffectTimings {
        lease: Duration::from_secs(60),
        in_flight_wait: Duration::from_millis(10),
        poll: Duration::from_millis(1),
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    for i in 0..1100u32 {
        let req = ClaimRequest {
            effect_id: format!("e{i:05}"),
            keying: Keying::ActivityRecipe,
            tenant_id: "t".into(),
            run_id: "r".into(),
            node_id: "n".into(),
            attempt: 1,
            tool_id: "t:x".into(),
            digest: "d".into(),
            idempotent: false,
        };
        let Begin::Perform { claimed, .. } = fx.begin(&req, t, deadline).await.unwrap() else {
            panic!("fresh claim not performed");
        };
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
