//! The global allocator of the `wop` and `wop-serve` binaries: mimalloc
//! instead of glibc's malloc, whose multi-threaded paths were a fifth of
//! the service's CPU per invocation (decision 0024). The library itself
//! sets no allocator; an embedder chooses its own.
//!
//! ```ignore
//! #[global_allocator]
//! static GLOBAL: wop_serve::alloc::Allocator = wop_serve::alloc::ALLOCATOR;
//!
//! fn main() {
//!     wop_serve::alloc::return_freed_memory_at_once();
//!     // ...
//! }
//! ```

/// The allocator type, for a `#[global_allocator]` static.
pub type Allocator = mimalloc::MiMalloc;

/// The allocator, for a `#[global_allocator]` static.
pub const ALLOCATOR: Allocator = mimalloc::MiMalloc;

/// `mi_option_purge_delay` in the pinned mimalloc (`libmimalloc-sys`
/// 0.1.49, mimalloc 3.x `mimalloc.h`; mimalloc keeps deprecated options in
/// the enum so that indices stay put).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Hands memory freed by a burst back to the operating system at once
/// instead of after mimalloc's purge delay, which only the thread that
/// owns the memory acts on: an idle service would otherwise keep the
/// resident size of its last burst (the slow-reader test in
/// `tests/e2e/backpressure.rs` sees it). Call first thing in `main`;
/// without mimalloc as the global allocator it changes nothing.
#[allow(unsafe_code)]
pub fn return_freed_memory_at_once() {
    // SAFETY: `mi_option_set` stores an integer in mimalloc's option table;
    // 0 is a documented value of `purge_delay` ("immediate purging"), and
    // the index is checked against the pinned header above.
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, 0) }
}

#[cfg(test)]
#[allow(unsafe_code)]
mod tests {
    use super::*;

    fn purge_delay() -> std::os::raw::c_long {
        // SAFETY: reads an integer from mimalloc's option table.
        unsafe { libmimalloc_sys::mi_option_get(MI_OPTION_PURGE_DELAY) }
    }

    /// mimalloc 3's default purge delay is 1000 ms, a value none of the
    /// options beside it has: a drifted index fails here, not in service.
    #[test]
    fn the_option_set_is_mimallocs_purge_delay() {
        let set_by_env = ["MIMALLOC_PURGE_DELAY", "MIMALLOC_RESET_DELAY"]
            .iter()
            .any(|v| std::env::var_os(v).is_some());
        if !set_by_env {
            assert_eq!(purge_delay(), 1000);
        }
        return_freed_memory_at_once();
        assert_eq!(purge_delay(), 0);
    }
}
