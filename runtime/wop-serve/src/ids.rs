//! Invocation ids: version-4 UUIDs from the operating system's random
//! source, as `uuid::Uuid::new_v4` makes them, but read 4 KiB at a time
//! per thread — one `getrandom` system call per 256 ids instead of one
//! per request (~1 % of `wop serve`'s CPU per invocation, decision 0043).
//!
//! They stay unpredictable: a request without a run id runs as
//! `inv-<invocation id>`, and a tenant that could guess the next one
//! could prepare that run's ledger. The bytes are the kernel's CSPRNG
//! output, each used once; the process never forks without exec'ing, so
//! no two processes share a buffer.

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

/// 16 random bytes never handed out before, or `None` when the OS
/// source failed.
fn random_16() -> Option<[u8; 16]> {
    POOL.with(|pool| {
        let mut pool = pool.try_borrow_mut().ok()?;
        if pool.next + 16 > POOL_BYTES {
            getrandom::fill(&mut pool.bytes[..]).ok()?;
            pool.next = 0;
        }
        let at = pool.next;
        let mut out = [0u8; 16];
        out.copy_from_slice(&pool.bytes[at..at + 16]);
        // Spent bytes are not kept.
        pool.bytes[at..at + 16].fill(0);
        pool.next = at + 16;
        Some(out)
    })
}

/// A new invocation id (a hyphenated version-4 UUID).
pub(crate) fn invocation_id() -> String {
    match random_16() {
        Some(b) => uuid::Builder::from_random_bytes(b).into_uuid().to_string(),
        None => uuid::Uuid::new_v4().to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    /// Version 4, RFC 4122 variant, and all distinct across several
    /// refills of the pool, on several threads.
    #[test]
    fn ids_are_v4_uuids_and_never_repeat() {
        let per_thread = 3 * POOL_BYTES / 16 + 5;
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
                assert_eq!(u.get_version_num(), 4, "{id}");
                assert_eq!(u.get_variant(), uuid::Variant::RFC4122, "{id}");
                assert!(seen.insert(id), "an id repeated");
            }
        }
        assert_eq!(seen.len(), 3 * per_thread);
    }
}
