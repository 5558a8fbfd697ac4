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
//! **Errors** ([`error`]). Every protocol error code we emit is one
//! variant of [`ErrorCode`]; whatever stops a pack becomes a [`Fault`] and
//! [`classify()`] turns it into one code plus its `cap.breached` event.
//!
//! **Packs** ([`manifest`], [`pack`], [`capability`]). `pack.json` is
//! validated with JSON-path errors, files are read through a cap-std
//! directory, and every import a pack declares is judged against the
//! capabilities it requested and the operator granted — before any of its
//! code runs.
//!
//! **Policy** ([`policy`]). The operator's TOML file; each section
//! validates itself and engines receive only their own section.
//!
//! **Authorization, egress, budgets** ([`authz`], [`egress`], [`budget`],
//! [`admission`]). Fail-closed tool authorization, SSRF address classes and
//! allow-lists, and the budget/limit math that decides what one invocation
//! may spend.
//!
//! **Credentials** ([`secrets`]). Secrets a node declares, the operator
//! provides, and the host attaches on the way out, only to their audience.

pub mod abi;
pub mod admission;
pub mod archive;
pub mod authz;
pub mod breach;
pub mod budget;
pub mod capability;
pub mod classify;
pub mod digest;
pub mod egress;
pub mod error;
pub mod events;
pub mod identity;
pub mod ijson;
pub mod jcs;
pub mod limits;
pub mod logbuf;
pub mod manifest;
pub mod mcp_protocol;
pub mod model;
pub mod outcome;
pub mod pack;
pub mod packfile;
pub mod policy;
pub mod ratelimit;
pub mod replay;
pub mod requires;
pub mod runnable;
pub mod sampling;
pub mod schema;
pub mod secrets;
pub mod time;
pub mod tools;
pub mod trace;
pub mod trust;

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
