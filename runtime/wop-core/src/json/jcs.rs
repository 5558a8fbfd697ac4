//! RFC 8785 JSON Canonicalization Scheme (JCS), hashing and secret redaction.
//!
//! [`canonicalize`] renders a [`serde_json::Value`] as its unique canonical
//! text: object members sorted by the UTF-16 code units of their names, no
//! insignificant whitespace, minimal string escaping (RFC 8785 §3.2.2.2) and
//! numbers serialized exactly as ECMAScript's `Number.prototype.toString`
//! does for IEEE-754 doubles (§3.2.2.3).
//!
//! [`sha256_hex`] hashes that text; [`args_hash`] hashes it after
//! [`redact_secrets`] — this is the protocol's `argsHash`, which must never
//! depend on (or leak a digest of) credential values.

use serde_json::{Map, Number, Value};
use sha2::{Digest, Sha256};
use std::cmp::Ordering;

/// The largest integer magnitude every IEEE-754 double represents exactly
/// together with all its smaller neighbours (2^53).
const MAX_SAFE_INTEGER: u64 = 1 << 53;

/// The replacement written in place of a redacted value.
pub const REDACTED: &str = "[REDACTED]";

/// Normalized member names whose values are always redacted (exact match).
///
/// A member name is normalized by lowercasing it and removing every `-` and
/// `_`, so `api_key`, `Api-Key` and `APIKEY` all normalize to `apikey`.
pub const SECRET_NAMES: &[&str] = &[
    "password",
    "passwd",
    "secret",
    "token",
    "accesstoken",
    "refreshtoken",
    "apikey",
    "authorization",
    "credential",
    "credentials",
    "privatekey",
    "clientsecret",
    "cookie",
    "sessionid",
];

/// Normalized suffixes that also mark a member as secret, so that prefixed
/// names such as `X-Api-Key` (`xapikey`), `githubToken` (`githubtoken`),
/// `webhook_secret` or `db_password` are redacted too.
///
/// This errs on the side of redaction: a harmless member such as
/// `max_token` is redacted as well, which only means its value does not
/// contribute to the hash.
pub const SECRET_SUFFIXES: &[&str] = &["apikey", "token", "secret", "password"];

/// Returns the RFC 8785 canonical JSON text of `v`.
pub fn canonicalize(v: &Value) -> String {
    let mut out = String::new();
    write_value(&mut out, v);
    out
}

/// Returns the lowercase hex SHA-256 digest of [`canonicalize`]`(v)`.
pub fn sha256_hex(v: &Value) -> String {
    hex::encode(Sha256::digest(canonicalize(v).as_bytes()))
}

/// Returns the protocol's `argsHash`: [`sha256_hex`] of
/// [`redact_secrets`]`(v)`.
pub fn args_hash(v: &Value) -> String {
    sha256_hex(&redact_secrets(v))
}

/// Returns a copy of `v` in which the value of every object member whose
/// name looks like a secret is replaced by the string `"[REDACTED]"`, at
/// any depth (inside nested objects and arrays).
///
/// A name is normalized by lowercasing it and removing `-` and `_`; it is
/// secret if the normalized name equals one of [`SECRET_NAMES`]
/// (`password`, `passwd`, `secret`, `token`, `accesstoken`, `refreshtoken`,
/// `apikey`, `authorization`, `credential`, `credentials`, `privatekey`,
/// `clientsecret`, `cookie`, `sessionid`) or ends with one of
/// [`SECRET_SUFFIXES`] (`apikey`, `token`, `secret`, `password`).
/// The whole value is replaced, whatever its type.
pub fn redact_secrets(v: &Value) -> Value {
    match v {
        Value::Object(map) => {
            let mut out = Map::with_capacity(map.len());
            for (name, value) in map {
                let redacted = if is_secret_name(name) {
                    Value::String(REDACTED.to_owned())
                } else {
                    redact_secrets(value)
                };
                out.insert(name.clone(), redacted);
            }
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(items.iter().map(redact_secrets).collect()),
        other => other.clone(),
    }
}

/// Whether a member name denotes a secret (see [`redact_secrets`]).
pub fn is_secret_name(name: &str) -> bool {
    let normalized: String = name
        .chars()
        .filter(|c| *c != '-' && *c != '_')
        .flat_map(char::to_lowercase)
        .collect();
    SECRET_NAMES.contains(&normalized.as_str())
        || SECRET_SUFFIXES.iter().any(|s| normalized.ends_with(s))
}

fn write_value(out: &mut String, v: &Value) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(true) => out.push_str("true"),
        Value::Bool(false) => out.push_str("false"),
        Value::Number(n) => write_number(out, n),
        Value::String(s) => write_string(out, s),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_value(out, item);
            }
            out.push(']');
        }
        Value::Object(map) => {
            let mut members: Vec<(&String, &Value)> = map.iter().collect();
            members.sort_by(|a, b| utf16_cmp(a.0, b.0));
            out.push('{');
            for (i, (name, value)) in members.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_string(out, name);
                out.push(':');
                write_value(out, value);
            }
            out.push('}');
        }
    }
}

/// Compares two strings by their UTF-16 code units (RFC 8785 §3.2.3).
fn utf16_cmp(a: &str, b: &str) -> Ordering {
    a.encode_utf16().cmp(b.encode_utf16())
}

fn write_number(out: &mut String, n: &Number) {
    if let Some(u) = n.as_u64() {
        if u <= MAX_SAFE_INTEGER {
            out.push_str(&u.to_string());
        } else {
            write_f64(out, u as f64);
        }
    } else if let Some(i) = n.as_i64() {
        if i.unsigned_abs() <= MAX_SAFE_INTEGER {
            out.push_str(&i.to_string());
        } else {
            write_f64(out, i as f64);
        }
    } else if let Some(f) = n.as_f64() {
        write_f64(out, f);
    } else {
        // Only reachable with serde_json's `arbitrary_precision`; parse the
        // literal as a double, as JCS requires.
        match n.to_string().parse::<f64>() {
            Ok(f) => write_f64(out, f),
            Err(_) => out.push_str(&n.to_string()),
        }
    }
}

fn write_f64(out: &mut String, f: f64) {
    if f == 0.0 {
        // Covers -0, which ECMAScript prints as "0".
        out.push('0');
    } else {
        // serde_json never holds NaN or infinities; ryu_js would print them
        // the ECMAScript way ("NaN", "Infinity") should one appear.
        let mut buf = ryu_js::Buffer::new();
        out.push_str(buf.format(f));
    }
}

fn write_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{8}' => out.push_str("\\b"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\u{c}' => out.push_str("\\f"),
            '\r' => out.push_str("\\r"),
            c if (c as u32) < 0x20 => {
                out.push_str(&format!("\\u{:04x}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Canonical text of the double nearest to the decimal `text`.
    ///
    /// Parsed with Rust's correctly rounded `f64` parser, not serde_json's:
    /// without its `float_roundtrip` feature serde_json may be 1 ULP off
    /// (e.g. for 333333333.33333329), which is a parsing matter, not a
    /// canonicalization one.
    fn num(text: &str) -> String {
        let v = match serde_json::from_str::<Value>(text).unwrap() {
            Value::Number(n) if n.is_f64() => json!(text.parse::<f64>().unwrap()),
            other => other,
        };
        canonicalize(&v)
    }

    #[test]
    fn rfc8785_sorting_example() {
        let v: Value = serde_json::from_str(
            r#"{
              "\u20ac": "Euro Sign",
              "\r": "Carriage Return",
              "\ufb33": "Hebrew Letter Dalet With Dagesh",
              "1": "One",
              "\ud83d\ude00": "Emoji: Grinning Face",
              "\u0080": "Control",
              "\u00f6": "Latin Small Letter O With Diaeresis"
            }"#,
        )
        .unwrap();
        let expected = "{\"\\r\":\"Carriage Return\",\"1\":\"One\",\"\u{80}\":\"Control\",\
             \"\u{f6}\":\"Latin Small Letter O With Diaeresis\",\"\u{20ac}\":\"Euro Sign\",\
             \"\u{1f600}\":\"Emoji: Grinning Face\",\
             \"\u{fb33}\":\"Hebrew Letter Dalet With Dagesh\"}";
        assert_eq!(canonicalize(&v), expected);
        // Rust's own (UTF-8 / code point) order would put U+FB33 before U+1F600.
        assert!("\u{fb33}" < "\u{1f600}");
    }

    #[test]
    fn rfc8785_main_example() {
        // RFC 8785 §3.2.2 sample input and output.
        let mut v: Value = serde_json::from_str(
            r#"{
              "numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
              "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
              "literals": [null, true, false]
            }"#,
        )
        .unwrap();
        // Use correctly rounded doubles for the numbers (see `num`).
        v["numbers"][0] = json!("333333333.33333329".parse::<f64>().unwrap());
        let expected = "{\"literals\":[null,true,false],\
            \"numbers\":[333333333.3333333,1e+30,4.5,0.002,1e-27],\
            \"string\":\"\u{20ac}$\\u000f\\nA'B\\\"\\\\\\\\\\\"/\"}";
        assert_eq!(canonicalize(&v), expected);
    }

    #[test]
    fn numbers() {
        assert_eq!(num("0"), "0");
        assert_eq!(num("-0"), "0");
        assert_eq!(num("-0.0"), "0");
        assert_eq!(num("1e21"), "1e+21");
        assert_eq!(num("1e20"), "100000000000000000000");
        assert_eq!(num("1e-7"), "1e-7");
        assert_eq!(num("0.000001"), "0.000001");
        assert_eq!(num("123456789012345680000"), "123456789012345680000");
        assert_eq!(num("4.5"), "4.5");
        assert_eq!(num("4.50"), "4.5");
        assert_eq!(num("0.002"), "0.002");
        assert_eq!(num("2e-3"), "0.002");
        assert_eq!(num("-1.5"), "-1.5");
        assert_eq!(num("1.0"), "1");
        assert_eq!(num("9007199254740992"), "9007199254740992");
        assert_eq!(num("-9007199254740993"), "-9007199254740992");
        assert_eq!(num("18446744073709551615"), "18446744073709552000");
        assert_eq!(num("1.7976931348623157e308"), "1.7976931348623157e+308");
        assert_eq!(num("5e-324"), "5e-324");
        assert_eq!(num("333333333.33333329"), "333333333.3333333");
        assert_eq!(num("1e30"), "1e+30");
        assert_eq!(num("0.000000000000000000000000001"), "1e-27");
        // u64 beyond 2^53 goes through an IEEE-754 double.
        assert_eq!(
            canonicalize(&json!(9_007_199_254_740_993_u64)),
            "9007199254740992"
        );
        assert_eq!(canonicalize(&json!(-42_i64)), "-42");
    }

    #[test]
    fn string_escaping() {
        assert_eq!(canonicalize(&json!("a\"b\\c")), r#""a\"b\\c""#);
        assert_eq!(canonicalize(&json!("\u{8}\t\n\u{c}\r")), r#""\b\t\n\f\r""#);
        assert_eq!(
            canonicalize(&json!("\u{0}\u{1}\u{1f}\u{7f}")),
            "\"\\u0000\\u0001\\u001f\u{7f}\""
        );
        // Slash, non-ASCII and astral characters stay literal.
        assert_eq!(canonicalize(&json!("/é€😀")), "\"/é€😀\"");
        assert_eq!(canonicalize(&json!("\u{2028}")), "\"\u{2028}\"");
    }

    #[test]
    fn nested_structures() {
        let v = json!({
            "b": [1, {"z": null, "a": [true, false, []]}, "x"],
            "a": {"d": {}, "c": 2.50},
        });
        assert_eq!(
            canonicalize(&v),
            r#"{"a":{"c":2.5,"d":{}},"b":[1,{"a":[true,false,[]],"z":null},"x"]}"#
        );
        assert_eq!(canonicalize(&json!([])), "[]");
        assert_eq!(canonicalize(&json!({})), "{}");
        assert_eq!(canonicalize(&json!(null)), "null");
    }

    #[test]
    fn sha256_of_canonical_text() {
        let a = json!({"b": 1, "a": [1, 2]});
        let b: Value = serde_json::from_str(r#"{ "a" : [ 1 , 2.0 ], "b" : 1e0 }"#).unwrap();
        assert_eq!(sha256_hex(&a), sha256_hex(&b));
        assert_eq!(
            sha256_hex(&a),
            hex::encode(Sha256::digest(br#"{"a":[1,2],"b":1}"#))
        );
        assert_eq!(sha256_hex(&a).len(), 64);
        assert!(
            sha256_hex(&a)
                .chars()
                .all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c))
        );
    }

    #[test]
    fn redaction() {
        let v = json!({
            "user": "alice",
            "Password": "hunter2",
            "api_key": "k1",
            "X-Api-Key": "k2",
            "nested": {
                "Authorization": {"scheme": "Bearer", "value": "t"},
                "list": [{"refresh_token": "r"}, {"keep": 1, "COOKIE": ["a", "b"]}],
                "githubToken": 7,
                "db_password": "p",
                "webhook-secret": null,
                "client_secret": "c",
                "session-id": "s",
                "private_key": "pk",
                "passwd": "pw",
                "credentials": {"x": 1},
            },
            "tokens": 5,
            "tokenizer": "bpe",
            "keyboard": "qwerty",
        });
        let r = redact_secrets(&v);
        assert_eq!(
            r,
            json!({
                "user": "alice",
                "Password": REDACTED,
                "api_key": REDACTED,
                "X-Api-Key": REDACTED,
                "nested": {
                    "Authorization": REDACTED,
                    "list": [{"refresh_token": REDACTED}, {"keep": 1, "COOKIE": REDACTED}],
                    "githubToken": REDACTED,
                    "db_password": REDACTED,
                    "webhook-secret": REDACTED,
                    "client_secret": REDACTED,
                    "session-id": REDACTED,
                    "private_key": REDACTED,
                    "passwd": REDACTED,
                    "credentials": REDACTED,
                },
                "tokens": 5,
                "tokenizer": "bpe",
                "keyboard": "qwerty",
            })
        );
        // Redaction does not touch the input, and secrets do not affect argsHash.
        assert_eq!(v["Password"], "hunter2");
        let other = json!({"user": "alice", "password": "different"});
        let same = json!({"user": "alice", "password": "hunter2"});
        assert_eq!(args_hash(&other), args_hash(&same));
        assert_ne!(args_hash(&other), sha256_hex(&other));
        assert_eq!(args_hash(&json!({"a": 1})), sha256_hex(&json!({"a": 1})));
        // Top-level non-objects pass through.
        assert_eq!(redact_secrets(&json!(["token"])), json!(["token"]));
    }

    #[test]
    fn secret_names() {
        for n in [
            "password",
            "PASSWORD",
            "pass_word",
            "accessToken",
            "access-token",
            "ApiKey",
            "x_api_key",
            "sessionId",
            "cookie",
            "authorization",
            "credential",
        ] {
            assert!(is_secret_name(n), "{n}");
        }
        for n in [
            "user",
            "tokens",
            "apikeys",
            "passwords_policy",
            "key",
            "auth",
            "",
        ] {
            assert!(!is_secret_name(n), "{n}");
        }
    }
}
