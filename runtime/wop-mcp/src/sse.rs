//! A bounded `text/event-stream` parser: yields each event's `data`,
//! refusing any single event larger than the cap.

use crate::lines::{LineEvent, LineSplitter};

/// One parsed item.
#[derive(Debug, PartialEq)]
pub(crate) enum SseItem {
    /// The joined `data:` lines of one event, as received (not yet checked
    /// for UTF-8: the message parser refuses invalid UTF-8 the same way on
    /// every transport).
    Data(Vec<u8>),
    /// An event (or one of its lines) passed the cap; `observed` is a lower
    /// bound of its size.
    TooLarge {
        /// Bytes seen.
        observed: u64,
    },
}

/// Incremental parser; memory is bounded by the cap plus one read chunk.
pub(crate) struct SseParser {
    lines: LineSplitter,
    max: usize,
    data: Vec<u8>,
    has_data: bool,
    oversized: bool,
    events: Vec<LineEvent>,
}

impl SseParser {
    /// A parser refusing events over `max` bytes.
    pub(crate) fn new(max: usize) -> Self {
        SseParser {
            lines: LineSplitter::new(max.saturating_add(16)),
            max,
            data: Vec::new(),
            has_data: false,
            oversized: false,
            events: Vec::new(),
        }
    }

    /// Feeds bytes, appending complete items to `out`.
    pub(crate) fn feed(&mut self, chunk: &[u8], out: &mut Vec<SseItem>) {
        self.lines.feed(chunk, &mut self.events);
        let events = std::mem::take(&mut self.events);
        for ev in events {
            match ev {
                LineEvent::Line(line) => self.line(&line, out),
                LineEvent::Overflow { observed, .. } => {
                    if !self.oversized {
                        out.push(SseItem::TooLarge { observed });
                    }
                    self.oversized = true;
                }
                LineEvent::OverflowEnd { .. } => {}
            }
        }
    }

    fn line(&mut self, line: &[u8], out: &mut Vec<SseItem>) {
        if line.is_empty() {
            if self.has_data && !self.oversized {
                out.push(SseItem::Data(std::mem::take(&mut self.data)));
            }
            self.data.clear();
            self.has_data = false;
            self.oversized = false;
            return;
        }
        if self.oversized {
            return;
        }
        let (field, value) = match line.iter().position(|b| *b == b':') {
            Some(i) => {
                let v = &line[i + 1..];
                (&line[..i], v.strip_prefix(b" ").unwrap_or(v))
            }
            None => (line, &b""[..]),
        };
        if field != b"data" {
            return;
        }
        if self.has_data {
            self.data.push(b'\n');
        }
        self.data.extend_from_slice(value);
        self.has_data = true;
        if self.data.len() > self.max {
            out.push(SseItem::TooLarge {
                observed: self.data.len() as u64,
            });
            self.oversized = true;
            self.data = Vec::new();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_events() {
        let mut p = SseParser::new(100);
        let mut out = Vec::new();
        p.feed(
            b"event: message\nid: 1\ndata: {\"a\":\ndata: 1}\n\n: comment\n",
            &mut out,
        );
        p.feed(b"data: x\r\n\r\n", &mut out);
        assert_eq!(
            out,
            vec![
                SseItem::Data(b"{\"a\":\n1}".to_vec()),
                SseItem::Data(b"x".to_vec())
            ]
        );
    }

    #[test]
    fn keeps_bytes_as_sent() {
        let mut p = SseParser::new(100);
        let mut out = Vec::new();
        p.feed(b"data: \"\xff\xfe\"\n\n", &mut out);
        assert_eq!(out, vec![SseItem::Data(b"\"\xff\xfe\"".to_vec())]);
        assert!(crate::protocol::parse_message(b"\"\xff\"").is_err());
    }

    #[test]
    fn refuses_big_events() {
        let mut p = SseParser::new(8);
        let mut out = Vec::new();
        p.feed(b"data: 12345\ndata: 67890\n\ndata: ok\n\n", &mut out);
        assert!(matches!(out[0], SseItem::TooLarge { .. }));
        assert_eq!(out[1], SseItem::Data(b"ok".to_vec()));
        assert_eq!(out.len(), 2);
    }
}
