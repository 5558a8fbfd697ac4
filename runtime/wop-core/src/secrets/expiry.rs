//! RFC 3339 timestamps (`expiresAt`) to milliseconds since the epoch.

use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// Parses `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)` (`T` also `t` or a
/// space), at or after the epoch, to whole milliseconds (a longer fraction
/// is cut, not rounded). A leap second (`:60`) is accepted only where one
/// can occur, the last second of a month in UTC, and read as the last
/// instant of second 59.
pub(crate) fn parse_rfc3339_ms(text: &str) -> Result<u64, String> {
    let bad = || format!("`{text}` is not an RFC 3339 timestamp like 2027-01-31T00:00:00Z");
    // RFC 3339 names `T` (any case) and, by its note, a space; the parser
    // takes any one byte there.
    if !matches!(text.as_bytes().get(10), Some(b'T' | b't' | b' ')) {
        return Err(bad());
    }
    let at = OffsetDateTime::parse(text, &Rfc3339).map_err(|_| bad())?;
    u64::try_from(at.unix_timestamp_nanos() / 1_000_000).map_err(|_| bad())
}

#[cfg(test)]
mod tests {
    use super::parse_rfc3339_ms;

    #[test]
    fn timestamps() {
        assert_eq!(parse_rfc3339_ms("1970-01-01T00:00:00Z"), Ok(0));
        assert_eq!(
            parse_rfc3339_ms("2026-12-01T00:00:00Z"),
            Ok(1_796_083_200_000)
        );
        assert_eq!(
            parse_rfc3339_ms("2026-12-01T01:00:00+01:00"),
            Ok(1_796_083_200_000)
        );
        assert_eq!(
            parse_rfc3339_ms("2026-12-01T00:00:00.5Z"),
            Ok(1_796_083_200_500)
        );
        assert_eq!(
            parse_rfc3339_ms("2024-02-29T00:00:00Z"),
            Ok(1_709_164_800_000)
        );
        for bad in [
            "2026-12-01",
            "2026-13-01T00:00:00Z",
            "2025-02-29T00:00:00Z",
            "2026-12-01T00:00:00",
            "2026-12-01T00:00:00+1:00",
            "2026-12-01T00:00:00.Z",
            "x026-12-01T00:00:00Z",
        ] {
            assert!(parse_rfc3339_ms(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn separators_fractions_offsets_and_the_epoch() {
        let t = 1_796_083_200_000;
        for ok in [
            "2026-12-01t00:00:00z",
            "2026-12-01 00:00:00Z",
            "2026-11-30T19:00:00-05:00",
            "2026-12-01T00:00:00-00:00",
        ] {
            assert_eq!(parse_rfc3339_ms(ok), Ok(t), "{ok}");
        }
        // Whole milliseconds: a longer fraction is cut, never rounded up.
        assert_eq!(
            parse_rfc3339_ms("2026-12-01T00:00:00.1239999Z"),
            Ok(t + 123)
        );
        for bad in [
            "2026-12-01X00:00:00Z",
            "2026-12-01T00:00:00+24:00",
            "2026-12-01T00:00:00+01:60",
            "2026-12-01T24:00:00Z",
            "2026-12-01T00:00:00Z ",
            "1969-12-31T23:59:59Z",
            "2026-12-01T00:00:00.123",
            "２026-12-01T00:00:00Z",
        ] {
            assert!(parse_rfc3339_ms(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_leap_second_only_where_one_can_be() {
        // The last second of a month in UTC: the last instant of :59.
        assert_eq!(
            parse_rfc3339_ms("2016-12-31T23:59:60Z"),
            Ok(1_483_228_799_999)
        );
        assert_eq!(
            parse_rfc3339_ms("2017-01-01T00:59:60+01:00"),
            Ok(1_483_228_799_999)
        );
        // Anywhere else there is no such second.
        assert!(parse_rfc3339_ms("2026-12-01T12:00:60Z").is_err());
    }
}
