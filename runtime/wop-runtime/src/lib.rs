//! # wop-runtime
//!
//! Runs untrusted OpenWOP node packs as sandboxed, metered WebAssembly.
//!
//! ## Core concepts
//!
//! **Pack.** A directory with an OpenWOP `pack.json` and a WebAssembly
//! component built against the `openwop:node-pack@0.1.0` world (see `wit/`).
//! Our manifest block `x-wop` holds the entry's sha256, the capabilities
//! the pack requests and optional limit requests.
//!
//! **Runtime.** [`Runtime`] loads packs ([`Runtime::load_pack`]) and runs node
//! invocations ([`Runtime::invoke`]). Loading validates the manifest,
//! verifies integrity, compiles once (cached in memory and on disk), and
//! refuses forbidden or ungranted imports *before any pack code runs*.
//!
//! **Invocation.** Every call gets a fresh store and instance, dropped
//! afterwards: no state survives between invocations. Fuel, a wall-clock
//! deadline and memory/table/instance caps bound it; host-side allocations
//! on the pack's behalf are bounded too. Whatever stops a pack is
//! classified into the protocol's codes ([`ErrorCode`]) with a
//! `cap.breached` event when a limit was hit.
//!
//! **Capabilities.** Deny by default. A pack gets `log`, `clock` and
//! `random` (replayable: seeded per run, node and attempt) plus what it
//! requests *and* the operator's [`Policy`] grants. WASI is linked with no
//! ambient authority: no environment, arguments, sockets or preopened
//! directories — except one directory an operator may grant, at `/data`.
//!
//! **Policy.** One TOML file ([`Policy`]): limit ceilings and per-pack
//! grants. Unknown keys are errors.

pub mod abi_v1;
mod cache;
mod capability_doc;
mod component;
mod engine;
mod env;
pub mod in_place;
mod kind;
mod registry;
mod runtime;
mod sandbox;

// The layers below, re-exported so that embedders need one dependency.
// Pure domain (`wop-core`):
pub use wop_core::{
    abi, admission, authz, budget, capability, classify, error, events, jcs, limits, logbuf,
    manifest, mcp_protocol, model, outcome, pack, packfile, policy, ratelimit, replay,
};
// Durable state (`wop-effects`):
pub use wop_effects::{effects, store};
// The gate (`wop-gate`):
pub use wop_gate as gate;

/// Tools: descriptors (`wop-core`), providers and the registry (`wop-gate`).
pub mod tools {
    pub use wop_gate::tools::*;
    pub use wop_gate::{http_tool, pack_tool};
}

/// safe-fetch: the pure checks (`wop-core`) and the engine and guarded
/// client (`wop-gate`).
pub mod egress {
    pub use wop_core::egress::*;
    pub use wop_gate::egress::{Egress, PackEgress};
    pub use wop_gate::egress::{Resolver, SystemResolver};
}

/// Metering: budget math (`wop-core`) and the persisted meter (`wop-effects`).
pub mod metering {
    pub use wop_core::budget::*;
    pub use wop_effects::meter::{
        MAX_ROLLUP_PAGE, Meter, MeterError, MeterOptions, RollupPage, USAGE_ENTRIES_IN_MEMORY,
        UsageCommit, UsageScope,
    };
}

pub use cache::CacheStats;
pub use capability_doc::CapabilityDocument;
pub use component::{GUEST_DATA_DIR, JsBuild, build_javascript_pack};
#[doc(hidden)]
pub use engine::{FUEL_YIELD_INTERVAL, engine_config};
pub use registry::PackSummary;
pub use runtime::{PacksDirLoad, Runtime, RuntimeConfig, RuntimeStats};
pub use sandbox::FUEL_PER_HOST_BYTE;
pub use wop_core::FsGrant;
pub use wop_core::{
    Capability, ConfigError, EgressView, ErrorCode, Event, EventSink, FailureSource, ImportReport,
    Inspection, InvocationReport, InvokeRequest, LimitRequest, Limits, LoadError, LogLevel,
    LogStream, MemorySink, NodeError, Outcome, OutcomeFields, PackGrant, Policy, Principal,
    RunContext, Usage,
};
