//! `openwop:node-pack/clock`: the replayable clock.

use crate::component::bindings::clock::Host;
use crate::component::state::HostState;
use crate::sandbox::Loop;
use wop_core::capability::Capability;

impl Host for HostState {
    fn now_ms(&mut self) -> wasmtime::Result<u64> {
        self.sb
            .enter("clock", Some(Capability::Clock), 0, Loop::Outside)?;
        Ok(self.sb.clock.now_ms())
    }
}
