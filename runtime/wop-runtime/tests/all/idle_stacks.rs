//! The idle release gives back the fiber stacks' memory too (decision
//! 0042, the vendored wasmtime's third change).
//!
//! A guest runs on a fiber stack from the pool. Without stack zeroing
//! (wop's configuration: zeroing costs every call a `memset` and an
//! `madvise`), a returned stack keeps every page its guest touched, and a
//! guest that recursed to the 1 MiB `max_wasm_stack` leaves ~1 MiB
//! resident in the slot. Before the change `Engine::release_idle_pool_memory`
//! released linear memories only, so that memory never went back.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The resident bytes of the mapping of this process that contains
/// `addr` (`/proc/self/smaps`), or `None` if no mapping does.
fn resident_of_mapping_at(addr: usize) -> Option<usize> {
    let smaps = std::fs::read_to_string("/proc/self/smaps").ok()?;
    let mut inside = false;
    for line in smaps.lines() {
        let first = line.split_whitespace().next().unwrap_or("");
        if let Some((start, end)) = first.split_once('-')
            && let (Ok(start), Ok(end)) = (
                usize::from_str_radix(start, 16),
                usize::from_str_radix(end, 16),
            )
        {
            inside = (start..end).contains(&addr);
            continue;
        }
        if inside && let Some(kib) = line.strip_prefix("Rss:") {
            let kib: usize = kib.trim().trim_end_matches("kB").trim().parse().ok()?;
            return Some(kib * 1024);
        }
    }
    None
}

/// Runs a guest that notes where its fiber stack is and then recurses
/// until the stack overflows, in a store that is dropped afterwards (its
/// stack goes back to the pool). Returns an address on that stack.
fn overflow_the_stack(engine: &wasmtime::Engine) -> usize {
    let wasm = wat::parse_str(
        r#"(module
             (import "host" "here" (func $here))
             (func $deep (param i64 i64 i64 i64) (result i64)
               (i64.add (local.get 0)
                 (call $deep (local.get 1) (local.get 2) (local.get 3) (local.get 0))))
             (func (export "run") (result i64)
               (call $here)
               (call $deep (i64.const 1) (i64.const 2) (i64.const 3) (i64.const 4))))"#,
    )
    .unwrap();
    let module = wasmtime::Module::new(engine, wasm).unwrap();
    let here = Arc::new(AtomicUsize::new(0));
    let noted = here.clone();
    let mut linker = wasmtime::Linker::new(engine);
    linker
        .func_wrap("host", "here", move || {
            let local = 0u8;
            noted.store(std::ptr::addr_of!(local) as usize, Ordering::Relaxed);
        })
        .unwrap();
    let tokio = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let outcome = tokio.block_on(async {
        let mut store = wasmtime::Store::new(engine, ());
        store.set_fuel(u64::MAX).unwrap();
        let instance = linker.instantiate_async(&mut store, &module).await?;
        let run = instance.get_typed_func::<(), i64>(&mut store, "run")?;
        run.call_async(&mut store, ()).await
    });
    let trap = outcome.expect_err("unbounded recursion must overflow the stack");
    assert_eq!(
        trap.downcast_ref::<wasmtime::Trap>(),
        Some(&wasmtime::Trap::StackOverflow),
        "{trap:?}"
    );
    here.load(Ordering::Relaxed)
}

#[test]
fn the_idle_release_gives_back_what_a_deep_guest_left_on_its_stack() {
    let engine = wasmtime::Engine::new(&wop_runtime::engine_config()).unwrap();
    let on_stack = overflow_the_stack(&engine);
    assert_ne!(on_stack, 0, "the guest's host call did not run");
    let before = resident_of_mapping_at(on_stack).expect("the fiber stack's mapping");
    // The guest's 1 MiB of wasm stack is still there in the returned slot.
    assert!(
        before >= 512 << 10,
        "the returned stack holds only {before} bytes: the test no longer overflows it"
    );
    let released = engine.release_idle_pool_memory();
    let after = resident_of_mapping_at(on_stack).expect("the fiber stack's mapping");
    assert!(
        after <= 64 << 10,
        "the idle release left {after} of the stack's {before} resident bytes"
    );
    assert!(
        released >= before - after,
        "{released} bytes reported released, {} went",
        before - after
    );
    // And the slot is usable again: the same guest runs (and overflows) in it.
    assert_ne!(overflow_the_stack(&engine), 0);
}

/// The release never touches a stack in use: a guest suspended 2,000
/// frames deep in an async host call (its fiber parked, its frames on the
/// pool's stack) while the release runs resumes with every frame intact —
/// each frame adds its own argument on the way back, so one zeroed page
/// of the stack would change the sum or crash the guest.
#[test]
fn the_idle_release_leaves_a_suspended_guests_stack_alone() {
    let engine = wasmtime::Engine::new(&wop_runtime::engine_config()).unwrap();
    // A deep stack in the pool: the next guest takes this warm slot.
    overflow_the_stack(&engine);
    let wasm = wat::parse_str(
        r#"(module
             (import "host" "pause" (func $pause))
             (func $down (param $n i64) (result i64)
               (if (result i64) (i64.eqz (local.get $n))
                 (then (call $pause) (i64.const 0))
                 (else (i64.add (local.get $n)
                         (call $down (i64.sub (local.get $n) (i64.const 1)))))))
             (func (export "run") (param i64) (result i64) (call $down (local.get 0))))"#,
    )
    .unwrap();
    let module = wasmtime::Module::new(&engine, wasm).unwrap();
    let paused = Arc::new(tokio::sync::Notify::new());
    let resume = Arc::new(tokio::sync::Notify::new());
    let mut linker = wasmtime::Linker::new(&engine);
    let (p, r) = (paused.clone(), resume.clone());
    linker
        .func_wrap_async(
            "host",
            "pause",
            move |_caller: wasmtime::Caller<'_, ()>, ()| {
                let (p, r) = (p.clone(), r.clone());
                Box::new(async move {
                    p.notify_one();
                    r.notified().await;
                })
            },
        )
        .unwrap();
    let tokio = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let (sum, released) = tokio.block_on(async {
        let guest = async {
            let mut store = wasmtime::Store::new(&engine, ());
            store.set_fuel(u64::MAX).unwrap();
            let instance = linker.instantiate_async(&mut store, &module).await?;
            let run = instance.get_typed_func::<i64, i64>(&mut store, "run")?;
            run.call_async(&mut store, 2000).await
        };
        let release = async {
            paused.notified().await;
            let released = engine.release_idle_pool_memory();
            resume.notify_one();
            released
        };
        tokio::join!(guest, release)
    });
    assert_eq!(sum.unwrap(), 2000 * 2001 / 2);
    // The suspended guest ran on the overflowed slot (the one warm stack):
    // the release while it ran left that slot's megabyte alone, and the
    // next release, with the slot back in the pool, gives it back.
    let after = engine.release_idle_pool_memory();
    assert!(
        after >= 512 << 10,
        "the stack in use lost its pages to the release while suspended ({released} bytes released then, {after} after)"
    );
}
