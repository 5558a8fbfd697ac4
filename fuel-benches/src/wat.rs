//! The four CPU kernels as one hand-written core module
//! ([`KERNELS_WAT`], `src/kernels.wat`) under each metering configuration
//! ([`Metering`]), on a plain wasmtime engine: no component, no SDK, no JSON.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use wasmtime::{Config, Engine, Instance, Module, Result, Store, format_err};

/// The kernels module (WAT text).
pub const KERNELS_WAT: &str = include_str!("kernels.wat");

/// Fuel granted per call when fuel is on: the runtime's default limit.
pub const FUEL_LIMIT: u64 = 10_000_000_000;
/// The runtime's fuel yield interval (`wop-runtime/src/engine.rs`).
pub const FUEL_YIELD_INTERVAL: u64 = 100_000;
/// The epoch ticker's period.
pub const TICK: Duration = Duration::from_millis(1);
/// The wall clock of a normal (non-stop) call: the runtime's default, 30 s.
pub const WALL_CLOCK: Duration = Duration::from_secs(30);

/// A CPU kernel: its export name in the module and in the `kernels` pack.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kernel {
    /// `n` LCG steps (dependent chain, latency-bound).
    Loop,
    /// Total Collatz steps of `1..=n` (branchy loops).
    Collatz,
    /// Recursive `fib(n)` (call-heavy).
    Fib,
    /// Primes below `n` (memory-heavy).
    Sieve,
}

impl Kernel {
    /// Every kernel.
    pub const ALL: [Kernel; 4] = [Kernel::Loop, Kernel::Collatz, Kernel::Fib, Kernel::Sieve];

    /// The export (and pack input) name.
    pub fn name(self) -> &'static str {
        match self {
            Kernel::Loop => "loop",
            Kernel::Collatz => "collatz",
            Kernel::Fib => "fib",
            Kernel::Sieve => "sieve",
        }
    }

    /// The `n` the benchmarks use: a few milliseconds of bare execution.
    pub fn bench_n(self) -> u32 {
        match self {
            Kernel::Loop => 3_000_000,
            Kernel::Collatz => 30_000,
            Kernel::Fib => 27,
            Kernel::Sieve => 2_000_000,
        }
    }
}

/// How guest code is metered and interrupted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Metering {
    /// No fuel, no epochs: the baseline.
    Bare,
    /// Fuel metering only (no wall clock: only fuel exhaustion stops a loop).
    Fuel,
    /// Epoch interruption only, a 1 ms ticker thread, deadline in ticks.
    Epoch,
    /// Fuel and epoch interruption.
    FuelEpoch,
    /// What `wop-runtime` uses (decision 0001): fuel, a yield to the async
    /// executor every [`FUEL_YIELD_INTERVAL`] units and a `tokio` timeout.
    Runtime,
}

impl Metering {
    /// Every configuration, baseline first.
    pub const ALL: [Metering; 5] = [
        Metering::Bare,
        Metering::Fuel,
        Metering::Epoch,
        Metering::FuelEpoch,
        Metering::Runtime,
    ];

    /// A short name for benchmark ids.
    pub fn name(self) -> &'static str {
        match self {
            Metering::Bare => "bare",
            Metering::Fuel => "fuel",
            Metering::Epoch => "epoch",
            Metering::FuelEpoch => "fuel+epoch",
            Metering::Runtime => "runtime(fuel+yield+timeout)",
        }
    }

    fn fuel(self) -> bool {
        matches!(
            self,
            Metering::Fuel | Metering::FuelEpoch | Metering::Runtime
        )
    }

    fn epoch(self) -> bool {
        matches!(self, Metering::Epoch | Metering::FuelEpoch)
    }
}

/// Increments an engine's epoch every [`TICK`] until dropped.
struct Ticker {
    stop: Arc<AtomicBool>,
}

impl Ticker {
    fn start(engine: Engine) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        std::thread::spawn(move || {
            while !flag.load(Ordering::Relaxed) {
                std::thread::sleep(TICK);
                engine.increment_epoch();
            }
        });
        Ticker { stop }
    }
}

impl Drop for Ticker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// The outcome of one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Run {
    /// The kernel's result.
    pub result: i64,
    /// Fuel consumed (0 when fuel is off).
    pub fuel: u64,
}

/// The kernels module compiled for one [`Metering`] (its own engine, and a
/// ticker thread for the epoch configurations).
pub struct WatKernels {
    metering: Metering,
    engine: Engine,
    module: Module,
    _ticker: Option<Ticker>,
}

impl WatKernels {
    /// Builds the engine for `metering` and compiles the module. Every
    /// configuration shares wasmtime's defaults otherwise (on-demand
    /// allocation, Cranelift `speed`).
    pub fn new(metering: Metering) -> Result<Self> {
        let mut c = Config::new();
        c.consume_fuel(metering.fuel())
            .epoch_interruption(metering.epoch());
        let engine = Engine::new(&c)?;
        let module = Module::new(&engine, ::wat::parse_str(KERNELS_WAT)?)?;
        let ticker = metering.epoch().then(|| Ticker::start(engine.clone()));
        Ok(Self {
            metering,
            engine,
            module,
            _ticker: ticker,
        })
    }

    /// Calls `kernel(n)` in a fresh store and instance, with the default
    /// wall clock ([`WALL_CLOCK`]).
    pub async fn call(&self, kernel: Kernel, n: u32) -> Result<Run> {
        self.call_export(kernel.name(), n, WALL_CLOCK).await
    }

    /// Calls the export `name(n)` in a fresh store and instance; the wall
    /// clock `deadline` is enforced as the configuration enforces it (ticks
    /// for epochs, a timer for [`Metering::Runtime`], not at all otherwise).
    pub async fn call_export(&self, name: &str, n: u32, deadline: Duration) -> Result<Run> {
        let m = self.metering;
        let mut store = Store::new(&self.engine, ());
        if m.fuel() {
            store.set_fuel(FUEL_LIMIT)?;
        }
        if m == Metering::Runtime {
            store.fuel_async_yield_interval(Some(FUEL_YIELD_INTERVAL))?;
        }
        if m.epoch() {
            let ticks = (deadline.as_nanos() / TICK.as_nanos()).max(1);
            store.set_epoch_deadline(u64::try_from(ticks).unwrap_or(u64::MAX));
            store.epoch_deadline_trap();
        }
        let run = async {
            let instance = Instance::new_async(&mut store, &self.module, &[]).await?;
            let f = instance.get_typed_func::<i32, i64>(&mut store, name)?;
            #[allow(clippy::cast_possible_wrap)]
            f.call_async(&mut store, n as i32).await
        };
        let result = if m == Metering::Runtime {
            match tokio::time::timeout(deadline, run).await {
                Ok(r) => r?,
                Err(_) => return Err(format_err!("deadline exceeded")),
            }
        } else {
            run.await?
        };
        let fuel = if m.fuel() {
            FUEL_LIMIT - store.get_fuel()?
        } else {
            0
        };
        Ok(Run { result, fuel })
    }

    /// Runs `loop br 0` with a wall clock of `deadline`; returns how long
    /// after the deadline it was stopped, or an error if it was not (the
    /// fuel-only configuration has no wall clock).
    pub async fn stop_latency(&self, deadline: Duration) -> Result<Duration> {
        if !(self.metering.epoch() || self.metering == Metering::Runtime) {
            return Err(format_err!("{} has no wall clock", self.metering.name()));
        }
        let start = Instant::now();
        match self.call_export("spin", 0, deadline).await {
            Ok(_) => Err(format_err!("spin returned")),
            Err(_) => Ok(start.elapsed().saturating_sub(deadline)),
        }
    }
}
