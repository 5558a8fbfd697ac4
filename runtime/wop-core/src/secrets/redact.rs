//! Taking credentials out of what comes back: a destination that echoes a
//! request (an echo endpoint, an error that quotes the key) must not hand
//! the value to the pack. Every occurrence of a credential's value, or of
//! one of its common encodings ([`super::Credential::needles`]), is
//! replaced by `[redacted:<id>]` before the pack, the effect store or an
//! event sees it.

use super::Credentials;
use serde_json::Value;

/// Replaces every occurrence of `needle` in `hay`; `None` if there is none.
/// Linear in `hay` whatever the needle (two-way search), so a hostile
/// body cannot make it quadratic.
fn replace(hay: &[u8], needle: &[u8], marker: &[u8]) -> Option<Vec<u8>> {
    if needle.is_empty() {
        return None;
    }
    let mut out: Option<Vec<u8>> = None;
    let mut copied = 0;
    for i in memchr::memmem::find_iter(hay, needle) {
        let o = out.get_or_insert_with(|| Vec::with_capacity(hay.len()));
        o.extend_from_slice(&hay[copied..i]);
        o.extend_from_slice(marker);
        copied = i + needle.len();
    }
    let mut o = out?;
    o.extend_from_slice(&hay[copied..]);
    Some(o)
}

/// `data` with every credential occurrence replaced; `None` if it held none.
pub fn bytes(creds: &Credentials, data: &[u8]) -> Option<Vec<u8>> {
    let mut current: Option<Vec<u8>> = None;
    for c in creds.iter() {
        let marker = c.marker();
        for n in c.needles() {
            let hay = current.as_deref().unwrap_or(data);
            if let Some(r) = replace(hay, n, marker.as_bytes()) {
                current = Some(r);
            }
        }
    }
    current
}

/// `s` with every credential occurrence replaced; `None` if it held none.
pub fn string(creds: &Credentials, s: &str) -> Option<String> {
    // Replacing whole ASCII-or-UTF-8 needles by ASCII markers keeps UTF-8.
    bytes(creds, s.as_bytes()).map(|b| String::from_utf8_lossy(&b).into_owned())
}

/// Redacts every string (and object key) in `v`; whether anything changed.
pub fn value(creds: &Credentials, v: &mut Value) -> bool {
    if creds.is_empty() {
        return false;
    }
    match v {
        Value::String(s) => match string(creds, s) {
            Some(r) => {
                *s = r;
                true
            }
            None => false,
        },
        Value::Array(a) => a.iter_mut().fold(false, |acc, x| value(creds, x) | acc),
        Value::Object(m) => {
            let mut changed = false;
            let keys: Vec<String> = m.keys().cloned().collect();
            for k in keys {
                if let Some(mut x) = m.remove(&k) {
                    changed |= value(creds, &mut x);
                    let key = match string(creds, &k) {
                        Some(r) => {
                            changed = true;
                            r
                        }
                        None => k,
                    };
                    m.insert(key, x);
                }
            }
            changed
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::secrets::{Credential, SecretSpec};
    use std::sync::Arc;
    use zeroize::Zeroizing;

    fn creds(attach: &str, value: &str) -> Credentials {
        let spec = SecretSpec {
            value: Some("env:X".into()),
            audiences: vec!["api.example.com".into()],
            attach: Some(attach.into()),
            ..Default::default()
        };
        let c = Credential::new("k", &spec, Zeroizing::new(value.into())).unwrap();
        Credentials::new(vec![Arc::new(c)])
    }

    #[test]
    fn values_and_their_encodings_are_replaced() {
        let c = creds("bearer", "sk-live/abc+def=1");
        let mut v = serde_json::json!({
            "raw": "token sk-live/abc+def=1 bad",
            "b64": base64::Engine::encode(&base64::engine::general_purpose::STANDARD, "sk-live/abc+def=1"),
            "pct": "sk-live%2Fabc%2Bdef%3D1",
            "list": ["x", "sk-live/abc+def=1sk-live/abc+def=1"],
            "sk-live/abc+def=1": 1,
        });
        assert!(value(&c, &mut v));
        let s = v.to_string();
        assert!(!s.contains("sk-live"), "{s}");
        assert_eq!(v["raw"], "token [redacted:k] bad");
        assert_eq!(v["list"][1], "[redacted:k][redacted:k]");
        // JSON-escaped in raw bytes.
        let body = br#"{"auth":"sk-live\/abc+def=1"}"#;
        let out = bytes(&c, body).unwrap();
        assert!(!String::from_utf8_lossy(&out).contains("abc+def"));
        assert!(bytes(&c, b"nothing here").is_none());
    }

    #[test]
    fn basic_credentials_redact_the_pair_its_base64_and_the_password() {
        let c = creds("basic", "user:correct-horse");
        for echoed in [
            "Basic dXNlcjpjb3JyZWN0LWhvcnNl",
            "user:correct-horse",
            "password=correct-horse",
        ] {
            let r = string(&c, echoed).unwrap();
            assert!(
                !r.contains("correct-horse") && !r.contains("dXNlcjpjb3JyZWN0"),
                "{r}"
            );
        }
    }

    #[test]
    fn debug_never_shows_the_value() {
        let c = creds("bearer", "sk-very-secret-1");
        let d = format!("{c:?}");
        assert!(!d.contains("sk-very-secret-1"), "{d}");
        assert!(d.contains("\"k\""), "{d}");
    }
}
