//! `GET /metrics`: what the service did, in the OpenMetrics text format
//! (`prometheus-client`, the official Rust client), behind the operator
//! scope.
//!
//! Recorded from each finished invocation's report (outcome, events,
//! usage) as the service sees it — no counter re-reads the store. Every
//! label value comes from the configuration or a fixed vocabulary
//! ([`Vocab`]), whatever a pack or a caller sends: pack, node type and
//! tenant must be a loaded pack, a served node type and a `serve.toml`
//! tenant; codes outside the registered vocabulary, tool ids outside the
//! operator's catalog and MCP ids of servers the policy does not configure
//! fold into `other`; a configured server's tools are one label,
//! `mcp:<server>/*` (its reads `mcp:<server>#<method>`); run ids, node ids
//! and effect ids are never labels. So the number of series is fixed by
//! the configuration, not by traffic (issue 33, item 1).

use super::store::{StoreMetrics, StoreScrape};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use std::collections::BTreeSet;
use std::sync::atomic::AtomicU64;
use wop_runtime::error::ErrorCode;
use wop_runtime::{Event, InvocationReport, Outcome};

/// `{pack, node_type, tenant, code}`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct InvocationLabels {
    pack: String,
    node_type: String,
    tenant: String,
    code: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PackLabel {
    pack: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CostLabels {
    pack: String,
    tenant: String,
    currency: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct InterfaceLabel {
    interface: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ToolLabels {
    tool: String,
    status: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StateLabel {
    state: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabel {
    kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ServerStateLabels {
    server: String,
    state: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ServerLabel {
    server: String,
}

type Histograms = Family<PackLabel, Histogram, fn() -> Histogram>;

/// Everything `/metrics` shows, and where each invocation is recorded.
pub(crate) struct Metrics {
    registry: Registry,
    invocations: Family<InvocationLabels, Counter>,
    duration: Histograms,
    fuel: Histograms,
    memory: Histograms,
    cost: Family<CostLabels, Counter<f64, AtomicU64>>,
    host_calls: Family<InterfaceLabel, Counter>,
    tool_calls: Family<ToolLabels, Counter>,
    effects: Family<StateLabel, Counter>,
    budget: Family<KindLabel, Counter>,
    breaches: Family<KindLabel, Counter>,
    // Read at scrape time (see `Scrape`).
    in_flight: Gauge,
    max_in_flight: Gauge,
    connections: Gauge,
    max_connections: Gauge,
    connections_refused: Gauge,
    refused_packs: Gauge,
    cache_hits: Gauge,
    cache_misses: Gauge,
    compiles: Gauge,
    instantiations: Gauge,
    idle_releases: Gauge,
    idle_released_bytes: Gauge,
    trace_spans_dropped: Gauge,
    trace_exports_failed: Gauge,
    /// `ctx.mcp` servers (ids from the operator's policy).
    mcp_state: Family<ServerStateLabels, Gauge>,
    mcp_restarts: Family<ServerLabel, Gauge>,
    /// The effect store's room and the tenants' shares of it.
    store: StoreMetrics,
    /// The label values allowed.
    vocab: Vocab,
}

/// The label values `/metrics` may show, all from the configuration; any
/// other value becomes [`OTHER`].
#[derive(Debug, Clone, Default)]
pub(crate) struct Vocab {
    /// The catalog's tool ids.
    pub tools: BTreeSet<String>,
    /// The policy's `ctx.mcp` server ids.
    pub mcp_servers: BTreeSet<String>,
    /// The loaded packs' names.
    pub packs: BTreeSet<String>,
    /// The served node types.
    pub node_types: BTreeSet<String>,
    /// The tenants of `serve.toml`'s tokens (and the anonymous tenant).
    pub tenants: BTreeSet<String>,
}

/// The label value of anything outside the vocabulary.
const OTHER: &str = "other";

/// The fixed methods of an MCP server's reads (`mcp:<server>#<method>`).
const MCP_READS: [&str; 3] = ["tools/list", "resources/read", "server-health"];

/// `value` if `known` holds it, else [`OTHER`].
fn known(known: &BTreeSet<String>, value: &str) -> String {
    if known.contains(value) {
        value.to_owned()
    } else {
        OTHER.to_owned()
    }
}

fn seconds() -> Histogram {
    // 50 µs … ~26 s.
    Histogram::new(exponential_buckets(0.000_05, 2.0, 20))
}

fn fuel() -> Histogram {
    // 10 k … ~2.7 T units.
    Histogram::new(exponential_buckets(10_000.0, 4.0, 15))
}

fn bytes() -> Histogram {
    // 64 KiB … 4 GiB.
    Histogram::new(exponential_buckets(65_536.0, 2.0, 17))
}

/// What the service's own state says at scrape time.
pub(crate) struct Scrape {
    pub in_flight: i64,
    pub max_in_flight: i64,
    pub connections: i64,
    pub max_connections: i64,
    pub connections_refused: i64,
    pub refused_packs: i64,
    pub cache_hits: i64,
    pub cache_misses: i64,
    pub compiles: i64,
    pub instantiations: i64,
    /// Idle releases of the sandbox pool's kept memory since start.
    pub idle_releases: i64,
    /// Bytes they gave back to the OS.
    pub idle_released_bytes: i64,
    /// Spans the OTLP exporter dropped (queue full) since start.
    pub trace_spans_dropped: i64,
    /// OTLP export requests that failed since start.
    pub trace_exports_failed: i64,
    /// Each configured MCP server's passive status.
    pub mcp: Vec<(String, wop_runtime::gate::mcp::ServerStatus)>,
    /// The effect store's backend, room and shares.
    pub store: StoreScrape,
}

impl Metrics {
    /// The metrics, whose labels take their values from `vocab`.
    pub(crate) fn new(vocab: Vocab) -> Self {
        let mut registry = Registry::with_prefix("wop");
        let invocations = Family::default();
        registry.register(
            "invocations",
            "Node invocations by pack, node type, tenant and outcome code (completed, suspended, or the error code)",
            invocations.clone(),
        );
        let duration = Histograms::new_with_constructor(seconds);
        registry.register(
            "invocation_duration_seconds",
            "Invocation wall time in the sandbox (usage.wallTimeUs)",
            duration.clone(),
        );
        let fuel_h = Histograms::new_with_constructor(fuel);
        registry.register(
            "invocation_fuel",
            "Fuel consumed per invocation",
            fuel_h.clone(),
        );
        let memory = Histograms::new_with_constructor(bytes);
        registry.register(
            "invocation_memory_peak_bytes",
            "Peak linear memory per invocation",
            memory.clone(),
        );
        let cost = Family::default();
        registry.register(
            "cost",
            "Cost of invocations and their tool calls (the policy's price table), by pack and tenant",
            cost.clone(),
        );
        let host_calls = Family::default();
        registry.register("host_calls", "Host calls by interface", host_calls.clone());
        let tool_calls = Family::default();
        registry.register(
            "tool_calls",
            "Tool and MCP calls by tool and status (ok, error, forbidden, rate_limited)",
            tool_calls.clone(),
        );
        let effects = Family::default();
        registry.register(
            "effect_claims",
            "Effectful calls by what happened: completed (performed and recorded), replayed, escaped (outcome unknown), refused (not performed)",
            effects.clone(),
        );
        let budget = Family::default();
        registry.register(
            "budget_events",
            "Budget events by kind (budget.reserved, .consumed, .threshold-crossed, .exhausted)",
            budget.clone(),
        );
        let breaches = Family::default();
        registry.register(
            "cap_breached",
            "cap.breached events by kind (OpenWOP openwop.cap.exceeded by openwop.cap_kind)",
            breaches.clone(),
        );
        let gauge = |registry: &mut Registry, name: &str, help: &str| {
            let g = Gauge::default();
            registry.register(name, help, g.clone());
            g
        };
        let in_flight = gauge(&mut registry, "in_flight", "Invocations running now");
        let max_in_flight = gauge(&mut registry, "max_in_flight", "maxInFlight");
        let connections = gauge(&mut registry, "connections", "Open client connections");
        let max_connections = gauge(&mut registry, "max_connections", "maxConnections");
        let connections_refused = gauge(
            &mut registry,
            "connections_refused",
            "Connections answered 503 at the connection cap since start",
        );
        let refused_packs = gauge(
            &mut registry,
            "refused_packs",
            "Packs refused at start (see /healthz and the console)",
        );
        let cache_hits = gauge(
            &mut registry,
            "compile_cache_hits",
            "Compile cache hits since start",
        );
        let cache_misses = gauge(
            &mut registry,
            "compile_cache_misses",
            "Compile cache misses since start",
        );
        let compiles = gauge(&mut registry, "compiles", "Compilations since start");
        let instantiations = gauge(
            &mut registry,
            "instantiations",
            "Sandbox instantiations since start",
        );
        let idle_releases = gauge(
            &mut registry,
            "pool_idle_releases",
            "Times the sandbox pool's kept memory went back to the OS after idleReleaseMs without an invocation",
        );
        let idle_released_bytes = gauge(
            &mut registry,
            "pool_idle_released_bytes",
            "Bytes those idle releases gave back to the OS since start",
        );
        let trace_spans_dropped = gauge(
            &mut registry,
            "trace_spans_dropped",
            "Spans the OTLP exporter dropped since start because its queue was full (sample with OTEL_TRACES_SAMPLER)",
        );
        let trace_exports_failed = gauge(
            &mut registry,
            "trace_exports_failed",
            "OTLP export requests that failed since start",
        );
        let mcp_state = Family::default();
        registry.register(
            "mcp_server_state",
            "ctx.mcp servers: 1 for the state each is in (idle: not started yet; starting; ready; down: died or failed to start, restarted on next use)",
            mcp_state.clone(),
        );
        let mcp_restarts = Family::default();
        registry.register(
            "mcp_server_restarts",
            "ctx.mcp server restarts (stdio) or new sessions after the first (HTTP) since start",
            mcp_restarts.clone(),
        );
        let store = StoreMetrics::register(&mut registry);
        Self {
            registry,
            invocations,
            duration,
            fuel: fuel_h,
            memory,
            cost,
            host_calls,
            tool_calls,
            effects,
            budget,
            breaches,
            in_flight,
            max_in_flight,
            connections,
            max_connections,
            connections_refused,
            refused_packs,
            cache_hits,
            cache_misses,
            compiles,
            instantiations,
            idle_releases,
            idle_released_bytes,
            trace_spans_dropped,
            trace_exports_failed,
            mcp_state,
            mcp_restarts,
            store,
            vocab,
        }
    }

    /// Records one finished invocation of `type_id` for `tenant`.
    pub(crate) fn record(&self, type_id: &str, tenant: &str, report: &InvocationReport) {
        let u = &report.usage;
        let code = match &report.outcome {
            Ok(Outcome::Completed { .. }) => "completed".to_owned(),
            Ok(Outcome::Suspended { .. }) => "suspended".to_owned(),
            Err(e) => fold_code(&e.code),
        };
        // A refusal before the sandbox has no pack in its usage.
        let pack = if u.pack.is_empty() {
            "(none)".to_owned()
        } else {
            known(&self.vocab.packs, &u.pack)
        };
        let tenant = known(&self.vocab.tenants, tenant);
        self.invocations
            .get_or_create(&InvocationLabels {
                pack: pack.clone(),
                node_type: known(&self.vocab.node_types, type_id),
                tenant: tenant.clone(),
                code,
            })
            .inc();
        let p = PackLabel { pack: pack.clone() };
        self.duration
            .get_or_create(&p)
            .observe(u.wall_time_us as f64 / 1e6);
        self.fuel.get_or_create(&p).observe(u.fuel_consumed as f64);
        self.memory
            .get_or_create(&p)
            .observe(u.peak_memory_bytes as f64);
        if u.cost > 0.0 {
            self.cost
                .get_or_create(&CostLabels {
                    pack,
                    tenant,
                    currency: u.currency.clone(),
                })
                .inc_by(u.cost);
        }
        for (iface, n) in &u.host_calls {
            self.host_calls
                .get_or_create(&InterfaceLabel {
                    interface: iface.clone(),
                })
                .inc_by(*n);
        }
        for e in &report.events {
            self.event(e);
        }
    }

    fn event(&self, e: &Event) {
        match e {
            Event::ToolReturned {
                tool_name,
                status,
                duration_ms,
                error,
                replayed,
                effect_id,
                ..
            } => {
                let status = serde_json::to_value(status)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_else(|| OTHER.to_owned());
                self.tool_calls
                    .get_or_create(&ToolLabels {
                        tool: self.fold_tool(tool_name),
                        status,
                    })
                    .inc();
                if effect_id.is_some() {
                    let unknown = error
                        .as_ref()
                        .and_then(|e| e.get("code"))
                        .and_then(serde_json::Value::as_str)
                        == Some(ErrorCode::EffectOutcomeUnknown.as_str());
                    let state = if *replayed {
                        "replayed"
                    } else if unknown {
                        "escaped"
                    } else if duration_ms.is_some() {
                        "completed"
                    } else {
                        "refused"
                    };
                    self.effects
                        .get_or_create(&StateLabel {
                            state: state.to_owned(),
                        })
                        .inc();
                }
            }
            Event::CapBreached { kind, .. } => {
                self.breaches
                    .get_or_create(&KindLabel {
                        kind: kind.as_str().to_owned(),
                    })
                    .inc();
            }
            Event::BudgetReserved { .. }
            | Event::BudgetConsumed { .. }
            | Event::BudgetThresholdCrossed { .. }
            | Event::BudgetExhausted { .. } => {
                self.budget
                    .get_or_create(&KindLabel {
                        kind: e.name().to_owned(),
                    })
                    .inc();
            }
            _ => {}
        }
    }

    /// A tool id as a label: the catalog's ids as they are; an MCP id of a
    /// configured server as `mcp:<server>/*` (a read as
    /// `mcp:<server>#<method>`); anything else — an unknown id a pack asked
    /// for, an MCP id of a server the policy does not configure — `other`.
    fn fold_tool(&self, tool: &str) -> String {
        if self.vocab.tools.contains(tool) {
            return tool.to_owned();
        }
        let Some(rest) = tool.strip_prefix("mcp:") else {
            return OTHER.to_owned();
        };
        let (server, op) = rest.split_at(rest.find(['/', '#']).unwrap_or(rest.len()));
        if !self.vocab.mcp_servers.contains(server) {
            return OTHER.to_owned();
        }
        match op.strip_prefix('#') {
            Some(method) if MCP_READS.contains(&method) => format!("mcp:{server}#{method}"),
            _ => format!("mcp:{server}/*"),
        }
    }

    /// The exposition, with the scrape-time gauges set from `s`.
    pub(crate) fn encode(&self, s: &Scrape) -> String {
        for (g, v) in [
            (&self.in_flight, s.in_flight),
            (&self.max_in_flight, s.max_in_flight),
            (&self.connections, s.connections),
            (&self.max_connections, s.max_connections),
            (&self.connections_refused, s.connections_refused),
            (&self.refused_packs, s.refused_packs),
            (&self.cache_hits, s.cache_hits),
            (&self.cache_misses, s.cache_misses),
            (&self.compiles, s.compiles),
            (&self.instantiations, s.instantiations),
            (&self.idle_releases, s.idle_releases),
            (&self.idle_released_bytes, s.idle_released_bytes),
            (&self.trace_spans_dropped, s.trace_spans_dropped),
            (&self.trace_exports_failed, s.trace_exports_failed),
        ] {
            g.set(v);
        }
        use wop_runtime::gate::mcp::ServerState;
        let states = [
            ServerState::Idle,
            ServerState::Starting,
            ServerState::Ready,
            ServerState::Down,
        ];
        for (server, st) in &s.mcp {
            for state in states {
                let labels = ServerStateLabels {
                    server: server.clone(),
                    state: state.as_str().to_owned(),
                };
                self.mcp_state
                    .get_or_create(&labels)
                    .set(i64::from(st.state == state));
            }
            let restarts = i64::try_from(st.restarts).unwrap_or(i64::MAX);
            let labels = ServerLabel {
                server: server.clone(),
            };
            self.mcp_restarts.get_or_create(&labels).set(restarts);
        }
        let tenants = &self.vocab.tenants;
        self.store.set(&s.store, tenants, |t| known(tenants, t));
        let mut out = String::new();
        if let Err(e) = prometheus_client::encoding::text::encode(&mut out, &self.registry) {
            tracing::error!(error = %e, "cannot encode the metrics");
        }
        out
    }
}

/// An outcome code as a label: the registered vocabulary as it is, a
/// pack's own code `other`.
fn fold_code(code: &str) -> String {
    if ErrorCode::ALL.iter().any(|c| c.as_str() == code) {
        code.to_owned()
    } else {
        OTHER.to_owned()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use wop_runtime::Usage;

    #[test]
    fn labels_stay_bounded_and_the_exposition_is_openmetrics() {
        let set = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect();
        let m = Metrics::new(Vocab {
            tools: set(&["crm:read"]),
            mcp_servers: set(&["files"]),
            packs: set(&["hello"]),
            node_types: set(&["t.hello"]),
            tenants: set(&["acme"]),
        });
        let mut usage = Usage {
            pack: "hello".into(),
            fuel_consumed: 20_000,
            wall_time_us: 30,
            ..Default::default()
        };
        usage.host_calls.insert("log".into(), 2);
        let ok = InvocationReport {
            outcome: Ok(Outcome::Completed {
                output: serde_json::json!({}),
            }),
            events: Vec::new(),
            usage: usage.clone(),
        };
        m.record("t.hello", "acme", &ok);
        let mut own =
            wop_runtime::NodeError::runtime(ErrorCode::ValidationError, "x", Default::default());
        own.code = "my.own.code-42".into();
        m.record(
            "t.hello",
            "acme",
            &InvocationReport {
                outcome: Err(own),
                events: Vec::new(),
                usage,
            },
        );
        assert_eq!(m.fold_tool("crm:read"), "crm:read");
        assert_eq!(
            m.fold_tool("mcp:files/any-name-the-server-chose"),
            "mcp:files/*"
        );
        assert_eq!(m.fold_tool("mcp:files#tools/list"), "mcp:files#tools/list");
        assert_eq!(m.fold_tool("mcp:files#whatever"), "mcp:files/*");
        assert_eq!(m.fold_tool("nope:whatever-the-pack-asked"), "other");
        // A server the policy does not configure is not a label.
        assert_eq!(m.fold_tool("mcp:not-configured/x"), "other");
        assert_eq!(m.fold_tool("mcp:files-2/x"), "other");
        assert_eq!(m.fold_tool("mcp:"), "other");
        m.record(
            "t.unknown",
            "stranger",
            &InvocationReport {
                outcome: Ok(Outcome::Completed {
                    output: serde_json::json!({}),
                }),
                events: Vec::new(),
                usage: Usage {
                    pack: "not-loaded".into(),
                    ..Default::default()
                },
            },
        );
        let text = m.encode(&Scrape {
            in_flight: 1,
            max_in_flight: 64,
            connections: 2,
            max_connections: 1024,
            connections_refused: 0,
            refused_packs: 0,
            cache_hits: 0,
            cache_misses: 1,
            compiles: 1,
            instantiations: 2,
            idle_releases: 1,
            idle_released_bytes: 8 << 20,
            trace_spans_dropped: 7,
            trace_exports_failed: 0,
            mcp: vec![(
                "files".to_owned(),
                wop_runtime::gate::mcp::ServerStatus {
                    state: wop_runtime::gate::mcp::ServerState::Down,
                    restarts: 3,
                    failures: 2,
                },
            )],
            store: StoreScrape {
                backend: "sled",
                room: Some(wop_runtime::store::StoreRoom {
                    free_bytes: 5 << 20,
                    reserve_bytes: 16 << 20,
                    refused_writes: 9,
                    share_refused_writes: 2,
                }),
                // A tenant no longer configured is summed as `other`.
                share: Some((
                    1 << 20,
                    vec![
                        ("acme".into(), 700),
                        ("gone".into(), 5),
                        ("gone2".into(), 6),
                    ],
                )),
                failed: true,
            },
        });
        assert!(
            text.contains(r#"wop_store_free_bytes{backend="sled"} 5242880"#)
                && text.contains(r#"wop_store_reserve_bytes{backend="sled"} 16777216"#)
                && text.contains(r#"wop_store_refused_writes{backend="sled"} 9"#)
                && text.contains(r#"wop_store_share_refused_writes{backend="sled"} 2"#)
                && text.contains(r#"wop_store_failed{backend="sled"} 1"#)
                && text.contains(r#"wop_store_tenant_bytes{tenant="acme"} 700"#)
                && text.contains(r#"wop_store_tenant_bytes{tenant="other"} 11"#)
                && text.contains("wop_store_tenant_share_bytes 1048576")
                && !text.contains("gone"),
            "{text}"
        );
        assert!(
            text.contains(r#"wop_mcp_server_state{server="files",state="down"} 1"#)
                && text.contains(r#"wop_mcp_server_state{server="files",state="ready"} 0"#)
                && text.contains(r#"wop_mcp_server_restarts{server="files"} 3"#),
            "{text}"
        );
        assert!(
            text.contains(r#"wop_invocations_total{pack="hello",node_type="t.hello",tenant="acme",code="completed"} 1"#),
            "{text}"
        );
        assert!(text.contains(r#"code="other"} 1"#), "{text}");
        assert!(
            text.contains(r#"wop_invocations_total{pack="other",node_type="other",tenant="other",code="completed"} 1"#),
            "{text}"
        );
        assert!(!text.contains("not-loaded") && !text.contains("stranger"));
        assert!(!text.contains("my.own.code-42"));
        assert!(
            text.contains(r#"wop_host_calls_total{interface="log"} 4"#),
            "{text}"
        );
        assert!(text.contains("wop_max_in_flight 64"));
        assert!(text.contains("wop_trace_spans_dropped 7"), "{text}");
        assert!(text.ends_with("# EOF\n"));
    }
}
