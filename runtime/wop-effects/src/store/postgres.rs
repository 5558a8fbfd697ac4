//! A [`KvStore`] on PostgreSQL, for many executors sharing one store.
//!
//! ## Schema
//!
//! One table, `wop_kv(key BYTEA PRIMARY KEY, value BYTEA NOT NULL)`. Keys
//! are stored as their UTF-8 bytes, so the primary-key b-tree orders them
//! exactly as the trait requires (byte order) whatever the database's
//! collation, and serves prefix scans as a range `key >= prefix AND key <
//! successor(prefix)`. A second table, `wop_schema(component, version)`,
//! holds the schema version; [`PostgresStore::connect`] creates or migrates
//! the schema at start, under a transaction-scoped advisory lock so that
//! executors starting together do not race, and refuses a schema newer than
//! this build knows.
//!
//! ## Atomicity and durability
//!
//! Every operation is one auto-committed statement (the client runs it
//! again only when a racing writer committed after its snapshot):
//! insert-if-absent is `INSERT … ON CONFLICT DO NOTHING`, compare-and-set
//! is `UPDATE … WHERE key = $1 AND value = $old` (or `DELETE … WHERE value
//! = $old`), each answering with the value the key held before it, so a
//! failed swap reports the current value in the same round trip. Under PostgreSQL's
//! default `READ COMMITTED`, a concurrent writer's row is re-checked after
//! it commits, so at most one compare-and-swap from the same expected value
//! wins. A statement returns after its commit, which with the server's
//! default `synchronous_commit = on` is flushed to the WAL: a successful
//! write is durable before it returns, and a read only ever sees committed
//! (hence durable) data.
//!
//! ## Connection URL and TLS
//!
//! `postgres://user:password@host:port/db?…` or `postgresql://…`, with any
//! parameter `tokio-postgres` understands, plus two of ours that are
//! removed before connecting: `wop_schema=<name>` (put the tables in that
//! PostgreSQL schema, created if missing; default: the connection's
//! `search_path`, normally `public`) and `wop_pool=<n>` (most pooled
//! connections, default 16).
//!
//! No TLS stack is compiled in. A URL whose hosts are all loopback
//! (`localhost`, `127.0.0.0/8`, `::1`) or unix-socket directories is
//! accepted. A URL naming any other host is **refused** unless it says
//! `sslmode=disable`, the operator's explicit statement that cleartext to
//! that host is acceptable (e.g. a private link or a TLS-terminating
//! sidecar). Passwords never appear in error messages.

use super::{CasResult, KvStore, StoreError};
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};
use std::time::Duration;
use tokio_postgres::NoTls;

mod batch;
mod schema;
mod sql;
mod url_policy;

use sql::Sql;

pub use schema::SCHEMA_VERSION;
use schema::migrate;
pub use url_policy::redact_url;
use url_policy::{Parsed, parse};

/// Options of [`PostgresStore::connect_with`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PostgresOptions {
    /// The PostgreSQL schema (namespace) holding the tables, created if
    /// missing. `None` (the default): the connection's `search_path`.
    /// Letters, digits and `_` only, starting with a letter or `_`.
    pub schema: Option<String>,
    /// Most pooled connections (default 16).
    pub max_connections: usize,
    /// How long to wait for a connection, new or pooled (default 10 s).
    pub connect_timeout: Duration,
}

impl Default for PostgresOptions {
    fn default() -> Self {
        Self {
            schema: None,
            max_connections: 16,
            connect_timeout: Duration::from_secs(10),
        }
    }
}

/// A [`KvStore`] in a PostgreSQL database (see the module docs).
pub struct PostgresStore {
    db: PoolSql,
    /// `"schema".` or empty.
    qualifier: String,
    /// Group commit of fresh claims ([`batch`]).
    batch: batch::Batcher,
}

/// The pool and the statements: what the store and its batching task
/// share.
#[derive(Clone)]
struct PoolSql {
    pool: Pool,
    /// The URL with the password replaced, for messages.
    display: String,
    sql: std::sync::Arc<Sql>,
}

impl std::fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresStore")
            .field("url", &self.db.display)
            .field("qualifier", &self.qualifier)
            .finish_non_exhaustive()
    }
}

fn qualifier(options: &PostgresOptions) -> String {
    options
        .schema
        .as_ref()
        .map(|s| format!("\"{s}\"."))
        .unwrap_or_default()
}

fn pg_error(display: &str, what: &str, e: &tokio_postgres::Error) -> StoreError {
    let unavailable = e.is_closed()
        || e.as_db_error().is_some_and(|d| {
            let c = d.code().code();
            c.starts_with("08") || c.starts_with("57") || c.starts_with("53")
        })
        || e.as_db_error().is_none();
    // The driver's Display of a database error is only "db error"; use the
    // server's message.
    let msg = match e.as_db_error() {
        Some(d) => format!("{}: {}", d.code().code(), d.message()),
        None => e.to_string(),
    };
    let text = format!("{what} failed on PostgreSQL store {display}: {msg}");
    if unavailable {
        StoreError::Unavailable(text)
    } else {
        StoreError::Io(text)
    }
}

fn build_pool(parsed: &Parsed) -> Result<Pool, StoreError> {
    let mgr = Manager::from_config(
        parsed.config.clone(),
        NoTls,
        ManagerConfig {
            recycling_method: RecyclingMethod::Fast,
        },
    );
    Pool::builder(mgr)
        .max_size(parsed.options.max_connections)
        .runtime(Runtime::Tokio1)
        .wait_timeout(Some(parsed.options.connect_timeout))
        .create_timeout(Some(parsed.options.connect_timeout))
        .build()
        .map_err(|e| {
            StoreError::Unavailable(format!(
                "cannot build the connection pool for {}: {e}",
                parsed.display
            ))
        })
}

/// The smallest byte string greater than every string starting with
/// `prefix`, or `None` if there is none (empty or all-0xFF prefix).
fn successor(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut s = prefix.to_vec();
    while let Some(last) = s.pop() {
        if last < 0xFF {
            s.push(last + 1);
            return Some(s);
        }
    }
    None
}

/// Bound on the conflict-reporting loop of one compare-and-swap (each turn
/// means another writer changed the key in between).
const MAX_CAS_TURNS: usize = 1000;

impl PostgresStore {
    /// The `(key, value)` pairs with `from <= key < to` (`to = None`: no
    /// upper bound), in key (byte) order, at most `limit` of them: what
    /// both scans run (a prefix is the range up to its successor, which
    /// need not be UTF-8).
    async fn scan(
        &self,
        from: &[u8],
        to: Option<&[u8]>,
        limit: usize,
    ) -> Result<Vec<(String, Vec<u8>)>, StoreError> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let client = self.db.client().await?;
        let rows = match to {
            Some(to) => {
                let st = client
                    .prepare_cached(&self.db.sql.scan_range)
                    .await
                    .map_err(self.db.err("prepare"))?;
                client.query(&st, &[&from, &to, &limit]).await
            }
            None => {
                let st = client
                    .prepare_cached(&self.db.sql.scan_from)
                    .await
                    .map_err(self.db.err("prepare"))?;
                client.query(&st, &[&from, &limit]).await
            }
        }
        .map_err(self.db.err("scan"))?;
        let mut out = Vec::with_capacity(rows.len());
        for r in rows {
            let k: Vec<u8> = r.try_get(0).map_err(self.db.err("scan"))?;
            let v: Vec<u8> = r.try_get(1).map_err(self.db.err("scan"))?;
            out.push((self.decode_key(k)?, v));
        }
        Ok(out)
    }
    /// Connects to `url` (see the module docs for the accepted form), then
    /// creates or migrates the schema and upgrades the key layout
    /// ([`crate::store::keyspace`]).
    pub async fn connect(url: &str) -> Result<PostgresStore, StoreError> {
        Self::connect_with(url, PostgresOptions::default()).await
    }

    /// Like [`connect`](Self::connect) with `options`; parameters in the URL
    /// (`wop_schema`, `wop_pool`) override them.
    pub async fn connect_with(
        url: &str,
        options: PostgresOptions,
    ) -> Result<PostgresStore, StoreError> {
        let parsed = parse(url, options)?;
        migrate(&parsed).await?;
        let store = Self::from_parsed(&parsed)?;
        crate::store::keyspace::upgrade(&store).await?;
        Ok(store)
    }

    /// For callers without an async context: parses, migrates on a helper
    /// thread with its own runtime, and returns a store whose pool connects
    /// lazily on the caller's runtime.
    pub(crate) fn connect_blocking(url: &str) -> Result<PostgresStore, StoreError> {
        let parsed = parse(url, PostgresOptions::default())?;
        let what = format!("the migration of PostgreSQL store {}", parsed.display);
        super::on_helper_thread(&what, || async {
            migrate(&parsed).await?;
            // On this thread's own pool, dropped with it.
            let store = Self::from_parsed(&parsed)?;
            crate::store::keyspace::upgrade(&store).await.map(|_| ())
        })?;
        Self::from_parsed(&parsed)
    }

    fn from_parsed(parsed: &Parsed) -> Result<PostgresStore, StoreError> {
        let qualifier = qualifier(&parsed.options);
        Ok(PostgresStore {
            db: PoolSql {
                pool: build_pool(parsed)?,
                sql: std::sync::Arc::new(Sql::new(&qualifier)),
                display: parsed.display.clone(),
            },
            qualifier,
            batch: batch::Batcher::new(),
        })
    }

    /// The store URL with its password redacted.
    pub fn display_url(&self) -> &str {
        &self.db.display
    }
}

impl PoolSql {
    async fn client(&self) -> Result<deadpool_postgres::Object, StoreError> {
        self.pool.get().await.map_err(|e| match e {
            deadpool_postgres::PoolError::Backend(e) => pg_error(&self.display, "connecting", &e),
            e => StoreError::Unavailable(format!(
                "no connection to PostgreSQL store {}: {e}",
                self.display
            )),
        })
    }

    fn err(&self, what: &str) -> impl Fn(tokio_postgres::Error) -> StoreError + '_ {
        let what = what.to_owned();
        move |e| pg_error(&self.display, &what, &e)
    }

    async fn current(
        &self,
        client: &deadpool_postgres::Object,
        key: &[u8],
    ) -> Result<Option<Vec<u8>>, StoreError> {
        let st = client
            .prepare_cached(&self.sql.get)
            .await
            .map_err(self.err("prepare"))?;
        let row = client
            .query_opt(&st, &[&key])
            .await
            .map_err(self.err("get"))?;
        match row {
            Some(r) => Ok(Some(r.try_get::<_, Vec<u8>>(0).map_err(self.err("get"))?)),
            None => Ok(None),
        }
    }
}

impl PostgresStore {
    /// Runs one statement (tests only).
    #[cfg(test)]
    pub(crate) async fn raw_execute_for_tests(&self, sql: &str) -> Result<u64, StoreError> {
        let client = self.db.client().await?;
        client
            .execute(sql, &[])
            .await
            .map_err(self.db.err("execute"))
    }

    fn decode_key(&self, key: Vec<u8>) -> Result<String, StoreError> {
        String::from_utf8(key).map_err(|e| {
            StoreError::Corrupt(format!(
                "PostgreSQL store {} holds a non-UTF-8 key ({}); it was not written by wop",
                self.db.display,
                hex::encode(e.as_bytes())
            ))
        })
    }
}

#[async_trait::async_trait]
impl KvStore for PostgresStore {
    async fn compare_and_swap(
        &self,
        key: &str,
        expected: Option<&[u8]>,
        new: Option<Vec<u8>>,
    ) -> Result<CasResult, StoreError> {
        let client = self.db.client().await?;
        let k = key.as_bytes();
        let (sql, what) = match (&expected, &new) {
            (None, Some(_)) => (&self.db.sql.insert_if_absent, "insert-if-absent"),
            (Some(_), Some(_)) => (&self.db.sql.update_if, "compare-and-set"),
            (Some(_), None) => (&self.db.sql.delete_if, "compare-and-delete"),
            (None, None) => {
                // "Delete if absent": nothing to write.
                return Ok(match self.db.current(&client, k).await? {
                    None => Ok(()),
                    Some(v) => Err(Some(v)),
                });
            }
        };
        let st = client
            .prepare_cached(sql)
            .await
            .map_err(self.db.err("prepare"))?;
        for _ in 0..MAX_CAS_TURNS {
            let row = match (&expected, &new) {
                (None, Some(v)) => client.query_one(&st, &[&k, v]).await,
                (Some(old), Some(v)) => client.query_one(&st, &[&k, old, v]).await,
                (Some(old), None) => client.query_one(&st, &[&k, old]).await,
                // Answered before the loop.
                (None, None) => return Ok(Ok(())),
            }
            .map_err(self.db.err(what))?;
            let changed: i64 = row.try_get(0).map_err(self.db.err(what))?;
            if changed == 1 {
                return Ok(Ok(()));
            }
            // Lost: report the value that beat us, as the statement saw
            // it. If that is what we expected, the winner committed after
            // the statement's snapshot (or the key has meanwhile become
            // what we expected again): run the statement again.
            let current: Option<Vec<u8>> = row.try_get(1).map_err(self.db.err(what))?;
            if current.as_deref() != expected {
                return Ok(Err(current));
            }
        }
        Err(StoreError::Unavailable(format!(
            "compare-and-swap of {key} on PostgreSQL store {} kept racing with other writers",
            self.db.display
        )))
    }

    async fn put_then_insert(
        &self,
        marker: &str,
        marker_value: Vec<u8>,
        key: &str,
        value: Vec<u8>,
    ) -> Result<CasResult, StoreError> {
        if marker == key {
            // One statement cannot upsert and insert the same row.
            self.put(marker, marker_value).await?;
            return self.compare_and_swap(key, None, Some(value)).await;
        }
        let (reply, answer) = tokio::sync::oneshot::channel();
        self.batch.submit(
            &self.db,
            batch::Request {
                marker: marker.as_bytes().to_vec(),
                marker_value,
                key: key.as_bytes().to_vec(),
                value,
                reply,
            },
        );
        answer.await.unwrap_or_else(|_| {
            Err(StoreError::Unavailable(format!(
                "the claim writer of PostgreSQL store {} stopped before answering; retry",
                self.db.display
            )))
        })
    }

    async fn remove_unchanged(
        &self,
        pairs: Vec<(String, Vec<u8>)>,
    ) -> Result<Vec<String>, StoreError> {
        if pairs.is_empty() {
            return Ok(Vec::new());
        }
        let (keys, values): (Vec<Vec<u8>>, Vec<Vec<u8>>) =
            pairs.into_iter().map(|(k, v)| (k.into_bytes(), v)).unzip();
        let client = self.db.client().await?;
        let st = client
            .prepare_cached(&self.db.sql.remove_unchanged)
            .await
            .map_err(self.db.err("prepare"))?;
        let rows = client
            .query(&st, &[&keys, &values])
            .await
            .map_err(self.db.err("remove-unchanged"))?;
        rows.iter()
            .map(|r| {
                let k: Vec<u8> = r.try_get(0).map_err(self.db.err("remove-unchanged"))?;
                String::from_utf8(k)
                    .map_err(|e| StoreError::Corrupt(format!("a key is not UTF-8: {e}")))
            })
            .collect()
    }

    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let client = self.db.client().await?;
        self.db.current(&client, key.as_bytes()).await
    }

    async fn put(&self, key: &str, value: Vec<u8>) -> Result<(), StoreError> {
        let client = self.db.client().await?;
        let st = client
            .prepare_cached(&self.db.sql.put)
            .await
            .map_err(self.db.err("prepare"))?;
        client
            .execute(&st, &[&key.as_bytes(), &value])
            .await
            .map_err(self.db.err("put"))?;
        Ok(())
    }

    async fn remove(&self, key: &str) -> Result<(), StoreError> {
        let client = self.db.client().await?;
        let st = client
            .prepare_cached(&self.db.sql.remove)
            .await
            .map_err(self.db.err("prepare"))?;
        client
            .execute(&st, &[&key.as_bytes()])
            .await
            .map_err(self.db.err("remove"))?;
        Ok(())
    }

    async fn scan_prefix(
        &self,
        prefix: &str,
        limit: usize,
    ) -> Result<Vec<(String, Vec<u8>)>, StoreError> {
        let from = prefix.as_bytes();
        self.scan(from, successor(from).as_deref(), limit).await
    }

    async fn scan_range(
        &self,
        start: &str,
        end: Option<&str>,
        limit: usize,
    ) -> Result<Vec<(String, Vec<u8>)>, StoreError> {
        if end.is_some_and(|e| e <= start) {
            return Ok(Vec::new());
        }
        self.scan(start.as_bytes(), end.map(str::as_bytes), limit)
            .await
    }

    /// A failed swap's statement answers with the value it found.
    fn failed_swap_reads_free(&self) -> bool {
        true
    }

    fn backend(&self) -> &'static str {
        "postgres"
    }
}

#[cfg(test)]
mod tests;
