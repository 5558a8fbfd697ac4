//! A newline splitter with a hard cap per line, for untrusted byte streams.

/// One event produced while feeding bytes.
#[derive(Debug, PartialEq)]
pub(crate) enum LineEvent {
    /// A complete line (without the newline), within the cap.
    Line(Vec<u8>),
    /// The current line just passed the cap. `head` holds its first bytes and
    /// `tail` its most recent ones (for attributing it); further bytes of the
    /// line are discarded until the next newline.
    Overflow {
        /// First bytes of the line.
        head: Vec<u8>,
        /// Bytes seen so far.
        observed: u64,
    },
    /// An oversized line finally ended; `tail` holds its last bytes.
    OverflowEnd {
        /// Last bytes of the line.
        tail: Vec<u8>,
        /// Total length of the line.
        observed: u64,
    },
}

const KEEP: usize = 256;

/// Splits a stream into lines of at most `max` bytes, holding at most
/// `max` bytes (plus one read chunk) at any time.
pub(crate) struct LineSplitter {
    max: usize,
    buf: Vec<u8>,
    discarding: Option<(u64, Vec<u8>)>,
}

impl LineSplitter {
    /// A splitter refusing lines over `max` bytes.
    pub(crate) fn new(max: usize) -> Self {
        LineSplitter {
            max,
            buf: Vec::new(),
            discarding: None,
        }
    }

    /// Bytes of the current oversized line discarded so far (0 if none).
    pub(crate) fn discarding(&self) -> u64 {
        self.discarding.as_ref().map_or(0, |(n, _)| *n)
    }

    /// Feeds `chunk`, appending events to `out`.
    pub(crate) fn feed(&mut self, mut chunk: &[u8], out: &mut Vec<LineEvent>) {
        while !chunk.is_empty() {
            let nl = chunk.iter().position(|b| *b == b'\n');
            if let Some((observed, tail)) = &mut self.discarding {
                let part = match nl {
                    Some(i) => &chunk[..i],
                    None => chunk,
                };
                *observed += part.len() as u64;
                tail.extend_from_slice(part);
                if tail.len() > KEEP {
                    let cut = tail.len() - KEEP;
                    tail.drain(..cut);
                }
                match nl {
                    Some(i) => {
                        let (observed, tail) = (*observed, std::mem::take(tail));
                        self.discarding = None;
                        out.push(LineEvent::OverflowEnd { tail, observed });
                        chunk = &chunk[i + 1..];
                    }
                    None => return,
                }
                continue;
            }
            let take = nl.unwrap_or(chunk.len());
            if self.buf.len() + take > self.max {
                let room = self.max.saturating_sub(self.buf.len());
                self.buf.extend_from_slice(&chunk[..room.min(take)]);
                let observed = (self.buf.len() + take - room.min(take)) as u64;
                let head: Vec<u8> = self.buf.iter().take(KEEP).copied().collect();
                let tail_start = take.saturating_sub(KEEP);
                let tail = chunk[tail_start..take].to_vec();
                self.buf = Vec::new();
                out.push(LineEvent::Overflow { head, observed });
                match nl {
                    Some(i) => {
                        out.push(LineEvent::OverflowEnd { tail, observed });
                        chunk = &chunk[i + 1..];
                    }
                    None => {
                        self.discarding = Some((observed, tail));
                        return;
                    }
                }
                continue;
            }
            self.buf.extend_from_slice(&chunk[..take]);
            match nl {
                Some(i) => {
                    let mut line = std::mem::take(&mut self.buf);
                    if line.last() == Some(&b'\r') {
                        line.pop();
                    }
                    out.push(LineEvent::Line(line));
                    chunk = &chunk[i + 1..];
                }
                None => return,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(max: usize, chunks: &[&[u8]]) -> Vec<LineEvent> {
        let mut s = LineSplitter::new(max);
        let mut out = Vec::new();
        for c in chunks {
            s.feed(c, &mut out);
        }
        out
    }

    #[test]
    fn splits_across_chunks() {
        let ev = run(10, &[b"ab", b"c\nde\r\n", b"f"]);
        assert_eq!(
            ev,
            vec![
                LineEvent::Line(b"abc".to_vec()),
                LineEvent::Line(b"de".to_vec())
            ]
        );
    }

    #[test]
    fn overflow_then_recovers() {
        let ev = run(4, &[b"12345", b"678", b"9\nok\n"]);
        assert!(matches!(&ev[0], LineEvent::Overflow { observed: 5, .. }));
        assert!(
            matches!(&ev[1], LineEvent::OverflowEnd { observed: 9, tail } if tail.ends_with(b"789"))
        );
        assert_eq!(ev[2], LineEvent::Line(b"ok".to_vec()));
        assert_eq!(ev.len(), 3);
    }

    #[test]
    fn overflow_in_one_chunk() {
        let ev = run(2, &[b"abcdef\nx\n"]);
        assert!(matches!(&ev[0], LineEvent::Overflow { .. }));
        assert!(matches!(&ev[1], LineEvent::OverflowEnd { observed: 6, .. }));
        assert_eq!(ev[2], LineEvent::Line(b"x".to_vec()));
    }
}
