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
