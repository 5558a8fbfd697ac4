//! RFC 3339 timestamps (`expiresAt`) to milliseconds since the epoch.

/// Parses `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)`.
pub(crate) fn parse_rfc3339_ms(text: &str) -> Result<u64, String> {
    let bad = || format!("`{text}` is not an RFC 3339 timestamp like 2027-01-31T00:00:00Z");
    let b = text.as_bytes();
    if b.len() < 20 || !b.is_ascii() {
        return Err(bad());
    }
    let num = |r: std::ops::Range<usize>| -> Result<i64, String> {
        let s = &text[r];
        if s.bytes().all(|c| c.is_ascii_digit()) {
            s.parse().map_err(|_| bad())
        } else {
            Err(bad())
        }
    };
    let sep = |i: usize, c: &[u8]| c.contains(&b[i]);
    if !(sep(4, b"-") && sep(7, b"-") && sep(10, b"Tt ") && sep(13, b":") && sep(16, b":")) {
        return Err(bad());
    }
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, s) = (num(11..13)?, num(14..16)?, num(17..19)?);
    let mut i = 19;
    let mut millis = 0i64;
    if b[i] == b'.' {
        let start = i + 1;
        i = start;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        if i == start {
            return Err(bad());
        }
        let frac = &text[start..i.min(start + 3)];
        millis = format!("{frac:0<3}").parse().map_err(|_| bad())?;
    }
    let offset_min = match &text[i..] {
        "Z" | "z" => 0,
        tz if tz.len() == 6 && (tz.starts_with('+') || tz.starts_with('-')) && &tz[3..4] == ":" => {
            let oh = num(i + 1..i + 3)?;
            let om = num(i + 4..i + 6)?;
            if oh > 23 || om > 59 {
                return Err(bad());
            }
            let m = oh * 60 + om;
            if tz.starts_with('-') { -m } else { m }
        }
        _ => return Err(bad()),
    };
    let leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    let days_in = [
        31,
        if leap { 29 } else { 28 },
        31,
        30,
        31,
        30,
        31,
        31,
        30,
        31,
        30,
        31,
    ];
    if !(1..=12).contains(&mo) || d < 1 || h > 23 || mi > 59 || s > 60 {
        return Err(bad());
    }
    let month_days = usize::try_from(mo - 1)
        .ok()
        .and_then(|m| days_in.get(m))
        .copied();
    if month_days.is_none_or(|md| d > md) {
        return Err(bad());
    }
    // Days from the civil date (Howard Hinnant's algorithm).
    let (yy, mm) = if mo <= 2 {
        (y - 1, mo + 9)
    } else {
        (y, mo - 3)
    };
    let era = yy.div_euclid(400);
    let yoe = yy - era * 400;
    let doy = (153 * mm + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let secs = days * 86_400 + h * 3600 + mi * 60 + s.min(59) - offset_min * 60;
    u64::try_from(secs * 1000 + millis).map_err(|_| bad())
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
}
