//! Plain paths: a path (or URI) that every server, proxy and decoder reads
//! the same way, so a prefix compared on its text means the same to the
//! host that compares it and to whatever serves it.
//!
//! A prefix such as `/v1` says nothing about `/v1/..%2Fadmin%2Fx`,
//! `/v1/..;/admin/x` or `/v1/%5C..%5Cadmin/x`: each starts with `/v1/`,
//! and a server or proxy that decodes `%2F`, drops `;` parameters or reads
//! `\` as `/` serves `/admin/x`. Credential audiences (`secrets.*.audiences`
//! path prefixes) and MCP resource patterns (`prefix*`) therefore match
//! only plain paths. Pure.

/// Why a path is not plain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotPlain {
    /// A percent-encoded `.`, `/`, `\`, `%` or `;` (`%2e`, `%2f`, `%5c`,
    /// `%25`, `%3b`, either case): a decoder turns it into a separator, a
    /// dot segment or another escape.
    Encoded,
    /// A `.` or `..` segment.
    DotSegment,
    /// A `\`, which some servers read as `/`.
    Backslash,
    /// A `;`: path parameters (`..;/` is `..` to some servers).
    Parameter,
    /// Whitespace or a control character.
    Control,
}

impl NotPlain {
    /// What was found, for a person.
    pub fn describe(self) -> &'static str {
        match self {
            Self::Encoded => "a percent-encoded `.`, `/`, `\\`, `%` or `;`",
            Self::DotSegment => "a `.` or `..` segment",
            Self::Backslash => "a `\\`",
            Self::Parameter => "a `;` (path parameters)",
            Self::Control => "whitespace or a control character",
        }
    }
}

/// The escapes of `.`, `/`, `\`, `%` and `;` (compared case-insensitively).
const ENCODED: [&[u8]; 5] = [b"%2e", b"%2f", b"%5c", b"%25", b"%3b"];

/// Checks that `path` is plain: none of [`NotPlain`]. Segments end at
/// `/`, `?` or `#`, so a whole URI can be checked as well as a path.
pub fn check(path: &str) -> Result<(), NotPlain> {
    let bytes = path.as_bytes();
    let encoded = bytes.windows(3).any(|w| {
        ENCODED
            .iter()
            .any(|e| w[0] == e[0] && w[1] == e[1] && w[2].eq_ignore_ascii_case(&e[2]))
    });
    if encoded {
        return Err(NotPlain::Encoded);
    }
    if path.contains('\\') {
        return Err(NotPlain::Backslash);
    }
    if path.contains(';') {
        return Err(NotPlain::Parameter);
    }
    if path.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(NotPlain::Control);
    }
    if path
        .split(['/', '?', '#'])
        .any(|seg| seg == "." || seg == "..")
    {
        return Err(NotPlain::DotSegment);
    }
    Ok(())
}

/// Whether `path` is plain ([`check`]).
pub fn is_plain(path: &str) -> bool {
    check(path).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_paths_pass() {
        for ok in [
            "/",
            "/v1",
            "/v1/x",
            "/v1/a.b/c..d/...",
            "/v1/%20x",
            "/v1/%41",
            "/v1//x",
            "/v1/x?a=b.c",
            "file:///srv/data/a.txt",
        ] {
            assert_eq!(check(ok), Ok(()), "{ok}");
        }
        for (bad, why) in [
            ("/v1/..%2Fadmin%2Fx", NotPlain::Encoded),
            ("/v1/..%2fadmin", NotPlain::Encoded),
            ("/v1/%2E%2E/admin", NotPlain::Encoded),
            ("/v1/%5C..%5Cadmin/x", NotPlain::Encoded),
            ("/v1/%252e%252e/admin", NotPlain::Encoded),
            ("/v1/..%3B/admin", NotPlain::Encoded),
            ("/v1/..;/admin/x", NotPlain::Parameter),
            ("/v1;x=1/a", NotPlain::Parameter),
            ("/v1/\\..\\admin", NotPlain::Backslash),
            ("/v1/../admin", NotPlain::DotSegment),
            ("/v1/./x", NotPlain::DotSegment),
            ("/v1/..", NotPlain::DotSegment),
            ("/v1/..?x", NotPlain::DotSegment),
            ("/v1/a b", NotPlain::Control),
            ("/v1/a\u{0}", NotPlain::Control),
        ] {
            assert_eq!(check(bad), Err(why), "{bad}");
        }
    }
}
