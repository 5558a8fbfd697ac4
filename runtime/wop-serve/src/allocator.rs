//! The allocator of the service's binaries (decision 0040): jemalloc,
//! with its background threads returning freed memory to the OS on their
//! own clock.
//!
//! Each binary that runs the service declares it (a library cannot choose
//! the allocator of the program that links it):
//!
//! ```ignore
//! #[global_allocator]
//! static ALLOCATOR: wop_serve::allocator::Allocator = wop_serve::allocator::Allocator;
//! ```
//!
//! Why not glibc's: an invocation through the service allocates and frees
//! more blocks of one size than glibc's per-thread cache holds (7), and a
//! larger block now and then (hyper's read buffer) consolidates the rest,
//! so most small allocations took glibc's slow path (`_int_malloc` alone
//! was 14.5 % of the service's CPU at eight clients). Operators tune it
//! with the `_RJEM_MALLOC_CONF` environment variable (jemalloc's
//! `MALLOC_CONF`, prefixed because Rust's jemalloc symbols are).

pub use tikv_jemallocator::Jemalloc as Allocator;

/// Returns the pages jemalloc holds free ("dirty": freed but resident) in
/// every arena to the OS now, instead of when its decay clock would.
/// Called by the idle release; harmless in a binary whose global allocator
/// is another (jemalloc's arenas then hold nothing). False if jemalloc
/// refused the command.
pub fn purge_free_memory() -> bool {
    // `arena.<MALLCTL_ARENAS_ALL>.purge`; MALLCTL_ARENAS_ALL is 4096.
    command(c"arena.4096.purge")
}

/// Runs the jemalloc control `name` that reads and writes nothing (a
/// command, jemalloc(3)); false if jemalloc refused it (an unknown name).
#[allow(unsafe_code)]
fn command(name: &std::ffi::CStr) -> bool {
    // SAFETY: `name` is NUL-terminated; a command that takes no value is
    // called with null old/new pointers and zero lengths, as jemalloc(3)
    // specifies, and retains no pointer.
    let rc = unsafe {
        tikv_jemalloc_sys::mallctl(
            name.as_ptr(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            0,
        )
    };
    rc == 0
}

#[cfg(test)]
mod tests {
    use super::{command, purge_free_memory};

    #[test]
    fn jemalloc_accepts_the_purge_command() {
        assert!(purge_free_memory());
    }

    #[test]
    fn an_unknown_control_is_refused() {
        // What a misspelt or removed control name would answer (ENOENT).
        assert!(!command(c"arena.4096.purgx"));
        assert!(!command(c"arena.4096"));
    }
}
