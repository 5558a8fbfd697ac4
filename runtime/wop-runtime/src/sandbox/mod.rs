//! The one sandbox core shared by every pack kind (components and ABI v1
//! core modules): the per-invocation [`Sandbox`] every store carries
//! (limits, limiter, bounded log, replayable clock and random, host-call
//! counts, the first host fault, the call meter), and the one execution
//! skeleton: [`arm`] a fresh store (limiter, call hook, fuel and yield),
//! run the pack kind's own call under the wall-clock deadline, then
//! [`Armed::finish`] (usage harvest, fault → [`classify`], bounded log →
//! events).
//!
//! ```text
//! let mut armed = sandbox::arm(engine, state, &spec)?;      // shared
//! let outcome = timeout(armed.deadline(), kind_specific(&mut armed.store)).await;
//! armed.finish(outcome)                                     // shared
//! ```

mod limiter;
mod meter;

pub(crate) use limiter::{Limiter, check_declared_tables, table_cap};
pub(crate) use meter::CallMeter;

use quanta::Instant;
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use wasmtime::{Engine, Store, Trap};
use wop_core::admission::Binding;
use wop_core::classify::{Classified, Fault, classify};
use wop_core::events::Event;
use wop_core::limits::Limits;
use wop_core::logbuf::{LogBuffer, SharedLog, Tap, with_log};
use wop_core::model::Usage;
use wop_core::replay::{ReplayClock, ReplayRng, Seed};

/// What every pack kind's store carries for one invocation.
pub(crate) struct Sandbox {
    /// The limits this invocation runs under.
    pub limits: Limits,
    /// Memory/table/instance caps, with what was observed.
    pub limiter: Limiter,
    /// The bounded log (log lines, stdio, audit events).
    pub log: SharedLog,
    /// Replayable random (seeded per run, node, attempt).
    pub rng: ReplayRng,
    /// Replayable clock.
    pub clock: ReplayClock,
    /// Host calls per interface.
    /// Calls per interface (a handful of entries: a linear scan beats a map).
    pub host_calls: Vec<(&'static str, u64)>,
    /// The first host-side fault (a trap follows).
    pub host_fault: Option<Fault>,
    /// When instantiation finished.
    pub instantiated_at: Option<Instant>,
    /// Per-host-call attribution and the loop count.
    pub meter: CallMeter,
    /// When the wall clock of this execution runs out (set by [`arm`]):
    /// every host call checks it on entry and on return.
    pub deadline: Option<Instant>,
    /// When the execution started (for the wall-clock fault).
    pub started: Option<Instant>,
    /// The same deadline on the OS's monotonic clock, and when the
    /// execution started on it: checked at least once per
    /// [`OS_CLOCK_CHECK_FUEL`] units of guest fuel, whatever the fast
    /// clock says (decision 0013).
    pub os_clock: Option<(std::time::Instant, std::time::Instant)>,
    /// Fuel left at (or below) which the hook reads the OS clock next.
    pub os_check_at: u64,
    /// Fuel owed for host work (bytes moved or parsed), taken from the
    /// guest's fuel when the host call returns.
    pub fuel_debt: u64,
    /// Record the per-host-call breakdown.
    pub breakdown: bool,
}

/// Fuel charged per byte a host call moves or parses on the guest's
/// behalf (roughly one guest instruction per byte copied or scanned).
pub(crate) const FUEL_PER_HOST_BYTE: u64 = 1;

/// Guest fuel between two reads of the OS clock by the call hook. Half the
/// yield interval, so that every fuel yield (a host transition) passes at
/// least one: a spinning guest is checked against the OS clock at every
/// yield, a guest calling the host often once per this much work.
pub(crate) const OS_CLOCK_CHECK_FUEL: u64 = crate::engine::FUEL_YIELD_INTERVAL / 2;

impl Sandbox {
    /// A fresh sandbox for `limits`, seeded by `seed`.
    pub(crate) fn new(limits: Limits, seed: &Seed) -> Self {
        Self {
            limits,
            limiter: Limiter::new(&limits),
            log: Arc::new(Mutex::new(LogBuffer::new(
                usize::try_from(limits.log_bytes).unwrap_or(usize::MAX),
                usize::try_from(limits.log_line_bytes).unwrap_or(usize::MAX),
            ))),
            rng: ReplayRng::new(seed.derive("openwop:random")),
            clock: ReplayClock::new(seed),
            host_calls: Vec::new(),
            host_fault: None,
            instantiated_at: None,
            meter: CallMeter::new(limits.fuel),
            deadline: None,
            started: None,
            os_clock: None,
            os_check_at: u64::MAX,
            fuel_debt: 0,
            breakdown: false,
        }
    }

    /// Charges fuel for `bytes` of host work done on the guest's behalf;
    /// it is taken when the host call returns.
    pub(crate) fn charge(&mut self, bytes: usize) {
        self.fuel_debt = self
            .fuel_debt
            .saturating_add((bytes as u64).saturating_mul(FUEL_PER_HOST_BYTE));
    }

    /// The wall-clock fault if the deadline has passed.
    /// The wall-clock fault, if `now` is past the deadline.
    fn past_deadline(&mut self, now: Instant) -> Option<wasmtime::Error> {
        let deadline = self.deadline?;
        if now < deadline {
            return None;
        }
        let elapsed = self
            .started
            .map_or(Duration::ZERO, |s| now.saturating_duration_since(s));
        Some(self.fault(Fault::WallClock {
            limit_ms: self.limits.wall_clock_ms,
            elapsed_ms: u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX),
        }))
    }

    /// The wall-clock fault if the deadline has passed on the OS's
    /// monotonic clock, read only when `fuel_left` has fallen to the next
    /// check point (at most once per [`OS_CLOCK_CHECK_FUEL`] of guest
    /// work). The fast clock alone is not trusted to end an execution:
    /// a TSC that lags on this CPU reads as stopped (decision 0013).
    fn past_os_deadline(&mut self, fuel_left: u64) -> Option<wasmtime::Error> {
        if fuel_left > self.os_check_at {
            return None;
        }
        self.os_check_at = fuel_left.saturating_sub(OS_CLOCK_CHECK_FUEL);
        let (started, deadline) = self.os_clock?;
        let now = std::time::Instant::now();
        if now < deadline {
            return None;
        }
        let elapsed = now.saturating_duration_since(started);
        Some(self.fault(Fault::WallClock {
            limit_ms: self.limits.wall_clock_ms,
            elapsed_ms: u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX),
        }))
    }

    /// Counts a host call of `iface` and labels it for the breakdown.
    pub(crate) fn count(&mut self, iface: &'static str) {
        match self.host_calls.iter_mut().find(|(k, _)| *k == iface) {
            Some((_, n)) => *n += 1,
            None => self.host_calls.push((iface, 1)),
        }
        self.meter.open(iface);
    }

    /// Records a fault (the first one wins) and returns the trap to raise.
    pub(crate) fn fault(&mut self, fault: Fault) -> wasmtime::Error {
        let msg = match &fault {
            Fault::Trap { message, .. } => message.clone(),
            Fault::HostCap {
                kind,
                limit,
                observed,
            } => format!("host cap exceeded: {kind} {observed} > {limit}"),
            other => format!("{other:?}"),
        };
        if self.host_fault.is_none() {
            self.host_fault = Some(fault);
        }
        wasmtime::Error::msg(msg)
    }

    /// Records a host-cap breach and returns the trap to raise.
    pub(crate) fn host_cap(
        &mut self,
        kind: &'static str,
        limit: u64,
        observed: u64,
    ) -> wasmtime::Error {
        self.fault(Fault::HostCap {
            kind,
            limit,
            observed,
        })
    }

    /// Checks the size of data a pack passes into a host call.
    pub(crate) fn check_arg(&mut self, len: usize) -> wasmtime::Result<()> {
        let cap = self.limits.host_arg_bytes;
        if len as u64 > cap {
            return Err(self.host_cap("host-arg-bytes", cap, len as u64));
        }
        Ok(())
    }
}

/// Store data of a pack kind: it carries a [`Sandbox`] and may add usage
/// of its own.
pub(crate) trait SandboxState: Send + 'static {
    /// The shared sandbox.
    fn sandbox(&self) -> &Sandbox;
    /// The shared sandbox, mutably.
    fn sandbox_mut(&mut self) -> &mut Sandbox;
    /// Adds what this pack kind counted to the usage record.
    fn harvest(&self, _usage: &mut Usage) {}
    /// Error codes the runtime handed the pack during the invocation (a
    /// pack may relay these; see `wop_core::outcome`).
    fn verdicts(&self) -> BTreeSet<String> {
        BTreeSet::new()
    }
}

/// How to run one execution.
pub(crate) struct Spec<'a> {
    /// For `cap.breached.nodeId`.
    pub node_id: String,
    /// Which run-level limit binds fuel and the wall clock.
    pub binding: Binding,
    /// Record the per-host-call breakdown (installs the call hook).
    pub breakdown: bool,
    /// Counts instantiations (for operators and tests).
    pub instantiations: Option<&'a AtomicU64>,
    /// The trap kind of an error that is not a trap (bad canonical-ABI
    /// data for components, a failed instantiation for core modules).
    pub untyped: &'static str,
    /// The usage record to fill (attribution already set).
    pub usage: Usage,
    /// Receives the log's events as they are kept (live streaming).
    pub tap: Option<Tap>,
}

/// The result of one execution, before outcome interpretation.
pub(crate) struct Execution<R> {
    /// What the pack returned, or what stopped it.
    pub result: Result<R, Classified>,
    /// The bounded log's events plus the breach, if any.
    pub events: Vec<Event>,
    /// What it consumed.
    pub usage: Usage,
    /// Verdicts the runtime handed the pack (see [`SandboxState::verdicts`]).
    pub verdicts: BTreeSet<String>,
}

/// Interprets what a pack of either kind returned (the output cap, the
/// verdicts it may relay), recording the output's size in `usage` and any
/// breach in `events`.
pub(crate) fn interpret_return(
    ret: wop_core::outcome::PackReturn,
    output_cap: u64,
    may_suspend: bool,
    verdicts: &BTreeSet<String>,
    node_id: &str,
    usage: &mut Usage,
    events: &mut Vec<Event>,
) -> Result<wop_core::model::Outcome, wop_core::error::NodeError> {
    let (r, size) = wop_core::outcome::interpret(ret, output_cap, may_suspend, verdicts, node_id);
    usage.output_bytes = size;
    r.map_err(|c| {
        events.extend(c.breach);
        c.error
    })
}

/// A store ready to run: limiter, call hook and fuel installed.
pub(crate) struct Armed<'a, T: SandboxState> {
    /// The fresh store (dropped by [`Armed::finish`]).
    pub store: Store<T>,
    started: Instant,
    log: SharedLog,
    spec: Spec<'a>,
}

/// The execution of a sandbox that could not even be set up.
pub(crate) fn failed<R>(message: String, log: SharedLog, spec: Spec<'_>) -> Execution<R> {
    let c = classify(
        &Fault::Trap {
            kind: "host-setup".to_owned(),
            message,
        },
        &spec.node_id,
    );
    close(Err(c), log, spec.usage, Instant::now())
}

/// Arms a fresh store for `state` on `engine`: the limiter, the call hook
/// (when the breakdown is on), fuel and the yield interval that lets the
/// wall-clock deadline interrupt the guest (decision 0001).
pub(crate) fn arm<'a, T: SandboxState, R>(
    engine: &Engine,
    state: T,
    mut spec: Spec<'a>,
) -> Result<Armed<'a, T>, Box<Execution<R>>> {
    let started = Instant::now();
    let limits = state.sandbox().limits;
    let log = state.sandbox().log.clone();
    if let Some(tap) = spec.tap.take() {
        with_log(&log, |l| l.set_tap(Some(tap)));
    }
    spec.usage.fuel_limit = limits.fuel;
    spec.usage.memory_limit_bytes = limits.memory_bytes;
    let mut store = Store::new(engine, state);
    store.limiter(|s| &mut s.sandbox_mut().limiter);
    // Every host transition passes the call hook: it enforces the wall
    // clock at host-call entry and return (host work the guest does not
    // burn fuel for cannot outrun the deadline), takes the fuel owed for
    // host work, and — when the breakdown is on — attributes fuel and wall
    // time to host calls (our host functions label the ones that are
    // theirs). Always installed: the deadline check costs one clock read
    // per host transition; the breakdown (≈ 190 ns per host call,
    // docs/decisions/0005) stays switchable (`[metering]
    // hostCallBreakdown = false`).
    {
        let sb = store.data_mut().sandbox_mut();
        let wall = Duration::from_millis(limits.wall_clock_ms);
        sb.started = Some(started);
        sb.deadline = started.checked_add(wall);
        let os_now = std::time::Instant::now();
        sb.os_clock = os_now.checked_add(wall).map(|d| (os_now, d));
        sb.os_check_at = limits.fuel.saturating_sub(OS_CLOCK_CHECK_FUEL);
        sb.breakdown = spec.breakdown;
    }
    store.call_hook(|mut ctx, hook| {
        match hook {
            wasmtime::CallHook::CallingHost => {
                // One fast clock read serves the deadline and the
                // breakdown; the OS clock is read once per check interval.
                let now = Instant::now();
                let fuel = ctx.get_fuel().unwrap_or(0);
                let sb = ctx.data_mut().sandbox_mut();
                if let Some(e) = sb.past_deadline(now) {
                    return Err(e);
                }
                if let Some(e) = sb.past_os_deadline(fuel) {
                    return Err(e);
                }
                if sb.breakdown {
                    sb.meter.pending = Some((fuel, now));
                }
            }
            wasmtime::CallHook::ReturningFromHost => {
                let debt = std::mem::take(&mut ctx.data_mut().sandbox_mut().fuel_debt);
                let mut fuel = ctx.get_fuel().unwrap_or(0);
                if debt > 0 {
                    // Out of fuel: the guest traps on its next instruction
                    // (classified as the fuel limit).
                    fuel = fuel.saturating_sub(debt);
                    ctx.set_fuel(fuel)?;
                }
                let sb = ctx.data_mut().sandbox_mut();
                let now = Instant::now();
                if sb.breakdown {
                    sb.meter.close(now);
                }
                // After a fuel yield or an async host call the task may
                // have waited: both clocks are asked again.
                if let Some(e) = sb.past_deadline(now) {
                    return Err(e);
                }
                if let Some(e) = sb.past_os_deadline(fuel) {
                    return Err(e);
                }
            }
            _ => {}
        }
        Ok(())
    });
    let fueled = store
        .set_fuel(limits.fuel)
        .and_then(|()| store.fuel_async_yield_interval(Some(crate::engine::FUEL_YIELD_INTERVAL)));
    if let Err(e) = fueled {
        drop(store);
        return Err(Box::new(failed(
            format!("cannot configure fuel: {e:#}"),
            log,
            spec,
        )));
    }
    if let Some(n) = spec.instantiations {
        n.fetch_add(1, Ordering::Relaxed);
    }
    Ok(Armed {
        store,
        started,
        log,
        spec,
    })
}

/// Marks the end of instantiation (for `instantiateTimeUs`).
pub(crate) fn instantiated<T: SandboxState>(store: &mut Store<T>) {
    store.data_mut().sandbox_mut().instantiated_at = Some(Instant::now());
}

impl<T: SandboxState> Armed<'_, T> {
    /// The wall-clock deadline of the execution.
    pub(crate) fn deadline(&self) -> Duration {
        Duration::from_millis(self.store.data().sandbox().limits.wall_clock_ms)
    }

    /// The end of every execution: harvests usage, classifies a failure
    /// (re-read through the binding), drops the store and closes the log.
    pub(crate) fn finish<R>(
        self,
        outcome: Result<wasmtime::Result<R>, tokio::time::error::Elapsed>,
    ) -> Execution<R> {
        let Armed {
            store,
            started,
            log,
            spec,
        } = self;
        let elapsed = started.elapsed();
        let mut usage = spec.usage;
        let data = store.data();
        let sb = data.sandbox();
        let limits = sb.limits;
        let remaining = store.get_fuel().unwrap_or(0);
        usage.fuel_consumed = limits.fuel.saturating_sub(remaining);
        usage.host_call_breakdown = sb.meter.records();
        usage.fuel_after_last_call = sb.meter.mark.saturating_sub(remaining);
        usage.loop_iterations = sb.meter.loop_iterations;
        usage.peak_memory_bytes = sb.limiter.memory_peak;
        usage.peak_table_elements = sb.limiter.table_peak;
        usage.instantiate_time_us = sb
            .instantiated_at
            .map_or(0, |t| micros(t.saturating_duration_since(started)));
        usage.host_calls = sb
            .host_calls
            .iter()
            .map(|(k, v)| ((*k).to_owned(), *v))
            .collect();
        data.harvest(&mut usage);
        let verdicts = data.verdicts();
        let result = match outcome {
            Err(_elapsed) => Err(classify(
                &spec.binding.apply(Fault::WallClock {
                    limit_ms: limits.wall_clock_ms,
                    elapsed_ms: u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX),
                }),
                &spec.node_id,
            )),
            Ok(Ok(r)) => Ok(r),
            Ok(Err(e)) => {
                let fault = fault_from(&e, sb, usage.fuel_consumed, spec.untyped);
                Err(classify(&spec.binding.apply(fault), &spec.node_id))
            }
        };
        drop(store);
        let mut exec = close(result, log, usage, started);
        exec.verdicts = verdicts;
        exec
    }
}

/// Takes the bounded log (events, with the truncation marker), appends the
/// `cap.breached` of a classified failure, fills in log bytes and wall time.
fn close<R>(
    result: Result<R, Classified>,
    log: SharedLog,
    mut usage: Usage,
    started: Instant,
) -> Execution<R> {
    let buf = match Arc::try_unwrap(log) {
        Ok(m) => m.into_inner().unwrap_or_else(|p| p.into_inner()),
        // Still shared (should not happen once the store is dropped):
        // take a snapshot by swapping in an empty buffer.
        Err(shared) => with_log(&shared, |l| std::mem::replace(l, LogBuffer::new(0, 1))),
    };
    usage.log_bytes = buf.kept_bytes() as u64;
    usage.log_bytes_dropped = buf.dropped_bytes();
    let mut events = buf.finish();
    if let Err(c) = &result
        && let Some(b) = &c.breach
    {
        events.push(b.clone());
    }
    usage.wall_time_us = micros(started.elapsed());
    Execution {
        result,
        events,
        usage,
        verdicts: BTreeSet::new(),
    }
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

/// Turns a wasmtime error into a [`Fault`]: the limiter's and the host's
/// own records first (they know what was attempted), then the typed trap.
fn fault_from(e: &wasmtime::Error, sb: &Sandbox, consumed: u64, untyped: &str) -> Fault {
    if let Some(f) = &sb.limiter.breach {
        return f.clone();
    }
    if let Some(f) = &sb.host_fault {
        return f.clone();
    }
    // A full resource table is the `resourceEntries` limit (WASI's host
    // functions raise it as an error, not a trap).
    if matches!(
        e.downcast_ref::<wasmtime::component::ResourceTableError>(),
        Some(wasmtime::component::ResourceTableError::Full)
    ) {
        return Fault::HostCap {
            kind: "resource-entries",
            limit: sb.limits.resource_entries,
            observed: sb.limits.resource_entries.saturating_add(1),
        };
    }
    match e.downcast_ref::<Trap>() {
        Some(Trap::OutOfFuel) => Fault::Fuel {
            limit: sb.limits.fuel,
            consumed,
        },
        Some(Trap::StackOverflow) => Fault::StackOverflow,
        Some(Trap::MemoryOutOfBounds) | Some(Trap::HeapMisaligned) => Fault::OutOfBounds,
        Some(t) => Fault::Trap {
            kind: trap_kind(*t).to_owned(),
            message: t.to_string(),
        },
        None => Fault::Trap {
            kind: untyped.to_owned(),
            message: format!("{e:#}"),
        },
    }
}

fn trap_kind(t: Trap) -> &'static str {
    match t {
        Trap::UnreachableCodeReached => "unreachable",
        Trap::IntegerDivisionByZero => "integer-division-by-zero",
        Trap::IntegerOverflow => "integer-overflow",
        Trap::BadConversionToInteger => "bad-conversion-to-integer",
        Trap::IndirectCallToNull => "indirect-call-to-null",
        Trap::BadSignature => "bad-signature",
        Trap::TableOutOfBounds => "table-out-of-bounds",
        Trap::CannotEnterComponent => "cannot-enter-component",
        _ => "trap",
    }
}
