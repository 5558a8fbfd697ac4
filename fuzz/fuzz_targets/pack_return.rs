//! What a guest hands back, decoded by the pure host side: the ABI v1
//! response envelope and a component's completed/suspended/failed values
//! (`outcome::interpret`), and the bytes it writes to stdout/stderr and
//! its log calls (`logbuf::LogBuffer`).
//!
//! Input: byte 0 picks the return kind (bits 0-1: completed, suspended,
//! failed, envelope), whether the pack may suspend (bit 2) and whether
//! the runtime gave it `budget_exhausted` to relay (bit 3); byte 1 picks
//! the output cap; the rest is the payload (for `failed`: code, message
//! and details separated by NUL bytes).
//!
//! Checks: never panics; nothing larger than the cap is interpreted;
//! an error's code is well formed, a reserved code is never invented, the
//! message is cut, details are an object; suspension needs permission;
//! the log keeps at most its total cap and cuts long lines.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::collections::BTreeSet;
use wop_core::error::{ErrorCode, FailureSource};
use wop_core::events::{Event, LogLevel, LogStream};
use wop_core::logbuf::{CUT_MARKER, LogBuffer};
use wop_core::model::Outcome;
use wop_core::outcome::{MAX_MESSAGE_BYTES, PackReturn, interpret, valid_code};

const CAPS: [u64; 5] = [0, 16, 1024, 65_536, u64::MAX];

fuzz_target!(|data: &[u8]| {
    let [flags, cap, payload @ ..] = data else {
        return;
    };
    let cap = CAPS[usize::from(*cap) % CAPS.len()];
    let may_suspend = flags & 4 != 0;
    let mut relayed = BTreeSet::new();
    if flags & 8 != 0 {
        relayed.insert(ErrorCode::BudgetExhausted.as_str().to_owned());
    }
    let text = String::from_utf8_lossy(payload).into_owned();
    let ret = match flags & 3 {
        0 => PackReturn::Completed(text),
        1 => PackReturn::Suspended(text),
        2 => {
            let mut parts = text.splitn(3, '\0');
            PackReturn::Failed {
                code: parts.next().unwrap_or_default().to_owned(),
                message: parts.next().unwrap_or_default().to_owned(),
                details: parts.next().map(str::to_owned),
            }
        }
        _ => PackReturn::Envelope(payload.to_vec()),
    };
    let size = ret.size();
    let (res, counted) = interpret(ret, cap, may_suspend, &relayed, "node-1");
    assert_eq!(counted, size);
    match res {
        Ok(Outcome::Completed { .. }) => assert!(size <= cap),
        Ok(Outcome::Suspended { .. }) => assert!(size <= cap && may_suspend),
        Err(c) => {
            let e = c.error;
            assert!(e.message.len() <= MAX_MESSAGE_BYTES + CUT_MARKER.len());
            if let Some(d) = &e.details {
                assert!(d.is_object(), "{d}");
            }
            match e.source {
                FailureSource::Pack => {
                    assert!(size <= cap);
                    assert!(valid_code(&e.code), "{:?}", e.code);
                    if let Some(code) = ErrorCode::parse(&e.code) {
                        assert!(
                            !code.is_reserved() || relayed.contains(&e.code),
                            "invented verdict {:?}",
                            e.code
                        );
                    }
                }
                _ => assert!(ErrorCode::parse(&e.code).is_some(), "{:?}", e.code),
            }
        }
    }
    log(flags, payload);
});

/// Feeds the payload to a small log buffer as stdout/stderr writes and log
/// calls, split at 0xFE bytes.
fn log(flags: &u8, payload: &[u8]) {
    let (total_cap, line_cap) = (256usize, 32usize);
    let mut buf = LogBuffer::new(total_cap, line_cap);
    for (i, chunk) in payload.split(|b| *b == 0xFE).enumerate() {
        match (usize::from(*flags >> 4) + i) % 3 {
            0 => buf.write(LogStream::Stdout, chunk),
            1 => buf.write(LogStream::Stderr, chunk),
            _ => buf.log(LogLevel::Info, &String::from_utf8_lossy(chunk), None),
        }
    }
    let events = buf.finish();
    let mut kept = 0usize;
    for e in &events {
        let Event::LogAppended {
            message, stream, ..
        } = e
        else {
            panic!("not a log event: {e:?}");
        };
        if *stream == LogStream::Runtime {
            continue;
        }
        kept += message.len();
        // A kept line is at most the line cap plus the cut marker, also
        // when invalid UTF-8 expands in the lossy conversion (found here,
        // fixed in logbuf.rs: fuzz/README.md, "Findings").
        let line_bound = line_cap;
        assert!(
            message.len() <= line_bound + CUT_MARKER.len(),
            "a {}-byte line past the {line_cap}-byte line cap: {message:?}",
            message.len()
        );
    }
    assert!(
        kept <= total_cap,
        "{kept} bytes kept past the {total_cap}-byte cap"
    );
}
