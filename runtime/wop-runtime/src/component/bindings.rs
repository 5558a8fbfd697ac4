//! Host bindings generated from `wit/` (package `openwop:node-pack@0.1.0`).
#![allow(missing_docs)]

wasmtime::component::bindgen!({
    path: "../../wit",
    world: "node-pack",
    imports: {
        "openwop:node-pack/tools": async | trappable,
        "openwop:node-pack/http": async | trappable,
        "openwop:node-pack/mcp": async | trappable,
        default: trappable,
    },
    exports: { default: async },
});

pub use exports::openwop::node_pack::node;
pub use openwop::node_pack::{clock, http, log, mcp, random, tools, types};
