//! `openwop:node-pack/random`: the seeded random stream.

use crate::component::bindings::random::Host;
use crate::component::state::HostState;
use crate::sandbox::Loop;
use wop_core::breach::BreachKind;
use wop_core::capability::Capability;

/// Largest single request; above it the call traps (`host-random-bytes`).
pub(crate) const MAX_FILL: u32 = 65_536;

impl Host for HostState {
    fn fill(&mut self, len: u32) -> wasmtime::Result<Vec<u8>> {
        self.sb
            .enter("random", Some(Capability::Random), 0, Loop::Outside)?;
        if len > MAX_FILL {
            return Err(self
                .sb
                .host_cap(BreachKind::RandomBytes, MAX_FILL.into(), len.into()));
        }
        let mut out = vec![0u8; len as usize];
        self.sb.rng().fill(&mut out);
        Ok(out)
    }
}
