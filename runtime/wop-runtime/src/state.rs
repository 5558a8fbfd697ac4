//! Per-invocation store state: WASI context, resource table, limiter, the
//! bounded log, replayable clock/random and usage counters. Dropped with
//! the store after every invocation.

use crate::capability::Capability;
use crate::classify::Fault;
use crate::events::LogStream;
use crate::limits::Limits;
use crate::logbuf::LogBuffer;
use crate::replay::{ReplayClock, ReplayRng, Seed};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Instant;
use wasmtime::ResourceLimiter;
use wasmtime::component::ResourceTable;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

/// Who and what this invocation is for (bound to every host call).
#[derive(Debug, Clone)]
pub(crate) struct InvocationScope {
    pub run_id: String,
    pub node_id: String,
    pub tenant_id: String,
    pub attempt: u32,
    pub type_id: String,
    pub capabilities: BTreeSet<Capability>,
    pub principal: crate::invoke::Principal,
    pub pack: String,
    pub declared_tools: Vec<String>,
    pub granted_tools: Vec<String>,
    pub depth: u32,
    /// What safe-fetch may reach (`None`: nothing, e.g. during describe()).
    pub egress: Option<crate::egress::PackEgress>,
}

impl InvocationScope {
    pub(crate) fn context(&self) -> crate::invoke::RunContext {
        crate::invoke::RunContext {
            run_id: self.run_id.clone(),
            node_id: self.node_id.clone(),
            tenant_id: self.tenant_id.clone(),
            attempt: self.attempt,
        }
    }
}

/// The log buffer shared between the `log` interface and WASI stdio.
pub(crate) type SharedLog = Arc<Mutex<LogBuffer>>;

pub(crate) fn with_log<R>(log: &SharedLog, f: impl FnOnce(&mut LogBuffer) -> R) -> R {
    let mut g = match log.lock() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    };
    f(&mut g)
}

pub(crate) struct HostState {
    pub wasi: WasiCtx,
    pub table: ResourceTable,
    pub limiter: Limiter,
    pub scope: InvocationScope,
    pub limits: Limits,
    pub log: SharedLog,
    pub rng: ReplayRng,
    pub clock: ReplayClock,
    /// Host calls per interface (`log`, `tools`, ...).
    pub host_calls: BTreeMap<&'static str, u64>,
    /// The first host-side cap the pack breached (a trap follows).
    pub host_fault: Option<Fault>,
    /// When instantiation finished.
    pub instantiated_at: Option<Instant>,
    /// The gate every side-effecting host call goes through.
    pub gate: Arc<crate::gate::Gate>,
    /// Per-invocation call counters (call ids, effect ordinals).
    pub counters: crate::gate::CallCounters,
    /// When this invocation's wall clock runs out.
    pub deadline: Instant,
    /// Per-call attribution and usage counters.
    pub meter: CallMeter,
    /// Loop and run bounds.
    pub bounds: crate::metering::RunBounds,
    /// The run's budget meter, for charging tool calls before they run.
    pub run_meter: Option<crate::gate::MeterSite>,
}

/// Most host-call records kept per invocation (the rest are aggregated).
pub(crate) const MAX_CALL_RECORDS: usize = 4096;

/// Attribution of fuel and wall time to host calls, and usage counters.
///
/// Cheap on purpose: the call hook (which runs on every host transition,
/// libcalls included) only stores the fuel counter; the clock is read and a
/// record is kept only for the `openwop` calls our host functions label.
#[derive(Debug, Default)]
pub(crate) struct CallMeter {
    /// Set by the call hook on every host entry: fuel remaining.
    pub pending: Option<u64>,
    /// The open, labeled host call.
    open: Option<(OpenCall, Instant)>,
    /// Fuel remaining at the last recorded host call (initially the limit).
    pub mark: u64,
    /// Recorded calls.
    records: Vec<OpenCall>,
    /// Performed tool calls by id.
    pub tool_calls_by_id: BTreeMap<String, u64>,
    /// Effect claims won.
    pub effect_claims: u64,
    /// Egress bytes in.
    pub egress_in: u64,
    /// Egress bytes out.
    pub egress_out: u64,
    /// Tool-call rounds of the pack's own loop.
    pub loop_iterations: u64,
}

/// A host call being or having been recorded (no allocation for plain calls).
#[derive(Debug, Clone)]
struct OpenCall {
    interface: &'static str,
    target: Option<String>,
    fuel_before: u64,
    wall_us: u64,
}

impl CallMeter {
    pub(crate) fn new(fuel_limit: u64) -> Self {
        Self {
            mark: fuel_limit,
            ..Default::default()
        }
    }

    /// Labels the host call the hook just entered as ours.
    fn open(&mut self, interface: &'static str) {
        let Some(fuel) = self.pending.take() else {
            return;
        };
        let rec = OpenCall {
            interface,
            target: None,
            fuel_before: self.mark.saturating_sub(fuel),
            wall_us: 0,
        };
        self.mark = fuel;
        self.open = Some((rec, Instant::now()));
    }

    /// Names the target of the open call (a tool id, a destination).
    pub(crate) fn target(&mut self, t: &str) {
        if let Some((rec, _)) = &mut self.open {
            rec.target = Some(t.to_owned());
        }
    }

    /// Called by the hook when a host call returns.
    pub(crate) fn close(&mut self) {
        self.pending = None;
        if let Some((mut rec, at)) = self.open.take() {
            rec.wall_us = u64::try_from(at.elapsed().as_micros()).unwrap_or(u64::MAX);
            if self.records.len() < MAX_CALL_RECORDS {
                self.records.push(rec);
            } else if let Some(last) = self.records.last_mut() {
                // Past the cap: fold into the last record so sums stay exact.
                last.fuel_before += rec.fuel_before;
                last.wall_us += rec.wall_us;
                last.interface = "(aggregated)";
                last.target = None;
            }
        }
    }

    /// The recorded calls, for the usage report.
    pub(crate) fn records(&self) -> Vec<crate::invoke::HostCallRecord> {
        self.records
            .iter()
            .map(|r| crate::invoke::HostCallRecord {
                interface: r.interface.to_owned(),
                target: r.target.clone(),
                fuel_before: r.fuel_before,
                wall_us: r.wall_us,
            })
            .collect()
    }

    /// Counts performed tool calls and won claims from the gate's events.
    pub(crate) fn absorb(&mut self, events: &[crate::events::Event]) {
        for e in events {
            if let crate::events::Event::ToolReturned {
                tool_name,
                duration_ms: Some(_),
                effect_id,
                ..
            } = e
            {
                *self.tool_calls_by_id.entry(tool_name.clone()).or_insert(0) += 1;
                if effect_id.is_some() {
                    self.effect_claims += 1;
                }
            }
        }
    }
}

impl HostState {
    pub(crate) fn count(&mut self, iface: &'static str) {
        *self.host_calls.entry(iface).or_insert(0) += 1;
        self.meter.open(iface);
    }

    /// One round of the pack's own agent loop (a tools/http/mcp call).
    /// Past `maxLoopIterations` the invocation fails with
    /// `loop_limit_exceeded`.
    pub(crate) fn loop_tick(&mut self) -> wasmtime::Result<()> {
        self.meter.loop_iterations += 1;
        let observed = self.meter.loop_iterations;
        if let Some(limit) = self.bounds.max_loop_iterations
            && observed > u64::from(limit)
        {
            if self.host_fault.is_none() {
                self.host_fault = Some(Fault::LoopLimit {
                    limit: u64::from(limit),
                    observed,
                });
            }
            return Err(wasmtime::Error::msg(format!(
                "loop limit exceeded: {observed} > {limit}"
            )));
        }
        Ok(())
    }

    /// Records a host-cap breach and returns the trap to raise.
    pub(crate) fn host_cap(
        &mut self,
        kind: &'static str,
        limit: u64,
        observed: u64,
    ) -> wasmtime::Error {
        let fault = Fault::HostCap {
            kind,
            limit,
            observed,
        };
        if self.host_fault.is_none() {
            self.host_fault = Some(fault);
        }
        wasmtime::Error::msg(format!("host cap exceeded: {kind} {observed} > {limit}"))
    }

    /// Fails closed if the invocation lacks `cap`. The import gate already
    /// refuses such packs at load; this is the second line of defense.
    pub(crate) fn require(&mut self, cap: Capability) -> wasmtime::Result<()> {
        if self.scope.capabilities.contains(&cap) {
            return Ok(());
        }
        let fault = Fault::CapabilityDenied {
            capability: cap.as_str().to_owned(),
        };
        if self.host_fault.is_none() {
            self.host_fault = Some(fault);
        }
        Err(wasmtime::Error::msg(format!(
            "capability `{}` not granted",
            cap.as_str()
        )))
    }

    /// Checks the size of data a pack passes into a host call.
    pub(crate) fn check_arg(&mut self, len: usize) -> wasmtime::Result<()> {
        let cap = self.limits.host_arg_bytes;
        if len as u64 > cap {
            return Err(self.host_cap("host-arg-bytes", cap, len as u64));
        }
        Ok(())
    }

    /// The call site for the gate.
    pub(crate) fn call_site(&self, transport: crate::events::Transport) -> crate::gate::CallSite {
        crate::gate::CallSite {
            principal: self.scope.principal.clone(),
            context: self.scope.context(),
            pack: self.scope.pack.clone(),
            declared: self.scope.declared_tools.clone(),
            granted: self.scope.granted_tools.clone(),
            deadline: self.deadline,
            depth: self.scope.depth,
            transport,
            meter: self.run_meter.clone(),
        }
    }

    pub(crate) fn seed(scope: &InvocationScope) -> Seed {
        Seed::new(&scope.run_id, &scope.node_id, scope.attempt)
    }
}

impl WasiView for HostState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

/// Enforces the memory/table/instance caps and records what was observed.
#[derive(Debug)]
pub(crate) struct Limiter {
    memory_cap: u64,
    table_cap: u64,
    instances: usize,
    memories_and_tables: usize,
    /// Current total linear memory over all memories.
    pub memory_total: u64,
    /// Highest total linear memory reached.
    pub memory_peak: u64,
    /// The breach, if one happened.
    pub breach: Option<Fault>,
}

impl Limiter {
    pub(crate) fn new(l: &Limits) -> Self {
        Self {
            memory_cap: l.memory_bytes,
            table_cap: l.table_elements,
            instances: usize::try_from(l.instances).unwrap_or(usize::MAX),
            memories_and_tables: usize::try_from(l.memories_and_tables).unwrap_or(usize::MAX),
            memory_total: 0,
            memory_peak: 0,
            breach: None,
        }
    }
}

impl ResourceLimiter for Limiter {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let grow = (desired as u64).saturating_sub(current as u64);
        let total = self.memory_total.saturating_add(grow);
        if total > self.memory_cap {
            self.breach.get_or_insert(Fault::Memory {
                limit: self.memory_cap,
                observed: total,
            });
            return Err(wasmtime::Error::msg(format!(
                "linear memory cap exceeded: {total} > {}",
                self.memory_cap
            )));
        }
        self.memory_total = total;
        self.memory_peak = self.memory_peak.max(total);
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired as u64 > self.table_cap {
            self.breach.get_or_insert(Fault::Table {
                limit: self.table_cap,
                observed: desired as u64,
            });
            return Err(wasmtime::Error::msg(format!(
                "table cap exceeded: {desired} > {}",
                self.table_cap
            )));
        }
        Ok(true)
    }

    fn instances(&self) -> usize {
        self.instances
    }
    fn tables(&self) -> usize {
        self.memories_and_tables
    }
    fn memories(&self) -> usize {
        self.memories_and_tables
    }
}

/// WASI stdout/stderr, captured into the invocation's bounded log.
#[derive(Clone)]
pub(crate) struct CapturedStdio {
    pub stream: LogStream,
    pub log: SharedLog,
}

/// Permit size for one write (a bounded host allocation per call).
const STDIO_PERMIT: usize = 64 << 10;

impl wasmtime_wasi::cli::IsTerminal for CapturedStdio {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl wasmtime_wasi::cli::StdoutStream for CapturedStdio {
    fn p2_stream(&self) -> Box<dyn wasmtime_wasi::p2::OutputStream> {
        Box::new(self.clone())
    }
    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

#[wasmtime_wasi::async_trait]
impl wasmtime_wasi::p2::Pollable for CapturedStdio {
    async fn ready(&mut self) {}
}

impl wasmtime_wasi::p2::OutputStream for CapturedStdio {
    fn write(&mut self, bytes: bytes::Bytes) -> wasmtime_wasi::p2::StreamResult<()> {
        with_log(&self.log, |l| l.write(self.stream, &bytes));
        Ok(())
    }
    fn flush(&mut self) -> wasmtime_wasi::p2::StreamResult<()> {
        Ok(())
    }
    fn check_write(&mut self) -> wasmtime_wasi::p2::StreamResult<usize> {
        Ok(STDIO_PERMIT)
    }
}

impl tokio::io::AsyncWrite for CapturedStdio {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        with_log(&self.log, |l| l.write(self.stream, buf));
        std::task::Poll::Ready(Ok(buf.len()))
    }
    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
}
