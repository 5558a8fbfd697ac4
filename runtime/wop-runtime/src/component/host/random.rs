//! `openwop:node-pack/random`: the seeded random stream.

use crate::component::bindings::random::Host;
use crate::component::state::HostState;

/// Largest single request; above it the call traps (`host-random-bytes`).
pub(crate) const MAX_FILL: u32 = 65_536;

impl Host for HostState {
    fn fill(&mut self, len: u32) -> wasmtime::Result<Vec<u8>> {
        self.count("random");
        if len > MAX_FILL {
            return Err(self.host_cap("random-bytes", MAX_FILL.into(), len.into()));
        }
        let mut out = vec![0u8; len as usize];
        self.sb.rng.fill(&mut out);
        Ok(out)
    }
}
