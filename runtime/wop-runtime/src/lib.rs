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
mod bindings;
mod cache;
pub mod capability;
pub mod classify;
pub mod effects;
pub mod egress;
mod engine;
pub mod error;
pub mod events;
pub mod gate;
mod host;
mod invoke;
pub mod jcs;
pub mod limits;
pub mod logbuf;
pub mod manifest;
pub mod metering;
mod pack;
pub mod policy;
pub mod ratelimit;
pub mod replay;
mod runtime;
mod state;
pub mod store;
pub mod tools;

pub use cache::CacheStats;
pub use capability::Capability;
pub use error::{ConfigError, ErrorCode, FailureSource, LoadError, NodeError};
pub use events::{Event, EventSink, LogLevel, LogStream, MemorySink};
pub use host::wasi::GUEST_DATA_DIR;
pub use invoke::{InvocationReport, InvokeRequest, Outcome, Principal, RunContext, Usage};
pub use limits::{LimitRequest, Limits};
pub use pack::{EgressView, ImportReport, Inspection};
pub use policy::{FsGrant, PackGrant, Policy};
pub use runtime::{PackSummary, Runtime, RuntimeConfig, RuntimeStats};
