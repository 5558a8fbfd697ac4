//! The one sandbox core shared by every pack kind (components and ABI v1
//! core modules): the per-invocation [`Sandbox`] every store carries
//! (limits, limiter, bounded log, replayable clock and random, host-call
//! counts, the first host fault, the call meter), and the one execution
//! skeleton: [`arm`] a fresh store (limiter, call hook, fuel and yield),
//! run the pack kind's own call under the wall-clock deadline ([`within`]:
//! tokio's timeout, fuel yields resumed in place for a slice), then
//! [`Armed::finish`] (usage harvest, fault → [`classify`], bounded log →
//! events).
//!
//! ```text
//! let mut armed = sandbox::arm(engine, state, &env, untyped)?;   // shared
//! let outcome = within(armed.deadline(), kind_specific(&mut armed.store)).await;
//! armed.finish(outcome)                                          // shared
//! ```

mod arm;
mod entry;
mod limiter;
mod meter;
mod slice;

pub(crate) use arm::{Execution, arm, failed, instantiated};
pub(crate) use entry::Loop;
pub(crate) use limiter::{Limiter, check_declared_tables, table_cap};
pub(crate) use meter::CallMeter;
pub(crate) use slice::within;

use crate::env::RunEnv;
use quanta::Instant;
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use wop_core::breach::BreachKind;
use wop_core::capability::Capability;
use wop_core::classify::Fault;
use wop_core::limits::Limits;
use wop_core::logbuf::{LogBuffer, SharedLog};
use wop_core::model::Usage;
use wop_core::replay::{ReplayClock, ReplayRng, Seed};

/// The capabilities an execution may use: a set of bits, copied into
/// every store (no allocation per invocation).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Grants(u16);

impl Grants {
    /// The set holding `caps`.
    pub(crate) fn of<'a>(caps: impl IntoIterator<Item = &'a Capability>) -> Self {
        Self(caps.into_iter().fold(0, |bits, c| bits | Self::bit(*c)))
    }

    fn bit(c: Capability) -> u16 {
        1 << (c as u16)
    }

    /// Whether `cap` is in the set.
    pub(crate) fn contains(self, cap: Capability) -> bool {
        self.0 & Self::bit(cap) != 0
    }
}

/// What every pack kind's store carries for one invocation.
pub(crate) struct Sandbox {
    /// The limits this invocation runs under.
    pub limits: Limits,
    /// Memory/table/instance caps, with what was observed.
    pub limiter: Limiter,
    /// The bounded log (log lines, stdio, audit events).
    pub log: SharedLog,
    /// The invocation's seed (per run, node, attempt).
    seed: Seed,
    /// Replayable random, derived from `seed` on first use ([`Sandbox::rng`]).
    rng: Option<ReplayRng>,
    /// Replayable clock.
    pub clock: ReplayClock,
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
    /// Fuel owed for host work (bytes moved or parsed) since the
    /// execution started, counted against the guest's fuel at every host
    /// transition ([`Sandbox::settle_fuel`]).
    pub fuel_debt: u64,
    /// Record the per-host-call breakdown.
    pub breakdown: bool,
    /// The capabilities host calls may use.
    pub grants: Grants,
    /// `maxLoopIterations`: rounds of the pack's own agent loop.
    pub max_loop_iterations: Option<u32>,
}

/// Fuel charged per byte a host call moves or parses on the guest's
/// behalf (roughly one guest instruction per byte copied or scanned).
pub const FUEL_PER_HOST_BYTE: u64 = 1;

/// Guest fuel between two reads of the OS clock by the call hook. Half the
/// yield interval, so that every fuel yield (a host transition) passes at
/// least one: a spinning guest is checked against the OS clock at every
/// yield, a guest calling the host often once per this much work.
pub(crate) const OS_CLOCK_CHECK_FUEL: u64 = crate::engine::FUEL_YIELD_INTERVAL / 2;

impl Sandbox {
    /// A fresh sandbox for one execution in `env`, seeded by `seed` (the
    /// run's: [`RunEnv::seed`]) and allowed `grants`.
    pub(crate) fn new(env: &RunEnv<'_>, seed: &Seed, grants: Grants) -> Self {
        let limits = env.limits;
        let mut log = LogBuffer::new(
            usize::try_from(limits.log_bytes).unwrap_or(usize::MAX),
            usize::try_from(limits.log_line_bytes).unwrap_or(usize::MAX),
        );
        // Every event of a credentialed invocation, whatever adds it.
        log.set_redact(env.credentials.clone());
        Self {
            limits,
            limiter: Limiter::new(&limits),
            log: Arc::new(Mutex::new(log)),
            seed: *seed,
            rng: None,
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
            breakdown: env.breakdown,
            grants,
            max_loop_iterations: env.bounds.max_loop_iterations,
        }
    }

    /// The replayable random stream of `openwop:random` (and the ABI's
    /// `random`), derived from the seed on the pack's first use: most
    /// invocations never ask, and the derivation is a SHA-256.
    pub(crate) fn rng(&mut self) -> &mut ReplayRng {
        let seed = &self.seed;
        self.rng
            .get_or_insert_with(|| ReplayRng::new(seed.derive("openwop:random")))
    }

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
        kind: BreachKind,
        limit: u64,
        observed: u64,
    ) -> wasmtime::Error {
        self.fault(Fault::HostCap {
            kind,
            limit,
            observed,
        })
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
