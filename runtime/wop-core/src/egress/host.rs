//! Host names for safe-fetch: normalization (lowercase, one trailing dot
//! removed, IDNA to ASCII) and the names a pack may never reach. Pure.

use std::net::IpAddr;

/// A normalized destination host.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum HostName {
    /// A DNS name: lowercase ASCII (punycode), no trailing dot.
    Name(String),
    /// An IP literal.
    Ip(IpAddr),
}

impl HostName {
    /// The canonical text: the name, an IPv4 dotted quad, or `[v6]`.
    pub fn canonical(&self) -> String {
        match self {
            Self::Name(n) => n.clone(),
            Self::Ip(IpAddr::V4(v4)) => v4.to_string(),
            Self::Ip(IpAddr::V6(v6)) => format!("[{v6}]"),
        }
    }
}

/// Why a host was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostError {
    /// Not a valid host name.
    Invalid(String),
    /// A name that always means this machine or a metadata service.
    Forbidden(&'static str),
}

/// Names that reach this machine or a cloud metadata service, whatever
/// DNS says.
const FORBIDDEN_NAMES: &[&str] = &[
    "localhost",
    "localhost.localdomain",
    "ip6-localhost",
    "ip6-loopback",
    "metadata",
    "metadata.google.internal",
    "metadata.goog",
    "metadata.azure.internal",
    "instance-data",
    "instance-data.ec2.internal",
    "metadata.platformequinix.com",
    "metadata.packet.net",
];

/// Suffixes whose every name is refused.
const FORBIDDEN_SUFFIXES: &[&str] = &[".localhost", ".localhost.localdomain"];

/// Normalizes a host as text: brackets mean IPv6; anything that parses as
/// an IP address is one; otherwise an IDNA name, lowercased, with one
/// trailing dot removed. Does not judge the result (see [`judge_name`]).
pub fn normalize(host: &str) -> Result<HostName, HostError> {
    if let Some(inner) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        return inner
            .parse::<std::net::Ipv6Addr>()
            .map(|ip| HostName::Ip(IpAddr::V6(ip)))
            .map_err(|_| HostError::Invalid(format!("`{host}` is not an IPv6 address")));
    }
    if host.is_empty() {
        return Err(HostError::Invalid("the host is empty".to_owned()));
    }
    let trimmed = host.strip_suffix('.').unwrap_or(host);
    if trimmed.is_empty() || trimmed.ends_with('.') {
        return Err(HostError::Invalid(format!("`{host}` is not a host name")));
    }
    if let Ok(ip) = trimmed.parse::<IpAddr>() {
        return Ok(HostName::Ip(ip));
    }
    let ascii = idna::domain_to_ascii(trimmed)
        .map_err(|_| HostError::Invalid(format!("`{host}` is not a valid host name")))?;
    let ascii = ascii
        .strip_suffix('.')
        .unwrap_or(&ascii)
        .to_ascii_lowercase();
    if ascii.is_empty()
        || ascii.len() > 253
        || ascii.split('.').any(|l| l.is_empty() || l.len() > 63)
        || !ascii
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    {
        return Err(HostError::Invalid(format!(
            "`{host}` is not a valid host name"
        )));
    }
    if let Ok(ip) = ascii.parse::<IpAddr>() {
        return Ok(HostName::Ip(ip));
    }
    // A name whose last label is numeric would be read as an IPv4 address
    // by URL parsers (WHATWG); refuse the ambiguity.
    if ascii
        .rsplit('.')
        .next()
        .is_some_and(|l| l.chars().all(|c| c.is_ascii_digit()) || l.starts_with("0x"))
    {
        return Err(HostError::Invalid(format!(
            "`{host}` looks like a numeric address but is not a valid one"
        )));
    }
    Ok(HostName::Name(ascii))
}

/// Refuses names that always reach this machine or a metadata service,
/// and single-label names (resolver search domains could turn them into
/// internal names).
pub fn judge_name(name: &str) -> Result<(), HostError> {
    if FORBIDDEN_NAMES.contains(&name) || FORBIDDEN_SUFFIXES.iter().any(|s| name.ends_with(s)) {
        return Err(HostError::Forbidden(
            "the name always refers to this machine or a cloud metadata service",
        ));
    }
    if !name.contains('.') {
        return Err(HostError::Forbidden(
            "single-label names are refused (resolver search domains make them internal names)",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(s: &str) -> HostName {
        HostName::Name(s.to_owned())
    }

    #[test]
    fn normalization_table() {
        let cases: &[(&str, Option<HostName>)] = &[
            ("api.example.com", Some(n("api.example.com"))),
            ("API.Example.COM", Some(n("api.example.com"))),
            ("api.example.com.", Some(n("api.example.com"))),
            ("api.example.com..", None),
            (".", None),
            ("", None),
            ("bücher.example", Some(n("xn--bcher-kva.example"))),
            ("BÜCHER.example", Some(n("xn--bcher-kva.example"))),
            ("xn--bcher-kva.example", Some(n("xn--bcher-kva.example"))),
            ("ｌｏｃａｌｈｏｓｔ", Some(n("localhost"))),
            (
                "127.0.0.1",
                Some(HostName::Ip("127.0.0.1".parse().unwrap())),
            ),
            (
                "127.0.0.1.",
                Some(HostName::Ip("127.0.0.1".parse().unwrap())),
            ),
            ("[::1]", Some(HostName::Ip("::1".parse().unwrap()))),
            (
                "[::ffff:127.0.0.1]",
                Some(HostName::Ip("::ffff:7f00:1".parse().unwrap())),
            ),
            ("[nope]", None),
            ("1.2.3.999", None),
            ("foo.0x10", None),
            ("a..b", None),
        ];
        for (input, want) in cases {
            assert_eq!(normalize(input).ok(), *want, "{input}");
        }
    }

    #[test]
    fn forbidden_names() {
        for bad in [
            "localhost",
            "foo.localhost",
            "a.b.localhost",
            "metadata.google.internal",
            "metadata",
            "instance-data.ec2.internal",
            "intranet",
        ] {
            assert!(judge_name(bad).is_err(), "{bad}");
        }
        for ok in [
            "api.example.com",
            "localhost.example.com",
            "metadata.example.com",
        ] {
            assert!(judge_name(ok).is_ok(), "{ok}");
        }
    }
}
