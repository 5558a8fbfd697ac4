//! `openwop:node-pack/clock`: the replayable clock.

use crate::component::bindings::clock::Host;
use crate::component::state::HostState;

impl Host for HostState {
    fn now_ms(&mut self) -> wasmtime::Result<u64> {
        self.count("clock");
        Ok(self.sb.clock.now_ms())
    }
}
