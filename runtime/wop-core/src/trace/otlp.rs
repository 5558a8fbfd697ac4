//! The shape of an OTLP/HTTP JSON `ExportTraceServiceRequest` (the
//! protobuf JSON mapping: lowerCamelCase names, 64-bit integers and
//! nanosecond times as strings, ids as lowercase hex), borrowed from the
//! spans and serialized in one pass.

use super::{Attr, Span, capped};
use serde::Serialize;

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Request<'a> {
    resource_spans: [ResourceSpans<'a>; 1],
}

impl<'a> Request<'a> {
    pub(super) fn new(service: &'a str, version: &'a str, spans: &'a [Span]) -> Self {
        Request {
            resource_spans: [ResourceSpans {
                resource: Resource {
                    attributes: [
                        KeyValue {
                            key: "service.name",
                            value: AnyValue::String(service),
                        },
                        KeyValue {
                            key: "service.version",
                            value: AnyValue::String(version),
                        },
                    ],
                },
                scope_spans: [ScopeSpans {
                    scope: Scope {
                        name: "wop",
                        version,
                    },
                    spans: spans.iter().map(OtlpSpan).collect(),
                }],
            }],
        }
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ResourceSpans<'a> {
    resource: Resource<'a>,
    scope_spans: [ScopeSpans<'a>; 1],
}

#[derive(Serialize)]
struct Resource<'a> {
    attributes: [KeyValue<'a>; 2],
}

#[derive(Serialize)]
struct ScopeSpans<'a> {
    scope: Scope<'a>,
    spans: Vec<OtlpSpan<'a>>,
}

#[derive(Serialize)]
struct Scope<'a> {
    name: &'a str,
    version: &'a str,
}

#[derive(Serialize)]
struct KeyValue<'a> {
    key: &'a str,
    value: AnyValue<'a>,
}

/// `{"stringValue": …}` and its siblings (`intValue` as a string).
#[derive(Serialize)]
enum AnyValue<'a> {
    #[serde(rename = "stringValue")]
    String(&'a str),
    #[serde(rename = "intValue")]
    Int(String),
    #[serde(rename = "doubleValue")]
    Double(f64),
    #[serde(rename = "boolValue")]
    Bool(bool),
}

impl<'a> From<&'a Attr> for AnyValue<'a> {
    fn from(a: &'a Attr) -> Self {
        match a {
            Attr::Str(s) => AnyValue::String(s),
            Attr::Int(i) => AnyValue::Int(i.to_string()),
            Attr::Float(f) => AnyValue::Double(*f),
            Attr::Bool(b) => AnyValue::Bool(*b),
        }
    }
}

/// One span in the mapping's field names and encodings.
struct OtlpSpan<'a>(&'a Span);

impl Serialize for OtlpSpan<'_> {
    fn serialize<S: serde::Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap as _;
        let s = self.0;
        let mut m = ser.serialize_map(None)?;
        m.serialize_entry("traceId", &hex::encode(s.trace_id))?;
        m.serialize_entry("spanId", &hex::encode(s.span_id))?;
        if let Some(p) = s.parent {
            m.serialize_entry("parentSpanId", &hex::encode(p))?;
        }
        m.serialize_entry("name", &s.name)?;
        // SPAN_KIND_CLIENT = 3, SPAN_KIND_SERVER = 2.
        m.serialize_entry("kind", &if s.client { 3 } else { 2 })?;
        m.serialize_entry("startTimeUnixNano", &s.start_ns.to_string())?;
        m.serialize_entry("endTimeUnixNano", &s.end_ns.to_string())?;
        m.serialize_entry("attributes", &Attributes(&s.attributes))?;
        m.serialize_entry(
            "status",
            &match &s.error {
                // STATUS_CODE_ERROR = 2, with the (capped) error code.
                Some(code) => Status {
                    code: 2,
                    message: Some(capped(code)),
                },
                // STATUS_CODE_OK = 1.
                None => Status {
                    code: 1,
                    message: None,
                },
            },
        )?;
        m.end()
    }
}

struct Attributes<'a>(&'a [(&'static str, Attr)]);

impl Serialize for Attributes<'_> {
    fn serialize<S: serde::Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        ser.collect_seq(self.0.iter().map(|(key, v)| KeyValue {
            key,
            value: v.into(),
        }))
    }
}

#[derive(Serialize)]
struct Status<'a> {
    code: u8,
    #[serde(skip_serializing_if = "Option::is_none")]
    message: Option<&'a str>,
}
