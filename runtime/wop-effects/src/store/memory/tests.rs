use super::*;

fn store(capacity: u64) -> MemoryStore {
    MemoryStore::with_capacity(capacity)
}

/// A new key past the capacity is refused and nothing changes; removing
/// frees its bytes, and the key then fits.
#[tokio::test]
async fn a_new_key_past_the_capacity_is_refused_and_writes_nothing() {
    let s = store(1_000);
    s.put("a", vec![0; 600]).await.unwrap();
    let before = s.bytes();
    assert_eq!(before, 1 + 600 + ENTRY_OVERHEAD);
    let err = s.put("b", vec![0; 600]).await.unwrap_err();
    assert!(matches!(err, StoreError::Full(_)), "{err}");
    assert!(err.to_string().contains("durable store"), "{err}");
    let cas = s.compare_and_swap("b", None, Some(vec![0; 600])).await;
    assert!(matches!(cas, Err(StoreError::Full(_))));
    assert_eq!(s.get("b").await.unwrap(), None);
    assert_eq!(s.bytes(), before);
    s.remove("a").await.unwrap();
    assert_eq!(s.bytes(), 0);
    s.put("b", vec![0; 600]).await.unwrap();
    assert_eq!(s.bytes(), before);
}

/// Replacing an existing key's value (settling a claim) may use an eighth
/// more than the capacity, and no more; shrinking always fits.
#[tokio::test]
async fn settling_an_existing_key_has_an_eighth_of_headroom() {
    let s = store(8_000);
    s.put("claim", vec![1; 7_000]).await.unwrap();
    // 7,000 + 5 + 128 = 7,133: a new key of 1,000 does not fit.
    assert!(s.put("other", vec![0; 1_000]).await.is_err());
    // Growing the claim to 8,500 (8,633 ≤ 9,000) fits…
    let grown = s
        .compare_and_swap("claim", Some(&[1; 7_000]), Some(vec![2; 8_500]))
        .await
        .unwrap();
    assert!(grown.is_ok());
    // …to 9,000 (9,133 > 9,000) does not, and the value stays.
    let err = s.put("claim", vec![3; 9_000]).await.unwrap_err();
    assert!(matches!(err, StoreError::Full(_)), "{err}");
    assert_eq!(s.get("claim").await.unwrap(), Some(vec![2; 8_500]));
    // Shrinking fits even above the capacity.
    s.put("claim", vec![4; 10]).await.unwrap();
    assert_eq!(s.bytes(), 5 + 10 + ENTRY_OVERHEAD);
}

/// A failed swap reports the current value and writes nothing; the count
/// follows inserts, overwrites and removals exactly.
#[tokio::test]
async fn the_byte_count_follows_every_write() {
    let s = store(u64::MAX / 2);
    s.put("k1", vec![0; 10]).await.unwrap();
    s.put("k1", vec![0; 30]).await.unwrap();
    s.compare_and_swap("k2", None, Some(vec![0; 5]))
        .await
        .unwrap()
        .unwrap();
    let failed = s
        .compare_and_swap("k2", None, Some(vec![0; 50]))
        .await
        .unwrap();
    assert_eq!(failed, Err(Some(vec![0; 5])));
    assert_eq!(s.bytes(), (2 + 30 + 2 + 5) + 2 * ENTRY_OVERHEAD);
    s.compare_and_swap("k2", Some(&[0; 5]), None)
        .await
        .unwrap()
        .unwrap();
    s.remove("absent").await.unwrap();
    assert_eq!(s.bytes(), 2 + 30 + ENTRY_OVERHEAD);
}

/// Unbounded by default.
#[tokio::test]
async fn new_is_unbounded() {
    let s = MemoryStore::new();
    assert_eq!(s.capacity(), None);
    s.put("big", vec![0; 1 << 20]).await.unwrap();
    s.put("big2", vec![0; 1 << 20]).await.unwrap();
}

/// Keys sharing more than the inline head (decision 0058), and keys that
/// differ inside it, scan in byte order and within their bounds.
#[tokio::test]
async fn scans_keep_byte_order_past_the_inline_head() {
    let s = MemoryStore::new();
    let long = format!("usage/{}/", "t".repeat(key::HEAD_BYTES));
    let mut keys: Vec<String> = ["b", "a/1", "a", "a\u{1}", "a/0", "é", "\u{7f}"]
        .iter()
        .map(|t| format!("{long}{t}"))
        .collect();
    keys.extend(["usage/", "usage/s", "usage/u", "usage0"].map(str::to_owned));
    for (i, k) in keys.iter().enumerate() {
        s.put(k, vec![i as u8]).await.unwrap();
    }
    keys.sort();
    let all: Vec<String> = s
        .scan_range("", None, 100)
        .await
        .unwrap()
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    assert_eq!(all, keys);
    let under: Vec<String> = s
        .scan_prefix(&format!("{long}a"), 100)
        .await
        .unwrap()
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    let want: Vec<&str> = ["a", "a\u{1}", "a/0", "a/1"]
        .iter()
        .map(|t| {
            keys.iter()
                .find(|k| **k == format!("{long}{t}"))
                .unwrap()
                .as_str()
        })
        .collect();
    assert_eq!(under, want);
    let page = s
        .scan_range(&format!("{long}a/0"), Some(&format!("{long}b")), 100)
        .await
        .unwrap();
    assert_eq!(page.len(), 2, "a/0 and a/1: {page:?}");
    assert_eq!(s.get(&format!("{long}a/1")).await.unwrap(), Some(vec![1]));
    s.remove(&format!("{long}a/1")).await.unwrap();
    assert_eq!(s.get(&format!("{long}a/1")).await.unwrap(), None);
    assert_eq!(s.scan_prefix(&long, 100).await.unwrap().len(), 6);
}
