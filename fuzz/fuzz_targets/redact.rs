//! Credential redaction: whatever a destination echoes around a
//! credential, `wop_core::secrets::redact` leaves no occurrence of the
//! value (nor of its base64 form) in bytes, strings or JSON, and a second
//! pass changes nothing.
//!
//! Input: byte 0 picks the attach style; then a value and a body separated
//! by the first NUL. The value is kept to the characters real credentials
//! use (`[A-Za-z0-9._~+/=:-]`), at least 8 of them.
#![no_main]

use base64::Engine as _;
use libfuzzer_sys::fuzz_target;
use std::sync::Arc;
use wop_core::secrets::{Credential, Credentials, SecretSpec, redact};

fuzz_target!(|data: &[u8]| {
    let [style, rest @ ..] = data else {
        return;
    };
    let (v, body) = match rest.iter().position(|c| *c == 0) {
        Some(i) => (&rest[..i], &rest[i + 1..]),
        None => return,
    };
    let value: String = v
        .iter()
        .map(|&b| char::from(b))
        .filter(|c| c.is_ascii_alphanumeric() || "._~+/=:-".contains(*c))
        .take(128)
        .collect();
    let attach = match style % 3 {
        0 => "bearer",
        1 if value.contains(':') => "basic",
        _ => "header:x-api-key",
    };
    let spec = SecretSpec {
        value: Some("env:X".into()),
        audiences: vec!["api.example.com".into()],
        attach: Some(attach.into()),
        ..Default::default()
    };
    let Ok(c) = Credential::new("k", &spec, zeroize::Zeroizing::new(value.clone())) else {
        return;
    };
    let creds = Credentials::new(vec![Arc::new(c)]);
    let b64 = base64::engine::general_purpose::STANDARD.encode(&value);
    let contains = |hay: &[u8], n: &str| hay.windows(n.len()).any(|w| w == n.as_bytes());
    let out = redact::bytes(&creds, body).unwrap_or_else(|| body.to_vec());
    assert!(!contains(&out, &value), "the value survived in bytes");
    assert!(!contains(&out, &b64), "its base64 survived in bytes");
    assert!(redact::bytes(&creds, &out).is_none(), "a second pass changed something");
    let text = String::from_utf8_lossy(body).into_owned();
    let mut json = serde_json::json!({ "echo": text, "list": [text.clone()], text.clone(): 1 });
    redact::value(&creds, &mut json);
    // Every decoded string and key (what a pack reads); the serialized
    // text may show the value's characters after an escape the body itself
    // held, which tells nothing about the value.
    fn strings(v: &serde_json::Value, out: &mut Vec<String>) {
        match v {
            serde_json::Value::String(s) => out.push(s.clone()),
            serde_json::Value::Array(a) => a.iter().for_each(|x| strings(x, out)),
            serde_json::Value::Object(m) => m.iter().for_each(|(k, x)| {
                out.push(k.clone());
                strings(x, out);
            }),
            _ => {}
        }
    }
    let mut all = Vec::new();
    strings(&json, &mut all);
    for s in all {
        assert!(!s.contains(&value), "the value survived in a JSON string");
    }
});
