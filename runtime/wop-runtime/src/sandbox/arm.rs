//! The one execution skeleton of every pack kind: [`arm`] a fresh store
//! (limiter, call hook, fuel and yield), run the kind's own call under
//! the wall-clock deadline, then [`Armed::finish`] (usage harvest, fault →
//! [`classify`], bounded log → events) and [`Execution::report`] (the
//! returned outcome interpreted the same way for both kinds).

use super::{OS_CLOCK_CHECK_FUEL, Sandbox, SandboxState};
use crate::env::RunEnv;
use quanta::Instant;
use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;
use wasmtime::{AsContext, Engine, Store, Trap};
use wop_core::admission::Binding;
use wop_core::breach::BreachKind;
use wop_core::classify::{Classified, Fault, classify};
use wop_core::error::NodeError;
use wop_core::events::Event;
use wop_core::logbuf::{LogBuffer, SharedLog, with_log};
use wop_core::model::{InvocationReport, Usage};
use wop_core::outcome::PackReturn;

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

impl<R> Execution<R> {
    /// The report of a node invocation: what the pack returned, through
    /// `returned` (the pack kind's value → the protocol's [`PackReturn`],
    /// and whether it may suspend), interpreted against the output cap and
    /// the verdicts it may relay; or what stopped it.
    pub(crate) fn report(
        self,
        env: &RunEnv<'_>,
        returned: impl FnOnce(R) -> Result<(PackReturn, bool), NodeError>,
    ) -> InvocationReport {
        let Execution {
            result,
            mut events,
            mut usage,
            verdicts,
        } = self;
        let outcome =
            result
                .map_err(|c| c.error)
                .and_then(returned)
                .and_then(|(ret, may_suspend)| {
                    let node_id = &env.context.node_id;
                    let cap = env.limits.output_bytes;
                    let (r, size) =
                        wop_core::outcome::interpret(ret, cap, may_suspend, &verdicts, node_id);
                    usage.output_bytes = size;
                    r.map_err(|c| {
                        events.extend(c.breach);
                        c.error
                    })
                });
        InvocationReport {
            outcome,
            events,
            usage,
        }
    }
}

/// A store ready to run: limiter, call hook and fuel installed.
pub(crate) struct Armed<T: SandboxState> {
    /// The fresh store (dropped by [`Armed::finish`]).
    pub store: Store<T>,
    started: Instant,
    log: SharedLog,
    /// For `cap.breached.nodeId`.
    node_id: String,
    /// Which run-level limit binds fuel and the wall clock.
    binding: Binding,
    /// The trap kind of an error that is not a trap (bad canonical-ABI
    /// data for components, a failed instantiation for core modules).
    untyped: &'static str,
    /// The usage record to fill (attribution already set).
    usage: Usage,
}

/// The usage record of an execution in `env`, attributed to its run, node
/// and node type, with its limits.
fn attributed(env: &RunEnv<'_>) -> Usage {
    let c = env.context;
    Usage {
        tenant_id: c.tenant_id.clone(),
        run_id: c.run_id.clone(),
        node_id: c.node_id.clone(),
        attempt: c.attempt,
        type_id: env.type_id.to_owned(),
        fuel_limit: env.limits.fuel,
        memory_limit_bytes: env.limits.memory_bytes,
        ..Default::default()
    }
}

/// The execution of a sandbox that could not even be set up.
pub(crate) fn failed<R>(message: String, log: SharedLog, env: &RunEnv<'_>) -> Execution<R> {
    let c = classify(
        &Fault::Trap {
            kind: "host-setup".to_owned(),
            message,
        },
        &env.context.node_id,
    );
    close(Err(c), log, attributed(env), Instant::now())
}

/// Arms a fresh store for `state` on `engine`: the limiter, the call hook
/// (when the breakdown is on), fuel and the yield interval that lets the
/// wall-clock deadline interrupt the guest (decision 0001). `untyped` is
/// the trap kind of an error that is not a trap.
pub(crate) fn arm<T: SandboxState, R>(
    engine: &Engine,
    state: T,
    env: &RunEnv<'_>,
    untyped: &'static str,
) -> Result<Armed<T>, Box<Execution<R>>> {
    let started = Instant::now();
    let limits = state.sandbox().limits;
    let log = state.sandbox().log.clone();
    if let Some(tap) = env.tap.clone() {
        with_log(&log, |l| l.set_tap(Some(tap)));
    }
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
    }
    store.call_hook(|mut ctx, hook| {
        match hook {
            wasmtime::CallHook::CallingHost => {
                // One fast clock read serves the deadline and the
                // breakdown; the OS clock is read once per check interval.
                let now = Instant::now();
                let fuel = ctx.as_context().get_fuel().unwrap_or(0);
                let sb = ctx.data_mut().sandbox_mut();
                let fuel = sb.settle_fuel(fuel)?;
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
                let fuel = ctx.as_context().get_fuel().unwrap_or(0);
                let sb = ctx.data_mut().sandbox_mut();
                let fuel = sb.settle_fuel(fuel)?;
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
            env,
        )));
    }
    if let Some(n) = env.instantiations {
        n.fetch_add(1, Ordering::Relaxed);
    }
    Ok(Armed {
        store,
        started,
        log,
        node_id: env.context.node_id.clone(),
        binding: env.binding,
        untyped,
        usage: attributed(env),
    })
}

/// Marks the end of instantiation (for `instantiateTimeUs`).
pub(crate) fn instantiated<T: SandboxState>(store: &mut Store<T>) {
    store.data_mut().sandbox_mut().instantiated_at = Some(Instant::now());
}

impl<T: SandboxState> Armed<T> {
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
            node_id,
            binding,
            untyped,
            mut usage,
        } = self;
        let elapsed = started.elapsed();
        let data = store.data();
        let sb = data.sandbox();
        let limits = sb.limits;
        // Host work owed and not yet met by a transition counts as spent.
        let remaining = store.get_fuel().unwrap_or(0).saturating_sub(sb.fuel_owed());
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
                &binding.apply(Fault::WallClock {
                    limit_ms: limits.wall_clock_ms,
                    elapsed_ms: u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX),
                }),
                &node_id,
            )),
            Ok(Ok(r)) => Ok(r),
            Ok(Err(e)) => {
                let fault = fault_from(&e, sb, usage.fuel_consumed, untyped);
                Err(classify(&binding.apply(fault), &node_id))
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
            kind: BreachKind::ResourceEntries,
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
