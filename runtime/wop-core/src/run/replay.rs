//! Replayable clock and randomness. Both are derived from
//! (run, node, attempt) so a re-execution of the same attempt observes the
//! same values, and another attempt different ones. Pure.

use sha2::{Digest, Sha256};

/// A per-invocation seed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Seed([u8; 32]);

impl Seed {
    /// `sha256("wop:replay:v1\0" ‖ run ‖ "\0" ‖ node ‖ "\0" ‖ attempt)`
    /// ([`crate::digest::tagged`]; the attempt little-endian).
    pub fn new(run_id: &str, node_id: &str, attempt: u32) -> Self {
        let attempt = attempt.to_le_bytes();
        let parts: [&[u8]; 3] = [run_id.as_bytes(), node_id.as_bytes(), &attempt];
        Seed(crate::digest::tagged("wop:replay:v1", &parts))
    }

    /// A sub-seed for one named stream (so our `random` and WASI's random
    /// do not share bytes).
    pub fn derive(&self, label: &str) -> Seed {
        let mut h = Sha256::new();
        h.update(self.0);
        h.update(label.as_bytes());
        Seed(h.finalize().into())
    }

    /// 16 bytes of this seed as a u128 (for `wasi:random/insecure-seed`).
    pub fn as_u128(&self) -> u128 {
        let mut b = [0u8; 16];
        b.copy_from_slice(&self.0[..16]);
        u128::from_le_bytes(b)
    }

    /// A start time for the replayable clock: a fixed epoch offset by up to
    /// ~11.5 days derived from the seed. Replays see the same time; the time
    /// is plausible (after 2024-01-01) but is not the host's real time.
    pub fn clock_start_ms(&self) -> u64 {
        const BASE_MS: u64 = 1_704_067_200_000; // 2024-01-01T00:00:00Z
        let mut b = [0u8; 8];
        b.copy_from_slice(&self.0[16..24]);
        BASE_MS + (u64::from_le_bytes(b) % 1_000_000_000)
    }
}

/// A deterministic byte stream: SHA-256 in counter mode over a seed.
#[derive(Debug, Clone)]
pub struct ReplayRng {
    seed: Seed,
    counter: u64,
    block: [u8; 32],
    used: usize,
}

impl ReplayRng {
    /// A stream starting at the beginning.
    pub fn new(seed: Seed) -> Self {
        Self {
            seed,
            counter: 0,
            block: [0; 32],
            used: 32,
        }
    }

    /// Fills `out` with the next bytes of the stream.
    pub fn fill(&mut self, out: &mut [u8]) {
        for b in out {
            if self.used == 32 {
                let mut h = Sha256::new();
                h.update(self.seed.0);
                h.update(self.counter.to_le_bytes());
                self.block = h.finalize().into();
                self.counter += 1;
                self.used = 0;
            }
            *b = self.block[self.used];
            self.used += 1;
        }
    }
}

impl rand_core::TryRng for ReplayRng {
    type Error = std::convert::Infallible;
    fn try_next_u32(&mut self) -> Result<u32, Self::Error> {
        let mut b = [0u8; 4];
        self.fill(&mut b);
        Ok(u32::from_le_bytes(b))
    }
    fn try_next_u64(&mut self) -> Result<u64, Self::Error> {
        let mut b = [0u8; 8];
        self.fill(&mut b);
        Ok(u64::from_le_bytes(b))
    }
    fn try_fill_bytes(&mut self, dst: &mut [u8]) -> Result<(), Self::Error> {
        self.fill(dst);
        Ok(())
    }
}

/// The replayable clock: starts at [`Seed::clock_start_ms`] and advances
/// one millisecond per reading, so time moves forward but is reproducible.
#[derive(Debug, Clone)]
pub struct ReplayClock {
    next_ms: u64,
}

impl ReplayClock {
    /// A clock for this seed.
    pub fn new(seed: &Seed) -> Self {
        Self {
            next_ms: seed.clock_start_ms(),
        }
    }

    /// The next reading in milliseconds since the Unix epoch.
    pub fn now_ms(&mut self) -> u64 {
        let t = self.next_ms;
        self.next_ms += 1;
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_attempt_same_stream_other_attempt_differs() {
        let a = Seed::new("run", "node", 1);
        let b = Seed::new("run", "node", 1);
        let c = Seed::new("run", "node", 2);
        let d = Seed::new("ru", "nnode", 1); // separator matters
        let draw = |s: Seed| {
            let mut r = ReplayRng::new(s);
            let mut v = [0u8; 100];
            r.fill(&mut v);
            v
        };
        assert_eq!(draw(a), draw(b));
        assert_ne!(draw(a), draw(c));
        assert_ne!(draw(a), draw(d));
        assert_ne!(a.derive("x"), a.derive("y"));
        let mut c1 = ReplayClock::new(&a);
        let mut c2 = ReplayClock::new(&b);
        assert_eq!(c1.now_ms(), c2.now_ms());
        assert_eq!(c1.now_ms() + 1, c1.now_ms());
    }

    #[test]
    fn split_reads_equal_one_read() {
        let s = Seed::new("r", "n", 3);
        let mut one = ReplayRng::new(s);
        let mut v = [0u8; 70];
        one.fill(&mut v);
        let mut two = ReplayRng::new(s);
        let mut w = [0u8; 70];
        two.fill(&mut w[..33]);
        two.fill(&mut w[33..]);
        assert_eq!(v, w);
    }
}
