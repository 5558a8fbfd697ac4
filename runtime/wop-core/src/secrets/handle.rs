//! Opaque secret handles (issue 32, item 5). The protocol's JavaScript
//! packs call `ctx.secrets.resolve({ref})` and put `plaintext` into a
//! request header. Here they get a **handle** instead — `wop-secret-`
//! and 32 random hex digits, minted per invocation for one credential the
//! operator granted — and safe-fetch swaps it for the credential only
//! where the credential may go:
//!
//! - in a header value of exactly the form the operator attaches the
//!   credential as (`Authorization: Bearer <handle>` for `attach =
//!   "bearer"`, `<name>: <handle>` for `attach = "header:<name>"`); the
//!   header is then dropped and the credential attached by the usual rules
//!   (its audience, expiry, redirects, redaction: decision 0020), as if
//!   the pack had named it;
//! - anywhere else — the URL, the body, another header or form — and a
//!   handle this invocation was not given (forged, or from another run)
//!   refuse the request (`egress_denied`, reason `secret-handle`).
//!
//! A handle is worth nothing outside its invocation, so it may sit in a
//! pack's memory, logs and outputs. What this cannot serve: code that
//! computes with a key's bytes (HMAC signing, deriving a token), which
//! would compute with the handle.
//!
//! Pure: the nonce comes from the caller (the gate session).

use super::{Attach, Credentials};
use crate::egress::Denial;
use serde_json::json;
use std::collections::BTreeMap;

/// What every handle starts with.
pub const PREFIX: &str = "wop-secret-";
/// Hex digits after the prefix (128 random bits).
pub const NONCE_HEX: usize = 32;
/// Handles one invocation may hold (one per credential; the cap bounds a
/// pack that asks in a loop for ids it does not have).
pub const MAX_HANDLES: usize = 64;
/// `details.reason` of every refusal here.
pub const REASON: &str = "secret-handle";

/// The handles minted in one invocation: handle → credential id.
#[derive(Debug, Default, Clone)]
pub struct Handles {
    by_handle: BTreeMap<String, String>,
}

impl Handles {
    /// The handle of credential `id`: the one already minted, else a new
    /// one from `nonce` (16 random bytes). `None` past [`MAX_HANDLES`].
    pub fn mint(&mut self, id: &str, nonce: [u8; 16]) -> Option<String> {
        if let Some((h, _)) = self.by_handle.iter().find(|(_, v)| *v == id) {
            return Some(h.clone());
        }
        if self.by_handle.len() >= MAX_HANDLES {
            return None;
        }
        let h = format!("{PREFIX}{}", hex::encode(nonce));
        self.by_handle.insert(h.clone(), id.to_owned());
        Some(h)
    }

    /// Whether no handle was minted.
    pub fn is_empty(&self) -> bool {
        self.by_handle.is_empty()
    }

    /// `text` with each minted handle as `wop-secret:<id>`: what the gate
    /// hashes, so that a retry (another invocation, other handles) makes
    /// the same request, the same effect.
    pub fn stable(&self, text: &str) -> String {
        if self.by_handle.is_empty() || !mentions(text.as_bytes()) {
            return text.to_owned();
        }
        let mut out = text.to_owned();
        for (h, id) in &self.by_handle {
            out = out.replace(h.as_str(), &format!("wop-secret:{id}"));
        }
        out
    }
}

/// Where `text` holds something that starts like a handle (the prefix,
/// ASCII case-insensitive: a server may not care about case).
fn mentions(text: &[u8]) -> bool {
    let p = PREFIX.as_bytes();
    text.windows(p.len()).any(|w| w.eq_ignore_ascii_case(p))
}

fn refuse(message: String) -> Denial {
    Denial::denied(REASON, message)
}

/// The value a header must have to carry credential `id`'s handle `h`,
/// and its name, per the credential's attach form.
fn expected(attach: &Attach, h: &str) -> Option<(String, String)> {
    match attach {
        Attach::Bearer => Some(("authorization".to_owned(), format!("Bearer {h}"))),
        Attach::Header(name) => Some((name.clone(), h.to_owned())),
        // The value is `user:password` base64-encoded by the host; a pack
        // would encode the handle itself.
        Attach::Basic => None,
    }
}

fn shown_form(attach: &Attach) -> String {
    match attach {
        Attach::Bearer => "`Authorization: Bearer <handle>` (attach = \"bearer\")".to_owned(),
        Attach::Header(n) => format!("`{n}: <handle>` (attach = \"header:{n}\")"),
        Attach::Basic => "no header value (attach = \"basic\": the host encodes user:password itself; name the credential with the x-wop-credential header instead)".to_owned(),
    }
}

/// A request's headers without the ones that carried handles, and the
/// credential ids those named.
pub type Taken = (Vec<(String, String)>, Vec<String>);

/// Takes the handles out of a request: checks the URL and body hold none,
/// and that each header mentioning one is exactly its credential's attach
/// form with a handle minted in this invocation. Returns the headers
/// without those, and the credential ids they named (attached after this
/// by [`super::decide::first_request`], audience and all).
pub fn take(
    handles: &Handles,
    creds: &Credentials,
    url: &str,
    headers: &[(String, String)],
    body: Option<&[u8]>,
) -> Result<Taken, Denial> {
    if mentions(url.as_bytes()) {
        return Err(refuse(
            "a secret handle (from ctx.secrets.resolve) is in the URL; it may only go in the header the operator attaches its credential as".to_owned(),
        ));
    }
    if body.is_some_and(mentions) {
        return Err(refuse(
            "a secret handle (from ctx.secrets.resolve) is in the request body; it may only go in the header the operator attaches its credential as".to_owned(),
        ));
    }
    let mut kept = Vec::with_capacity(headers.len());
    let mut named: Vec<String> = Vec::new();
    for (name, value) in headers {
        if !mentions(value.as_bytes()) && !mentions(name.as_bytes()) {
            kept.push((name.clone(), value.clone()));
            continue;
        }
        let shown_name = crate::text::cut(name, 64);
        let found = handles
            .by_handle
            .iter()
            .find(|(h, _)| value.contains(h.as_str()));
        let Some((h, id)) = found else {
            return Err(refuse(format!(
                "header `{shown_name}` holds a secret handle this invocation was not given (forged, or from another invocation)"
            ))
            .with(json!({"header": shown_name})));
        };
        let Some(c) = creds.get(id) else {
            return Err(refuse(format!(
                "secret `{id}` is not among this invocation's credentials"
            )));
        };
        let form = expected(c.attach(), h);
        let fits = form
            .as_ref()
            .is_some_and(|(n, v)| n.eq_ignore_ascii_case(name) && v == value);
        if !fits {
            return Err(refuse(format!(
                "header `{shown_name}` carries the handle of secret `{id}` in a form this host does not attach it as; the operator attaches it as {} in [secrets.{id}]",
                shown_form(c.attach())
            ))
            .with(json!({"header": shown_name, "secretId": id})));
        }
        if !named.contains(id) {
            named.push(id.clone());
        }
    }
    Ok((kept, named))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::secrets::{Credential, SecretSpec};
    use std::sync::Arc;
    use zeroize::Zeroizing;

    fn creds(attach: &str) -> Credentials {
        let spec: SecretSpec = toml::from_str(&format!(
            "value = \"env:X\"\naudiences = [\"api.example.com\"]\nattach = \"{attach}\"\n"
        ))
        .unwrap();
        let c = Credential::new(
            "api",
            &spec,
            Zeroizing::new("user:sk-test-0123456789".to_owned()),
        )
        .unwrap();
        Credentials::new(vec![Arc::new(c)])
    }

    fn h(name: &str, value: &str) -> (String, String) {
        (name.to_owned(), value.to_owned())
    }

    #[test]
    fn a_handle_in_its_form_names_the_credential_and_leaves_the_headers() {
        let mut hs = Handles::default();
        let handle = hs.mint("api", [7; 16]).unwrap();
        assert_eq!(hs.mint("api", [9; 16]).as_deref(), Some(handle.as_str()));
        let c = creds("bearer");
        let (kept, named) = take(
            &hs,
            &c,
            "https://api.example.com/v1",
            &[
                h("Authorization", &format!("Bearer {handle}")),
                h("x-a", "1"),
            ],
            Some(b"{}"),
        )
        .unwrap();
        assert_eq!((kept, named), (vec![h("x-a", "1")], vec!["api".to_owned()]));
        let c = creds("header:X-Api-Key");
        let (_, named) = take(&hs, &c, "https://a/", &[h("x-api-key", &handle)], None).unwrap();
        assert_eq!(named, vec!["api".to_owned()]);
    }

    #[test]
    fn handles_elsewhere_forged_or_in_another_form_are_refused() {
        let mut hs = Handles::default();
        let handle = hs.mint("api", [7; 16]).unwrap();
        let c = creds("bearer");
        let refused = |url: &str, headers: &[(String, String)], body: Option<&[u8]>| {
            take(&hs, &c, url, headers, body).unwrap_err()
        };
        let d = refused(&format!("https://a/?k={handle}"), &[], None);
        assert!(
            d.reason == REASON && d.message.contains("URL"),
            "{}",
            d.message
        );
        let d = refused("https://a/", &[], Some(format!("k={handle}").as_bytes()));
        assert!(d.message.contains("body"), "{}", d.message);
        let forged = format!("{PREFIX}{}", "a".repeat(NONCE_HEX));
        let d = refused(
            "https://a/",
            &[h("Authorization", &format!("Bearer {forged}"))],
            None,
        );
        assert!(d.message.contains("not given"), "{}", d.message);
        // Case games do not hide a handle.
        let d = refused("https://a/", &[h("x", &forged.to_ascii_uppercase())], None);
        assert!(d.message.contains("not given"), "{}", d.message);
        for wrong in [
            h("Authorization", &format!("Token {handle}")),
            h("X-Api-Key", &handle),
            h("Authorization", &format!("Bearer {handle}x")),
        ] {
            let d = refused("https://a/", &[wrong], None);
            assert!(d.message.contains("attach = \"bearer\""), "{}", d.message);
        }
        // Basic cannot carry a handle.
        let c = creds("basic");
        let d = take(
            &hs,
            &c,
            "https://a/",
            &[h("Authorization", &format!("Basic {handle}"))],
            None,
        )
        .unwrap_err();
        assert!(d.message.contains("x-wop-credential"), "{}", d.message);
    }

    #[test]
    fn minting_is_capped() {
        let mut hs = Handles::default();
        for i in 0..MAX_HANDLES {
            assert!(hs.mint(&format!("s{i}"), [i as u8; 16]).is_some());
        }
        assert_eq!(hs.mint("one-more", [0; 16]), None);
        assert!(
            hs.mint("s0", [1; 16]).is_some(),
            "an existing one is still given"
        );
    }
}
