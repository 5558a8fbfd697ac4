//! Measures the two ways to enforce a wall clock on guest code, for
//! `docs/decisions/0001-wall-clock.md`:
//!
//! - **fuel-yield**: fuel metering (needed anyway, for deterministic
//!   metering) + `fuel_async_yield_interval` + a tokio timeout;
//! - **epoch**: epoch interruption with a 1 ms ticker thread, in addition
//!   to fuel (fuel stays on: it is our metering).
//!
//! Reports (1) the slowdown of CPU kernels vs. no instrumentation, as
//! ratios measured in the same run, and (2) how long after the deadline
//! a tight `loop br 0` is actually stopped.
//!
//! Run: `cargo run --release -p wop-runtime --example wall_clock_strategies`
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::time::{Duration, Instant};
use wasmtime::{Config, Engine, Instance, Module, Store};

const KERNELS: &str = r#"
(module
  (func $fib (export "fib") (param i32) (result i32)
    (if (result i32) (i32.lt_u (local.get 0) (i32.const 2))
      (then (local.get 0))
      (else (i32.add (call $fib (i32.sub (local.get 0) (i32.const 1)))
                     (call $fib (i32.sub (local.get 0) (i32.const 2)))))))
  (func (export "collatz") (param i32) (result i32)
    (local $n i64) (local $steps i32) (local $i i32)
    (loop $outer
      (local.set $n (i64.extend_i32_u (i32.add (local.get $i) (i32.const 1))))
      (block $done (loop $l
        (br_if $done (i64.le_u (local.get $n) (i64.const 1)))
        (local.set $n (if (result i64) (i64.eqz (i64.and (local.get $n) (i64.const 1)))
          (then (i64.shr_u (local.get $n) (i64.const 1)))
          (else (i64.add (i64.mul (local.get $n) (i64.const 3)) (i64.const 1)))))
        (local.set $steps (i32.add (local.get $steps) (i32.const 1)))
        (br $l)))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br_if $outer (i32.lt_u (local.get $i) (local.get 0))))
    (local.get $steps))
  (func (export "spin") (param i32) (result i32)
    (loop $l (br $l))
    (i32.const 0)))
"#;

#[derive(Clone, Copy, Debug, PartialEq)]
enum Mode {
    Bare,
    FuelYield,
    Epoch,
}

fn engine(mode: Mode) -> Engine {
    let mut c = Config::new();
    c.consume_fuel(mode != Mode::Bare);
    c.epoch_interruption(mode == Mode::Epoch);
    Engine::new(&c).unwrap()
}

async fn call(
    engine: &Engine,
    module: &Module,
    mode: Mode,
    func: &str,
    arg: i32,
    deadline: Duration,
) -> (Result<i32, String>, Duration) {
    let mut store = Store::new(engine, ());
    if mode != Mode::Bare {
        store.set_fuel(u64::MAX / 2).unwrap();
    }
    if mode == Mode::FuelYield {
        store.fuel_async_yield_interval(Some(100_000)).unwrap();
    }
    if mode == Mode::Epoch {
        store.set_epoch_deadline(deadline.as_millis() as u64);
        store.epoch_deadline_trap();
    }
    let start = Instant::now();
    let fut = async {
        let inst = Instance::new_async(&mut store, module, &[]).await?;
        let f = inst.get_typed_func::<i32, i32>(&mut store, func)?;
        f.call_async(&mut store, arg).await
    };
    let r = match mode {
        Mode::FuelYield => match tokio::time::timeout(deadline, fut).await {
            Ok(r) => r.map_err(|e| format!("{e}")),
            Err(_) => Err("deadline".to_owned()),
        },
        _ => fut.await.map_err(|e| format!("{e}")),
    };
    (r, start.elapsed())
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let wasm = wat::parse_str(KERNELS).unwrap();
    let modes = [Mode::Bare, Mode::FuelYield, Mode::Epoch];
    let engines: Vec<(Mode, Engine, Module)> = modes
        .iter()
        .map(|&m| {
            let e = engine(m);
            let module = Module::new(&e, &wasm).unwrap();
            (m, e, module)
        })
        .collect();
    // The epoch ticker: 1 ms per tick.
    let ticker_engine = engines[2].1.clone();
    std::thread::spawn(move || {
        loop {
            std::thread::sleep(Duration::from_millis(1));
            ticker_engine.increment_epoch();
        }
    });

    println!("## CPU kernels: median of 7 runs, ratio vs bare");
    println!("| kernel | bare | fuel+yield | epoch(+fuel) |");
    println!("|---|---|---|---|");
    for (func, arg) in [("fib", 27), ("collatz", 300_000)] {
        let mut row = Vec::new();
        for (mode, e, m) in &engines {
            let mut times = Vec::new();
            for _ in 0..7 {
                let (r, t) = call(e, m, *mode, func, arg, Duration::from_secs(600)).await;
                r.unwrap();
                times.push(t);
            }
            row.push(median(times));
        }
        let base = row[0].as_secs_f64();
        println!(
            "| {func}({arg}) | {:.1} ms | {:.2}× | {:.2}× |",
            base * 1e3,
            row[1].as_secs_f64() / base,
            row[2].as_secs_f64() / base
        );
    }

    println!("\n## Stop latency for `loop br 0` with a 100 ms deadline (median of 7)");
    for (mode, e, m) in &engines[1..] {
        let mut over = Vec::new();
        for _ in 0..7 {
            let (r, t) = call(e, m, *mode, "spin", 0, Duration::from_millis(100)).await;
            assert!(r.is_err());
            over.push(t.saturating_sub(Duration::from_millis(100)));
        }
        println!(
            "- {mode:?}: stopped {:.2} ms after the deadline",
            median(over).as_secs_f64() * 1e3
        );
    }
}
