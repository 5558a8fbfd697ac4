//! Request/report types and the invocation core: a fresh `Store` and
//! instance per call, fuel and wall-clock limits, the limiter, and
//! classification of whatever stops the pack.

use crate::bindings::{NodePackPre, node, types};
use crate::classify::{Classified, Fault, classify};
use crate::error::{FailureSource, NodeError};
use crate::events::Event;
use crate::limits::Limits;
use crate::logbuf::LogBuffer;
use crate::policy::FsGrant;
use crate::replay::{ReplayClock, ReplayRng};
use crate::state::{HostState, InvocationScope, Limiter};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use wasmtime::{Engine, Store, Trap};

/// Who is asking: the principal on whose behalf the node runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Principal {
    /// Principal id; non-agent calls use `core.system`.
    pub id: String,
    /// The principal's tenant.
    pub tenant: String,
    /// Granted scopes.
    #[serde(default)]
    pub scopes: Vec<String>,
}

impl Default for Principal {
    fn default() -> Self {
        Self {
            id: "core.system".to_owned(),
            tenant: "default".to_owned(),
            scopes: Vec::new(),
        }
    }
}

/// Where in a run this invocation is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunContext {
    /// The workflow run.
    pub run_id: String,
    /// The node within the run.
    pub node_id: String,
    /// The tenant the run belongs to.
    pub tenant_id: String,
    /// Attempt number, starting at 1.
    pub attempt: u32,
}

impl Default for RunContext {
    fn default() -> Self {
        Self {
            run_id: "run-local".to_owned(),
            node_id: "node-1".to_owned(),
            tenant_id: "default".to_owned(),
            attempt: 1,
        }
    }
}

/// One node invocation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InvokeRequest {
    /// The node type to run (must be registered by a loaded pack).
    pub type_id: String,
    /// The node's inputs.
    pub inputs: Value,
    /// The node's static configuration (`{}` if none).
    #[serde(default = "empty_object")]
    pub config: Value,
    /// The resume value after a `suspended` outcome.
    #[serde(default)]
    pub resume: Option<Value>,
    /// Run, node, tenant, attempt.
    #[serde(default)]
    pub context: RunContext,
    /// On whose behalf.
    #[serde(default)]
    pub principal: Principal,
    /// The run's budget (fixed at the run's first invocation; later values
    /// are ignored). Default: the policy's `[runs]`.
    #[serde(default)]
    pub budget: Option<crate::metering::RunBudget>,
    /// The run's bounds. Default: the policy's `[runs]`.
    #[serde(default)]
    pub bounds: Option<crate::metering::RunBounds>,
}

fn empty_object() -> Value {
    Value::Object(Default::default())
}

impl InvokeRequest {
    /// A request with default context and principal.
    pub fn new(type_id: impl Into<String>, inputs: Value) -> Self {
        Self {
            type_id: type_id.into(),
            inputs,
            config: empty_object(),
            resume: None,
            context: RunContext::default(),
            principal: Principal::default(),
            budget: None,
            bounds: None,
        }
    }
}

/// How a node finished when it did not fail.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "lowercase")]
pub enum Outcome {
    /// Finished with an output.
    Completed {
        /// The node's output.
        output: Value,
    },
    /// Waiting for outside input.
    Suspended {
        /// What the node waits for.
        interrupt: Value,
    },
}

/// What one invocation consumed, attributed to its pack, node and run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    /// Pack name.
    pub pack: String,
    /// Pack version.
    pub pack_version: String,
    /// Node type.
    pub type_id: String,
    /// Tenant.
    pub tenant_id: String,
    /// Run.
    pub run_id: String,
    /// Node.
    pub node_id: String,
    /// Attempt.
    pub attempt: u32,
    /// Fuel granted.
    pub fuel_limit: u64,
    /// Fuel consumed (deterministic for the same pack and inputs).
    pub fuel_consumed: u64,
    /// Wall time of the whole invocation, in microseconds.
    pub wall_time_us: u64,
    /// Time to instantiate, in microseconds.
    pub instantiate_time_us: u64,
    /// Peak linear memory (all memories), in bytes.
    pub peak_memory_bytes: u64,
    /// Memory cap, in bytes.
    pub memory_limit_bytes: u64,
    /// Host calls per interface.
    pub host_calls: BTreeMap<String, u64>,
    /// Log bytes kept.
    pub log_bytes: u64,
    /// Log bytes dropped past the cap.
    pub log_bytes_dropped: u64,
    /// Size of the output JSON, in bytes.
    pub output_bytes: u64,
    /// Tool calls performed (not refused, not replayed), all transports.
    pub tool_calls: u64,
    /// Performed tool calls by tool id.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tool_calls_by_id: BTreeMap<String, u64>,
    /// Effect claims won (the effect was performed under our claim).
    pub effect_claims: u64,
    /// Egress bytes received (safe-fetch response bodies).
    pub egress_bytes_in: u64,
    /// Egress bytes sent (safe-fetch request bodies).
    pub egress_bytes_out: u64,
    /// Host tool-call rounds of the pack's own loop (tools, http, mcp).
    pub loop_iterations: u64,
    /// Cost of this invocation (tool calls + fuel + memory + egress +
    /// invocation), in `currency`.
    pub cost: f64,
    /// The price table's currency.
    pub currency: String,
    /// One record per host call of the `openwop` interfaces, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub host_call_breakdown: Vec<HostCallRecord>,
    /// Fuel the pack spent after its last recorded host call (so that
    /// Σ `fuelBefore` + this = `fuelConsumed`).
    pub fuel_after_last_call: u64,
}

/// One host call in the usage breakdown.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HostCallRecord {
    /// The interface (`log`, `tools`, `http`, ...).
    pub interface: String,
    /// The tool or destination, for gate calls.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// Fuel the pack spent since the previous recorded host call (or the
    /// start): the computation that led to this call.
    pub fuel_before: u64,
    /// Wall time inside the host call, in microseconds.
    pub wall_us: u64,
}

/// Everything an invocation produced.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InvocationReport {
    /// The outcome, or why the node failed.
    #[serde(serialize_with = "ser_outcome")]
    pub outcome: Result<Outcome, NodeError>,
    /// Events in order (`log.appended`, `cap.breached`, ...).
    pub events: Vec<Event>,
    /// What it consumed.
    pub usage: Usage,
}

fn ser_outcome<S: serde::Serializer>(
    o: &Result<Outcome, NodeError>,
    s: S,
) -> Result<S::Ok, S::Error> {
    #[derive(Serialize)]
    #[serde(tag = "outcome", rename_all = "lowercase")]
    enum Failed<'a> {
        Failed { error: &'a NodeError },
    }
    match o {
        Ok(ok) => ok.serialize(s),
        Err(error) => Failed::Failed { error }.serialize(s),
    }
}

/// What to call on the fresh instance.
pub(crate) enum Call {
    Describe,
    Invoke(node::Request),
}

pub(crate) enum Returned {
    Describe(node::PackInfo),
    Invoke(Result<node::Outcome, types::ErrorInfo>),
}

/// The result of one execution, before outcome interpretation.
pub(crate) struct Execution {
    pub result: Result<Returned, Classified>,
    pub events: Vec<Event>,
    pub usage: Usage,
}

pub(crate) struct ExecParams<'a> {
    pub engine: &'a Engine,
    pub pre: &'a NodePackPre<HostState>,
    pub scope: InvocationScope,
    pub limits: Limits,
    pub fs: Option<&'a FsGrant>,
    pub instantiations: &'a std::sync::atomic::AtomicU64,
    pub gate: Arc<crate::gate::Gate>,
    pub bounds: crate::metering::RunBounds,
    pub run_meter: Option<crate::gate::MeterSite>,
    /// Record the per-host-call breakdown (installs the call hook).
    pub breakdown: bool,
    /// What a fuel or deadline stop means: the invocation's own limit, or
    /// the run's budget / run timeout (then classified as such).
    pub binding: Binding,
}

/// Which limit binds the invocation's fuel and wall clock.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Binding {
    /// Fuel granted is the run budget's remaining fuel (not the ceiling).
    pub fuel_budget: Option<u64>,
    /// The deadline is the run's remaining time: (runTimeoutMs, elapsed before start).
    pub run_timeout: Option<(u64, u64)>,
}

impl Binding {
    /// Re-reads a fuel or wall-clock stop as the run-level limit that
    /// actually bound it (budget fuel, run timeout). Shared by every pack kind.
    pub(crate) fn apply(&self, fault: Fault) -> Fault {
        match (fault, self.fuel_budget, self.run_timeout) {
            (Fault::Fuel { consumed, .. }, Some(left), _) => Fault::Budget {
                kind: "budget-fuel",
                dimension: "fuel",
                limit: left,
                observed: consumed,
            },
            (Fault::WallClock { elapsed_ms, .. }, _, Some((limit_ms, before_ms))) => {
                Fault::RunTimeout {
                    limit_ms,
                    elapsed_ms: before_ms + elapsed_ms,
                }
            }
            (f, _, _) => f,
        }
    }
}

/// Runs `call` in a fresh store and instance, then drops both.
pub(crate) async fn execute(p: ExecParams<'_>, call: Call) -> Execution {
    let started = Instant::now();
    let limits = p.limits;
    let node_id = p.scope.node_id.clone();
    let seed = HostState::seed(&p.scope);
    let log = Arc::new(Mutex::new(LogBuffer::new(
        usize::try_from(limits.log_bytes).unwrap_or(usize::MAX),
        usize::try_from(limits.log_line_bytes).unwrap_or(usize::MAX),
    )));
    let mut usage = Usage {
        tenant_id: p.scope.tenant_id.clone(),
        run_id: p.scope.run_id.clone(),
        node_id: p.scope.node_id.clone(),
        attempt: p.scope.attempt,
        type_id: p.scope.type_id.clone(),
        fuel_limit: limits.fuel,
        memory_limit_bytes: limits.memory_bytes,
        ..Default::default()
    };
    let wasi = match crate::host::wasi::ctx(&seed, &log, p.fs) {
        Ok(w) => w,
        Err(e) => {
            let c = classify(
                &Fault::Trap {
                    kind: "host-setup".to_owned(),
                    message: format!("cannot prepare the sandbox: {e:#}"),
                },
                &node_id,
            );
            return finish(Err(c), log, usage, started);
        }
    };
    let mut table = wasmtime::component::ResourceTable::new();
    table.set_max_capacity(usize::try_from(limits.resource_entries).unwrap_or(usize::MAX));
    let state = HostState {
        wasi,
        table,
        limiter: Limiter::new(&limits),
        rng: ReplayRng::new(seed.derive("openwop:random")),
        clock: ReplayClock::new(&seed),
        scope: p.scope,
        limits,
        log: log.clone(),
        host_calls: BTreeMap::new(),
        host_fault: None,
        instantiated_at: None,
        gate: p.gate,
        counters: Default::default(),
        deadline: started + Duration::from_millis(limits.wall_clock_ms),
        meter: crate::state::CallMeter::new(limits.fuel),
        bounds: p.bounds,
        run_meter: p.run_meter,
    };
    let mut store = Store::new(p.engine, state);
    store.limiter(|s| &mut s.limiter);
    // Attribute fuel and wall time to host calls: the hook sees every
    // transition; our host functions label the ones that are theirs.
    // Measured cost ≈ 190 ns per host call (docs/decisions/0005), so an
    // operator may turn it off (`[metering] hostCallBreakdown = false`).
    if p.breakdown {
        store.call_hook(|mut ctx, hook| {
            match hook {
                wasmtime::CallHook::CallingHost => {
                    let fuel = ctx.get_fuel().unwrap_or(0);
                    ctx.data_mut().meter.pending = Some(fuel);
                }
                wasmtime::CallHook::ReturningFromHost => ctx.data_mut().meter.close(),
                _ => {}
            }
            Ok(())
        });
    }
    if let Err(c) = arm_fuel(&mut store, limits.fuel, &node_id) {
        return finish(Err(*c), log, usage, started);
    }

    let deadline = Duration::from_millis(limits.wall_clock_ms);
    let pre = p.pre;
    let instantiations = p.instantiations;
    let run = async {
        instantiations.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let pack = pre.instantiate_async(&mut store).await?;
        store.data_mut().instantiated_at = Some(Instant::now());
        let n = pack.openwop_node_pack_node();
        match call {
            Call::Describe => n.call_describe(&mut store).await.map(Returned::Describe),
            Call::Invoke(req) => n.call_invoke(&mut store, &req).await.map(Returned::Invoke),
        }
    };
    let outcome = tokio::time::timeout(deadline, run).await;
    let elapsed = started.elapsed();

    let remaining = store.get_fuel().unwrap_or(0);
    usage.fuel_consumed = limits.fuel.saturating_sub(remaining);
    let binding = p.binding;
    let data = store.data();
    usage.host_call_breakdown = data.meter.records();
    usage.fuel_after_last_call = data.meter.mark.saturating_sub(remaining);
    usage.tool_calls = data.meter.tool_calls_by_id.values().sum();
    usage.tool_calls_by_id = data.meter.tool_calls_by_id.clone();
    usage.effect_claims = data.meter.effect_claims;
    usage.egress_bytes_in = data.meter.egress_in;
    usage.egress_bytes_out = data.meter.egress_out;
    usage.loop_iterations = data.meter.loop_iterations;
    usage.peak_memory_bytes = data.limiter.memory_peak;
    usage.instantiate_time_us = data
        .instantiated_at
        .map_or(0, |t| micros(t.saturating_duration_since(started)));
    usage.host_calls = data
        .host_calls
        .iter()
        .map(|(k, v)| ((*k).to_owned(), *v))
        .collect();

    let elapsed_ms = u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX);
    let result = match outcome {
        Err(_elapsed) => Err(classify(
            &binding.apply(Fault::WallClock {
                limit_ms: limits.wall_clock_ms,
                elapsed_ms,
            }),
            &node_id,
        )),
        Ok(Ok(r)) => Ok(r),
        Ok(Err(e)) => Err(classify(
            &binding.apply(fault_of(&e, data, &limits, usage.fuel_consumed)),
            &node_id,
        )),
    };
    drop(store);
    finish(result, log, usage, started)
}

fn finish(
    result: Result<Returned, Classified>,
    log: crate::state::SharedLog,
    usage: Usage,
    started: Instant,
) -> Execution {
    let (result, events, usage) = close_log(result, log, usage, started);
    Execution {
        result,
        events,
        usage,
    }
}

/// Gives a fresh store its fuel and the yield interval that lets the
/// wall-clock deadline interrupt it (decision 0001). Every pack kind.
pub(crate) fn arm_fuel<T>(
    store: &mut Store<T>,
    fuel: u64,
    node_id: &str,
) -> Result<(), Box<Classified>> {
    store
        .set_fuel(fuel)
        .and_then(|()| store.fuel_async_yield_interval(Some(crate::engine::FUEL_YIELD_INTERVAL)))
        .map_err(|e| {
            Box::new(classify(
                &Fault::Trap {
                    kind: "host-setup".to_owned(),
                    message: format!("cannot configure fuel: {e:#}"),
                },
                node_id,
            ))
        })
}

/// The end of every execution, for every pack kind: takes the bounded log
/// (events, with the truncation marker), appends the `cap.breached` of a
/// classified failure, and fills in log bytes and wall time.
pub(crate) fn close_log<R>(
    result: Result<R, Classified>,
    log: crate::state::SharedLog,
    mut usage: Usage,
    started: Instant,
) -> (Result<R, Classified>, Vec<Event>, Usage) {
    let buf = match Arc::try_unwrap(log) {
        Ok(m) => m.into_inner().unwrap_or_else(|p| p.into_inner()),
        // Still shared (should not happen once the store is dropped):
        // take a snapshot by swapping in an empty buffer.
        Err(shared) => {
            crate::state::with_log(&shared, |l| std::mem::replace(l, LogBuffer::new(0, 1)))
        }
    };
    usage.log_bytes = buf.kept_bytes() as u64;
    usage.log_bytes_dropped = buf.dropped_bytes();
    let mut events = buf.finish();
    if let Err(c) = &result
        && let Some(b) = &c.breach
    {
        events.push(b.clone());
    }
    usage.wall_time_us = micros(started.elapsed());
    (result, events, usage)
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

/// Turns a wasmtime error into a [`Fault`]: limiter and host-cap records
/// first (they know what was attempted), then the typed trap code.
fn fault_of(e: &wasmtime::Error, s: &HostState, limits: &Limits, consumed: u64) -> Fault {
    fault_from(
        e,
        &s.limiter,
        s.host_fault.as_ref(),
        limits,
        consumed,
        "invalid-abi",
    )
}

/// Turns a wasmtime error into a [`Fault`], for every pack kind: the
/// limiter's and the host's own records first (they know what was
/// attempted), then the typed trap code. `untyped` names an error that is
/// not a trap (bad canonical-ABI data for components, a failed
/// instantiation for core modules).
pub(crate) fn fault_from(
    e: &wasmtime::Error,
    limiter: &Limiter,
    host_fault: Option<&Fault>,
    limits: &Limits,
    consumed: u64,
    untyped: &str,
) -> Fault {
    if let Some(f) = &limiter.breach {
        return f.clone();
    }
    if let Some(f) = host_fault {
        return f.clone();
    }
    match e.downcast_ref::<Trap>() {
        Some(Trap::OutOfFuel) => Fault::Fuel {
            limit: limits.fuel,
            consumed,
        },
        Some(Trap::StackOverflow) => Fault::StackOverflow,
        Some(Trap::MemoryOutOfBounds) | Some(Trap::HeapMisaligned) => Fault::OutOfBounds,
        Some(t) => Fault::Trap {
            kind: trap_kind(*t).to_owned(),
            message: t.to_string(),
        },
        None => Fault::Trap {
            kind: untyped.to_owned(),
            message: format!("{e:#}"),
        },
    }
}

pub(crate) fn trap_kind(t: Trap) -> &'static str {
    match t {
        Trap::UnreachableCodeReached => "unreachable",
        Trap::IntegerDivisionByZero => "integer-division-by-zero",
        Trap::IntegerOverflow => "integer-overflow",
        Trap::BadConversionToInteger => "bad-conversion-to-integer",
        Trap::IndirectCallToNull => "indirect-call-to-null",
        Trap::BadSignature => "bad-signature",
        Trap::TableOutOfBounds => "table-out-of-bounds",
        Trap::CannotEnterComponent => "cannot-enter-component",
        _ => "trap",
    }
}

/// Turns what an `invoke` returned into the node's outcome, enforcing the
/// output cap and JSON validity.
pub(crate) fn interpret(
    returned: Result<node::Outcome, types::ErrorInfo>,
    limits: &Limits,
    node_id: &str,
    usage: &mut Usage,
) -> Result<Outcome, Box<Classified>> {
    let pack_err = |e: types::ErrorInfo| {
        let details = e
            .details
            .map(|d| serde_json::from_str::<Value>(&d).unwrap_or(Value::String(d)));
        Classified {
            error: NodeError {
                code: if e.code.is_empty() {
                    "node_failed".to_owned()
                } else {
                    crate::logbuf::cut(&e.code, 128)
                },
                message: crate::logbuf::cut(&e.message, 4096),
                details,
                source: FailureSource::Pack,
            },
            breach: None,
        }
    };
    let (json, completed) = match returned {
        Err(e) => return Err(Box::new(pack_err(e))),
        Ok(node::Outcome::Completed(j)) => (j, true),
        Ok(node::Outcome::Suspended(j)) => (j, false),
    };
    usage.output_bytes = json.len() as u64;
    if json.len() as u64 > limits.output_bytes {
        return Err(Box::new(classify(
            &Fault::HostCap {
                kind: "output-bytes",
                limit: limits.output_bytes,
                observed: json.len() as u64,
            },
            node_id,
        )));
    }
    let value: Value = serde_json::from_str(&json).map_err(|e| {
        Box::new(classify(
            &Fault::Trap {
                kind: "invalid-output".to_owned(),
                message: format!("the node's output is not valid JSON: {e}"),
            },
            node_id,
        ))
    })?;
    Ok(if completed {
        Outcome::Completed { output: value }
    } else {
        Outcome::Suspended { interrupt: value }
    })
}
