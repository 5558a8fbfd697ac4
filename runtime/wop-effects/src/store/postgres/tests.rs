use super::*;

#[test]
fn redaction() {
    assert_eq!(
        redact_url("postgres://wop:s3cret@127.0.0.1:5432/wop"),
        "postgres://wop:***@127.0.0.1:5432/wop"
    );
    assert_eq!(
        redact_url("postgresql://u@h/db?password=x&sslmode=disable"),
        "postgresql://u@h/db?password=***&sslmode=disable"
    );
    assert_eq!(redact_url("postgres://h"), "postgres://h");
}

#[test]
fn successor_of_prefix() {
    assert_eq!(successor(b"ab"), Some(b"ac".to_vec()));
    assert_eq!(successor(b"a\xff"), Some(b"b".to_vec()));
    assert_eq!(successor(b""), None);
    assert_eq!(successor(b"\xff\xff"), None);
}

#[test]
fn url_policy() {
    let ok = |u: &str| parse(u, PostgresOptions::default()).map(|p| p.options);
    assert!(ok("postgres://u:p@127.0.0.1:5432/db").is_ok());
    assert!(ok("postgresql://u:p@localhost/db").is_ok());
    assert!(ok("postgres://u:p@[::1]:5432/db").is_ok());
    assert!(ok("postgres://u@%2Ftmp%2Fsock/db").is_ok());
    let remote = ok("postgres://u:secret@db.example.com/db").unwrap_err();
    let msg = remote.to_string();
    assert!(
        msg.contains("db.example.com") && msg.contains("sslmode=disable"),
        "{msg}"
    );
    assert!(!msg.contains("secret"), "{msg}");
    assert!(ok("postgres://u:p@10.0.0.5/db?sslmode=require").is_err());
    assert!(ok("postgres://u:p@10.0.0.5/db?sslmode=disable").is_ok());
    let o = ok("postgres://u@localhost/db?wop_schema=t_1&wop_pool=3&sslmode=disable").unwrap();
    assert_eq!(o.schema.as_deref(), Some("t_1"));
    assert_eq!(o.max_connections, 3);
    assert!(ok("postgres://u@localhost/db?wop_schema=a;drop").is_err());
    assert!(ok("postgres://u@localhost/db?wop_pool=0").is_err());
    assert!(ok("mysql://u@localhost/db").is_err());
}

/// The batched statement itself, deterministically: four requests in one
/// statement, one of them on a key that already exists; each gets its own
/// answer in order, every marker is written, and nothing is written twice.
#[tokio::test]
async fn one_statement_answers_each_request_of_a_batch() {
    let Some(url) = crate::store::conformance::postgres_test_url("batch_statement") else {
        return;
    };
    let store = PostgresStore::connect(&url).await.unwrap();
    store.put("k/taken", b"before".to_vec()).await.unwrap();
    let v = |s: &str| s.as_bytes().to_vec();
    let markers = vec![v("m/1"), v("m/2"), v("m/3"), v("m/4")];
    let marker_values = vec![v("a"), v("b"), v("c"), v("d")];
    let keys = vec![v("k/1"), v("k/taken"), v("k/3"), v("k/4")];
    let values = vec![v("1"), v("2"), v("3"), v("4")];
    let answers = batch::statement(&store.db, &markers, &marker_values, &keys, &values)
        .await
        .unwrap();
    assert_eq!(
        answers,
        vec![
            Ok(Ok(())),
            Ok(Err(Some(v("before")))),
            Ok(Ok(())),
            Ok(Ok(()))
        ]
    );
    for (m, mv) in markers.iter().zip(&marker_values) {
        let m = std::str::from_utf8(m).unwrap();
        assert_eq!(store.get(m).await.unwrap().as_ref(), Some(mv));
    }
    assert_eq!(store.get("k/taken").await.unwrap(), Some(v("before")));
    assert_eq!(store.get("k/4").await.unwrap(), Some(v("4")));
}

/// Two writers take the same row locks in the same order, whatever order
/// their batch arrived in: a transaction holds `k/2` uncommitted; a batch
/// that lists `k/3` before `k/2` blocks on `k/2` *without* holding `k/3`,
/// so the transaction can still write `k/3` and commit. Written in arrival
/// order, the batch would hold `k/3` while waiting for `k/2` and
/// PostgreSQL would abort one of the two (`40P01 deadlock detected`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_takes_its_row_locks_in_key_order() {
    let Some(url) = crate::store::conformance::postgres_test_url("batch_lock_order") else {
        return;
    };
    let store = std::sync::Arc::new(PostgresStore::connect(&url).await.unwrap());
    let v = |s: &str| s.as_bytes().to_vec();
    let mut holder = store.db.client().await.unwrap();
    let tx = holder.transaction().await.unwrap();
    let insert = store.db.sql.insert_if_absent.clone();
    tx.execute(&insert, &[&v("k/2"), &v("held")]).await.unwrap();

    let batch = {
        let store = store.clone();
        tokio::spawn(async move {
            let (markers, marker_values) = (vec![v("m/3"), v("m/2")], vec![v("a"), v("b")]);
            let (keys, values) = (vec![v("k/3"), v("k/2")], vec![v("3"), v("2")]);
            batch::statement(&store.db, &markers, &marker_values, &keys, &values).await
        })
    };
    // Until the batch is waiting for the row the transaction holds.
    let watcher = store.db.client().await.unwrap();
    let blocked = "SELECT count(*) FROM pg_stat_activity \
                   WHERE datname = current_database() AND wait_event_type = 'Lock'";
    let mut waited = 0;
    while watcher
        .query_one(blocked, &[])
        .await
        .unwrap()
        .get::<_, i64>(0)
        == 0
    {
        assert!(waited < 2000, "the batch never waited for the held row");
        waited += 1;
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    tx.execute(&insert, &[&v("k/3"), &v("mine")])
        .await
        .expect("the batch must not hold k/3 while it waits for k/2");
    tx.commit().await.unwrap();
    let answers = batch.await.unwrap().expect("no deadlock");
    assert!(
        answers.iter().all(|a| matches!(a, Ok(Err(_)))),
        "{answers:?}"
    );
    assert_eq!(store.get("k/3").await.unwrap(), Some(v("mine")));
    assert_eq!(store.get("k/2").await.unwrap(), Some(v("held")));
    assert_eq!(store.get("m/3").await.unwrap(), Some(v("a")));
}

/// A compare-and-swap is one statement that also answers with the value
/// the key held: a failed insert, update or delete reports the current
/// value without a second round trip, and a successful one writes.
#[tokio::test]
async fn a_failed_swap_answers_with_the_current_value_in_its_own_statement() {
    let Some(url) = crate::store::conformance::postgres_test_url("cas_statement") else {
        return;
    };
    let store = PostgresStore::connect(&url).await.unwrap();
    assert!(store.failed_swap_reads_free());
    store.put("k", b"now".to_vec()).await.unwrap();
    let client = store.db.client().await.unwrap();
    let (k, old, new) = (b"k".to_vec(), b"old".to_vec(), b"new".to_vec());
    let sql = &store.db.sql;
    let rows = [
        client.query_one(&sql.insert_if_absent, &[&k, &new]).await,
        client.query_one(&sql.update_if, &[&k, &old, &new]).await,
        client.query_one(&sql.delete_if, &[&k, &old]).await,
    ];
    for row in rows {
        let row = row.unwrap();
        assert_eq!(row.get::<_, i64>(0), 0);
        assert_eq!(row.get::<_, Option<Vec<u8>>>(1), Some(b"now".to_vec()));
    }
    let now = b"now".to_vec();
    let row = client.query_one(&sql.update_if, &[&k, &now, &new]).await;
    assert_eq!(row.unwrap().get::<_, i64>(0), 1);
    assert_eq!(store.get("k").await.unwrap(), Some(new.clone()));
    let row = client.query_one(&sql.delete_if, &[&k, &new]).await;
    assert_eq!(row.unwrap().get::<_, i64>(0), 1);
    let row = client
        .query_one(&sql.insert_if_absent, &[&k, &old])
        .await
        .unwrap();
    assert_eq!(row.get::<_, i64>(0), 1);
    assert_eq!(
        row.get::<_, Option<Vec<u8>>>(1),
        None,
        "the value before it"
    );
}
