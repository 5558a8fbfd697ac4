//! `GET /console`: a read-only page for operators, rendered on the server
//! (no script, no chart library: the chart is SVG) — loaded packs with
//! their grants and limits, refused packs and why, recent invocations with
//! their outcome code, latency, fuel and cost, cost per pack over the last
//! hour, and one run's effects.
//!
//! The same authority as `/metrics`: the operator scope. A browser cannot
//! add a bearer token to a navigation, and tokens never go in URLs, so the
//! operator pastes the token into a form once; the server checks it and
//! answers with a session cookie (random, `HttpOnly`, `SameSite=Strict`,
//! `Path=/console`, 8 hours) — the token itself is never stored in the
//! browser. Served over HTTPS (`serve.toml` `behindTls`, or
//! `X-Forwarded-Proto: https` from one of its `trustedProxies`) the cookie
//! is `__Host-wop_console` with `Secure` and `Path=/` (what the `__Host-`
//! prefix requires): a browser never sends it over plain HTTP, and no
//! sibling domain or plain-HTTP page can set it. `Authorization: Bearer`
//! works too (scripts, proxies).

mod chart;
mod html;
mod page;
pub(crate) mod sessions;

use crate::api::{authenticate, operator, read_body};
use crate::state::AppState;
use axum::body::Body;
use axum::extract::{Query, State};
use axum::http::{Extensions, HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use serde::Deserialize;
use sessions::TTL;
use wop_runtime::Principal;

const COOKIE: &str = "wop_console";
/// The cookie's name over HTTPS.
const SECURE_COOKIE: &str = "__Host-wop_console";

/// The session cookie's name and attributes: over HTTPS `__Host-` and
/// `Secure` (which `__Host-` requires, with `Path=/` and no `Domain`).
#[derive(Debug, Clone, Copy)]
struct CookieKind {
    tls: bool,
}

impl CookieKind {
    fn of(state: &AppState, headers: &HeaderMap, extensions: &Extensions) -> Self {
        CookieKind {
            tls: state.over_tls(headers, extensions),
        }
    }

    fn name(self) -> &'static str {
        if self.tls { SECURE_COOKIE } else { COOKIE }
    }

    /// `Set-Cookie` for `value`, kept `max_age` seconds.
    fn set(self, value: &str, max_age: u64) -> String {
        let (name, path, secure) = if self.tls {
            (SECURE_COOKIE, "/", "; Secure")
        } else {
            (COOKIE, "/console", "")
        };
        format!("{name}={value}{secure}; HttpOnly; SameSite=Strict; Path={path}; Max-Age={max_age}")
    }
}

/// The session id the request's cookie of `kind` carries.
fn cookie_session(headers: &HeaderMap, kind: CookieKind) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|kv| {
            let (k, v) = kv.trim().split_once('=')?;
            (k == kind.name() && v.len() == 64 && v.bytes().all(|b| b.is_ascii_hexdigit()))
                .then(|| v.to_owned())
        })
}

/// Who is looking: a bearer token, else a session cookie.
fn viewer(state: &AppState, headers: &HeaderMap, kind: CookieKind) -> Option<Principal> {
    if headers.contains_key(header::AUTHORIZATION) {
        return authenticate(state, headers).ok();
    }
    cookie_session(headers, kind).and_then(|id| state.sessions.get(&id))
}

fn html(status: StatusCode, body: String) -> Response {
    let mut r = (status, Html(body)).into_response();
    let h = r.headers_mut();
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(
        "content-security-policy",
        HeaderValue::from_static("default-src 'none'; style-src 'unsafe-inline'; img-src 'self'; form-action 'self'; frame-ancestors 'none'"),
    );
    h.insert("x-frame-options", HeaderValue::from_static("DENY"));
    r
}

fn see_console(cookie: Option<String>) -> Response {
    let mut r = StatusCode::SEE_OTHER.into_response();
    r.headers_mut()
        .insert(header::LOCATION, HeaderValue::from_static("/console"));
    if let Some(c) = cookie
        && let Ok(v) = HeaderValue::from_str(&c)
    {
        r.headers_mut().insert(header::SET_COOKIE, v);
    }
    r
}

/// `?run=&tenant=`: one run's effects.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ConsoleQuery {
    run: Option<String>,
    tenant: Option<String>,
}

/// `GET /console`.
pub(crate) async fn get(
    State(state): State<AppState>,
    headers: HeaderMap,
    extensions: Extensions,
    q: Result<Query<ConsoleQuery>, axum::extract::rejection::QueryRejection>,
) -> Response {
    let kind = CookieKind::of(&state, &headers, &extensions);
    let Some(p) = viewer(&state, &headers, kind) else {
        return html(StatusCode::OK, page::login(None));
    };
    if let Err(e) = operator(&p, "the console needs") {
        return html(StatusCode::FORBIDDEN, page::login(Some(&e.message)));
    }
    let run = match q.ok().map(|Query(q)| q) {
        Some(ConsoleQuery {
            run: Some(run),
            tenant: Some(tenant),
        }) if !run.is_empty() && run.len() <= 256 && !tenant.is_empty() && tenant.len() <= 256 => {
            let run_id = crate::wire::decode_run_id(&run);
            let max = wop_runtime::effects::MAX_PAGE;
            let effects = state
                .rt
                .effects_page(&tenant, &run_id, None, max)
                .await
                .map_err(|e| format!("effect store: {e}"));
            Some(page::RunView {
                tenant,
                run,
                effects,
            })
        }
        _ => None,
    };
    html(StatusCode::OK, page::dashboard(&state, &p.id, run))
}

/// `POST /console/login` (a form: `token=…`).
pub(crate) async fn login(
    State(state): State<AppState>,
    headers: HeaderMap,
    extensions: Extensions,
    body: Body,
) -> Response {
    let kind = CookieKind::of(&state, &headers, &extensions);
    let bytes = match read_body(&state, &headers, body).await {
        Ok(b) => b,
        Err(e) => return e.into_response(),
    };
    let token = form_value(&bytes, "token").unwrap_or_default();
    let principal = state
        .tokens
        .get(&crate::config::token_sha256(token.trim()))
        .cloned();
    let Some(p) = principal else {
        return html(
            StatusCode::UNAUTHORIZED,
            page::login(Some("that token is not valid")),
        );
    };
    if let Err(e) = operator(&p, "the console needs") {
        return html(StatusCode::FORBIDDEN, page::login(Some(&e.message)));
    }
    let id = state.sessions.open(p);
    see_console(Some(kind.set(&id, TTL.as_secs())))
}

/// `POST /console/logout`.
pub(crate) async fn logout(
    State(state): State<AppState>,
    headers: HeaderMap,
    extensions: Extensions,
) -> Response {
    let kind = CookieKind::of(&state, &headers, &extensions);
    if let Some(id) = cookie_session(&headers, kind) {
        state.sessions.close(&id);
    }
    see_console(Some(kind.set("", 0)))
}

/// One field of an `application/x-www-form-urlencoded` body.
fn form_value(body: &[u8], key: &str) -> Option<String> {
    let text = std::str::from_utf8(body).ok()?;
    text.split('&').find_map(|pair| {
        let (k, v) = pair.split_once('=')?;
        (k == key).then(|| {
            percent_encoding::percent_decode_str(&v.replace('+', " "))
                .decode_utf8_lossy()
                .into_owned()
        })
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn forms_and_cookies() {
        assert_eq!(
            form_value(b"a=1&token=ab%2Bc+d", "token").as_deref(),
            Some("ab+c d")
        );
        assert_eq!(form_value(b"a=1", "token"), None);
        let mut h = HeaderMap::new();
        let id = "0123456789abcdef".repeat(4);
        h.insert(
            header::COOKIE,
            format!("x=1; {COOKIE}={id}").parse().unwrap(),
        );
        let (plain, tls) = (CookieKind { tls: false }, CookieKind { tls: true });
        assert_eq!(cookie_session(&h, plain).as_deref(), Some(id.as_str()));
        assert_eq!(cookie_session(&h, tls), None, "over TLS only __Host-");
        h.insert(
            header::COOKIE,
            format!("{SECURE_COOKIE}={id}").parse().unwrap(),
        );
        assert_eq!(cookie_session(&h, tls).as_deref(), Some(id.as_str()));
        assert_eq!(cookie_session(&h, plain), None);
        h.insert(header::COOKIE, format!("{COOKIE}=short").parse().unwrap());
        assert_eq!(cookie_session(&h, plain), None);
        assert_eq!(
            tls.set("ab", 5),
            "__Host-wop_console=ab; Secure; HttpOnly; SameSite=Strict; Path=/; Max-Age=5"
        );
        assert_eq!(
            plain.set("ab", 5),
            "wop_console=ab; HttpOnly; SameSite=Strict; Path=/console; Max-Age=5"
        );
        assert_eq!(
            html::esc("<a href='x'>&\"</a>"),
            "&lt;a href=&#39;x&#39;&gt;&amp;&quot;&lt;/a&gt;"
        );
    }
}
