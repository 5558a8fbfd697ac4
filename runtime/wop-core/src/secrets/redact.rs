//! Taking credentials out of what comes back: a destination that echoes a
//! request (an echo endpoint, an error that quotes the key) must not hand
//! the value to the pack. Every occurrence of a credential's value, or of
//! one of its common encodings ([`super::Credential::needles`]), is
//! replaced by `[redacted:<id>]` before the pack, the effect store or an
//! event sees it.
//!
//! Matching ignores ASCII case: a value that comes back as (part of) a
//! host name has been lowercased by the URL parser on the way
//! (`Location: ftp://<value>.invalid/` is reported as a lowercase
//! destination), and a lowercased credential is still the credential.

use super::Credentials;
use crate::model::events::{Event, LogLevel, LogStream};
use serde_json::Value;

/// Replaces every ASCII-case-insensitive occurrence of `needle` (ASCII
/// lowercase) in `hay`, whose lowercase form is `folded`; `None` if there
/// is none. Linear in `hay` whatever the needle (two-way search), so a
/// hostile body cannot make it quadratic.
fn replace(hay: &[u8], folded: &[u8], needle: &[u8], marker: &[u8]) -> Option<Vec<u8>> {
    if needle.is_empty() {
        return None;
    }
    let mut out: Option<Vec<u8>> = None;
    let mut copied = 0;
    for i in memchr::memmem::find_iter(folded, needle) {
        let o = out.get_or_insert_with(|| Vec::with_capacity(hay.len()));
        o.extend_from_slice(&hay[copied..i]);
        o.extend_from_slice(marker);
        copied = i + needle.len();
    }
    let mut o = out?;
    o.extend_from_slice(&hay[copied..]);
    Some(o)
}

/// `data` with every credential occurrence replaced, in any ASCII case;
/// `None` if it held none.
pub fn bytes(creds: &Credentials, data: &[u8]) -> Option<Vec<u8>> {
    let mut current: Option<Vec<u8>> = None;
    // The lowercase form of what is searched, refreshed after a
    // replacement (ASCII folding keeps every offset).
    let mut folded = data.to_ascii_lowercase();
    for c in creds.iter() {
        let marker = c.marker();
        for n in c.needles() {
            let hay = current.as_deref().unwrap_or(data);
            if let Some(r) = replace(hay, &folded, n, marker.as_bytes()) {
                folded = r.to_ascii_lowercase();
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

/// `event` with every credential occurrence replaced in every string it
/// holds (every field of every kind, so an event added later is covered
/// too). An event that would no longer be valid once redacted (a value
/// that is also a closed-vocabulary word) is withheld: a runtime warning
/// takes its place.
pub fn event(creds: &Credentials, event: Event) -> Event {
    if creds.is_empty() {
        return event;
    }
    let withheld = || Event::LogAppended {
        level: LogLevel::Warn,
        message: "[wop] an event was withheld: it held a credential value that could not be \
                  redacted from it"
            .to_owned(),
        fields: None,
        stream: LogStream::Runtime,
    };
    let Ok(mut v) = serde_json::to_value(&event) else {
        return withheld();
    };
    if !value(creds, &mut v) {
        return event;
    }
    serde_json::from_value(v).unwrap_or_else(|_| withheld())
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
    fn events_of_every_kind_are_redacted() {
        let c = creds("bearer", "sk-test-API-7f3a9c1e5b");
        let e = event(
            &c,
            Event::EgressDecided {
                decision: "denied".into(),
                destination: "sk-test-api-7f3a9c1e5b.invalid:1".into(),
                reason: "policy-denied".into(),
                credential_id: None,
                cause: Some("scheme".into()),
            },
        );
        let s = serde_json::to_string(&e).unwrap();
        assert!(!s.to_ascii_lowercase().contains("7f3a9c1e5b"), "{s}");
        assert!(s.contains("[redacted:k].invalid:1"), "{s}");
        // Untouched when there is nothing to take out.
        let plain = Event::LogAppended {
            level: LogLevel::Info,
            message: "hello".into(),
            fields: Some(serde_json::json!({"a": 1})),
            stream: LogStream::Log,
        };
        assert_eq!(event(&c, plain.clone()), plain);
    }

    #[test]
    fn any_ascii_case_is_replaced() {
        let c = creds("bearer", "sk-test-API-7f3a9c1e5b");
        for echoed in [
            "ftp://sk-test-api-7f3a9c1e5b.invalid:1/",
            "SK-TEST-API-7F3A9C1E5B",
            "x sK-tEsT-aPi-7F3a9C1e5B y",
        ] {
            let r = string(&c, echoed).unwrap();
            assert!(!r.to_ascii_lowercase().contains("7f3a9c1e5b"), "{r}");
            assert!(r.contains("[redacted:k]"), "{r}");
        }
        assert_eq!(
            string(&c, "a SK-TEST-API-7F3A9C1E5B b").as_deref(),
            Some("a [redacted:k] b")
        );
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
    fn a_marker_never_holds_the_credential_so_a_second_pass_changes_nothing() {
        // The fuzz target's find (regressions/redact/password-inside-marker):
        // a Basic password that reads like the marker itself.
        for (value, marker) in [
            ("user0000:redacted:k", "[redacted]"),
            ("user0000:redacted", "[***]"),
            ("user0000:correct-horse", "[redacted:k]"),
        ] {
            let c = creds("basic", value);
            let once = string(&c, &format!("echo {value} and again {value}")).unwrap();
            assert!(once.contains(marker), "{once}");
            assert_eq!(string(&c, &once), None, "{once}");
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
