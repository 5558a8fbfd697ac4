//! RFC 8785 canonicalization (`jcs::canonicalize`), its hash and the
//! secret redaction behind `argsHash`, on any JSON a pack or tool sends.
//!
//! Checks: never panics; the canonical text is JSON that parses to a value
//! whose canonical text is the same (a fixed point), has no whitespace
//! outside strings, and keeps the value (numbers compared as doubles);
//! redaction is idempotent and hides every secret-named member.
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use wop_core::jcs::{
    REDACTED, args_hash, canonicalize, is_secret_name, redact_secrets, sha256_hex,
};

fuzz_target!(|data: &[u8]| {
    let Ok(v) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    let c = canonicalize(&v);
    let back: Value = match serde_json::from_str(&c) {
        Ok(b) => b,
        Err(e) => panic!("canonical text is not JSON: {e}\n{c}"),
    };
    assert_eq!(canonicalize(&back), c, "not a fixed point");
    assert!(same(&v, &back), "the value changed:\n{v}\n{c}");
    assert_eq!(sha256_hex(&v), sha256_hex(&back));
    let r = redact_secrets(&v);
    assert_eq!(redact_secrets(&r), r);
    assert_eq!(args_hash(&v), sha256_hex(&r));
    no_secrets(&r);
    no_whitespace_outside_strings(&c);
});

/// Equal as JSON values, numbers compared as IEEE doubles (what JCS keeps).
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, a)| y.get(k).is_some_and(|b| same(a, b)))
        }
        _ => a == b,
    }
}

fn no_secrets(v: &Value) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                if is_secret_name(k) {
                    assert_eq!(x, &Value::String(REDACTED.to_owned()), "{k}");
                } else {
                    no_secrets(x);
                }
            }
        }
        Value::Array(a) => a.iter().for_each(no_secrets),
        _ => {}
    }
}

fn no_whitespace_outside_strings(c: &str) {
    let mut in_str = false;
    let mut esc = false;
    for ch in c.chars() {
        if in_str {
            match (esc, ch) {
                (true, _) => esc = false,
                (false, '\\') => esc = true,
                (false, '"') => in_str = false,
                _ => {}
            }
        } else if ch == '"' {
            in_str = true;
        } else {
            assert!(!ch.is_whitespace(), "whitespace outside strings in {c}");
        }
    }
}
