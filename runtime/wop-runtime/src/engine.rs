//! The process-wide wasmtime [`Engine`]: pooling allocator, fuel metering,
//! and no epoch interruption (see `docs/decisions/0001-wall-clock.md`: the
//! wall clock is enforced by async fuel yields plus a deadline).

use sha2::{Digest, Sha256};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use wasmtime::{Config, Engine, InstanceAllocationStrategy, OptLevel, PoolingAllocationConfig};
use wop_core::error::ConfigError;

/// Fuel units between two cooperative yields to the async executor. Small
/// enough that a deadline is noticed within well under a millisecond of
/// guest execution, large enough that yields cost nothing measurable.
#[doc(hidden)]
pub const FUEL_YIELD_INTERVAL: u64 = 100_000;

/// The wasmtime version this runtime is built on (pinned in the workspace).
pub(crate) const ENGINE_VERSION: &str = "50.0.1";

/// Concurrent invocations (component instances) the pool holds.
const POOL_COMPONENT_INSTANCES: u32 = 1000;
/// Core instances per component: componentized Python needs more than 16.
const POOL_CORE_INSTANCES_PER_COMPONENT: u32 = 128;
/// Memories/tables per component.
const POOL_MEMORIES_PER_COMPONENT: u32 = 16;
const POOL_TABLES_PER_COMPONENT: u32 = 64;
/// Largest linear memory the pool reserves room for (the policy's
/// `memoryBytes` ceiling is enforced below this by the store limiter).
const POOL_MAX_MEMORY_BYTES: usize = 4 << 30;
/// Bytes of each linear memory / table slot kept resident between uses.
/// 8 MiB: a componentized Python hello dirties about 5 MiB, so with 1 MiB
/// every call paid ~318 page faults re-faulting the rest (4 MiB: 257;
/// 8 MiB: 5; 16 MiB: 0). `fuel-benches` `languages`, same machine, one
/// run each: Python 1847 -> 1358 µs p50, JavaScript 349 -> 189, Rust
/// 67 -> 53 (decision 0028).
const POOL_KEEP_RESIDENT_MEMORY: usize = 8 << 20;
/// Idle slots that keep their memory warm (wasmtime's default is 100): the
/// RSS an idle pool can hold is at most this many × the kept bytes,
/// 128 MiB (8 lost slot affinity: Python 30 faults per call again).
const POOL_MAX_UNUSED_WARM_SLOTS: u32 = 16;
const POOL_KEEP_RESIDENT_TABLE: usize = 64 << 10;
/// Guest stack: 1 MiB of wasm stack on a 2 MiB host fiber stack.
const MAX_WASM_STACK: usize = 1 << 20;
const ASYNC_STACK: usize = 2 << 20;

/// The configuration of the process-wide engine: component model, fuel on
/// (no epochs), the stacks, the pooling allocator and its slot-reuse
/// settings. Public only so that benchmarks can configure a bare wasmtime
/// exactly like `wop` (`fuel-benches`); not part of the API.
#[doc(hidden)]
pub fn engine_config() -> Config {
    let mut c = Config::new();
    c.wasm_component_model(true)
        .consume_fuel(true)
        .epoch_interruption(false)
        .max_wasm_stack(MAX_WASM_STACK)
        .async_stack_size(ASYNC_STACK)
        .cranelift_opt_level(OptLevel::Speed)
        .parallel_compilation(true);
    let mut pool = PoolingAllocationConfig::new();
    pool.total_component_instances(POOL_COMPONENT_INSTANCES)
        .total_core_instances(POOL_COMPONENT_INSTANCES * 4)
        .total_memories(POOL_COMPONENT_INSTANCES * 2)
        .total_tables(POOL_COMPONENT_INSTANCES * 4)
        .total_stacks(POOL_COMPONENT_INSTANCES)
        .max_core_instances_per_component(POOL_CORE_INSTANCES_PER_COMPONENT)
        .max_memories_per_component(POOL_MEMORIES_PER_COMPONENT)
        .max_tables_per_component(POOL_TABLES_PER_COMPONENT)
        // The same ceiling the limiter enforces: before, the pool's own
        // default (20 000) silently stopped growth below the documented cap.
        .table_elements(usize::try_from(wop_core::limits::MAX_TABLE_ELEMENTS).unwrap_or(usize::MAX))
        .max_memory_size(POOL_MAX_MEMORY_BYTES);
    // Slot reuse without page faults or cross-core TLB shootdowns: keep
    // the first 8 MiB of each memory (64 KiB of each table) resident and
    // reset only its dirty pages (PAGEMAP_SCAN, Linux >= 6.7; `Auto` falls
    // back to memset of the kept bytes elsewhere). Memory is zeroed either
    // way. Measured in fuel-benches `latency`/`throughput`: hello 68.6 ->
    // 51.6 µs p50, and 2 tasks now scale 1.8x instead of 1.4x (decision
    // 0010). Idle, it holds at most 16 warm slots × 8 MiB of RSS (before:
    // 100 × 1 MiB), and only pages an instance actually dirtied.
    pool.max_unused_warm_slots(POOL_MAX_UNUSED_WARM_SLOTS)
        .linear_memory_keep_resident(POOL_KEEP_RESIDENT_MEMORY)
        .table_keep_resident(POOL_KEEP_RESIDENT_TABLE)
        .pagemap_scan(wasmtime::Enabled::Auto);
    c.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
    c
}

/// The one engine of this process (created on first use).
pub(crate) fn engine() -> Result<&'static Engine, ConfigError> {
    static ENGINE: OnceLock<Result<Engine, String>> = OnceLock::new();
    ENGINE
        .get_or_init(|| Engine::new(&engine_config()).map_err(|e| format!("{e:#}")))
        .as_ref()
        .map_err(|e| ConfigError::Engine(e.clone()))
}

/// Idle-pool releases of this process: `(releases, bytes released)`.
static IDLE_RELEASES: (AtomicU64, AtomicU64) = (AtomicU64::new(0), AtomicU64::new(0));

/// Gives the memory the pool keeps resident for idle slots (up to 8 MiB of
/// each slot an instance dirtied, decision 0028) back to the OS; returns
/// the bytes released. Process-wide: the engine is. Slots stay usable — the
/// next instance in one pays its page faults again. Safe while invocations
/// run (wasmtime takes each slot out of its free list while releasing it).
pub(crate) fn release_idle_memory() -> usize {
    let Ok(engine) = engine() else { return 0 };
    let bytes = engine.release_idle_pool_memory();
    trim_heap();
    IDLE_RELEASES.0.fetch_add(1, Ordering::Relaxed);
    IDLE_RELEASES
        .1
        .fetch_add(u64::try_from(bytes).unwrap_or(u64::MAX), Ordering::Relaxed);
    bytes
}

/// Returns the free pages of every malloc arena to the OS (glibc keeps
/// them: a long-lived server's heap otherwise stays at its high-water
/// mark). Elsewhere nothing to do.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
fn trim_heap() {
    // SAFETY: malloc_trim only walks the allocator's own free lists under
    // its own locks; it takes and returns no pointers.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn trim_heap() {}

/// `(releases, bytes released)` by [`release_idle_memory`] since start.
pub(crate) fn idle_releases() -> (u64, u64) {
    (
        IDLE_RELEASES.0.load(Ordering::Relaxed),
        IDLE_RELEASES.1.load(Ordering::Relaxed),
    )
}

/// A stable fingerprint of everything in the engine that affects compiled
/// code (wasmtime version, target, tunables, features): part of the compile
/// cache key, so an artifact is never loaded into an incompatible engine.
pub(crate) fn fingerprint(engine: &Engine) -> String {
    fingerprint_for(engine, ENGINE_VERSION)
}

fn fingerprint_for(engine: &Engine, version: &str) -> String {
    use std::hash::{Hash, Hasher};
    struct ShaHasher(Sha256);
    impl Hasher for ShaHasher {
        fn finish(&self) -> u64 {
            0 // unused: we take the full digest below
        }
        fn write(&mut self, bytes: &[u8]) {
            self.0.update(bytes);
        }
    }
    let mut h = ShaHasher(Sha256::new());
    engine.precompile_compatibility_hash().hash(&mut h);
    // wasmtime's hash covers its own version; ours names it too, so a
    // cache written by another engine is never even offered to this one.
    h.write(version.as_bytes());
    h.write(b"wop-engine-v1");
    hex::encode(&h.0.finalize()[..16])
}

#[cfg(test)]
mod tests {
    /// The advertised engine version is the wasmtime the workspace locks
    /// (the capability document must not name an engine we do not run).
    #[test]
    fn engine_version_is_the_locked_wasmtime() {
        let lock = include_str!("../../../Cargo.lock");
        let locked = lock
            .split("[[package]]")
            .find(|p| p.contains("\nname = \"wasmtime\"\n"))
            .and_then(|p| p.lines().find_map(|l| l.strip_prefix("version = \"")))
            .map(|v| v.trim_end_matches('"'));
        assert_eq!(locked, Some(super::ENGINE_VERSION));
    }

    /// A slot given back to the pool keeps resident only the pages its
    /// instance wrote. Against wasmtime 50.0.1 as published, on kernels
    /// whose `PAGEMAP_SCAN` reports never-touched pages as written (6.18
    /// here), one written page kept the whole 2 MiB around it resident
    /// (zeroed, then reset on every later instance). The workspace's
    /// patched wasmtime (decision 0034) keeps the one page.
    #[test]
    fn a_returned_slot_keeps_only_the_pages_its_instance_wrote() {
        if !pagemap_scan_kernel() {
            eprintln!(
                "skipped: PAGEMAP_SCAN needs Linux >= 6.7 (wasmtime resets kept memory without it)"
            );
            return;
        }
        let engine = wasmtime::Engine::new(&super::engine_config()).unwrap();
        // 2 MiB of memory, a data segment (the copy-on-write image) in the
        // second half, one byte written just below it.
        let wasm = wat::parse_str(
            r#"(module
                 (memory (export "memory") 32)
                 (data (i32.const 0x100000) "image")
                 (func (export "touch") (i32.store8 (i32.const 0xff000) (i32.const 1))))"#,
        )
        .unwrap();
        let module = wasmtime::Module::new(&engine, wasm).unwrap();
        {
            let mut store = wasmtime::Store::new(&engine, ());
            store.set_fuel(1_000_000).unwrap();
            let instance = wasmtime::Instance::new(&mut store, &module, &[]).unwrap();
            let touch = instance
                .get_typed_func::<(), ()>(&mut store, "touch")
                .unwrap();
            touch.call(&mut store, ()).unwrap();
        }
        let resident = engine
            .pooling_allocator_metrics()
            .unwrap()
            .unused_memory_bytes_resident();
        assert!(
            resident <= 64 << 10,
            "a slot whose instance wrote one page keeps {resident} bytes resident"
        );
    }

    /// Funcrefs call the function they name, in every instance: the
    /// workspace's patched wasmtime builds a defined function's funcref
    /// from a per-module table of code offsets and a per-instance record
    /// of where its store keeps the code (decision 0037). Two modules fill
    /// one imported table through element segments and `ref.func` and
    /// call through it, in two stores one after the other (the second
    /// reuses the pool's slots), and their exports are called directly.
    #[test]
    fn funcrefs_call_the_functions_they_name_in_every_instance() {
        let engine = wasmtime::Engine::new(&super::engine_config()).unwrap();
        let table = wasmtime::Module::new(
            &engine,
            wat::parse_str(r#"(module (table (export "t") 8 funcref))"#).unwrap(),
        )
        .unwrap();
        let user = |base: i32, a: i32| {
            let wat = format!(
                r#"(module
                     (import "host" "t" (table 8 funcref))
                     (func $pad (result i32) (i32.const -1))
                     (func $a (result i32) (i32.const {a}))
                     (func $b (result i32) (i32.const {b}))
                     (func $c (export "c") (result i32) (i32.const {c}))
                     (elem (table 0) (i32.const {base}) func $a $b)
                     (elem declare func $c)
                     (func (export "set") (table.set 0 (i32.const 7) (ref.func $c)))
                     (func (export "via_table") (param i32) (result i32)
                       (call_indirect (result i32) (local.get 0))))"#,
                b = a + 1,
                c = a + 2,
            );
            wasmtime::Module::new(&engine, wat::parse_str(wat).unwrap()).unwrap()
        };
        let (x, y) = (user(0, 10), user(2, 20));
        for _store in 0..2 {
            let mut store = wasmtime::Store::new(&engine, ());
            store.set_fuel(1_000_000).unwrap();
            let t = wasmtime::Instance::new(&mut store, &table, &[]).unwrap();
            let t = t.get_export(&mut store, "t").unwrap();
            let x = wasmtime::Instance::new(&mut store, &x, std::slice::from_ref(&t)).unwrap();
            let y = wasmtime::Instance::new(&mut store, &y, &[t]).unwrap();
            let mut via = |i: &wasmtime::Instance, slot: i32| {
                i.get_typed_func::<i32, i32>(&mut store, "via_table")
                    .unwrap()
                    .call(&mut store, slot)
                    .unwrap()
            };
            assert_eq!(
                [via(&x, 0), via(&x, 1), via(&y, 2), via(&y, 3)],
                [10, 11, 20, 21]
            );
            for (i, c) in [(&x, 12), (&y, 22)] {
                i.get_typed_func::<(), ()>(&mut store, "set")
                    .unwrap()
                    .call(&mut store, ())
                    .unwrap();
                let through_table = i
                    .get_typed_func::<i32, i32>(&mut store, "via_table")
                    .unwrap()
                    .call(&mut store, 7)
                    .unwrap();
                let direct = i
                    .get_typed_func::<(), i32>(&mut store, "c")
                    .unwrap()
                    .call(&mut store, ())
                    .unwrap();
                assert_eq!((through_table, direct), (c, c));
            }
        }
    }

    /// Linux >= 6.7 (`PAGEMAP_SCAN`), read from the running kernel.
    fn pagemap_scan_kernel() -> bool {
        let Ok(release) = std::fs::read_to_string("/proc/sys/kernel/osrelease") else {
            return false;
        };
        let mut parts = release.trim().split(['.', '-']);
        let major: u32 = parts.next().and_then(|p| p.parse().ok()).unwrap_or(0);
        let minor: u32 = parts.next().and_then(|p| p.parse().ok()).unwrap_or(0);
        (major, minor) >= (6, 7)
    }

    /// The compile cache's key names the engine: an artifact written by
    /// the previous engine (48.0.8) has another file name, so it is
    /// recompiled, never offered to this one.
    #[test]
    fn the_cache_key_changes_with_the_engine_version() {
        let engine = wasmtime::Engine::new(&super::engine_config()).unwrap();
        assert_ne!(
            super::fingerprint(&engine),
            super::fingerprint_for(&engine, "48.0.8")
        );
        assert_eq!(super::fingerprint(&engine), super::fingerprint(&engine));
    }
}
