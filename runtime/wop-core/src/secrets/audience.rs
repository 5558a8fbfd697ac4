//! A credential's audience for safe-fetch: where it may be attached.
//!
//! Grammar: `[scheme://]host[:port][/path-prefix]`, the host part as in
//! the egress allow-list ([`crate::egress::allow`]): an exact name, `*.domain`
//! (names strictly below it) or an IP literal; never `*`. Without a scheme
//! only https matches (a credential is not sent in clear text unless the
//! operator writes `http://`). A path prefix matches the path itself and
//! anything below it (`/v1` matches `/v1` and `/v1/x`, not `/v1x`), and
//! only a plain path ([`crate::egress::plain`]): `/v1/..%2Fadmin` starts
//! with `/v1/` but a decoding server or proxy serves `/admin`, so such a
//! request is [`Fit::NotPlain`], never in the audience.

use crate::egress::allow::{Dest, Pattern};
use crate::egress::plain;

/// How a request fits an audience.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fit {
    /// In the audience.
    In,
    /// Outside it.
    Out,
    /// The origin matches and the raw path starts with the audience's path
    /// prefix, but the path is not plain (encoded separators, dot
    /// segments, `;` parameters, `\`): what it reaches cannot be told
    /// from its text.
    NotPlain,
}

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
        if let Err(why) = plain::check(path) {
            return Err(format!(
                "`{text}`: the path prefix has {}; give it as the plain path it is",
                why.describe()
            ));
        }
        let path = (!path.is_empty() && path != "/").then(|| path.to_owned());
        Ok(Audience { origin, path })
    }

    /// Whether a request to `dest` with this URL `path` is in the audience.
    pub fn matches(&self, dest: &Dest<'_>, path: &str) -> bool {
        self.fit(dest, path) == Fit::In
    }

    /// How a request to `dest` with this URL `path` (as sent: the raw,
    /// still percent-encoded path) fits the audience. Without a path
    /// prefix only the origin counts; with one, the path must start with
    /// it and be plain.
    pub fn fit(&self, dest: &Dest<'_>, path: &str) -> Fit {
        if !self.origin.matches(dest) {
            return Fit::Out;
        }
        let prefixed = match &self.path {
            None => return Fit::In,
            Some(p) if p.ends_with('/') => path.starts_with(p.as_str()),
            Some(p) => {
                path == p
                    || path
                        .strip_prefix(p.as_str())
                        .is_some_and(|rest| rest.starts_with('/'))
            }
        };
        match (prefixed, plain::is_plain(path)) {
            (false, _) => Fit::Out,
            (true, true) => Fit::In,
            (true, false) => Fit::NotPlain,
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
    fn path_prefixes_match_only_plain_paths() {
        let h = normalize("api.example.com").unwrap();
        let d = Dest {
            scheme: Scheme::Https,
            host: &h,
            port: 443,
        };
        let v1 = Audience::parse("api.example.com/v1").unwrap();
        let host_only = Audience::parse("api.example.com").unwrap();
        for raw in [
            "/v1/..%2Fadmin%2Fx",
            "/v1/..;/admin/x",
            "/v1/%5C..%5Cadmin/x",
            "/v1/%252e%252e/admin",
            "/v1/x/../../admin",
        ] {
            assert_eq!(v1.fit(&d, raw), Fit::NotPlain, "{raw}");
            assert!(!v1.matches(&d, raw), "{raw}");
            // Without a path prefix the path is not compared at all.
            assert_eq!(host_only.fit(&d, raw), Fit::In, "{raw}");
        }
        assert_eq!(v1.fit(&d, "/v1/x"), Fit::In);
        // Outside the prefix whatever it holds: not attached, not refused.
        assert_eq!(v1.fit(&d, "/v2/..%2Fv1"), Fit::Out);
        assert_eq!(v1.fit(&d, "/files/a%2Fb"), Fit::Out);
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
            "x.example/v1/..%2F",
            "x.example/v1;x",
            "x.example/v1/../admin",
        ] {
            assert!(Audience::parse(bad).is_err(), "{bad}");
        }
    }
}
