//! Traces (DESIGN.md §9): W3C trace context in and out, the spans of one
//! invocation, and their OTLP/HTTP JSON encoding. Pure: ids come from the
//! caller's randomness, times from the caller's clock, and exporting is
//! the gate's (`wop_gate::telemetry::otlp`).
//!
//! Span names are the protocol's and never a string a pack chose:
//! `openwop.node.<typeId>` (the type id only when it is a plain
//! `[a-z0-9._-]` id, else `openwop.node`) and `openwop.activity.<kind>`
//! for a host call (`tool`, `mcp`, `http`). Attribute values are capped at
//! [`MAX_ATTR_LEN`] bytes.

mod otlp;
pub mod sampling;

use serde_json::Value;

/// Longest attribute value kept (longer ones are cut at a char boundary).
pub const MAX_ATTR_LEN: usize = 256;

/// A W3C trace context (`traceparent`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceContext {
    /// The trace.
    pub trace_id: [u8; 16],
    /// The parent span.
    pub span_id: [u8; 8],
    /// The sampled flag.
    pub sampled: bool,
}

fn hex_exact<const N: usize>(s: &str) -> Option<[u8; N]> {
    if s.len() != N * 2 || !s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
        return None;
    }
    let v = hex::decode(s).ok()?;
    <[u8; N]>::try_from(v).ok()
}

impl TraceContext {
    /// Parses a `traceparent` header value. Anything malformed (another
    /// version's shape, upper case, all-zero ids) is `None`: a bad value is
    /// ignored, never an error, and never grants anything.
    pub fn parse(v: &str) -> Option<TraceContext> {
        let v = v.trim();
        if v.len() > 512 {
            return None;
        }
        let mut parts = v.split('-');
        let (ver, t, s, f) = (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
        if ver != "00" || parts.next().is_some() {
            return None;
        }
        let trace_id: [u8; 16] = hex_exact(t)?;
        let span_id: [u8; 8] = hex_exact(s)?;
        let flags: [u8; 1] = hex_exact(f)?;
        if trace_id == [0; 16] || span_id == [0; 8] {
            return None;
        }
        Some(TraceContext {
            trace_id,
            span_id,
            sampled: flags[0] & 1 == 1,
        })
    }

    /// The `traceparent` header value.
    pub fn header(&self) -> String {
        format!(
            "00-{}-{}-{}",
            hex::encode(self.trace_id),
            hex::encode(self.span_id),
            if self.sampled { "01" } else { "00" }
        )
    }

    /// The same trace, with `span_id` as the parent.
    pub fn child(&self, span_id: [u8; 8]) -> TraceContext {
        TraceContext { span_id, ..*self }
    }
}

/// An attribute value.
#[derive(Debug, Clone, PartialEq)]
pub enum Attr {
    /// A string (capped).
    Str(String),
    /// An integer.
    Int(i64),
    /// A float.
    Float(f64),
    /// A boolean.
    Bool(bool),
}

/// `s` cut at [`MAX_ATTR_LEN`] bytes (on a character boundary): string
/// attributes and a span's error message.
fn capped(s: &str) -> &str {
    &s[..s.floor_char_boundary(MAX_ATTR_LEN)]
}

impl Attr {
    /// A string attribute, capped at [`MAX_ATTR_LEN`] bytes.
    pub fn str(s: &str) -> Attr {
        Attr::Str(capped(s).to_owned())
    }
}

/// One finished span.
#[derive(Debug, Clone, PartialEq)]
pub struct Span {
    /// The trace.
    pub trace_id: [u8; 16],
    /// This span.
    pub span_id: [u8; 8],
    /// Its parent, if any.
    pub parent: Option<[u8; 8]>,
    /// The protocol's name.
    pub name: String,
    /// Start, ns since the Unix epoch.
    pub start_ns: u64,
    /// End, ns since the Unix epoch.
    pub end_ns: u64,
    /// `SPAN_KIND_SERVER` for an invocation, `CLIENT` for a host call.
    pub client: bool,
    /// Attributes.
    pub attributes: Vec<(&'static str, Attr)>,
    /// The error code, when it failed.
    pub error: Option<String>,
}

/// Whether `s` may appear in a span name.
fn plain(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 128
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"._-".contains(&b))
}

/// `openwop.node.<typeId>`, or `openwop.node` for a type id that is not a
/// plain id.
pub fn node_span_name(type_id: &str) -> String {
    if plain(type_id) {
        format!("openwop.node.{type_id}")
    } else {
        "openwop.node".to_owned()
    }
}

/// `openwop.activity.<kind>` for a host call of the tool `tool_id`:
/// `http` (safe-fetch), `mcp` (an MCP server), else `tool`.
pub fn activity_span_name(tool_id: &str) -> &'static str {
    if tool_id.starts_with("http:") {
        "openwop.activity.http"
    } else if tool_id.starts_with("mcp:") {
        "openwop.activity.mcp"
    } else {
        "openwop.activity.tool"
    }
}

/// The OTLP/HTTP JSON body (`ExportTraceServiceRequest`) of `spans`, as
/// a value (for tests and tools; the exporter writes [`otlp_json_bytes`]).
pub fn otlp_json(service: &str, version: &str, spans: &[Span]) -> Value {
    serde_json::to_value(otlp::Request::new(service, version, spans)).unwrap_or(Value::Null)
}

/// The OTLP/HTTP JSON body (`ExportTraceServiceRequest`) of `spans`,
/// written straight from the spans (no intermediate JSON tree: 500 spans
/// took 16.6 ms through a `Value`).
pub fn otlp_json_bytes(service: &str, version: &str, spans: &[Span]) -> Vec<u8> {
    serde_json::to_vec(&otlp::Request::new(service, version, spans)).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traceparent_round_trips_and_malformed_values_are_ignored() {
        let v = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let c = TraceContext::parse(v).unwrap();
        assert!(c.sampled);
        assert_eq!(c.header(), v);
        for bad in [
            "",
            "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-xx",
            "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
        ] {
            assert!(TraceContext::parse(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn names_are_never_pack_strings_and_attributes_are_capped() {
        assert_eq!(
            node_span_name("wop.samples.hello"),
            "openwop.node.wop.samples.hello"
        );
        assert_eq!(node_span_name("Evil Name\n"), "openwop.node");
        assert_eq!(
            activity_span_name("http:api.example.com"),
            "openwop.activity.http"
        );
        assert_eq!(activity_span_name("mcp:ev/echo"), "openwop.activity.mcp");
        assert_eq!(activity_span_name("crm:write"), "openwop.activity.tool");
        match Attr::str(&"é".repeat(500)) {
            Attr::Str(s) => assert!(s.len() <= MAX_ATTR_LEN),
            _ => unreachable!(),
        }
        let s = Span {
            trace_id: [1; 16],
            span_id: [2; 8],
            parent: Some([3; 8]),
            name: "openwop.node".into(),
            start_ns: 1,
            end_ns: 2,
            client: false,
            attributes: vec![
                ("openwop.run_id", Attr::str("r")),
                ("openwop.node_attempt", Attr::Int(0)),
            ],
            error: None,
        };
        let body = otlp_json("wop", "0.1.0", &[s]);
        let span = &body["resourceSpans"][0]["scopeSpans"][0]["spans"][0];
        assert_eq!(span["traceId"], "01010101010101010101010101010101");
        assert_eq!(span["parentSpanId"], "0303030303030303");
        assert_eq!(span["attributes"][1]["value"]["intValue"], "0");
    }

    /// The body is the protocol buffers JSON mapping of
    /// `ExportTraceServiceRequest`, field for field: written straight from
    /// the spans, equal to the literal below (an error span with a parent
    /// and every attribute kind; a root span that succeeded).
    #[test]
    fn the_body_is_the_otlp_json_mapping() {
        let failed = Span {
            trace_id: [0xab; 16],
            span_id: [0x01; 8],
            parent: Some([0x02; 8]),
            name: "openwop.activity.http".into(),
            start_ns: 1_700_000_000_000_000_001,
            end_ns: 1_700_000_000_000_000_999,
            client: true,
            attributes: vec![
                ("s", Attr::str("v\"\n")),
                ("i", Attr::Int(-9_007_199_254_740_993)),
                ("f", Attr::Float(0.25)),
                ("b", Attr::Bool(true)),
            ],
            error: Some("egress_denied".into()),
        };
        let ok = Span {
            parent: None,
            client: false,
            attributes: Vec::new(),
            error: None,
            name: "openwop.node".into(),
            ..failed.clone()
        };
        let expected = serde_json::json!({"resourceSpans": [{
            "resource": {"attributes": [
                {"key": "service.name", "value": {"stringValue": "wop"}},
                {"key": "service.version", "value": {"stringValue": "1.2.3"}},
            ]},
            "scopeSpans": [{"scope": {"name": "wop", "version": "1.2.3"}, "spans": [
                {
                    "traceId": "abababababababababababababababab",
                    "spanId": "0101010101010101",
                    "parentSpanId": "0202020202020202",
                    "name": "openwop.activity.http",
                    "kind": 3,
                    "startTimeUnixNano": "1700000000000000001",
                    "endTimeUnixNano": "1700000000000000999",
                    "attributes": [
                        {"key": "s", "value": {"stringValue": "v\"\n"}},
                        {"key": "i", "value": {"intValue": "-9007199254740993"}},
                        {"key": "f", "value": {"doubleValue": 0.25}},
                        {"key": "b", "value": {"boolValue": true}},
                    ],
                    "status": {"code": 2, "message": "egress_denied"},
                },
                {
                    "traceId": "abababababababababababababababab",
                    "spanId": "0101010101010101",
                    "name": "openwop.node",
                    "kind": 2,
                    "startTimeUnixNano": "1700000000000000001",
                    "endTimeUnixNano": "1700000000000000999",
                    "attributes": [],
                    "status": {"code": 1},
                },
            ]}],
        }]});
        let long = Span {
            error: Some("é".repeat(1000)),
            ..ok.clone()
        };
        let body = otlp_json("wop", "1.2.3", &[long]);
        let message = &body["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["status"]["message"];
        assert_eq!(
            message.as_str().map(str::len),
            Some(MAX_ATTR_LEN),
            "cut on a boundary"
        );
        let spans = [failed, ok];
        let bytes = otlp_json_bytes("wop", "1.2.3", &spans);
        let parsed: Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(parsed, expected);
        assert_eq!(otlp_json("wop", "1.2.3", &spans), expected);
    }

    /// The OpenTelemetry project's own OTLP types (`opentelemetry-proto`,
    /// its serde mapping) read the body as a collector would: ids, kinds,
    /// times, every attribute kind and the status come back as written.
    #[test]
    fn the_opentelemetry_otlp_types_read_the_body() {
        use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
        use opentelemetry_proto::tonic::common::v1::any_value::Value as V;
        let span = Span {
            trace_id: [0xab; 16],
            span_id: [0x01; 8],
            parent: Some([0x02; 8]),
            name: "openwop.activity.http".into(),
            start_ns: 1_700_000_000_000_000_001,
            end_ns: 1_700_000_000_000_000_999,
            client: true,
            attributes: vec![
                ("s", Attr::str("v\"\n")),
                ("i", Attr::Int(-9_007_199_254_740_993)),
                ("f", Attr::Float(0.25)),
                ("b", Attr::Bool(true)),
            ],
            error: Some("egress_denied".into()),
        };
        let bytes = otlp_json_bytes("wop", "1.2.3", std::slice::from_ref(&span));
        let req: ExportTraceServiceRequest = serde_json::from_slice(&bytes).unwrap();
        let rs = &req.resource_spans[0];
        let service = &rs.resource.as_ref().unwrap().attributes[0];
        assert_eq!(service.key, "service.name");
        let got = &rs.scope_spans[0].spans[0];
        assert_eq!(got.trace_id, vec![0xab; 16]);
        assert_eq!(got.span_id, vec![0x01; 8]);
        assert_eq!(got.parent_span_id, vec![0x02; 8]);
        assert_eq!(got.name, "openwop.activity.http");
        assert_eq!(got.kind, 3);
        assert_eq!(got.start_time_unix_nano, span.start_ns);
        assert_eq!(got.end_time_unix_nano, span.end_ns);
        let values: Vec<_> = got
            .attributes
            .iter()
            .map(|kv| kv.value.as_ref().and_then(|v| v.value.clone()))
            .collect();
        assert_eq!(
            values,
            [
                Some(V::StringValue("v\"\n".into())),
                Some(V::IntValue(-9_007_199_254_740_993)),
                Some(V::DoubleValue(0.25)),
                Some(V::BoolValue(true)),
            ]
        );
        let status = got.status.as_ref().unwrap();
        assert_eq!((status.code, status.message.as_str()), (2, "egress_denied"));
    }
}
