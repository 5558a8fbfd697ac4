//! # wop-core
//!
//! The pure domain of `wop`: no wasmtime, no tokio, no network, no
//! database. Everything here is plain Rust over plain data, unit-tested
//! with case tables, and shared by every crate above it.
//!
//! ## Core concepts
//!
//! **Model** ([`model`]). One node invocation ([`InvokeRequest`]) names a
//! node type, its inputs and where it runs in a workflow ([`RunContext`],
//! [`Principal`]); it ends in an [`Outcome`] or a [`NodeError`], with the
//! events it produced and its [`Usage`] ([`InvocationReport`]).
//!
//! **Errors** ([`error`]). Every protocol error code we emit is one row of
//! [`ErrorCode`]'s table; whatever stops a pack becomes a [`Fault`] and
//! [`classify()`] turns it into one code plus its `cap.breached` event.
//!
//! **Packs** ([`manifest`], [`files`], [`trust`], [`pack`],
//! [`capability`]). `pack.json` is validated with JSON-path errors, files
//! are read through a cap-std directory, the signature is judged before
//! anything else, and every import a pack declares is judged against the
//! capabilities it requested and the operator granted — before any of its
//! code runs.
//!
//! **Policy** ([`policy`]). The operator's TOML file; each section
//! validates itself and engines receive only their own section.
//!
//! **Authorization, egress, budgets** ([`tools`], [`egress`], [`budget`],
//! [`run`]). Fail-closed tool authorization, SSRF address classes and
//! allow-lists, and the budget/limit math that decides what one invocation
//! may spend.
//!
//! **Credentials** ([`secrets`]). Secrets a node declares, the operator
//! provides, and the host attaches on the way out, only to their audience.
//!
//! ## Rooms
//!
//! One folder (or file) per concept, listed from the bottom up: each uses
//! only rooms listed above it, so no room uses one that uses it (no
//! circle, between rooms or between files):
//!
//! - [`time`], [`digest`], [`text`], [`ratelimit`], [`limits`],
//!   [`capability`]: leaves (the wall clock, domain-separated SHA-256,
//!   cutting text to a cap, the token bucket, per-invocation limits and
//!   `[limits]`, capability names and the import gate); use nothing.
//! - [`json`]: I-JSON checks and RFC 8785 canonical JSON; uses nothing.
//! - [`error`]: the error-code table, `NodeError`, `LoadError` and the
//!   `details!` macro (exported at the crate root); uses nothing.
//! - [`model`]: request, run bounds, report, usage, events, breaches;
//!   uses error.
//! - [`budget`]: prices, the run ledger, roll-ups; uses model, time.
//! - [`egress`]: safe-fetch checks, allow-lists, `egress.decided`; uses
//!   error, model, ratelimit.
//! - [`secrets`]: credentials declared, provided, attached, redacted; uses
//!   egress, model, error, text.
//! - [`tools`]: tool descriptors and authorization; uses model, secrets.
//! - [`trace`]: trace context, spans, samplers; uses nothing.
//! - [`run`]: admission, replay, the log buffer, fault classification,
//!   output interpretation; uses model, error, budget, secrets, limits,
//!   digest, text.
//! - [`mcp`]: MCP protocol names, `[mcp]` servers, requests and grants;
//!   uses tools, egress, ratelimit.
//! - [`files`]: the bounded pack-file reader and `.tgz` archives; uses error.
//! - [`manifest`]: `pack.json`, `runtime.requires`, what can run, ABI
//!   versions; uses error, json, limits, capability, egress, mcp, secrets.
//! - [`trust`]: trusted keys, PEM, signatures, approved manifests, diffs;
//!   uses error, json, manifest, files, limits.
//! - [`policy`]: the operator's TOML, its own sections and a pack's grant;
//!   uses the rooms whose sections it holds (model, budget, egress,
//!   secrets, tools, mcp, trust, capability, limits, ratelimit, error).
//! - [`pack`]: a pack directory read and judged under a policy
//!   (provenance, approval, requirements, imports, identity, schemas);
//!   uses policy, trust, manifest, files, egress, capability, limits,
//!   error, text.
//!
//! The modules that lived at the top level before these rooms are
//! re-exported at their old paths (`wop_core::outcome`, …).

pub mod budget;
pub mod capability;
pub mod digest;
pub mod egress;
pub mod error;
pub mod files;
pub mod json;
pub mod limits;
pub mod manifest;
pub mod mcp;
pub mod model;
pub mod pack;
pub mod policy;
pub mod ratelimit;
pub mod run;
pub mod secrets;
pub mod text;
pub mod time;
pub mod tools;
pub mod trace;
pub mod trust;

// The old top-level paths of modules now in a room.
pub use files::{archive, packfile};
pub use json::{ijson, jcs};
pub use manifest::{abi, runnable};
pub use mcp::protocol as mcp_protocol;
pub use model::{breach, events};
pub use pack::{identity, schema};
pub use run::{admission, classify, logbuf, outcome, replay};
pub use tools::authz;
pub use trace::sampling;

pub use breach::BreachKind;
pub use capability::Capability;
pub use classify::{Classified, Fault, classify};
pub use error::{ConfigError, ErrorCode, FailureSource, LoadError, NodeError};
pub use events::{Event, EventSink, LogLevel, LogStream, MemorySink};
pub use limits::{LimitRequest, Limits};
pub use model::{
    InvocationReport, InvokeRequest, Outcome, OutcomeFields, Principal, RunContext, Usage,
};
pub use pack::{EgressView, ImportReport, Inspection};
pub use policy::{FsGrant, PackGrant, Policy};
