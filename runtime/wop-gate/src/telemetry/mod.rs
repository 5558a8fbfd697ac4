//! Telemetry: the OpenTelemetry traces of invocations, in two parts that
//! meet only in the runtime.
//!
//! - **Spans** (`spans.rs`): while an invocation runs, the gate records a
//!   client span for each host call it runs ([`TraceSite`], a child of
//!   the invocation's span) and carries the call's `traceparent` on to
//!   what the call reaches. Ids and clocks for spans live here too.
//! - **Export** ([`otlp`]): the runtime's [`otlp::Exporter`] sends finished
//!   spans to a collector over OTLP/HTTP (JSON) on a thread of its own.
//!   The gate never calls it: the runtime starts each invocation's span,
//!   gives the gate its [`TraceSite`] (`CallSite::trace`) and, when the
//!   invocation ends, exports its span with the host-call spans the site
//!   collected.
//!
//! Both speak `wop_core::trace` (spans, attributes, `traceparent`).

pub mod otlp;
mod spans;

pub(crate) use spans::Started;
pub use spans::{MAX_SPANS, TraceSite, new_span_id, new_trace_id, now_ns};
