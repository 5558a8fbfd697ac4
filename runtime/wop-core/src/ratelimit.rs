//! Token-bucket rate limiting per (principal, tool).
//!
//! Each (principal, tool) pair has its own bucket of at most
//! [`RateSpec::capacity`] tokens, refilled continuously at
//! [`RateSpec::refill_per_sec`]. A bucket starts full; each admitted call
//! takes one token. Time is passed in explicitly ([`RateLimiter::try_acquire`]
//! takes an [`Instant`]), so callers use `Instant::now()` and tests use
//! synthetic instants.
//!
//! Memory is bounded: a limiter holds at most
//! [`DEFAULT_MAX_BUCKETS`] buckets (configurable with
//! [`RateLimiter::with_max_buckets`]). When a new pair arrives and the table
//! is full, buckets that have fully refilled are evicted first — this loses
//! nothing, since a full bucket behaves exactly like a fresh one. If no
//! bucket can be evicted, the call is denied (fail closed) with a
//! retry-after of [`FAIL_CLOSED_RETRY_AFTER`] (1 s).

use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// The default bound on the number of buckets a [`RateLimiter`] keeps.
pub const DEFAULT_MAX_BUCKETS: usize = 100_000;

/// The retry-after returned when the bucket table is full and nothing can be
/// evicted.
pub const FAIL_CLOSED_RETRY_AFTER: Duration = Duration::from_secs(1);

/// Tolerance for floating-point rounding when checking for a whole token.
const EPSILON: f64 = 1e-9;

/// A token-bucket specification: burst size and refill rate.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RateSpec {
    /// Maximum number of tokens (the burst size); at least 1.
    pub capacity: u32,
    /// Tokens added per second; finite and greater than 0.
    pub refill_per_sec: f64,
}

impl RateSpec {
    /// Checks that `capacity ≥ 1` and `refill_per_sec` is finite and `> 0`.
    pub fn validate(&self) -> Result<(), String> {
        if self.capacity < 1 {
            return Err(format!(
                "rate limit capacity must be at least 1, got {}",
                self.capacity
            ));
        }
        if !self.refill_per_sec.is_finite() || self.refill_per_sec <= 0.0 {
            return Err(format!(
                "rate limit refillPerSec must be a finite number greater than 0, got {}",
                self.refill_per_sec
            ));
        }
        Ok(())
    }
}

#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    last: Instant,
    capacity: f64,
    refill_per_sec: f64,
}

impl Bucket {
    /// Brings the bucket up to `now` under `spec`.
    fn refill(&mut self, spec: &RateSpec, now: Instant) {
        self.capacity = f64::from(spec.capacity);
        self.refill_per_sec = spec.refill_per_sec;
        let elapsed = now.saturating_duration_since(self.last).as_secs_f64();
        self.tokens = (self.tokens + elapsed * self.refill_per_sec).min(self.capacity);
        if now > self.last {
            self.last = now;
        }
    }

    /// Time from `now` until this bucket is full again under its last spec.
    fn time_to_full(&self, now: Instant) -> Duration {
        let elapsed = now.saturating_duration_since(self.last).as_secs_f64();
        let tokens = self.tokens + elapsed * self.refill_per_sec;
        let missing = self.capacity - tokens;
        if missing <= EPSILON {
            Duration::ZERO
        } else {
            secs_ceil_ms(missing / self.refill_per_sec)
        }
    }
}

/// Converts seconds to a duration rounded up to whole milliseconds (at
/// least 1 ms), saturating on overflow.
fn secs_ceil_ms(secs: f64) -> Duration {
    let ms = (secs * 1000.0).ceil();
    // `as` saturates (and maps NaN to 0).
    Duration::from_millis((ms as u64).max(1))
}

#[derive(Debug)]
struct Table {
    buckets: HashMap<(String, String), Bucket>,
    /// While the table is full, no bucket can be full before this instant,
    /// so eviction scans before it are pointless.
    no_eviction_before: Option<Instant>,
}

/// Token buckets per (principal, tool). `Send + Sync`; share it by reference
/// or in an `Arc`.
#[derive(Debug)]
pub struct RateLimiter {
    table: Mutex<Table>,
    max_buckets: usize,
}

impl Default for RateLimiter {
    fn default() -> Self {
        Self::new()
    }
}

impl RateLimiter {
    /// A limiter bounded to [`DEFAULT_MAX_BUCKETS`] buckets.
    pub fn new() -> Self {
        Self::with_max_buckets(DEFAULT_MAX_BUCKETS)
    }

    /// A limiter bounded to `max_buckets` buckets (at least 1).
    pub fn with_max_buckets(max_buckets: usize) -> Self {
        RateLimiter {
            table: Mutex::new(Table {
                buckets: HashMap::new(),
                no_eviction_before: None,
            }),
            max_buckets: max_buckets.max(1),
        }
    }

    /// The number of buckets currently held.
    pub fn len(&self) -> usize {
        self.lock().buckets.len()
    }

    /// Whether no bucket is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Takes one token from the bucket of (`principal`, `tool`) under `spec`
    /// at time `now`.
    ///
    /// Returns `Err(retry_after)` when denied: the time until one token is
    /// available, rounded up to whole milliseconds, or
    /// [`FAIL_CLOSED_RETRY_AFTER`] when the bucket table is full and no
    /// bucket could be evicted. `spec` should have passed
    /// [`RateSpec::validate`]; an invalid spec denies every call.
    pub fn try_acquire(
        &self,
        principal: &str,
        tool: &str,
        spec: &RateSpec,
        now: Instant,
    ) -> Result<(), Duration> {
        if spec.validate().is_err() {
            return Err(FAIL_CLOSED_RETRY_AFTER);
        }
        let mut table = self.lock();
        let key = (principal.to_owned(), tool.to_owned());
        if !table.buckets.contains_key(&key) {
            if table.buckets.len() >= self.max_buckets {
                Self::evict_full(&mut table, now);
                if table.buckets.len() >= self.max_buckets {
                    tracing::warn!(
                        max_buckets = self.max_buckets,
                        "rate limiter bucket table is full; denying new principal/tool pair"
                    );
                    return Err(FAIL_CLOSED_RETRY_AFTER);
                }
            }
            table.buckets.insert(
                key.clone(),
                Bucket {
                    tokens: f64::from(spec.capacity),
                    last: now,
                    capacity: f64::from(spec.capacity),
                    refill_per_sec: spec.refill_per_sec,
                },
            );
        }
        let Some(bucket) = table.buckets.get_mut(&key) else {
            return Err(FAIL_CLOSED_RETRY_AFTER);
        };
        bucket.refill(spec, now);
        if bucket.tokens >= 1.0 - EPSILON {
            bucket.tokens = (bucket.tokens - 1.0).max(0.0);
            Ok(())
        } else {
            Err(secs_ceil_ms((1.0 - bucket.tokens) / spec.refill_per_sec))
        }
    }

    /// Evicts every bucket that is full at `now`, remembering when the next
    /// one could be full if none was.
    fn evict_full(table: &mut Table, now: Instant) {
        if table.no_eviction_before.is_some_and(|t| now < t) {
            return;
        }
        let mut soonest: Option<Duration> = None;
        table.buckets.retain(|_, b| {
            let ttf = b.time_to_full(now);
            if ttf.is_zero() {
                false
            } else {
                soonest = Some(soonest.map_or(ttf, |s| s.min(ttf)));
                true
            }
        });
        // Buckets only drain after this scan, so the soonest time-to-full is a
        // lower bound for the next possible eviction.
        table.no_eviction_before = soonest.and_then(|d| now.checked_add(d));
    }

    fn lock(&self) -> MutexGuard<'_, Table> {
        // The table holds plain numbers and is never left half-updated, so a
        // poisoned lock is safe to recover.
        self.table.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(capacity: u32, refill_per_sec: f64) -> RateSpec {
        RateSpec {
            capacity,
            refill_per_sec,
        }
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn limiter_is_send_sync() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<RateLimiter>();
    }

    #[test]
    fn spec_validation_and_serde() {
        assert!(spec(1, 0.5).validate().is_ok());
        assert!(spec(0, 1.0).validate().is_err());
        assert!(spec(1, 0.0).validate().is_err());
        assert!(spec(1, -1.0).validate().is_err());
        assert!(spec(1, f64::NAN).validate().is_err());
        assert!(spec(1, f64::INFINITY).validate().is_err());
        let s: RateSpec = serde_json::from_str(r#"{"capacity": 5, "refillPerSec": 2.5}"#).unwrap();
        assert_eq!(s, spec(5, 2.5));
        assert_eq!(
            serde_json::to_value(s).unwrap(),
            serde_json::json!({"capacity": 5, "refillPerSec": 2.5})
        );
        assert!(
            serde_json::from_str::<RateSpec>(r#"{"capacity": 5, "refillPerSec": 1, "x": 1}"#)
                .is_err()
        );
        assert!(serde_json::from_str::<RateSpec>(r#"{"capacity": 5}"#).is_err());
    }

    #[test]
    fn burst_then_denial_with_retry_after() {
        let rl = RateLimiter::new();
        let s = spec(3, 2.0); // one token per 500 ms
        let t0 = Instant::now();
        for _ in 0..3 {
            assert_eq!(rl.try_acquire("p", "t", &s, t0), Ok(()));
        }
        assert_eq!(rl.try_acquire("p", "t", &s, t0), Err(ms(500)));
        // 200 ms later: 0.4 tokens, 300 ms to go.
        assert_eq!(rl.try_acquire("p", "t", &s, t0 + ms(200)), Err(ms(300)));
        // Retry-after rounds up to whole milliseconds.
        let s3 = spec(1, 3.0);
        assert_eq!(rl.try_acquire("q", "t", &s3, t0), Ok(()));
        assert_eq!(rl.try_acquire("q", "t", &s3, t0), Err(ms(334)));
        assert_eq!(rl.try_acquire("q", "t", &s3, t0 + ms(334)), Ok(()));
    }

    #[test]
    fn refill_over_synthetic_time() {
        let rl = RateLimiter::new();
        let s = spec(2, 10.0); // one token per 100 ms
        let t0 = Instant::now();
        assert!(rl.try_acquire("p", "t", &s, t0).is_ok());
        assert!(rl.try_acquire("p", "t", &s, t0).is_ok());
        assert!(rl.try_acquire("p", "t", &s, t0).is_err());
        assert!(rl.try_acquire("p", "t", &s, t0 + ms(99)).is_err());
        assert!(rl.try_acquire("p", "t", &s, t0 + ms(100)).is_ok());
        assert!(rl.try_acquire("p", "t", &s, t0 + ms(100)).is_err());
        // A long idle period refills only up to capacity.
        let later = t0 + Duration::from_secs(3600);
        assert!(rl.try_acquire("p", "t", &s, later).is_ok());
        assert!(rl.try_acquire("p", "t", &s, later).is_ok());
        assert_eq!(rl.try_acquire("p", "t", &s, later), Err(ms(100)));
        // Time going backwards never adds tokens.
        assert!(rl.try_acquire("p", "t", &s, t0).is_err());
        // Exact retry-after is honoured.
        let s = spec(1, 10.0);
        let mut t = t0;
        assert!(rl.try_acquire("r", "t", &s, t).is_ok());
        for _ in 0..100 {
            let wait = rl.try_acquire("r", "t", &s, t).unwrap_err();
            t += wait;
            assert!(rl.try_acquire("r", "t", &s, t).is_ok());
        }
    }

    #[test]
    fn independent_across_principals_and_tools() {
        let rl = RateLimiter::new();
        let s = spec(1, 1.0);
        let t0 = Instant::now();
        assert!(rl.try_acquire("alice", "fetch", &s, t0).is_ok());
        assert!(rl.try_acquire("alice", "fetch", &s, t0).is_err());
        assert!(rl.try_acquire("alice", "write", &s, t0).is_ok());
        assert!(rl.try_acquire("bob", "fetch", &s, t0).is_ok());
        assert!(rl.try_acquire("bob", "write", &s, t0).is_ok());
        assert!(rl.try_acquire("bob", "write", &s, t0).is_err());
        // No ambiguity from concatenation.
        assert!(rl.try_acquire("ab", "c", &s, t0).is_ok());
        assert!(rl.try_acquire("a", "bc", &s, t0).is_ok());
        assert_eq!(rl.len(), 6);
    }

    #[test]
    fn eviction_of_full_buckets_then_fail_closed() {
        let rl = RateLimiter::with_max_buckets(3);
        let s = spec(2, 1.0);
        let t0 = Instant::now();
        // Three buckets, each with one token taken (not full).
        for p in ["a", "b", "c"] {
            assert!(rl.try_acquire(p, "t", &s, t0).is_ok());
        }
        assert_eq!(rl.len(), 3);
        // Table full and nothing refilled: fail closed.
        assert_eq!(
            rl.try_acquire("d", "t", &s, t0),
            Err(FAIL_CLOSED_RETRY_AFTER)
        );
        // Existing pairs keep working while the table is full.
        assert!(rl.try_acquire("a", "t", &s, t0).is_ok());
        assert_eq!(rl.len(), 3);
        // After 1 s "b" and "c" are full again (a is at 1 of 2): they are evicted.
        let t1 = t0 + Duration::from_secs(1);
        assert!(rl.try_acquire("d", "t", &s, t1).is_ok());
        assert_eq!(rl.len(), 2);
        assert!(rl.try_acquire("e", "t", &s, t1).is_ok());
        assert_eq!(rl.len(), 3);
        // "a" was not evicted: its state was kept (1 token at t1).
        assert!(rl.try_acquire("a", "t", &s, t1).is_ok());
        assert!(rl.try_acquire("a", "t", &s, t1).is_err());
        // Full again with nothing evictable.
        assert_eq!(
            rl.try_acquire("f", "t", &s, t1),
            Err(FAIL_CLOSED_RETRY_AFTER)
        );
        // An evicted pair comes back as a fresh (full) bucket once room exists.
        let t3 = t1 + Duration::from_secs(3);
        assert!(rl.try_acquire("b", "t", &s, t3).is_ok());
        assert!(rl.try_acquire("b", "t", &s, t3).is_ok());
        assert!(rl.try_acquire("b", "t", &s, t3).is_err());
    }

    #[test]
    fn invalid_spec_fails_closed() {
        let rl = RateLimiter::new();
        let t0 = Instant::now();
        assert_eq!(
            rl.try_acquire("p", "t", &spec(0, 1.0), t0),
            Err(FAIL_CLOSED_RETRY_AFTER)
        );
        assert_eq!(
            rl.try_acquire("p", "t", &spec(1, f64::NAN), t0),
            Err(FAIL_CLOSED_RETRY_AFTER)
        );
        assert!(rl.is_empty());
    }

    #[test]
    fn tiny_refill_saturates_retry_after() {
        let rl = RateLimiter::new();
        let s = spec(1, 1e-300);
        let t0 = Instant::now();
        assert!(rl.try_acquire("p", "t", &s, t0).is_ok());
        let wait = rl.try_acquire("p", "t", &s, t0).unwrap_err();
        assert!(wait >= Duration::from_secs(1_000_000));
    }
}
