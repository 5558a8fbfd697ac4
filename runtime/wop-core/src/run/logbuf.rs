//! Bounded capture of everything a pack logs or prints. Pure.
//!
//! Lines from the `log` interface and from WASI stdout/stderr become
//! `log.appended` events. The total kept is capped per invocation; past
//! the cap lines are dropped and counted, and one marker event at the end
//! says how much was dropped. A single line longer than the line cap is cut
//! with a marker. A partial line (no newline yet) is bounded the same way.
//!
//! Of a credentialed invocation ([`LogBuffer::set_redact`]) every event is
//! redacted as it is kept, whatever added it and whenever: an audit event
//! built after a call's result was redacted (a redirect hop's
//! `egress.decided`) is covered as well as a log line.

use crate::model::events::{Event, LogLevel, LogStream};
use crate::secrets::{Credentials, redact};
/// Cutting a line at the line cap, with its marker ([`crate::text`]).
pub use crate::text::{CUT_MARKER, cut};
use serde_json::Value;

/// Most events kept per invocation.
pub const MAX_EVENTS: usize = 10_000;

/// Most bytes of recorded (non-log) events kept per invocation, measured
/// as their JSON. Past it events are dropped and counted, like past
/// [`MAX_EVENTS`]: a pack cannot make the host hold more than this in
/// audit events whatever it passes to its host calls.
pub const MAX_EVENT_BYTES: usize = 4 << 20;

/// Receives each event a [`LogBuffer`] keeps, at the moment it is kept:
/// how a host streams an invocation's log lines and audit events while the
/// node runs. Dropped events never reach it, so a tap sees at most what the
/// report will hold. Called with the buffer locked: it must be quick and
/// must not log into the same invocation.
#[derive(Clone)]
pub struct Tap(std::sync::Arc<dyn Fn(&Event) + Send + Sync>);

impl Tap {
    /// A tap calling `f` with every kept event.
    pub fn new(f: impl Fn(&Event) + Send + Sync + 'static) -> Self {
        Self(std::sync::Arc::new(f))
    }
}

impl std::fmt::Debug for Tap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Tap")
    }
}

/// The log of one invocation.
#[derive(Debug)]
pub struct LogBuffer {
    total_cap: usize,
    line_cap: usize,
    kept: usize,
    dropped_bytes: u64,
    dropped_lines: u64,
    dropped_events: u64,
    dropped_event_bytes: u64,
    event_bytes: usize,
    /// Bytes cut off over-long lines (counted as dropped).
    cut_bytes: u64,
    events: Vec<Event>,
    stdout: Partial,
    stderr: Partial,
    tap: Option<Tap>,
    /// The invocation's credentials: taken out of every kept event.
    redact: Credentials,
}

#[derive(Debug, Default)]
struct Partial {
    buf: Vec<u8>,
    /// The current line already overflowed the line cap: discard until `\n`.
    overflowed: bool,
}

impl LogBuffer {
    /// A buffer keeping at most `total_cap` bytes of messages, each at most
    /// `line_cap` bytes.
    pub fn new(total_cap: usize, line_cap: usize) -> Self {
        Self {
            total_cap,
            line_cap: line_cap.max(1),
            kept: 0,
            dropped_bytes: 0,
            dropped_lines: 0,
            dropped_events: 0,
            dropped_event_bytes: 0,
            event_bytes: 0,
            cut_bytes: 0,
            events: Vec::new(),
            stdout: Partial::default(),
            stderr: Partial::default(),
            tap: None,
            redact: Credentials::default(),
        }
    }

    /// Takes the values of `creds` (the invocation's credentials) out of
    /// every event kept from now on, before the tap or the report sees it
    /// ([`redact::event`]). By default (none) events are kept as they are.
    pub fn set_redact(&mut self, creds: Credentials) {
        self.redact = creds;
    }

    /// Sends every event kept from now on to `tap` as well. The events it
    /// receives are, in order, a prefix of what [`finish`](Self::finish)
    /// returns: only the closing markers (dropped counts) are not tapped.
    pub fn set_tap(&mut self, tap: Option<Tap>) {
        self.tap = tap;
    }

    /// Appends a kept event and shows it to the tap.
    fn keep(&mut self, event: Event) {
        let event = redact::event(&self.redact, event);
        if let Some(t) = &self.tap {
            (t.0)(&event);
        }
        self.events.push(event);
    }

    /// Bytes of message text kept so far.
    pub fn kept_bytes(&self) -> usize {
        self.kept
    }

    /// Log bytes dropped: lines past the total cap plus the parts of
    /// over-long lines cut at the line cap (stdout/stderr included).
    pub fn dropped_bytes(&self) -> u64 {
        self.dropped_bytes.saturating_add(self.cut_bytes)
    }

    /// Bytes of recorded (non-log) events kept so far, as JSON.
    pub fn event_bytes(&self) -> usize {
        self.event_bytes
    }

    /// Records a non-log event (tool calls, ...) in order with the log
    /// lines. At most [`MAX_EVENTS`] events and [`MAX_EVENT_BYTES`] bytes
    /// of them are kept; the rest are counted and one marker says so.
    pub fn record(&mut self, event: Event) {
        let size = serde_json::to_string(&event).map_or(0, |s| s.len());
        if self.events.len() >= MAX_EVENTS || self.event_bytes + size > MAX_EVENT_BYTES {
            self.dropped_events += 1;
            self.dropped_event_bytes += size as u64;
            return;
        }
        self.event_bytes += size;
        self.keep(event);
    }

    /// Records one line from the `log` interface.
    pub fn log(&mut self, level: LogLevel, message: &str, fields: Option<Value>) {
        if message.len() > self.line_cap {
            self.cut_bytes += (message.len() - self.line_cap) as u64;
        }
        let message = cut(message, self.line_cap);
        self.push(level, message, fields, LogStream::Log);
    }

    /// [`log`](Self::log) of a message the caller owns: kept without a copy
    /// unless it must be cut (the host's `log` call, on every call).
    pub fn log_owned(&mut self, level: LogLevel, message: String, fields: Option<Value>) {
        if message.len() > self.line_cap {
            return self.log(level, &message, fields);
        }
        self.push(level, message, fields, LogStream::Log);
    }

    /// Feeds raw bytes written to stdout or stderr.
    pub fn write(&mut self, stream: LogStream, bytes: &[u8]) {
        let line_cap = self.line_cap;
        let mut complete = Vec::new();
        {
            let part = match stream {
                LogStream::Stderr => &mut self.stderr,
                _ => &mut self.stdout,
            };
            let mut discarded = 0u64;
            for &b in bytes {
                if b == b'\n' {
                    if !part.overflowed {
                        complete.push((std::mem::take(&mut part.buf), false));
                    }
                    part.overflowed = false;
                } else if part.overflowed {
                    // The rest of an over-long line: discarded, counted.
                    discarded += 1;
                } else if part.buf.len() < line_cap {
                    part.buf.push(b);
                } else {
                    part.overflowed = true;
                    discarded += 1;
                    complete.push((std::mem::take(&mut part.buf), true));
                }
            }
            self.cut_bytes += discarded;
        }
        for (line, cut_off) in complete {
            self.push_raw(stream, &line, cut_off);
        }
    }

    fn push_raw(&mut self, stream: LogStream, line: &[u8], mut cut_off: bool) {
        let mut text = String::from_utf8_lossy(line).into_owned();
        if text.ends_with('\r') {
            text.pop();
        }
        // Each invalid byte became a 3-byte U+FFFD: cut again after the
        // conversion, so a kept line is never over the line cap (found by
        // the `pack_return` fuzz target).
        if text.len() > self.line_cap {
            let mut end = self.line_cap;
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            self.cut_bytes += (text.len() - end) as u64;
            text.truncate(end);
            cut_off = true;
        }
        if cut_off {
            text.push_str(CUT_MARKER);
        }
        let level = if stream == LogStream::Stderr {
            LogLevel::Warn
        } else {
            LogLevel::Info
        };
        self.push(level, text, None, stream);
    }

    fn push(&mut self, level: LogLevel, message: String, fields: Option<Value>, stream: LogStream) {
        let size = message.len() + fields.as_ref().map_or(0, crate::json::size::text_len);
        // Once the cap is reached everything after is dropped, so the kept
        // log is a prefix of what the pack wrote.
        if self.dropped_lines > 0
            || self.kept + size > self.total_cap
            || self.events.len() >= MAX_EVENTS
        {
            self.dropped_bytes += size as u64;
            self.dropped_lines += 1;
            return;
        }
        self.kept += size;
        self.keep(Event::LogAppended {
            level,
            message,
            fields,
            stream,
        });
    }

    /// Flushes partial lines and returns the events, with the truncation
    /// marker last if anything was dropped.
    pub fn finish(mut self) -> Vec<Event> {
        for stream in [LogStream::Stdout, LogStream::Stderr] {
            let part = match stream {
                LogStream::Stderr => std::mem::take(&mut self.stderr),
                _ => std::mem::take(&mut self.stdout),
            };
            if !part.buf.is_empty() {
                self.push_raw(stream, &part.buf, part.overflowed);
            }
        }
        if self.dropped_events > 0 {
            self.events.push(Event::LogAppended {
                level: LogLevel::Warn,
                message: format!(
                    "[wop] {} event(s), {} byte(s) dropped past the {MAX_EVENTS}-event / {MAX_EVENT_BYTES}-byte event cap",
                    self.dropped_events, self.dropped_event_bytes
                ),
                fields: None,
                stream: LogStream::Runtime,
            });
        }
        if self.dropped_lines > 0 {
            self.events.push(Event::LogAppended {
                level: LogLevel::Warn,
                message: format!(
                    "[wop] log truncated: {} line(s), {} byte(s) dropped past the {}-byte log cap (policy limits.logBytes)",
                    self.dropped_lines, self.dropped_bytes, self.total_cap
                ),
                fields: None,
                stream: LogStream::Runtime,
            });
        }
        self.events
    }
}

/// The log buffer shared between the `log` interface, WASI stdio and the
/// gate session's audit events (one invocation's, bounded).
pub type SharedLog = std::sync::Arc<std::sync::Mutex<LogBuffer>>;

/// Runs `f` on the shared buffer (a poisoned lock is taken over: the
/// buffer holds plain data).
pub fn with_log<R>(log: &SharedLog, f: impl FnOnce(&mut LogBuffer) -> R) -> R {
    let mut g = match log.lock() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    };
    f(&mut g)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn messages(events: &[Event]) -> Vec<String> {
        events
            .iter()
            .map(|e| match e {
                Event::LogAppended { message, .. } => message.clone(),
                other => panic!("{other:?}"),
            })
            .collect()
    }

    #[test]
    fn lines_split_across_writes_and_streams() {
        let mut b = LogBuffer::new(1000, 100);
        b.write(LogStream::Stdout, b"hel");
        b.write(LogStream::Stderr, b"err\n");
        b.write(LogStream::Stdout, b"lo\r\nworld");
        let ev = b.finish();
        assert_eq!(messages(&ev), vec!["err", "hello", "world"]);
    }

    #[test]
    fn long_line_is_cut_once() {
        let mut b = LogBuffer::new(1000, 4);
        b.write(LogStream::Stdout, b"abcdefghij\nxy\n");
        assert_eq!(
            messages(&b.finish()),
            vec![format!("abcd{CUT_MARKER}"), "xy".to_owned()]
        );
        assert_eq!(cut("ééé", 3), format!("é{CUT_MARKER}"));
    }

    #[test]
    fn invalid_utf8_cannot_grow_a_line_past_the_cap() {
        // 32 invalid bytes become 32 three-byte U+FFFD: still cut at 32.
        let mut b = LogBuffer::new(1024, 32);
        b.write(LogStream::Stdout, &[0xFF; 32]);
        b.write(LogStream::Stdout, b"\n");
        let m = messages(&b.finish());
        assert_eq!(m.len(), 1);
        assert!(m[0].len() <= 32 + CUT_MARKER.len(), "{} bytes", m[0].len());
        assert!(m[0].ends_with(CUT_MARKER));
    }

    #[test]
    fn cut_stdio_bytes_count_as_dropped() {
        let mut b = LogBuffer::new(1000, 4);
        b.write(LogStream::Stdout, b"abcdefghij\nxy\n");
        b.log(LogLevel::Info, "0123456789", None);
        // 6 bytes cut from stdout, 6 from the log line.
        assert_eq!(b.dropped_bytes(), 12);
    }

    #[test]
    fn events_are_capped_by_bytes_with_a_counted_marker() {
        let mut b = LogBuffer::new(1000, 100);
        let big = "x".repeat(1 << 20);
        for _ in 0..20 {
            b.record(Event::LogAppended {
                level: LogLevel::Info,
                message: big.clone(),
                fields: None,
                stream: LogStream::Runtime,
            });
        }
        assert!(b.event_bytes() <= MAX_EVENT_BYTES);
        let ev = b.finish();
        assert_eq!(ev.len(), 4, "3 kept + the marker");
        let m = messages(&ev);
        assert!(m[3].contains("17 event(s)"), "{}", m[3]);
    }

    #[test]
    fn the_tap_sees_kept_events_as_a_prefix_of_the_result() {
        use std::sync::{Arc, Mutex};
        let tapped = |b: &mut LogBuffer| {
            let seen = Arc::new(Mutex::new(Vec::new()));
            let s = seen.clone();
            b.set_tap(Some(Tap::new(move |e| {
                if let Ok(mut v) = s.lock() {
                    v.push(e.clone());
                }
            })));
            seen
        };
        // Live as kept; a partial stdout line when it is flushed.
        let mut b = LogBuffer::new(100, 100);
        let seen = tapped(&mut b);
        b.log(LogLevel::Info, "first", None);
        assert_eq!(messages(&seen.lock().expect("lock")), vec!["first"]);
        b.write(LogStream::Stdout, b"1234");
        let all = b.finish();
        assert_eq!(all, *seen.lock().expect("lock"));
        assert_eq!(messages(&all), vec!["first", "1234"]);
        // A dropped line is never tapped; the closing marker is only in
        // the result, after the tapped prefix.
        let mut b = LogBuffer::new(10, 100);
        let seen = tapped(&mut b);
        b.log(LogLevel::Info, "first", None);
        b.log(LogLevel::Info, "dropped past the cap", None);
        let all = b.finish();
        let seen = seen.lock().expect("lock").clone();
        assert_eq!(messages(&seen), vec!["first"]);
        assert_eq!(all.len(), 2);
        assert_eq!(all[..1], seen[..]);
    }

    #[test]
    fn a_credentialed_buffer_redacts_every_event_before_the_tap() {
        use crate::secrets::{Credential, SecretSpec};
        use std::sync::{Arc, Mutex};
        let spec = SecretSpec {
            value: Some("env:X".into()),
            audiences: vec!["api.example.com".into()],
            ..Default::default()
        };
        let value = zeroize::Zeroizing::new("sk-test-API-7f3a9c1e5b".to_owned());
        let c = Credential::new("api", &spec, value).expect("credential");
        let mut b = LogBuffer::new(1000, 1000);
        b.set_redact(Credentials::new(vec![Arc::new(c)]));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let s = seen.clone();
        b.set_tap(Some(Tap::new(move |e| {
            if let Ok(mut v) = s.lock() {
                v.push(e.clone());
            }
        })));
        b.record(Event::EgressDecided {
            decision: "denied".into(),
            destination: "sk-test-api-7f3a9c1e5b.invalid:1".into(),
            reason: "policy-denied".into(),
            credential_id: None,
            cause: Some("scheme".into()),
        });
        b.log(LogLevel::Info, "key SK-TEST-API-7F3A9C1E5B", None);
        b.write(LogStream::Stdout, b"sk-test-API-7f3a9c1e5b\n");
        let all = b.finish();
        assert_eq!(all, *seen.lock().expect("lock"));
        assert_eq!(all.len(), 3);
        let text = serde_json::to_string(&all).expect("json");
        assert!(!text.to_ascii_lowercase().contains("7f3a9c1e5b"), "{text}");
        assert_eq!(text.matches("[redacted:api]").count(), 3, "{text}");
    }

    #[test]
    fn total_cap_drops_and_marks() {
        let mut b = LogBuffer::new(10, 100);
        for _ in 0..5 {
            b.write(LogStream::Stdout, b"1234\n");
        }
        b.log(LogLevel::Info, "x", None);
        let ev = b.finish();
        let m = messages(&ev);
        assert_eq!(m.len(), 3, "{m:?}");
        assert_eq!(m[0], "1234");
        assert_eq!(m[1], "1234");
        assert!(m[2].contains("4 line(s), 13 byte(s) dropped"), "{m:?}");
    }
}
