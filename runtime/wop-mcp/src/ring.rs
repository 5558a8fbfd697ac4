//! A fixed-size byte ring keeping the most recent output of a child's stderr.

use std::collections::VecDeque;
use std::sync::Mutex;

/// Keeps the last `cap` bytes written to it; never grows past that.
#[derive(Debug)]
pub(crate) struct ByteRing {
    cap: usize,
    buf: Mutex<VecDeque<u8>>,
}

impl ByteRing {
    /// A ring holding at most `cap` bytes.
    pub(crate) fn new(cap: usize) -> Self {
        ByteRing {
            cap,
            buf: Mutex::new(VecDeque::with_capacity(cap)),
        }
    }

    /// Appends `bytes`, dropping the oldest beyond the cap.
    pub(crate) fn push(&self, bytes: &[u8]) {
        let Ok(mut buf) = self.buf.lock() else {
            return;
        };
        let bytes = if bytes.len() > self.cap {
            &bytes[bytes.len() - self.cap..]
        } else {
            bytes
        };
        let overflow = (buf.len() + bytes.len()).saturating_sub(self.cap);
        buf.drain(..overflow);
        buf.extend(bytes);
    }

    /// The retained bytes as lossy UTF-8, trimmed.
    pub(crate) fn text(&self) -> String {
        let Ok(buf) = self.buf.lock() else {
            return String::new();
        };
        let bytes: Vec<u8> = buf.iter().copied().collect();
        String::from_utf8_lossy(&bytes).trim().to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_tail() {
        let r = ByteRing::new(4);
        r.push(b"ab");
        r.push(b"cdef");
        assert_eq!(r.text(), "cdef");
        r.push(b"0123456789");
        assert_eq!(r.text(), "6789");
    }
}
