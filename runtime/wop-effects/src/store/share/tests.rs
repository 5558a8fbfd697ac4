use super::*;
use crate::effects::{Begin, ClaimRequest, Keying};
use crate::store::{MemoryStore, SledStore};
use crate::{EffectTimings, Effects};
use serde_json::json;
use std::time::{Duration, Instant};

fn request(tenant: &str, id: &str) -> ClaimRequest {
    ClaimRequest {
        effect_id: format!("{tenant}-{id}"),
        keying: Keying::ActivityRecipe,
        tenant_id: tenant.into(),
        run_id: "r".into(),
        node_id: "n".into(),
        attempt: 1,
        tool_id: "t:x".into(),
        digest: "d".into(),
        idempotent: false,
    }
}

fn timings() -> EffectTimings {
    EffectTimings {
        lease: Duration::from_secs(60),
        in_flight_wait: Duration::from_millis(50),
        poll: Duration::from_millis(5),
    }
}

/// Claims `id` for `tenant` and records a result of `kb` KiB: `Ok(true)`
/// if it was performed, `Ok(false)` if it was a replay.
async fn claim(fx: &Effects, tenant: &str, id: &str, kb: usize) -> Result<bool, String> {
    let deadline = Instant::now() + Duration::from_secs(5);
    match fx.begin(&request(tenant, id), timings(), deadline).await {
        Ok(Begin::Perform { claimed, .. }) => {
            let result = json!({"blob": "x".repeat(kb << 10)});
            assert!(fx.complete(&claimed, Ok(result)).await.unwrap());
            Ok(true)
        }
        Ok(Begin::Replay(_)) => Ok(false),
        Ok(other) => panic!("{other:?}"),
        Err(e) => {
            assert!(e.is_store_full(), "{e}");
            Err(e.to_string())
        }
    }
}

#[tokio::test]
async fn a_tenant_at_its_share_is_refused_new_claims_and_others_are_not() {
    let share = Arc::new(
        TenantShare::open(Arc::new(MemoryStore::new()), 100 << 10)
            .await
            .unwrap(),
    );
    let fx = Effects::new(share.clone(), "e");
    // 30 KiB results: three fit in 100 KiB. A fourth claim is admitted
    // (its pending record fits) and its settle goes ahead past the share;
    // the fifth claim is refused.
    for i in 0..3 {
        assert_eq!(claim(&fx, "acme", &i.to_string(), 30).await, Ok(true));
    }
    let held = share.held("acme");
    assert!(held > 90 << 10 && held < 100 << 10, "{held}");
    assert_eq!(claim(&fx, "acme", "3", 30).await, Ok(true));
    let e = claim(&fx, "acme", "4", 30).await.unwrap_err();
    assert!(
        e.contains("tenant `acme`") && e.contains("maxStoreBytesPerTenant"),
        "{e}"
    );
    assert!(e.contains(&format!("share of {} bytes", 100 << 10)), "{e}");
    assert_eq!(share.refused_writes(), 1);
    // Nothing of the refused claim was written: no record, no listing.
    assert!(fx.get("acme-4").await.unwrap().is_none());
    let listed = share.scan_prefix("run/acme/r/", 100).await.unwrap();
    assert_eq!(listed.len(), 4);
    // A recorded claim is still replayed; another tenant still claims.
    assert_eq!(claim(&fx, "acme", "0", 30).await, Ok(false));
    assert_eq!(claim(&fx, "globex", "0", 30).await, Ok(true));
    assert_eq!(share.held("globex") + share.held("acme"), {
        let all = share.scan_range("", None, 1000).await.unwrap();
        all.iter().map(|(k, v)| size(k, v)).sum::<u64>()
    });
}

#[tokio::test]
async fn removals_give_the_share_back() {
    let share = Arc::new(
        TenantShare::open(Arc::new(MemoryStore::new()), 64 << 10)
            .await
            .unwrap(),
    );
    let fx = Effects::new(share.clone(), "e");
    assert_eq!(claim(&fx, "acme", "a", 70).await, Ok(true));
    assert!(claim(&fx, "acme", "b", 40).await.is_err());
    // Retention (compare-and-delete of the record, then its listing).
    assert_eq!(fx.purge(u64::MAX).await.unwrap(), 1);
    assert_eq!(share.held("acme"), 0);
    assert_eq!(claim(&fx, "acme", "b", 40).await, Ok(true));
    // A plain remove gives back too.
    for (k, _) in share.scan_range("", None, 100).await.unwrap() {
        share.remove(&k).await.unwrap();
    }
    assert_eq!(share.held("acme"), 0);
}

/// Counted again when the store is opened again: a tenant at its share
/// stays refused after a restart, and replays its records.
#[tokio::test]
async fn the_counts_are_rebuilt_when_the_store_is_opened_again() {
    let dir = tempfile::tempdir().unwrap();
    let held = {
        let sled: Arc<dyn KvStore> = Arc::new(SledStore::open(dir.path()).unwrap());
        let share = Arc::new(TenantShare::open(sled, 64 << 10).await.unwrap());
        let fx = Effects::new(share.clone(), "e");
        assert_eq!(claim(&fx, "acme", "a", 70).await, Ok(true));
        assert_eq!(claim(&fx, "a/b%", "a", 1).await, Ok(true));
        share.put("usage/acme/r/1", vec![0; 100]).await.unwrap();
        let recorded = "rollup/run/a%2Fb%25/r";
        let r = share.compare_and_swap(recorded, None, Some(vec![0; 50]));
        r.await.unwrap().unwrap();
        (share.held("acme"), share.held("a/b%"))
    };
    let sled: Arc<dyn KvStore> = Arc::new(SledStore::open(dir.path()).unwrap());
    let share = Arc::new(TenantShare::open(sled, 64 << 10).await.unwrap());
    assert_eq!((share.held("acme"), share.held("a/b%")), held);
    let fx = Effects::new(share.clone(), "e");
    assert!(claim(&fx, "acme", "b", 40).await.is_err());
    assert_eq!(claim(&fx, "acme", "a", 70).await, Ok(false));
}

/// What every invocation records (usage records, roll-ups, ledgers) is
/// counted against its tenant (its key's segment) and never refused: a
/// tenant holding its share is refused new invocations by `admits`
/// instead.
#[tokio::test]
async fn recorded_usage_is_counted_never_refused_and_past_the_share_admits_no_more() {
    let share = TenantShare::open(Arc::new(MemoryStore::new()), 300)
        .await
        .unwrap();
    share.admits("acme").unwrap();
    let hundred = || Some(vec![0u8; 100]);
    share.put("usage/acme/r/1", vec![0; 100]).await.unwrap();
    let swap = |k: &'static str, old: Option<Vec<u8>>, new: Option<Vec<u8>>| {
        let share = &share;
        async move {
            let r = share.compare_and_swap(k, old.as_deref(), new).await;
            r.unwrap().unwrap();
        }
    };
    swap("rollup/run/acme/r", None, hundred()).await;
    swap("ledger/acme/r", None, hundred()).await;
    // Past the share: still written and counted.
    share.put("usage/acme/r/2", vec![0; 100]).await.unwrap();
    let keys = [
        "usage/acme/r/1",
        "usage/acme/r/2",
        "rollup/run/acme/r",
        "ledger/acme/r",
    ];
    let key_bytes: u64 = keys.iter().map(|k| k.len() as u64).sum();
    assert_eq!(share.held("acme"), 400 + key_bytes);
    let e = share.admits("acme").unwrap_err();
    assert!(e.is_full(), "{e}");
    let m = e.to_string();
    for part in [
        "tenant `acme`",
        "share of 300 bytes",
        "maxStoreBytesPerTenant",
        "replay",
    ] {
        assert!(m.contains(part), "no {part:?} in {m}");
    }
    // The same figures, for programs: nothing needed (a start refused).
    let r = e.share_refusal().expect("a share refusal");
    assert_eq!(
        (
            r.tenant.as_str(),
            r.held_bytes,
            r.needed_bytes,
            r.share_bytes
        ),
        ("acme", 400 + key_bytes, None, 300)
    );
    assert_eq!(share.refused_writes(), 1);
    share.admits("globex").unwrap();
    // A new claim is refused past the share, as before, with what it
    // needed.
    let e = share.put("run/acme/r/e1", Vec::new()).await.unwrap_err();
    assert!(e.is_full(), "{e}");
    let r = e.share_refusal().expect("a share refusal");
    assert_eq!((r.held_bytes, r.share_bytes), (400 + key_bytes, 300));
    assert!(r.needed_bytes.is_some_and(|n| n > 0), "{r:?}");
    assert_eq!(
        serde_json::Value::Object(r.details())["neededBytes"],
        r.needed_bytes.unwrap_or_default()
    );
    // A roll-up's update counts its change of size; the packs' all-time
    // roll-ups are not counted.
    swap("rollup/run/acme/r", hundred(), Some(vec![0; 10])).await;
    assert_eq!(share.held("acme"), 310 + key_bytes);
    share.put("rollup/pack/acme/p", vec![0; 100]).await.unwrap();
    assert_eq!(share.held("acme"), 310 + key_bytes);
    // Removals give back.
    for k in keys {
        share.remove(k).await.unwrap();
    }
    assert_eq!(share.held("acme"), 0);
    share.admits("acme").unwrap();
    // Rewriting what is stored changes nothing and is not refused.
    let inner = Arc::new(MemoryStore::new());
    inner.put("run/acme/r/e1", Vec::new()).await.unwrap();
    let share = TenantShare::open(inner, 10).await.unwrap();
    assert_eq!(share.held("acme"), "run/acme/r/e1".len() as u64);
    share.put("run/acme/r/e1", Vec::new()).await.unwrap();
}

/// A claim is checked with its listing entry as one: at the edge of the
/// share, where the entry would fit and the claim would not, nothing is
/// written; a recorded claim replayed from another run past the share is
/// answered and listed in that run, as before.
#[tokio::test]
async fn a_claim_and_its_listing_entry_are_one_and_replays_list_themselves() {
    // The sizes: acme's record `a`, then claim `b` (listing and pending
    // record) on a store without a share.
    let open = |share: u64| TenantShare::open(Arc::new(MemoryStore::new()), share);
    let sizes = Arc::new(open(u64::MAX).await.unwrap());
    let fx = Effects::new(sizes.clone(), "e");
    assert_eq!(claim(&fx, "acme", "a", 8).await, Ok(true));
    let held_a = sizes.held("acme");
    let deadline = Instant::now() + Duration::from_secs(5);
    let begun = fx.begin(&request("acme", "b"), timings(), deadline).await;
    assert!(matches!(begun, Ok(Begin::Perform { .. })), "{begun:?}");
    let listing = "run/acme/r/acme-b".len() as u64;
    let pending = sizes.held("acme") - held_a - listing;
    assert!(pending > listing, "{pending}");

    // A share with room for `b`'s listing entry and half its claim.
    let share = Arc::new(open(held_a + listing + pending / 2).await.unwrap());
    let fx = Effects::new(share.clone(), "e");
    assert_eq!(claim(&fx, "acme", "a", 8).await, Ok(true));
    assert_eq!(share.held("acme"), held_a);
    assert!(claim(&fx, "acme", "b", 1).await.is_err());
    assert_eq!(share.held("acme"), held_a);
    assert!(share.get("run/acme/r/acme-b").await.unwrap().is_none());
    assert!(fx.get("acme-b").await.unwrap().is_none());
    // The recorded claim, from another run: replayed, and listed there
    // while its entry fits the share.
    let replay_from = |run: &str| {
        let mut again = request("acme", "a");
        again.run_id = run.into();
        let fx = fx.clone();
        async move { fx.begin(&again, timings(), deadline).await.unwrap() }
    };
    let replay = replay_from("r2").await;
    assert!(matches!(replay, Begin::Replay(_)), "{replay:?}");
    assert!(share.get("run/acme/r2/acme-a").await.unwrap().is_some());
    let held = held_a + "run/acme/r2/acme-a".len() as u64;
    assert_eq!(share.held("acme"), held);
    // Past the share: replayed from ever new runs, listed in none of
    // them (each entry would grow the store past the share).
    let mut run = 3;
    while share.held("acme") + listing <= share.share() {
        let r = replay_from(&format!("r{run}")).await;
        assert!(matches!(r, Begin::Replay(_)), "{r:?}");
        run += 1;
    }
    let full = share.held("acme");
    for r in run..run + 20 {
        let replay = replay_from(&format!("r{r}")).await;
        assert!(matches!(replay, Begin::Replay(_)), "{replay:?}");
        let entry = format!("run/acme/r{r}/acme-a");
        assert!(share.get(&entry).await.unwrap().is_none(), "{entry}");
    }
    assert_eq!(share.held("acme"), full);
    // A replay from a run that lists it already is answered as before.
    assert!(matches!(replay_from("r2").await, Begin::Replay(_)));
}
