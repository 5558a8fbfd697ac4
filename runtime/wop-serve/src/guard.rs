//! Who may reach the server from a browser: `Origin` and `Host` checks on
//! every route, before authentication and before any body is read.
//!
//! - A request that carries `Origin` is refused (`403 forbidden`,
//!   `details.scope = "origin"`) unless that origin is listed in
//!   `serve.toml`'s `allowedOrigins` (empty by default). Non-browser clients
//!   send no `Origin`; a page's script always does, so a page on another
//!   site cannot drive the server (the MCP transport spec requires this
//!   check against DNS rebinding).
//! - In anonymous-loopback mode (no token needed) `Host` must name a
//!   loopback address or `localhost`: a page that rebinds its own name to
//!   127.0.0.1 still sends its own name as `Host`.

use crate::api::ApiError;
use crate::config::normalize_origin;
use crate::state::AppState;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde_json::json;
use std::net::IpAddr;
use wop_runtime::error::ErrorCode;

/// Whether `origin` (the header's value) is in `allowed` (normalized).
pub(crate) fn origin_allowed(origin: &str, allowed: &[String]) -> bool {
    normalize_origin(origin).is_some_and(|o| allowed.contains(&o))
}

/// Whether a `Host` header value names this machine's loopback interface:
/// `localhost` (or a name under `.localhost`), `127.0.0.0/8` or `[::1]`,
/// with an optional port.
pub(crate) fn loopback_host(host: &str) -> bool {
    let host = host.trim();
    // Strip the port: `[v6]:port`, `v4:port`, `name:port`.
    let name = if let Some(rest) = host.strip_prefix('[') {
        match rest.split_once(']') {
            Some((inside, after)) if after.is_empty() || valid_port(after) => inside,
            _ => return false,
        }
    } else {
        match host.rsplit_once(':') {
            Some((h, port)) if valid_port(&format!(":{port}")) => h,
            Some(_) => return false,
            None => host,
        }
    };
    let name = name.trim_end_matches('.').to_ascii_lowercase();
    if name == "localhost" || name.ends_with(".localhost") {
        return true;
    }
    name.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

fn valid_port(s: &str) -> bool {
    s.strip_prefix(':')
        .is_some_and(|p| !p.is_empty() && p.len() <= 5 && p.bytes().all(|b| b.is_ascii_digit()))
}

/// Whether `origin` is the server's own as the request names it (`Host`):
/// the console's own forms post with that origin. A page that rebinds its
/// name to this server gets its own name here, and no session cookie or
/// token for it.
pub(crate) fn same_origin(origin: &str, host: Option<&str>) -> bool {
    let (Some(o), Some(host)) = (normalize_origin(origin), host) else {
        return false;
    };
    let authority = o.split_once("://").map_or("", |(_, a)| a);
    let host = host.trim().to_ascii_lowercase();
    authority == host
        || normalize_origin(&format!("http://{host}")).is_some_and(|h| h == o)
        || normalize_origin(&format!("https://{host}")).is_some_and(|h| h == o)
}

/// Why a request is refused, if it is.
pub(crate) fn check(
    headers: &HeaderMap,
    allowed_origins: &[String],
    anonymous_loopback: bool,
) -> Option<ApiError> {
    if let Some(origin) = headers.get(header::ORIGIN) {
        let text = origin.to_str().unwrap_or("(not visible ASCII)");
        let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
        if !origin_allowed(text, allowed_origins) && !same_origin(text, host) {
            return Some(
                ApiError::new(
                    StatusCode::FORBIDDEN,
                    ErrorCode::Forbidden,
                    format!(
                        "requests from origin `{}` are not allowed; an operator can list it in serve.toml `allowedOrigins`",
                        text.chars().take(200).collect::<String>()
                    ),
                )
                .details(json!({"scope": "origin"})),
            );
        }
    }
    if anonymous_loopback {
        let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
        if !host.is_some_and(loopback_host) {
            return Some(
                ApiError::new(
                    StatusCode::FORBIDDEN,
                    ErrorCode::Forbidden,
                    "this server accepts anonymous requests only for a loopback Host (localhost, 127.0.0.1, [::1]); use a bearer token to reach it under another name",
                )
                .details(json!({"scope": "host"})),
            );
        }
    }
    None
}

/// The middleware: refuses before anything else runs.
pub(crate) async fn layer(State(state): State<AppState>, req: Request, next: Next) -> Response {
    match check(req.headers(), &state.origins, state.cfg.anonymous_loopback) {
        Some(e) => e.into_response(),
        None => next.run(req).await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins() {
        let allowed: Vec<String> = ["https://console.example", "http://localhost:3000"]
            .iter()
            .map(|o| normalize_origin(o).unwrap())
            .collect();
        for (origin, ok) in [
            ("https://console.example", true),
            ("HTTPS://Console.Example", true),
            ("https://console.example:443", true),
            ("http://localhost:3000", true),
            ("https://console.example:8443", false),
            ("http://console.example", false),
            ("https://evil.example", false),
            ("https://console.example.evil.example", false),
            ("null", false),
            ("", false),
            ("file://", false),
            ("https://console.example/", false),
            ("javascript://console.example", false),
        ] {
            assert_eq!(origin_allowed(origin, &allowed), ok, "{origin}");
        }
        assert!(!origin_allowed("https://console.example", &[]));
    }

    #[test]
    fn loopback_hosts() {
        for (host, ok) in [
            ("localhost", true),
            ("LOCALHOST:8080", true),
            ("localhost.", true),
            ("app.localhost:3000", true),
            ("127.0.0.1", true),
            ("127.1.2.3:9", true),
            ("[::1]", true),
            ("[::1]:8080", true),
            ("evil.example", false),
            ("evil.example:8080", false),
            ("localhost.evil.example", false),
            ("127.0.0.1.nip.io", false),
            ("10.0.0.1", false),
            ("0.0.0.0", false),
            ("[::ffff:127.0.0.1]", false),
            ("[::1", false),
            ("localhost:", false),
            ("localhost:99999x", false),
            ("", false),
        ] {
            assert_eq!(loopback_host(host), ok, "{host}");
        }
    }

    #[test]
    fn checks() {
        let mut h = HeaderMap::new();
        h.insert(header::HOST, "localhost:1".parse().unwrap());
        assert!(check(&h, &[], true).is_none());
        h.insert(header::ORIGIN, "https://evil.example".parse().unwrap());
        let e = check(&h, &[], false).unwrap();
        assert_eq!(
            (e.status, e.code.as_str()),
            (StatusCode::FORBIDDEN, "forbidden")
        );
        h.remove(header::ORIGIN);
        h.insert(header::HOST, "evil.example".parse().unwrap());
        assert!(check(&h, &[], true).is_some());
        assert!(
            check(&h, &[], false).is_none(),
            "a token server names itself"
        );
        h.remove(header::HOST);
        assert!(check(&h, &[], true).is_some(), "no Host in anonymous mode");
        // The console's own forms: same origin as the Host they were sent to.
        h.insert(header::HOST, "localhost:8787".parse().unwrap());
        h.insert(header::ORIGIN, "http://localhost:8787".parse().unwrap());
        assert!(check(&h, &[], true).is_none());
        h.insert(header::ORIGIN, "http://localhost:9999".parse().unwrap());
        assert!(check(&h, &[], true).is_some());
    }

    #[test]
    fn same_origins() {
        for (origin, host, ok) in [
            ("http://localhost:8787", Some("localhost:8787"), true),
            ("http://LOCALHOST:8787", Some("localhost:8787"), true),
            ("https://wop.example", Some("wop.example"), true),
            ("https://wop.example:443", Some("wop.example"), true),
            ("http://evil.example", Some("wop.example"), false),
            ("http://localhost:8787", None, false),
            ("null", Some("null"), false),
        ] {
            assert_eq!(same_origin(origin, host), ok, "{origin} {host:?}");
        }
    }
}
