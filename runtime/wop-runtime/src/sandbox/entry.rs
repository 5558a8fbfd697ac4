//! The one entry of every host call, whatever the pack kind or the
//! interface: [`Sandbox::enter`] counts the call, charges fuel for the
//! bytes it copied out of the guest, requires the capability, checks the
//! argument size and ticks the loop bound, always in that order, so none
//! of the five can be skipped or reordered by one adapter.

use super::{FUEL_PER_HOST_BYTE, Sandbox};
use wop_core::breach::BreachKind;
use wop_core::capability::Capability;
use wop_core::classify::Fault;

/// Whether a host call is one round of the pack's own agent loop
/// (`maxLoopIterations`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Loop {
    /// A tool call, a fetch, an MCP tool call.
    Round,
    /// Anything else (logging, the clock, listings, reads, stdio).
    Outside,
}

impl Sandbox {
    /// Enters a host call of `iface`: counts it (and labels it for the
    /// breakdown), charges fuel for the `arg_bytes` it copied out of the
    /// guest, requires `capability` (`None`: the interface is linked with
    /// no authority to guard, like WASI streams), checks `arg_bytes`
    /// against `hostArgBytes`, and ticks the loop bound for a
    /// [`Loop::Round`]. A refusal is the trap to raise.
    pub(crate) fn enter(
        &mut self,
        iface: &'static str,
        capability: Option<Capability>,
        arg_bytes: usize,
        round: Loop,
    ) -> wasmtime::Result<()> {
        self.count(iface);
        self.charge(arg_bytes);
        if let Some(cap) = capability {
            self.require(cap)?;
        }
        self.check_arg(arg_bytes)?;
        if round == Loop::Round {
            self.loop_tick()?;
        }
        Ok(())
    }

    /// Charges fuel for `bytes` of host work done on the guest's behalf;
    /// it is counted against the guest's fuel at every host transition
    /// ([`Sandbox::settle_fuel`]).
    pub(crate) fn charge(&mut self, bytes: usize) {
        self.fuel_debt = self
            .fuel_debt
            .saturating_add((bytes as u64).saturating_mul(FUEL_PER_HOST_BYTE));
    }

    /// The fuel left once host work is paid for, given the store's own
    /// `fuel` count; the fuel limit's fault when the host work owed has
    /// used it up. Called by the call hook at every host transition:
    /// since wasmtime 49 the hook may read the store's fuel but not set
    /// it (decision 0025), so the debt is carried and compared instead of
    /// subtracted. The guest's own instructions still never exceed the
    /// limit (wasmtime traps them); host work is judged at the next
    /// transition.
    pub(crate) fn settle_fuel(&mut self, fuel: u64) -> wasmtime::Result<u64> {
        if self.fuel_debt > 0 && self.fuel_debt >= fuel {
            let limit = self.limits.fuel;
            return Err(self.fault(Fault::Fuel {
                limit,
                consumed: limit,
            }));
        }
        Ok(fuel - self.fuel_debt)
    }

    /// Fuel owed for host work so far (part of the fuel consumed).
    pub(crate) fn fuel_owed(&self) -> u64 {
        self.fuel_debt
    }

    /// Counts a host call of `iface` and labels it for the breakdown.
    fn count(&mut self, iface: &'static str) {
        match self.host_calls.iter_mut().find(|(k, _)| *k == iface) {
            Some((_, n)) => *n += 1,
            None => self.host_calls.push((iface, 1)),
        }
        self.meter.open(iface);
    }

    /// Checks the size of data a pack passes into a host call.
    pub(crate) fn check_arg(&mut self, len: usize) -> wasmtime::Result<()> {
        let cap = self.limits.host_arg_bytes;
        if len as u64 > cap {
            return Err(self.host_cap(BreachKind::HostArgBytes, cap, len as u64));
        }
        Ok(())
    }

    /// Fails closed if the execution lacks `cap`. The import gate already
    /// refuses such packs at load; this is the second line of defense.
    fn require(&mut self, cap: Capability) -> wasmtime::Result<()> {
        if self.grants.contains(cap) {
            return Ok(());
        }
        Err(self.fault(Fault::CapabilityDenied {
            capability: cap.as_str().to_owned(),
        }))
    }

    /// One round of the pack's own agent loop (a tools/http/mcp call).
    /// Past `maxLoopIterations` the invocation fails with
    /// `loop_limit_exceeded`.
    fn loop_tick(&mut self) -> wasmtime::Result<()> {
        self.meter.loop_iterations += 1;
        let observed = self.meter.loop_iterations;
        if let Some(limit) = self.max_loop_iterations
            && observed > u64::from(limit)
        {
            return Err(self.fault(Fault::LoopLimit {
                limit: u64::from(limit),
                observed,
            }));
        }
        Ok(())
    }
}
