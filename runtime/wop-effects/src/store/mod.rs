//! A small durable key-value store with compare-and-swap.
//!
//! The effect-claim state machine and usage records are built on the
//! [`KvStore`] trait. Keys are UTF-8 strings; values are bytes. Three
//! backends exist: [`MemoryStore`] (tests, ephemeral runs), [`SledStore`]
//! (on disk, embedded, one process; durable before every successful write
//! returns, and no read returns a value that is not yet durable) and,
//! with the default-on cargo feature `postgres`, `PostgresStore` (many
//! executors sharing one database). [`open`] picks one from a spec string.
//!
//! Every backend must pass the same conformance suite
//! (`store::conformance::run_all`).

#[doc(hidden)]
pub mod conformance;
pub mod keyspace;
mod kv;
mod memory;
#[cfg(feature = "postgres")]
pub mod postgres;
mod share;
mod sled;
#[doc(hidden)]
pub mod tap;

pub use self::sled::{
    DEFAULT_RESERVE_MAX, DEFAULT_RESERVE_MIN, SLED_CACHE_BYTES, SledOptions, SledStore,
    default_reserve,
};
pub use kv::{CasResult, KvStore, ShareRefusal, StoreError, StoreRoom};
pub use memory::{MEMORY_STORE_BYTES, MemoryStore};
#[cfg(feature = "postgres")]
pub use postgres::{PostgresOptions, PostgresStore};
pub use share::TenantShare;

/// Whether `spec` names a PostgreSQL store (`postgres://…` or
/// `postgresql://…`) rather than a sled directory.
pub fn is_postgres_url(spec: &str) -> bool {
    spec.starts_with("postgres://") || spec.starts_with("postgresql://")
}

/// Opens the store that `spec` names:
///
/// - `postgres://…` or `postgresql://…`: a [`PostgresStore`](postgres) (see
///   its module docs for the URL form, TLS policy and the `wop_schema` /
///   `wop_pool` parameters). The schema is created or migrated before this
///   returns (on a helper thread, so this works with or without a running
///   tokio runtime); pooled connections are then made lazily on the
///   caller's runtime. Without the `postgres` feature: `Unavailable`.
/// - anything else: a directory path for a [`SledStore`] (created if
///   missing; the default backend).
///
/// Either way the key layout is brought up to date before this returns
/// ([`crate::store::keyspace::upgrade`]).
///
/// Errors never contain the URL's password.
pub fn open(spec: &str) -> Result<std::sync::Arc<dyn KvStore>, StoreError> {
    open_with(spec, SledOptions::default())
}

/// As [`open`], with `options` for a sled store (a PostgreSQL store
/// ignores them).
pub fn open_with(
    spec: &str,
    options: SledOptions,
) -> Result<std::sync::Arc<dyn KvStore>, StoreError> {
    if is_postgres_url(spec) {
        #[cfg(feature = "postgres")]
        {
            return Ok(std::sync::Arc::new(PostgresStore::connect_blocking(spec)?));
        }
        #[cfg(not(feature = "postgres"))]
        {
            return Err(StoreError::Unavailable(
                "this build of wop-effects has no PostgreSQL support (cargo feature `postgres`)"
                    .to_owned(),
            ));
        }
    }
    if spec.is_empty() {
        return Err(StoreError::Unavailable(
            "empty store spec: give a directory or a postgres:// URL".to_owned(),
        ));
    }
    let store = std::sync::Arc::new(SledStore::open_with(std::path::Path::new(spec), options)?);
    on_helper_thread("the key layout upgrade", || async {
        crate::store::keyspace::upgrade(&*store).await.map(|_| ())
    })?;
    Ok(store)
}

/// Runs `work` to completion on a helper thread with a runtime of its own,
/// so that opening a store works with or without a running tokio runtime
/// (and never blocks the caller's). `what` names it in errors.
pub(crate) fn on_helper_thread<F, Fut>(what: &str, work: F) -> Result<(), StoreError>
where
    F: FnOnce() -> Fut + Send,
    Fut: std::future::Future<Output = Result<(), StoreError>>,
{
    let done = std::thread::scope(|s| {
        s.spawn(|| {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| {
                    StoreError::Unavailable(format!("cannot start a runtime for {what}: {e}"))
                })?;
            rt.block_on(work())
        })
        .join()
    });
    done.unwrap_or_else(|_| Err(StoreError::Unavailable(format!("{what} did not complete"))))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn memory_conformance() {
        conformance::run_all(Arc::new(MemoryStore::new())).await;
    }

    /// A bounded in-memory store behaves the same while it has room.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn bounded_memory_conformance() {
        let store = Arc::new(MemoryStore::with_capacity(1 << 30));
        conformance::run_all(store.clone()).await;
        assert!(store.bytes() > 0);
    }

    /// A store shared out between tenants behaves the same while each has
    /// room, on both local backends.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn tenant_share_conformance() {
        let memory = TenantShare::open(Arc::new(MemoryStore::new()), 1 << 30);
        conformance::run_all(Arc::new(memory.await.unwrap())).await;
        let dir = tempfile::tempdir().unwrap();
        let sled = Arc::new(SledStore::open(&dir.path().join("db")).unwrap());
        let share = TenantShare::open(sled, 1 << 30).await.unwrap();
        conformance::run_all(Arc::new(share)).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn sled_conformance() {
        let dir = tempfile::tempdir().unwrap();
        let store = SledStore::open(&dir.path().join("db")).unwrap();
        conformance::run_all(Arc::new(store)).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn sled_conformance_without_group_commit() {
        let dir = tempfile::tempdir().unwrap();
        let store = SledStore::open_with(
            &dir.path().join("db"),
            SledOptions {
                group_commit: false,
                ..SledOptions::default()
            },
        )
        .unwrap();
        conformance::run_all(Arc::new(store)).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn open_picks_sled_for_a_path() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path().join("db").to_str().unwrap()).unwrap();
        assert_eq!(store.backend(), "sled");
        conformance::run_all(store).await;
        assert!(open("").is_err());
    }

    #[cfg(feature = "postgres")]
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn postgres_conformance() {
        let Some(url) = conformance::postgres_test_url("postgres_conformance") else {
            return;
        };
        let store = PostgresStore::connect(&url).await.unwrap();
        conformance::run_all(Arc::new(store)).await;
    }

    #[cfg(feature = "postgres")]
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn open_picks_postgres_for_a_url_and_migrates_once() {
        let Some(url) = conformance::postgres_test_url("open_postgres") else {
            return;
        };
        let store = open(&url).unwrap();
        assert_eq!(store.backend(), "postgres");
        store.put("k", b"v".to_vec()).await.unwrap();
        // Reopening (an already migrated schema) keeps the data.
        let again = open(&url).unwrap();
        assert_eq!(again.get("k").await.unwrap(), Some(b"v".to_vec()));
        // Several executors starting at once: the advisory lock serializes
        // the migration.
        let url2 = format!("{url}x");
        let mut tasks = Vec::new();
        for _ in 0..4 {
            let u = url2.clone();
            tasks.push(tokio::spawn(
                async move { PostgresStore::connect(&u).await },
            ));
        }
        for t in tasks {
            t.await.unwrap().unwrap();
        }
        // Bad credentials: an error without the password.
        let bad = url.replacen("://wop:", "://wop:wrong-secret-", 1);
        if bad != url {
            let msg = match open(&bad) {
                Err(e) => e.to_string(),
                Ok(_) => panic!("opened with a wrong password"),
            };
            assert!(!msg.contains("wrong-secret"), "{msg}");
        }
    }

    #[cfg(feature = "postgres")]
    #[tokio::test]
    async fn postgres_refuses_newer_schema() {
        let Some(url) = conformance::postgres_test_url("newer_schema") else {
            return;
        };
        let store = PostgresStore::connect(&url).await.unwrap();
        drop(store);
        let schema = url.rsplit("wop_schema=").next().unwrap().to_owned();
        let admin = PostgresStore::connect(&url).await.unwrap();
        // Bump the version behind wop's back through the store's own table.
        admin
            .raw_execute_for_tests(&format!(
                "UPDATE \"{schema}\".wop_schema SET version = version + 1 WHERE component = 'kv'"
            ))
            .await
            .unwrap();
        let err = PostgresStore::connect(&url).await.unwrap_err();
        assert!(matches!(err, StoreError::Unavailable(_)), "{err}");
        assert!(err.to_string().contains("newer"), "{err}");
    }
}
