//! Allow-lists: host patterns a pack's manifest requests (`x-wop.egress`)
//! and the operator grants (`[packs.<name>] egress`). A destination is
//! allowed only if it matches a requested pattern **and** a granted one.
//!
//! Pattern grammar: `[scheme://]host[:port]` where
//! - `scheme` is `https` (the default) or `http` — a pattern without a
//!   scheme matches https only, so plain http needs an explicit `http://`;
//! - `host` is an exact name (`api.example.com`, IDNA and case normalized),
//!   `*.example.com` (any name strictly below `example.com`), `*` (any
//!   host, including IP literals — the address guard still applies), or an
//!   IP literal (`203.0.113.7`, `[2001:db8::1]`);
//! - `port` is a number or `*`; without one only the scheme's default port
//!   (443 / 80) matches.

use super::host::{HostName, normalize};
use serde::Serialize;

/// `http` or `https`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Scheme {
    /// Plain HTTP (only where a pattern says `http://`).
    Http,
    /// HTTPS.
    Https,
}

impl Scheme {
    /// `http` / `https`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Http => "http",
            Self::Https => "https",
        }
    }

    /// 80 / 443.
    pub fn default_port(self) -> u16 {
        match self {
            Self::Http => 80,
            Self::Https => 443,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum HostPat {
    Any,
    Exact(HostName),
    /// `*.suffix`: names ending in `.suffix`.
    Below(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PortPat {
    Default,
    Any,
    Exact(u16),
}

/// One parsed pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pattern {
    text: String,
    scheme: Scheme,
    host: HostPat,
    port: PortPat,
}

/// A destination to match: scheme, normalized host, effective port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dest<'a> {
    /// The scheme.
    pub scheme: Scheme,
    /// The normalized host.
    pub host: &'a HostName,
    /// The port (explicit or the scheme's default).
    pub port: u16,
}

impl Pattern {
    /// Parses a pattern; the error says what is wrong.
    pub fn parse(text: &str) -> Result<Pattern, String> {
        let bad = |why: &str| Err(format!("egress pattern `{text}`: {why}"));
        let t = text.trim();
        if t.is_empty() {
            return bad("is empty");
        }
        let (scheme, rest) = match t.split_once("://") {
            Some((s, r)) => match s.to_ascii_lowercase().as_str() {
                "https" => (Scheme::Https, r),
                "http" => (Scheme::Http, r),
                _ => return bad("the scheme must be http or https"),
            },
            None => (Scheme::Https, t),
        };
        if rest.contains(['/', '?', '#', '@', '\\']) || rest.chars().any(char::is_whitespace) {
            return bad("only [scheme://]host[:port] is allowed (no path, query or userinfo)");
        }
        let (host, port) = if let Some(after) = rest.strip_prefix('[') {
            match after.split_once(']') {
                Some((h, "")) => (format!("[{h}]"), None),
                Some((h, p)) => match p.strip_prefix(':') {
                    Some(p) => (format!("[{h}]"), Some(p)),
                    None => return bad("junk after the IPv6 address"),
                },
                None => return bad("unclosed `[`"),
            }
        } else {
            match rest.rsplit_once(':') {
                Some((h, p)) => (h.to_owned(), Some(p)),
                None => (rest.to_owned(), None),
            }
        };
        let port = match port {
            None => PortPat::Default,
            Some("*") => PortPat::Any,
            Some(p) => match p.parse::<u16>() {
                Ok(n) if n > 0 => PortPat::Exact(n),
                _ => return bad("the port must be 1-65535 or `*`"),
            },
        };
        let host = if host == "*" {
            HostPat::Any
        } else if let Some(suffix) = host.strip_prefix("*.") {
            match normalize(suffix) {
                Ok(HostName::Name(n)) => HostPat::Below(n),
                _ => return bad("`*.` must be followed by a domain name"),
            }
        } else if host.contains('*') {
            return bad("`*` is allowed only as the whole host or as a leading `*.`");
        } else {
            match normalize(&host) {
                Ok(h) => HostPat::Exact(h),
                Err(_) => return bad("not a valid host"),
            }
        };
        Ok(Pattern {
            text: text.to_owned(),
            scheme,
            host,
            port,
        })
    }

    /// Whether the host part is `*` (every host).
    pub fn is_any_host(&self) -> bool {
        self.host == HostPat::Any
    }

    /// The pattern as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Whether `d` matches.
    pub fn matches(&self, d: &Dest<'_>) -> bool {
        if self.scheme != d.scheme {
            return false;
        }
        let port_ok = match self.port {
            PortPat::Default => d.port == d.scheme.default_port(),
            PortPat::Any => true,
            PortPat::Exact(p) => d.port == p,
        };
        port_ok
            && match (&self.host, d.host) {
                (HostPat::Any, _) => true,
                (HostPat::Exact(h), dh) => h == dh,
                (HostPat::Below(s), HostName::Name(n)) => n
                    .strip_suffix(s.as_str())
                    .is_some_and(|p| p.len() > 1 && p.ends_with('.')),
                (HostPat::Below(_), HostName::Ip(_)) => false,
            }
    }
}

/// Parses a list of patterns.
pub fn parse_all(patterns: &[String]) -> Result<Vec<Pattern>, (usize, String)> {
    patterns
        .iter()
        .enumerate()
        .map(|(i, p)| Pattern::parse(p).map_err(|e| (i, e)))
        .collect()
}

/// A pack's effective allow-list: requested ∩ granted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AllowList {
    requested: Vec<Pattern>,
    granted: Vec<Pattern>,
}

impl AllowList {
    /// The allow-list for a manifest request and an operator grant.
    pub fn new(requested: Vec<Pattern>, granted: Vec<Pattern>) -> Self {
        Self { requested, granted }
    }

    /// Whether nothing can match (no request or no grant).
    pub fn is_empty(&self) -> bool {
        self.requested.is_empty() || self.granted.is_empty()
    }

    /// Whether `d` matches a requested pattern and a granted pattern.
    pub fn allows(&self, d: &Dest<'_>) -> bool {
        self.requested.iter().any(|p| p.matches(d)) && self.granted.iter().any(|p| p.matches(d))
    }

    /// The requested patterns, as written.
    pub fn requested(&self) -> Vec<String> {
        self.requested.iter().map(|p| p.text.clone()).collect()
    }

    /// The granted patterns, as written.
    pub fn granted(&self) -> Vec<String> {
        self.granted.iter().map(|p| p.text.clone()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dest(scheme: Scheme, host: &str, port: Option<u16>) -> (Scheme, HostName, u16) {
        (
            scheme,
            normalize(host).unwrap(),
            port.unwrap_or(scheme.default_port()),
        )
    }

    #[test]
    fn pattern_syntax() {
        for ok in [
            "api.example.com",
            "*.example.com",
            "*",
            "http://*:*",
            "https://api.example.com:8443",
            "HTTP://API.EXAMPLE.COM",
            "http://127.0.0.1:8080",
            "[2001:db8::1]",
            "[2001:db8::1]:443",
            "bücher.example",
            "api.example.com.",
        ] {
            assert!(Pattern::parse(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "ftp://example.com",
            "example.com/path",
            "user@example.com",
            "example.com:0",
            "example.com:99999",
            "example.com:x",
            "a*.example.com",
            "*example.com",
            "*.",
            "[::1",
            "[::1]x",
            "exa mple.com",
            "example.com?q",
        ] {
            assert!(Pattern::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn matching_table() {
        use Scheme::*;
        type Case<'a> = (&'a str, (Scheme, &'a str, Option<u16>), bool);
        let cases: &[Case] = &[
            ("api.example.com", (Https, "api.example.com", None), true),
            ("api.example.com", (Https, "API.EXAMPLE.COM.", None), true),
            ("api.example.com", (Http, "api.example.com", None), false),
            (
                "api.example.com",
                (Https, "api.example.com", Some(8443)),
                false,
            ),
            ("api.example.com", (Https, "x.api.example.com", None), false),
            (
                "api.example.com",
                (Https, "api.example.com.evil.com", None),
                false,
            ),
            ("*.example.com", (Https, "a.example.com", None), true),
            ("*.example.com", (Https, "a.b.example.com", None), true),
            ("*.example.com", (Https, "example.com", None), false),
            ("*.example.com", (Https, "evilexample.com", None), false),
            (
                "*.example.com",
                (Https, "example.com.evil.com", None),
                false,
            ),
            ("*.example.com", (Https, "93.184.216.34", None), false),
            (
                "http://api.example.com",
                (Http, "api.example.com", None),
                true,
            ),
            (
                "http://api.example.com",
                (Https, "api.example.com", None),
                false,
            ),
            (
                "https://api.example.com:8443",
                (Https, "api.example.com", Some(8443)),
                true,
            ),
            (
                "api.example.com:*",
                (Https, "api.example.com", Some(1)),
                true,
            ),
            ("*", (Https, "anything.example", None), true),
            ("*", (Https, "93.184.216.34", None), true),
            ("*", (Http, "anything.example", None), false),
            ("http://*:*", (Http, "anything.example", Some(81)), true),
            (
                "bücher.example",
                (Https, "xn--bcher-kva.example", None),
                true,
            ),
            ("[2001:db8::1]", (Https, "[2001:db8::1]", None), true),
            (
                "http://127.0.0.1:8080",
                (Http, "127.0.0.1", Some(8080)),
                true,
            ),
            (
                "http://127.0.0.1:8080",
                (Http, "127.0.0.2", Some(8080)),
                false,
            ),
        ];
        for (pat, (s, h, port), want) in cases {
            let p = Pattern::parse(pat).unwrap();
            let (scheme, host, port) = dest(*s, h, *port);
            let d = Dest {
                scheme,
                host: &host,
                port,
            };
            assert_eq!(p.matches(&d), *want, "{pat} vs {s:?} {h} {port}");
        }
    }

    #[test]
    fn request_and_grant_must_both_match() {
        let l = AllowList::new(
            parse_all(&["*.example.com".into()]).unwrap(),
            parse_all(&["api.example.com".into(), "other.org".into()]).unwrap(),
        );
        let api = normalize("api.example.com").unwrap();
        let other = normalize("other.org").unwrap();
        let www = normalize("www.example.com").unwrap();
        let d = |h| Dest {
            scheme: Scheme::Https,
            host: h,
            port: 443,
        };
        assert!(l.allows(&d(&api)));
        assert!(!l.allows(&d(&other)), "granted but not requested");
        assert!(!l.allows(&d(&www)), "requested but not granted");
        assert!(AllowList::default().is_empty());
    }
}
