//! The PostgreSQL store's own schema: created or migrated once per
//! connect, under an advisory lock, over one dedicated connection; a
//! database migrated by a newer build is refused, never written.

use super::url_policy::Parsed;
use super::{pg_error, qualifier};
use crate::store::StoreError;
use tokio_postgres::NoTls;

/// The schema version this build writes and understands.
pub const SCHEMA_VERSION: i32 = 1;

/// Migrations, in order: `MIGRATIONS[i]` brings version `i` to `i + 1`.
/// `{s}` is replaced by the schema qualifier (`"name".` or nothing).
const MIGRATIONS: &[&str] = &["CREATE TABLE IF NOT EXISTS {s}wop_kv (
        key BYTEA PRIMARY KEY,
        value BYTEA NOT NULL
    )"];

/// Advisory lock id taken while creating or migrating the schema.
const MIGRATION_LOCK: i64 = 0x776f_705f_6b76; // "wop_kv"

/// Creates or migrates the schema over one dedicated connection.
pub(super) async fn migrate(parsed: &Parsed) -> Result<(), StoreError> {
    let display = &parsed.display;
    let (mut client, connection) = parsed
        .config
        .connect(NoTls)
        .await
        .map_err(|e| pg_error(display, "connecting", &e))?;
    let conn = tokio::spawn(async move {
        if let Err(e) = connection.await {
            tracing::debug!(error = %e, "migration connection ended");
        }
    });
    let r = migrate_on(&mut client, parsed).await;
    drop(client);
    let _ = conn.await;
    r
}

async fn migrate_on(
    client: &mut tokio_postgres::Client,
    parsed: &Parsed,
) -> Result<(), StoreError> {
    let display = &parsed.display;
    let e = |what: &'static str| move |e: tokio_postgres::Error| pg_error(display, what, &e);
    let q = qualifier(&parsed.options);
    let tx = client.transaction().await.map_err(e("begin migration"))?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
        .await
        .map_err(e("taking the migration lock"))?;
    if let Some(s) = &parsed.options.schema {
        tx.batch_execute(&format!("CREATE SCHEMA IF NOT EXISTS \"{s}\""))
            .await
            .map_err(e("creating the schema"))?;
    }
    tx.batch_execute(&format!(
        "CREATE TABLE IF NOT EXISTS {q}wop_schema (
            component TEXT PRIMARY KEY,
            version INTEGER NOT NULL,
            migrated_at TIMESTAMPTZ NOT NULL DEFAULT now()
        )"
    ))
    .await
    .map_err(e("creating the schema table"))?;
    let row = tx
        .query_opt(
            &format!("SELECT version FROM {q}wop_schema WHERE component = 'kv'"),
            &[],
        )
        .await
        .map_err(e("reading the schema version"))?;
    let current: i32 = match row {
        Some(r) => r.try_get(0).map_err(e("reading the schema version"))?,
        None => 0,
    };
    if current > SCHEMA_VERSION {
        return Err(StoreError::Unavailable(format!(
            "PostgreSQL store {display} has schema version {current}, newer than this build of \
             wop understands ({SCHEMA_VERSION}); upgrade wop"
        )));
    }
    for (i, m) in MIGRATIONS.iter().enumerate().skip(current.max(0) as usize) {
        tx.batch_execute(&m.replace("{s}", &q))
            .await
            .map_err(e("migrating the schema"))?;
        tracing::info!(store = %parsed.display, to = i + 1, "PostgreSQL store schema migrated");
    }
    if current != SCHEMA_VERSION {
        tx.execute(
            &format!(
                "INSERT INTO {q}wop_schema (component, version) VALUES ('kv', $1) \
                 ON CONFLICT (component) DO UPDATE SET version = EXCLUDED.version, \
                 migrated_at = now()"
            ),
            &[&SCHEMA_VERSION],
        )
        .await
        .map_err(e("recording the schema version"))?;
    }
    tx.commit().await.map_err(e("committing the migration"))
}
