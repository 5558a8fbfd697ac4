//! The in-memory store's map key: the key's text, and its first
//! [`HEAD_BYTES`] bytes held inline, so that a search of the map compares
//! bytes in the map's own nodes instead of following a pointer to each
//! key it passes.
//!
//! Why: `wop serve --memory-store` holds up to 100,000 usage entries
//! (`USAGE_ENTRIES_IN_MEMORY`), and every invocation of a new run makes
//! about seven searches of the map (the ledger read, the usage record and
//! run roll-up written, the forgotten run's scan and removals). With
//! `String` keys each comparison on the way down read a key from
//! elsewhere in the heap: a cache miss per comparison, about half of the
//! deferred usage flush's CPU (decision 0058). The store's keys differ
//! within their first few dozen bytes (`usage/<tenant>/<run>/…`), so the
//! inline head decides almost every comparison; equal heads fall back to
//! the whole text, so the order is exactly the text's byte order.

use std::cmp::Ordering;

/// Inline words of a key's head.
const WORDS: usize = 6;

/// How many of a key's first bytes are held inline (48: with the text's
/// pointer and length, a key is one 64-byte cache line).
pub(super) const HEAD_BYTES: usize = WORDS * 8;

/// A map key (see the module docs). Ordered exactly as its text's bytes.
#[derive(Debug, Clone)]
pub(super) struct Key {
    /// The text's first [`HEAD_BYTES`] bytes, zero-padded, as big-endian
    /// words: comparing the words compares those bytes.
    head: [u64; WORDS],
    text: Box<str>,
}

impl Key {
    pub(super) fn new(text: &str) -> Self {
        let mut bytes = [0u8; HEAD_BYTES];
        let n = text.len().min(HEAD_BYTES);
        bytes[..n].copy_from_slice(&text.as_bytes()[..n]);
        let mut head = [0u64; WORDS];
        for (word, chunk) in head.iter_mut().zip(bytes.chunks_exact(8)) {
            let mut b = [0u8; 8];
            b.copy_from_slice(chunk);
            *word = u64::from_be_bytes(b);
        }
        Key {
            head,
            text: text.into(),
        }
    }

    pub(super) fn as_str(&self) -> &str {
        &self.text
    }
}

impl Ord for Key {
    /// The text's byte order. Heads that differ decide it: up to the first
    /// differing byte both texts are equal, and a text that ends there
    /// (padded with zero) is a prefix of the other, so the smaller either
    /// way. Equal heads compare the texts.
    fn cmp(&self, other: &Self) -> Ordering {
        self.head
            .cmp(&other.head)
            .then_with(|| self.text.as_bytes().cmp(other.text.as_bytes()))
    }
}

impl PartialOrd for Key {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Key {
    fn eq(&self, other: &Self) -> bool {
        self.head == other.head && self.text == other.text
    }
}

impl Eq for Key {}

#[cfg(test)]
mod tests {
    use super::*;

    /// Texts around the head's length, with zero bytes (the padding's
    /// value), shared prefixes and non-ASCII: every pair orders as its
    /// text does.
    #[test]
    fn keys_order_exactly_as_their_text() {
        let long = "x".repeat(HEAD_BYTES + 1);
        let mut texts: Vec<String> = vec![
            String::new(),
            "\0".into(),
            "\0\0".into(),
            "a".into(),
            "a\0".into(),
            "a\0b".into(),
            "a\u{1}".into(),
            "ab".into(),
            "é".into(),
            "\u{7f}".into(),
            "usage/anon:local/inv-1/".into(),
            "usage/anon:local/inv-1/0".into(),
            "usage/anon:local/inv-10".into(),
        ];
        for n in [HEAD_BYTES - 1, HEAD_BYTES, HEAD_BYTES + 1] {
            let base = &long[..n];
            for tail in ["", "\0", "a", "b", "ab", "a\0", "é"] {
                texts.push(format!("{base}{tail}"));
                texts.push(format!("{}{tail}", &base[..n.saturating_sub(1)]));
            }
        }
        for a in &texts {
            for b in &texts {
                let (ka, kb) = (Key::new(a), Key::new(b));
                assert_eq!(
                    ka.cmp(&kb),
                    a.as_bytes().cmp(b.as_bytes()),
                    "{a:?} against {b:?}"
                );
                assert_eq!(ka == kb, a == b, "{a:?} against {b:?}");
                assert_eq!(ka.as_str(), a);
            }
        }
    }
}
