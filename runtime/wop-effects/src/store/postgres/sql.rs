//! The statements of the PostgreSQL store, with the table name filled
//! in: one place to read every SQL text the store sends.

/// The statements, with the table name filled in.
pub(super) struct Sql {
    pub(super) get: String,
    pub(super) put: String,
    pub(super) remove: String,
    pub(super) insert_if_absent: String,
    pub(super) update_if: String,
    pub(super) delete_if: String,
    pub(super) scan_range: String,
    pub(super) scan_from: String,
    pub(super) put_then_insert: String,
    pub(super) put_then_insert_batch: String,
    pub(super) remove_unchanged: String,
}

impl Sql {
    pub(super) fn new(q: &str) -> Self {
        let t = format!("{q}wop_kv");
        Sql {
            get: format!("SELECT value FROM {t} WHERE key = $1"),
            put: format!(
                "INSERT INTO {t} (key, value) VALUES ($1, $2) \
                 ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value"
            ),
            remove: format!("DELETE FROM {t} WHERE key = $1"),
            // Each compare-and-swap is one statement that also answers
            // with the value the key held before it (the statement's
            // snapshot), so a failed swap reports it in the same round
            // trip. A row a racing writer committed after the snapshot is
            // not seen: then `changed` is 0 and `current` may equal the
            // expected value, and the client runs the statement again.
            insert_if_absent: cas_statement(
                &t,
                "INSERT INTO {t} (key, value) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING",
            ),
            update_if: cas_statement(
                &t,
                "UPDATE {t} SET value = $3 WHERE key = $1 AND value = $2",
            ),
            delete_if: cas_statement(&t, "DELETE FROM {t} WHERE key = $1 AND value = $2"),
            scan_range: format!(
                "SELECT key, value FROM {t} WHERE key >= $1 AND key < $2 ORDER BY key LIMIT $3"
            ),
            scan_from: format!("SELECT key, value FROM {t} WHERE key >= $1 ORDER BY key LIMIT $2"),
            // One statement, one round trip, one commit: the marker upsert
            // and the insert-if-absent. The final SELECT reads the
            // statement's snapshot, i.e. the value `$3` held before it (a
            // row committed by a racing writer after the snapshot is not
            // seen: then `inserted` is 0 and `current` NULL, and the client
            // reads again).
            put_then_insert: format!(
                "WITH marker AS (INSERT INTO {t} (key, value) VALUES ($1, $2) \
                 ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value), \
                 ins AS (INSERT INTO {t} (key, value) VALUES ($3, $4) \
                 ON CONFLICT (key) DO NOTHING RETURNING 1) \
                 SELECT (SELECT count(*) FROM ins) AS inserted, \
                 (SELECT value FROM {t} WHERE key = $3) AS current"
            ),
            // The same for many requests (markers and keys all distinct):
            // one row per request, in order, with whether its insert won
            // and otherwise the value its key held before the statement.
            // Rows are written in key order: batches in flight at once may
            // share keys (a claim and its duplicate), and two statements
            // taking the same row locks in different orders deadlock
            // (40P01, seen on a fresh database by the conformance suite).
            // Compare-and-delete of many pairs in one statement. Rows are
            // locked in key order (`FOR UPDATE` in an ordered CTE) so two
            // executors purging the same page cannot deadlock; a row
            // changed by a writer that committed meanwhile is re-checked
            // after its lock and no longer matches.
            remove_unchanged: format!(
                "WITH input AS (SELECT * FROM unnest($1::bytea[], $2::bytea[]) AS i(k, v)), \
                 doomed AS (SELECT t.key FROM {t} t JOIN input ON t.key = input.k \
                 AND t.value = input.v ORDER BY t.key FOR UPDATE OF t) \
                 DELETE FROM {t} t USING doomed WHERE t.key = doomed.key RETURNING t.key"
            ),
            put_then_insert_batch: format!(
                "WITH input AS (SELECT * FROM unnest($1::bytea[], $2::bytea[], $3::bytea[], \
                 $4::bytea[]) WITH ORDINALITY AS i(mk, mv, k, v, n)), \
                 marker AS (INSERT INTO {t} (key, value) SELECT mk, mv FROM input ORDER BY mk \
                 ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value), \
                 ins AS (INSERT INTO {t} (key, value) SELECT k, v FROM input ORDER BY k \
                 ON CONFLICT (key) DO NOTHING RETURNING key) \
                 SELECT input.n, ins.key IS NOT NULL AS inserted, cur.value \
                 FROM input LEFT JOIN ins ON ins.key = input.k \
                 LEFT JOIN {t} cur ON cur.key = input.k ORDER BY input.n"
            ),
        }
    }
}

/// `write` (with `{t}` for the table) as a statement answering
/// `(changed, current)`: how many rows it wrote, and the value `$1` held
/// before it.
fn cas_statement(t: &str, write: &str) -> String {
    let write = write.replace("{t}", t);
    format!(
        "WITH w AS ({write} RETURNING 1) \
         SELECT (SELECT count(*) FROM w) AS changed, \
         (SELECT value FROM {t} WHERE key = $1) AS current"
    )
}
