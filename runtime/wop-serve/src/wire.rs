//! How the service writes values into answers and reads them from paths:
//! RFC 3339 times (effect listings, the console, the capability
//! document) and run ids in path segments (`/runs/{runId}/effects`, the
//! console's run view).

/// RFC 3339 (UTC) of milliseconds since the epoch: seconds, then a
/// fraction only when the milliseconds are not zero, without trailing
/// zeros (`.123`, `.12`, `.007`). A time past year 9999 is written as the
/// epoch.
pub(crate) fn rfc3339(ms: u64) -> String {
    let nanos = i128::from(ms) * 1_000_000;
    time::OffsetDateTime::from_unix_timestamp_nanos(nanos)
        .ok()
        .and_then(|t| {
            t.format(&time::format_description::well_known::Rfc3339)
                .ok()
        })
        .unwrap_or_else(|| "1970-01-01T00:00:00Z".to_owned())
}

/// A run id from a path segment: `~2F` (and, already decoded by the
/// router, `%2F`) stand for `/`.
pub(crate) fn decode_run_id(raw: &str) -> String {
    raw.replace("~2F", "/").replace("~2f", "/")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times() {
        let day = 1_764_460_800_000; // 2025-11-30T00:00:00Z
        for (ms, text) in [
            (0, "1970-01-01T00:00:00Z"),
            (day, "2025-11-30T00:00:00Z"),
            (day + 123, "2025-11-30T00:00:00.123Z"),
            (day + 7, "2025-11-30T00:00:00.007Z"),
            (day + 70, "2025-11-30T00:00:00.07Z"),
            (day + 100, "2025-11-30T00:00:00.1Z"),
            (day + 59_999, "2025-11-30T00:00:59.999Z"),
            (253_402_300_799_999, "9999-12-31T23:59:59.999Z"),
            (253_402_300_800_000, "1970-01-01T00:00:00Z"),
            (u64::MAX, "1970-01-01T00:00:00Z"),
        ] {
            assert_eq!(rfc3339(ms), text, "{ms}");
        }
    }

    #[test]
    fn run_ids() {
        assert_eq!(decode_run_id("a~2Fb~2fc"), "a/b/c");
        assert_eq!(decode_run_id("plain"), "plain");
    }
}
