//! Invocation ids: version-7 UUIDs (RFC 9562), the milliseconds since
//! the Unix epoch then 74 bits from the operating system's random source,
//! read 4 KiB at a time per thread — one `getrandom` system call per 409
//! ids instead of one per request (~1 % of `wop serve`'s CPU per
//! invocation, decision 0043).
//!
//! They stay unpredictable: a request without a run id runs as
//! `inv-<invocation id>`, and a tenant that could guess the next one
//! could prepare that run's ledger. 74 bits are the kernel's CSPRNG
//! output, each used once; the process never forks without exec'ing, so
//! no two processes share a buffer. The time they show is when the
//! request arrived, which its client knows.
//!
//! They sort by time (decision 0059): the keys the store files under
//! such a run (`rollup/run/<tenant>/inv-…`, `usage/<tenant>/inv-…/…`)
//! are written at the end of their tenant's range and forgotten at its
//! start, where a version-4 id put each one at a random place among up to
//! 100,000 others (`USAGE_ENTRIES_IN_MEMORY`), on cold memory.

use std::cell::RefCell;

/// Bytes read at a time.
const POOL_BYTES: usize = 4096;

struct Pool {
    bytes: Box<[u8; POOL_BYTES]>,
    /// The next unused byte; `POOL_BYTES` when all are used.
    next: usize,
}

thread_local! {
    static POOL: RefCell<Pool> = RefCell::new(Pool {
        bytes: Box::new([0; POOL_BYTES]),
        next: POOL_BYTES,
    });
}

/// Random bytes of a version-7 UUID (74 of their 80 bits are kept).
const RANDOM_BYTES: usize = 10;

/// [`RANDOM_BYTES`] random bytes never handed out before, or `None` when
/// the OS source failed.
fn random_bytes() -> Option<[u8; RANDOM_BYTES]> {
    POOL.with(|pool| {
        let mut pool = pool.try_borrow_mut().ok()?;
        if pool.next + RANDOM_BYTES > POOL_BYTES {
            getrandom::fill(&mut pool.bytes[..]).ok()?;
            pool.next = 0;
        }
        let at = pool.next;
        let mut out = [0u8; RANDOM_BYTES];
        out.copy_from_slice(&pool.bytes[at..at + RANDOM_BYTES]);
        // Spent bytes are not kept.
        pool.bytes[at..at + RANDOM_BYTES].fill(0);
        pool.next = at + RANDOM_BYTES;
        Some(out)
    })
}

/// Milliseconds since the Unix epoch (0 for a clock set before it).
fn unix_millis() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// A new invocation id: a hyphenated version-7 UUID. If the OS random
/// source fails, a version-4 one (`uuid` reads the source its own way):
/// as unique and unguessable, only not in time order.
pub(crate) fn invocation_id() -> String {
    match random_bytes() {
        Some(b) => uuid::Builder::from_unix_timestamp_millis(unix_millis(), &b)
            .into_uuid()
            .to_string(),
        None => uuid::Uuid::new_v4().to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    /// Version 7, RFC 9562 variant, and all distinct across several
    /// refills of the pool, on several threads.
    #[test]
    fn ids_are_v7_uuids_and_never_repeat() {
        let per_thread = 3 * POOL_BYTES / RANDOM_BYTES + 5;
        let threads: Vec<_> = (0..3)
            .map(|_| {
                std::thread::spawn(move || {
                    (0..per_thread).map(|_| invocation_id()).collect::<Vec<_>>()
                })
            })
            .collect();
        let mut seen = HashSet::new();
        for t in threads {
            for id in t.join().unwrap() {
                let u = uuid::Uuid::parse_str(&id).unwrap();
                assert_eq!(u.get_version_num(), 7, "{id}");
                assert_eq!(u.get_variant(), uuid::Variant::RFC4122, "{id}");
                assert!(seen.insert(id), "an id repeated");
            }
        }
        assert_eq!(seen.len(), 3 * per_thread);
    }

    /// An id shows when it was made, and ids made a millisecond apart or
    /// more sort in that order, as text too (the store's keys are text).
    /// Ids of the same millisecond differ in their random bits.
    #[test]
    fn ids_sort_by_the_time_they_were_made() {
        let millis = |id: &str| {
            let (secs, nanos) = uuid::Uuid::parse_str(id)
                .unwrap()
                .get_timestamp()
                .unwrap()
                .to_unix();
            secs * 1000 + u64::from(nanos) / 1_000_000
        };
        let before = unix_millis();
        let first = invocation_id();
        std::thread::sleep(std::time::Duration::from_millis(2));
        let second = invocation_id();
        let after = unix_millis();
        assert!(first < second, "{first} then {second}");
        assert!(before <= millis(&first), "{first} made at {before}");
        assert!(millis(&second) <= after, "{second} made by {after}");
        assert!(millis(&second) >= millis(&first) + 2);
        // Same millisecond (no sleep): still distinct, by their random
        // bits (the last 62 bits, after the variant).
        let a = uuid::Uuid::parse_str(&invocation_id()).unwrap();
        let b = uuid::Uuid::parse_str(&invocation_id()).unwrap();
        assert_ne!(a.as_bytes()[8..], b.as_bytes()[8..]);
    }
}
