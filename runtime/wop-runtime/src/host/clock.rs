//! `openwop:node-pack/clock`: the replayable clock.

use crate::bindings::clock::Host;
use crate::state::HostState;

impl Host for HostState {
    fn now_ms(&mut self) -> wasmtime::Result<u64> {
        self.count("clock");
        Ok(self.sb.clock.now_ms())
    }
}
