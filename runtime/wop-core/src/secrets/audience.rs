//! A credential's audience for safe-fetch: where it may be attached.
//!
//! Grammar: `[scheme://]host[:port][/path-prefix]`, the host part as in
//! the egress allow-list ([`crate::egress::allow`]): an exact name, `*.domain`
//! (names strictly below it) or an IP literal; never `*`. Without a scheme
//! only https matches (a credential is not sent in clear text unless the
//! operator writes `http://`). A path prefix matches the path itself and
//! anything below it (`/v1` matches `/v1` and `/v1/x`, not `/v1x`).

use crate::egress::allow::{Dest, Pattern};

/// One audience entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Audience {
    origin: Pattern,
    path: Option<String>,
}

impl Audience {
    /// Parses an entry; the error says what is wrong.
    pub fn parse(text: &str) -> Result<Audience, String> {
        let t = text.trim();
        let after_scheme = t.find("://").map_or(0, |i| i + 3);
        let (origin, path) = match t[after_scheme..].find('/') {
            Some(i) => t.split_at(after_scheme + i),
            None => (t, ""),
        };
        if path.contains(['?', '#']) || path.chars().any(char::is_whitespace) {
            return Err(format!(
                "`{text}`: only a path prefix may follow the host (no query or fragment)"
            ));
        }
        let origin = Pattern::parse(origin).map_err(|e| e.replace("egress pattern", "audience"))?;
        if origin.is_any_host() {
            return Err(format!(
                "`{text}`: `*` would send the credential anywhere; name its hosts"
            ));
        }
        let path = (!path.is_empty() && path != "/").then(|| path.to_owned());
        Ok(Audience { origin, path })
    }

    /// Whether a request to `dest` with this URL `path` is in the audience.
    pub fn matches(&self, dest: &Dest<'_>, path: &str) -> bool {
        if !self.origin.matches(dest) {
            return false;
        }
        match &self.path {
            None => true,
            Some(p) if p.ends_with('/') => path.starts_with(p.as_str()),
            Some(p) => {
                path == p
                    || path
                        .strip_prefix(p.as_str())
                        .is_some_and(|rest| rest.starts_with('/'))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::egress::allow::Scheme;
    use crate::egress::host::normalize;

    fn hit(a: &str, scheme: Scheme, host: &str, port: u16, path: &str) -> bool {
        let h = normalize(host).unwrap();
        Audience::parse(a).unwrap().matches(
            &Dest {
                scheme,
                host: &h,
                port,
            },
            path,
        )
    }

    #[test]
    fn audiences_match_host_scheme_port_and_path() {
        use Scheme::*;
        for (a, scheme, host, port, path, want) in [
            ("api.example.com", Https, "api.example.com", 443, "/", true),
            ("api.example.com", Http, "api.example.com", 80, "/", false),
            (
                "api.example.com",
                Https,
                "evil.example.com",
                443,
                "/",
                false,
            ),
            (
                "api.example.com",
                Https,
                "api.example.com",
                8443,
                "/",
                false,
            ),
            ("*.example.com", Https, "a.b.example.com", 443, "/", true),
            ("*.example.com", Https, "example.com", 443, "/", false),
            ("*.example.com", Https, "example.com.evil", 443, "/", false),
            ("http://127.0.0.1:8080", Http, "127.0.0.1", 8080, "/x", true),
            (
                "http://127.0.0.1:8080",
                Http,
                "127.0.0.1",
                8081,
                "/x",
                false,
            ),
            (
                "https://api.example.com/v1",
                Https,
                "api.example.com",
                443,
                "/v1",
                true,
            ),
            (
                "https://api.example.com/v1",
                Https,
                "api.example.com",
                443,
                "/v1/a",
                true,
            ),
            (
                "https://api.example.com/v1",
                Https,
                "api.example.com",
                443,
                "/v1x",
                false,
            ),
            (
                "https://api.example.com/v1/",
                Https,
                "api.example.com",
                443,
                "/v1/a",
                true,
            ),
            (
                "https://api.example.com/v1/",
                Https,
                "api.example.com",
                443,
                "/v2/a",
                false,
            ),
            (
                "api.example.com/v1",
                Https,
                "api.example.com",
                443,
                "/v1/a",
                true,
            ),
        ] {
            assert_eq!(
                hit(a, scheme, host, port, path),
                want,
                "{a} vs {host}:{port}{path}"
            );
        }
    }

    #[test]
    fn bad_audiences_are_refused() {
        for bad in [
            "*",
            "https://*",
            "*:*",
            "",
            "ftp://x.example",
            "user@x.example",
            "x.example/a?b",
        ] {
            assert!(Audience::parse(bad).is_err(), "{bad}");
        }
    }
}
