//! Compile once; a second load does no compilation; tampering is caught.

use super::*;
use wop_runtime::ErrorCode;

fn with_cache(dir: &Path) -> Runtime {
    let mut cfg = RuntimeConfig::new();
    cfg.cache_dir(dir);
    Runtime::new(&cfg).unwrap()
}

#[tokio::test]
async fn second_load_hits_the_cache() {
    let cache = tempfile::tempdir().unwrap();
    let a = with_cache(cache.path());
    load(&a, "hello").await;
    assert_eq!(a.stats().cache.compilations, 1);
    load(&a, "hello").await;
    assert_eq!(a.stats().cache.compilations, 1, "same runtime: memory hit");
    assert_eq!(a.stats().cache.memory_hits, 1);

    // A fresh runtime (as after a restart) loads from disk.
    let b = with_cache(cache.path());
    load(&b, "hello").await;
    assert_eq!(b.stats().cache.compilations, 0);
    assert_eq!(b.stats().cache.disk_hits, 1);
}

#[tokio::test]
async fn corrupted_cache_entry_is_discarded_and_recompiled() {
    let cache = tempfile::tempdir().unwrap();
    let a = with_cache(cache.path());
    let insp = a.inspect_pack(&pack("hello")).await.unwrap();
    let path = a.cache_path(&insp.sha256).unwrap();
    let mut bytes = std::fs::read(&path).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0xff;
    std::fs::write(&path, &bytes).unwrap();

    let b = with_cache(cache.path());
    load(&b, "hello").await;
    let s = b.stats().cache;
    assert_eq!((s.disk_rejected, s.disk_hits, s.compilations), (1, 0, 1));
}

#[tokio::test]
async fn tampered_entry_is_rejected() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = copy_pack("hello", tmp.path());
    let wasm = dir.join("hello.wasm");
    let mut bytes = std::fs::read(&wasm).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    std::fs::write(&wasm, bytes).unwrap();
    let rt = runtime("");
    let e = rt.load_pack(&dir).await.unwrap_err();
    assert_eq!(e.code(), ErrorCode::PackIntegrityMismatch);
    assert_eq!(rt.stats().cache.compilations, 0, "never compiled");
}
