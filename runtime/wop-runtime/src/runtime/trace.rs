//! The invocation's span (`openwop.node.<typeId>`): its trace context from
//! the caller's `traceparent` (or a new trace), and its attributes from the
//! report — the protocol's `openwop.*` ones, the outcome code, usage and
//! cost, and the limit that bound it (`openwop.cap_kind`, `_limit`,
//! `_observed`).

use wop_core::events::Event;
use wop_core::model::{InvocationReport, InvokeRequest};
use wop_core::sampling::Sampler;
use wop_core::trace::{Attr, Span, TraceContext, node_span_name};
use wop_gate::telemetry::{TraceSite, new_span_id, new_trace_id, now_ns};

/// A started invocation span.
pub(crate) struct NodeSpan {
    pub site: TraceSite,
    parent: Option<[u8; 8]>,
    start_ns: u64,
}

impl NodeSpan {
    /// Starts the span of `req`: a child of its `traceparent`, else the
    /// root of a new trace; recorded or not as `sampler` decides (the
    /// decision travels downstream in the `sampled` flag of the
    /// `traceparent` host calls send).
    pub(crate) fn start(req: &InvokeRequest, sampler: Sampler) -> NodeSpan {
        let parent = req.traceparent.as_deref().and_then(TraceContext::parse);
        let span_id = new_span_id();
        let trace_id = parent.map_or_else(new_trace_id, |p| p.trace_id);
        let ctx = TraceContext {
            trace_id,
            span_id,
            sampled: sampler.should_sample(parent.as_ref(), &trace_id),
        };
        NodeSpan {
            site: TraceSite {
                ctx,
                spans: Default::default(),
            },
            parent: parent.map(|p| p.span_id),
            start_ns: now_ns(),
        }
    }

    /// Ends it: the invocation's span followed by its host calls' spans.
    pub(crate) fn end(self, req: &InvokeRequest, report: &InvocationReport) -> Vec<Span> {
        let c = &req.context;
        let u = &report.usage;
        let mut attributes = vec![
            ("openwop.run_id", Attr::str(&c.run_id)),
            ("openwop.node_id", Attr::str(&c.node_id)),
            ("openwop.node_type", Attr::str(&req.type_id)),
            (
                "openwop.node_attempt",
                Attr::Int(i64::from(c.attempt.saturating_sub(1))),
            ),
            ("openwop.tenant_id", Attr::str(&c.tenant_id)),
            (
                "openwop.outcome",
                Attr::str(match &report.outcome {
                    Ok(wop_core::Outcome::Completed { .. }) => "completed",
                    Ok(wop_core::Outcome::Suspended { .. }) => "suspended",
                    Err(_) => "failed",
                }),
            ),
            ("wop.pack", Attr::str(&u.pack)),
            (
                "wop.usage.fuel",
                Attr::Int(i64::try_from(u.fuel_consumed).unwrap_or(i64::MAX)),
            ),
            (
                "wop.usage.wall_time_us",
                Attr::Int(i64::try_from(u.wall_time_us).unwrap_or(i64::MAX)),
            ),
            (
                "wop.usage.memory_peak_bytes",
                Attr::Int(i64::try_from(u.peak_memory_bytes).unwrap_or(i64::MAX)),
            ),
            (
                "wop.usage.tool_calls",
                Attr::Int(i64::try_from(u.tool_calls).unwrap_or(i64::MAX)),
            ),
            ("wop.cost", Attr::Float(u.cost)),
        ];
        for e in &report.events {
            if let Event::CapBreached {
                kind,
                limit,
                observed,
                ..
            } = e
            {
                attributes.push(("openwop.cap_kind", Attr::str(kind.as_str())));
                attributes.push((
                    "openwop.cap_limit",
                    Attr::Int(i64::try_from(*limit).unwrap_or(i64::MAX)),
                ));
                attributes.push((
                    "openwop.cap_observed",
                    Attr::Int(i64::try_from(*observed).unwrap_or(i64::MAX)),
                ));
                break;
            }
        }
        let error = report.outcome.as_ref().err().map(|e| e.code.clone());
        let mut spans = vec![Span {
            trace_id: self.site.ctx.trace_id,
            span_id: self.site.ctx.span_id,
            parent: self.parent,
            name: node_span_name(&req.type_id),
            start_ns: self.start_ns,
            end_ns: now_ns(),
            client: false,
            attributes,
            error,
        }];
        spans.extend(self.site.take());
        spans
    }
}
