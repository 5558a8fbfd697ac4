//! # wop-gate
//!
//! The one code path every side-effecting host call of a pack goes
//! through, and the providers that perform those calls. No wasmtime: the
//! runtime's host adapters translate WIT into calls on this crate.
//!
//! ## Core concepts
//!
//! **Gate** ([`Gate`]). Authorization (pack declaration and operator
//! grant, then tool visibility, then principal scopes; fail closed), rate
//! limit, the run's budget, the durable effect claim for world-changing
//! tools, then perform, record and audit (`agent.tool-called` /
//! `agent.tool-returned`).
//!
//! **Session** ([`GateSession`]). One per invocation: who calls (the
//! [`CallSite`]), the per-invocation counters, and the events and usage
//! the calls produced. Every call returns a [`CallReceipt`] saying whether
//! it was performed, claimed or replayed; usage is counted from receipts.
//!
//! **Tools** ([`tools`]). A [`ToolProvider`] performs a call: operator
//! HTTP tools ([`http_tool`]), node-pack tools through a [`NodeInvoker`]
//! the runtime implements ([`pack_tool`]), host extensions, and safe-fetch
//! ([`fetch`]), whose guarded client pins validated addresses.
//!
//! **MCP** ([`mcp`]). `ctx.mcp` on the runtime's [`mcp::McpGateway`]:
//! `call-tool` is the gate tool `mcp:<server>/<tool>`; listings, resource
//! reads and health are reads on a granted server.
//!
//! **Telemetry** ([`telemetry`]). Each host call is a span of its
//! invocation's trace ([`telemetry::TraceSite`]); the runtime exports them
//! over OTLP ([`telemetry::otlp`]).

mod audit;
pub mod egress;
pub mod fetch;
pub mod fetch_client;
mod gate;
pub mod http_tool;
pub mod mcp;
pub mod pack_tool;
pub mod secrets;
mod session;
pub mod telemetry;
pub mod tools;

pub use audit::{Audit, LogAudit};
pub use egress::{Egress, PackEgress, Resolver, SystemResolver};
pub use gate::*;
pub use pack_tool::NodeInvoker;
pub use session::{GateSession, SessionUsage};
pub use tools::{RegisteredTool, ToolProvider, ToolRegistry};
