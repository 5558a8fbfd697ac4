//! The conformance suite's scans: order, prefix isolation, limits, range
//! bounds and paging, short keys and keys sharing a long prefix.

use super::super::KvStore;

pub(super) async fn scan_prefix_order_isolation_limit(store: &dyn KvStore) {
    // Inserted out of order; some keys share a textual prefix without
    // belonging to the scanned "directory".
    for k in [
        "conf/scan/b",
        "conf/scan/a",
        "conf/scan/c/1",
        "conf/scan/é",
        "conf/scan/A",
        "conf/scan",
        "conf/scanx/a",
        "conf/sca",
        "conf/scan/c",
    ] {
        store.put(k, k.as_bytes().to_vec()).await.unwrap();
    }
    let got = store.scan_prefix("conf/scan/", usize::MAX).await.unwrap();
    let keys: Vec<&str> = got.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        keys,
        [
            "conf/scan/A",
            "conf/scan/a",
            "conf/scan/b",
            "conf/scan/c",
            "conf/scan/c/1",
            "conf/scan/é"
        ]
    );
    for (k, v) in &got {
        assert_eq!(v, k.as_bytes());
    }
    // Limit keeps the first keys in order.
    let limited = store.scan_prefix("conf/scan/", 2).await.unwrap();
    assert_eq!(
        limited,
        vec![
            ("conf/scan/A".to_owned(), b"conf/scan/A".to_vec()),
            ("conf/scan/a".to_owned(), b"conf/scan/a".to_vec()),
        ]
    );
    assert!(store.scan_prefix("conf/scan/", 0).await.unwrap().is_empty());
    // A prefix that is itself a key includes it.
    let with_self = store.scan_prefix("conf/scan", usize::MAX).await.unwrap();
    assert_eq!(with_self.len(), 8);
    assert_eq!(with_self[0].0, "conf/scan");
    assert_eq!(with_self[7].0, "conf/scanx/a");
    // No match.
    assert!(
        store
            .scan_prefix("conf/none/", 10)
            .await
            .unwrap()
            .is_empty()
    );
    // Removed keys disappear from scans.
    store.remove("conf/scan/b").await.unwrap();
    let after = store.scan_prefix("conf/scan/", usize::MAX).await.unwrap();
    assert_eq!(after.len(), 5);
    assert!(after.iter().all(|(k, _)| k != "conf/scan/b"));
}

pub(super) async fn scan_range_bounds_and_paging(store: &dyn KvStore) {
    for i in 0..25 {
        store
            .put(&format!("conf/range/{i:02}"), vec![i as u8])
            .await
            .unwrap();
    }
    store.put("conf/rangf", b"after".to_vec()).await.unwrap();
    let keys = |v: Vec<(String, Vec<u8>)>| v.into_iter().map(|(k, _)| k).collect::<Vec<_>>();
    // Half-open bounds.
    let got = store
        .scan_range("conf/range/03", Some("conf/range/06"), usize::MAX)
        .await
        .unwrap();
    assert_eq!(
        got,
        vec![
            ("conf/range/03".to_owned(), vec![3]),
            ("conf/range/04".to_owned(), vec![4]),
            ("conf/range/05".to_owned(), vec![5]),
        ]
    );
    // Empty and inverted ranges.
    assert!(
        store
            .scan_range("conf/range/06", Some("conf/range/06"), 10)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        store
            .scan_range("conf/range/09", Some("conf/range/02"), 10)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        store
            .scan_range("conf/range/", None, 0)
            .await
            .unwrap()
            .is_empty()
    );
    // No upper bound runs past the prefix.
    let open = keys(store.scan_range("conf/range/24", None, 2).await.unwrap());
    assert_eq!(open, ["conf/range/24", "conf/rangf"]);
    // Paging visits every key once, in order.
    let mut seen = Vec::new();
    let mut start = "conf/range/".to_owned();
    loop {
        let page = keys(
            store
                .scan_range(&start, Some("conf/range0"), 7)
                .await
                .unwrap(),
        );
        let full = page.len() == 7;
        if let Some(last) = page.last() {
            start = format!("{last}\0");
        }
        seen.extend(page);
        if !full {
            break;
        }
    }
    let want: Vec<String> = (0..25).map(|i| format!("conf/range/{i:02}")).collect();
    assert_eq!(seen, want);
}

/// Keys that share a prefix longer than any inline part of a key (the
/// in-memory store holds 48 bytes inline: decision 0058) order and page
/// exactly as their bytes, as short ones do.
pub(super) async fn scans_order_keys_sharing_a_long_prefix(store: &dyn KvStore) {
    let p = format!("conf/long/{}/", "p".repeat(60));
    for t in ["b", "a/1", "a", "a!", "a/0", "é", "A"] {
        store
            .put(&format!("{p}{t}"), t.as_bytes().to_vec())
            .await
            .unwrap();
    }
    // Keys that differ from the prefix early, on either side of it.
    store.put("conf/lone", b"before".to_vec()).await.unwrap();
    store.put("conf/lonh", b"after".to_vec()).await.unwrap();
    let tails = |v: Vec<(String, Vec<u8>)>| {
        v.into_iter()
            .map(|(k, v)| {
                assert_eq!(k.strip_prefix(&p).map(str::as_bytes), Some(&v[..]));
                String::from_utf8(v).unwrap()
            })
            .collect::<Vec<_>>()
    };
    let all = tails(store.scan_prefix(&p, usize::MAX).await.unwrap());
    assert_eq!(all, ["A", "a", "a!", "a/0", "a/1", "b", "é"]);
    let under_a = tails(store.scan_prefix(&format!("{p}a"), 10).await.unwrap());
    assert_eq!(under_a, ["a", "a!", "a/0", "a/1"]);
    let range = store
        .scan_range(&format!("{p}a!"), Some(&format!("{p}b")), 10)
        .await
        .unwrap();
    assert_eq!(tails(range), ["a!", "a/0", "a/1"]);
    // Paging two at a time visits each once, in order.
    let mut seen = Vec::new();
    let mut start = p.clone();
    let end = format!("{}0", &p[..p.len() - 1]);
    loop {
        let page = store.scan_range(&start, Some(&end), 2).await.unwrap();
        let full = page.len() == 2;
        if let Some((last, _)) = page.last() {
            start = format!("{last}\0");
        }
        seen.extend(tails(page));
        if !full {
            break;
        }
    }
    assert_eq!(seen, all);
}

/// `scan_range_keys` answers exactly the keys of `scan_range`, in order,
/// for every bound and limit the other checks use (run after them: it
/// reads what they left).
pub(super) async fn scan_range_keys_are_scan_ranges_keys(store: &dyn KvStore) {
    let long = format!("conf/long/{}/a", "p".repeat(60));
    let cases: [(&str, Option<&str>, usize); 9] = [
        ("conf/range/03", Some("conf/range/06"), usize::MAX),
        ("conf/range/06", Some("conf/range/06"), 10),
        ("conf/range/09", Some("conf/range/02"), 10),
        ("conf/range/", None, 0),
        ("conf/range/24", None, 2),
        ("conf/range/", Some("conf/range0"), 7),
        ("conf/", None, usize::MAX),
        ("conf/", Some("conf0"), 3),
        (&long, None, 5),
    ];
    let mut some = 0;
    for (start, end, limit) in cases {
        let pairs = store.scan_range(start, end, limit).await.unwrap();
        let want: Vec<String> = pairs.into_iter().map(|(k, _)| k).collect();
        let got = store.scan_range_keys(start, end, limit).await.unwrap();
        assert_eq!(got, want, "scan_range_keys({start:?}, {end:?}, {limit})");
        some += usize::from(!got.is_empty());
    }
    assert_eq!(some, 6, "the cases that found keys");
}
