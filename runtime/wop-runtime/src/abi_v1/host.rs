//! The host side of the ABI's `openwop.*` imports, over a core module's
//! linear memory. Every (ptr, len) a module hands in is bounds-checked
//! against its memory before anything is read; lengths are capped; text is
//! validated as UTF-8. A malformed argument traps the invocation with a
//! recorded fault (classified as `sandbox_invocation_error`), never the host.

use super::imports::AbiImport;
use crate::sandbox::{Loop, Sandbox, SandboxState};
use serde_json::{Map, Value};
use wasmtime::{Caller, Extern, Memory, Val};
use wop_core::breach::BreachKind;
use wop_core::classify::Fault;
use wop_core::events::LogLevel;
use wop_core::logbuf::with_log;

/// How a (ptr, len) pair crosses the boundary.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PairEncoding {
    /// Multi-value `(i32 i32)`.
    MultiValue,
    /// One `i64`: ptr in the low 32 bits, len in the high 32 bits.
    PackedI64,
}

impl PairEncoding {
    /// Splits the raw results of a call into (ptr, len).
    pub(crate) fn decode(self, results: &[Val]) -> Option<(u32, u32)> {
        match (self, results) {
            (Self::MultiValue, [Val::I32(p), Val::I32(l)]) => Some((*p as u32, *l as u32)),
            (Self::PackedI64, [Val::I64(v)]) => {
                let v = *v as u64;
                Some((v as u32, (v >> 32) as u32))
            }
            _ => None,
        }
    }

    /// Writes (ptr, len) into the result slots of a host function.
    fn encode(self, ptr: u32, len: u32, results: &mut [Val]) {
        match self {
            Self::MultiValue => {
                if let [p, l] = results {
                    *p = Val::I32(ptr as i32);
                    *l = Val::I32(len as i32);
                }
            }
            Self::PackedI64 => {
                if let [v] = results {
                    *v = Val::I64(((u64::from(len) << 32) | u64::from(ptr)) as i64);
                }
            }
        }
    }

    /// Number of result slots.
    pub(crate) fn arity(self) -> usize {
        match self {
            Self::MultiValue => 2,
            Self::PackedI64 => 1,
        }
    }
}

/// ABI status codes (RFC 0008 §F).
pub(crate) mod status {
    /// Success.
    pub const OK: i32 = 0;
    /// The payload is not valid (UTF-8, JSON).
    pub const VALIDATION: i32 = 10;
    /// No such channel (or variable).
    pub const NOT_FOUND: i32 = 11;
    /// The call would exceed a host-enforced cap.
    pub const CAPABILITY_BREACH: i32 = 20;
    /// Unexpected host-side failure.
    #[allow(dead_code)]
    pub const HOST_ERROR: i32 = 99;
}

/// Longest variable key or channel name accepted, in bytes.
pub(crate) const MAX_KEY_BYTES: u32 = 4096;
/// Largest single `openwop_random` request (the same cap as the
/// component `random` interface).
pub(crate) const MAX_RANDOM: u32 = 65_536;

/// Deepest nesting of host → guest callbacks an invocation may reach. The
/// ABI needs one level: a host function calls `openwop_alloc` to hand a
/// value back. An `openwop_alloc` that calls an import which calls
/// `openwop_alloc` again would otherwise re-enter until every fiber stack
/// of the process is taken (each re-entry runs on a new one).
pub(crate) const MAX_REENTRY: u32 = 1;

/// What a host function does.
#[derive(Debug, Clone, Copy)]
pub(crate) enum HostFn {
    /// An ABI import; pair-returning ones carry their declared encoding.
    Abi(AbiImport, Option<PairEncoding>),
    /// Probe convention: a granted `(i32) -> i32` import returns its argument.
    Identity,
}

/// Per-invocation store data of a core module. Dropped with the store.
pub(crate) struct AbiV1State {
    /// The sandbox every pack kind shares.
    pub sb: Sandbox,
    /// The host-provided memory (`env.memory`), if the module imports one.
    pub memory: Option<Memory>,
    /// Variables visible to `openwop_variable_get/set`.
    pub variables: Map<String, Value>,
    /// Channels visible to `openwop_channel_read/write`.
    pub channels: Map<String, Value>,
    /// Bytes held in `variables` + `channels` (bounded).
    pub state_bytes: u64,
    /// The resume value for the first `openwop_interrupt` call.
    pub resume: Option<Value>,
    /// Set when `openwop_interrupt` suspended the node: the payload as
    /// the module sent it (JSON text), interpreted like a returned outcome.
    pub suspended: Option<String>,
    /// Length of the response `openwop_node_invoke` returned: counted as
    /// `outputBytes` even when it is refused at the output cap.
    pub response_bytes: u64,
    /// How many host calls are inside a guest callback
    /// (`openwop_alloc`) right now; bounded by [`MAX_REENTRY`].
    pub reentry: u32,
}

/// What a node invocation hands the module: the variables and channels it
/// may read and write, and the value to resume with.
#[derive(Debug, Default)]
pub(crate) struct NodeState {
    /// Variables visible to `openwop_variable_get/set`.
    pub variables: Map<String, Value>,
    /// Channels visible to `openwop_channel_read/write`.
    pub channels: Map<String, Value>,
    /// The resume value for the first `openwop_interrupt` call.
    pub resume: Option<Value>,
}

impl AbiV1State {
    /// The store data of one execution.
    pub(crate) fn new(sb: Sandbox, node: NodeState) -> Self {
        Self {
            sb,
            memory: None,
            variables: node.variables,
            channels: node.channels,
            state_bytes: 0,
            resume: node.resume,
            suspended: None,
            response_bytes: 0,
            reentry: 0,
        }
    }
}

impl SandboxState for AbiV1State {
    fn sandbox(&self) -> &Sandbox {
        &self.sb
    }
    fn sandbox_mut(&mut self) -> &mut Sandbox {
        &mut self.sb
    }
    fn harvest(&self, usage: &mut wop_core::model::Usage) {
        usage.output_bytes = self.response_bytes;
    }
}

impl AbiV1State {
    /// Records a fault (the first one wins) and returns the trap to raise.
    pub(crate) fn fault(&mut self, fault: Fault) -> wasmtime::Error {
        self.sb.fault(fault)
    }

    /// A malformed ABI value from the module.
    pub(crate) fn invalid(&mut self, message: impl Into<String>) -> wasmtime::Error {
        self.fault(Fault::Trap {
            kind: "invalid-abi".to_owned(),
            message: message.into(),
        })
    }

    /// Total cap on variable/channel state held for the module.
    fn state_cap(&self) -> u64 {
        self.sb.limits.host_arg_bytes.saturating_mul(4)
    }
}

/// The marker error of a suspension through `openwop_interrupt`.
pub(crate) const SUSPENDED: &str = "wop: node suspended through openwop_interrupt";

/// The module's memory: the host-provided one, else its `memory` export.
pub(crate) fn memory_of(caller: &mut Caller<'_, AbiV1State>) -> wasmtime::Result<Memory> {
    if let Some(m) = caller.data().memory {
        return Ok(m);
    }
    match caller.get_export("memory") {
        Some(Extern::Memory(m)) => Ok(m),
        _ => Err(caller
            .data_mut()
            .invalid("the module has no linear memory (export `memory` or import `env.memory`)")),
    }
}

/// Whether `[ptr, ptr+len)` lies inside a memory of `size` bytes.
pub(crate) fn in_bounds(ptr: u32, len: u32, size: usize) -> bool {
    u64::from(ptr) + u64::from(len) <= size as u64
}

/// Copies `[ptr, ptr+len)` out of guest memory after a bounds check.
fn read(
    caller: &mut Caller<'_, AbiV1State>,
    what: &str,
    ptr: u32,
    len: u32,
) -> wasmtime::Result<Vec<u8>> {
    let mem = memory_of(caller)?;
    let size = mem.data_size(&*caller);
    if !in_bounds(ptr, len, size) {
        return Err(caller.data_mut().invalid(format!(
            "{what}: (ptr {ptr}, len {len}) lies past the end of memory ({size} bytes)"
        )));
    }
    let start = ptr as usize;
    caller.data_mut().sb.charge(len as usize);
    Ok(mem.data(&*caller)[start..start + len as usize].to_vec())
}

/// Hands bytes to the module: `openwop_alloc(len)` in the guest, a bounds
/// check of what it returned, then a copy. The module frees the buffer.
async fn give(caller: &mut Caller<'_, AbiV1State>, bytes: &[u8]) -> wasmtime::Result<(u32, u32)> {
    let len = u32::try_from(bytes.len()).map_err(|_| {
        caller
            .data_mut()
            .invalid("value too large for a 32-bit memory")
    })?;
    if len == 0 {
        return Ok((0, 0));
    }
    caller.data_mut().sb.charge(bytes.len());
    let alloc = match caller.get_export("openwop_alloc") {
        Some(Extern::Func(f)) => f,
        _ => {
            return Err(caller
                .data_mut()
                .invalid("the module does not export openwop_alloc"));
        }
    };
    let alloc = alloc
        .typed::<i32, i32>(&*caller)
        .map_err(|e| caller.data_mut().invalid(format!("openwop_alloc: {e}")))?;
    let depth = caller.data().reentry.saturating_add(1);
    if depth > MAX_REENTRY {
        return Err(caller.data_mut().fault(Fault::Reentrancy {
            limit: MAX_REENTRY.into(),
            observed: depth.into(),
        }));
    }
    caller.data_mut().reentry = depth;
    let called = alloc.call_async(&mut *caller, len as i32).await;
    caller.data_mut().reentry = depth - 1;
    let ptr = called? as u32;
    let mem = memory_of(caller)?;
    let size = mem.data_size(&*caller);
    if ptr == 0 || !in_bounds(ptr, len, size) {
        return Err(caller.data_mut().invalid(format!(
            "openwop_alloc({len}) returned {ptr}, which is not a usable buffer in a memory of {size} bytes"
        )));
    }
    mem.write(&mut *caller, ptr as usize, bytes).map_err(|e| {
        caller
            .data_mut()
            .invalid(format!("writing to the module: {e}"))
    })?;
    Ok((ptr, len))
}

fn arg(params: &[Val], i: usize) -> u32 {
    match params.get(i) {
        Some(Val::I32(v)) => *v as u32,
        _ => 0,
    }
}

/// Reads a key or channel name; `None` if it is too long or not UTF-8.
fn key(
    caller: &mut Caller<'_, AbiV1State>,
    ptr: u32,
    len: u32,
) -> wasmtime::Result<Option<String>> {
    if len > MAX_KEY_BYTES {
        // Still bounds-checked: a bad pointer is a fault, not a miss.
        let mem = memory_of(caller)?;
        let size = mem.data_size(&*caller);
        if !in_bounds(ptr, len, size) {
            return Err(caller.data_mut().invalid(format!(
                "key: (ptr {ptr}, len {len}) lies past the end of memory ({size} bytes)"
            )));
        }
        return Ok(None);
    }
    let bytes = read(caller, "key", ptr, len)?;
    Ok(String::from_utf8(bytes).ok())
}

/// Runs one host function.
pub(crate) async fn call(
    f: HostFn,
    mut caller: Caller<'_, AbiV1State>,
    params: &[Val],
    results: &mut [Val],
) -> wasmtime::Result<()> {
    let (abi, enc) = match f {
        HostFn::Identity => {
            caller
                .data_mut()
                .sb
                .enter("probe", None, 0, Loop::Outside)?;
            if let (Some(r), Some(p)) = (results.first_mut(), params.first()) {
                *r = *p;
            }
            return Ok(());
        }
        HostFn::Abi(a, e) => (a, e),
    };
    // Arguments are (ptr, len) pairs read after entry; each read is
    // bounds-checked and charged as it copies.
    caller
        .data_mut()
        .sb
        .enter(abi.interface(), Some(abi.capability()), 0, Loop::Outside)?;
    match abi {
        AbiImport::Log => {
            let (level, ptr, len) = (arg(params, 0) as i32, arg(params, 1), arg(params, 2));
            let line_cap =
                u32::try_from(caller.data().sb.limits.log_line_bytes).unwrap_or(u32::MAX);
            let mem = memory_of(&mut caller)?;
            let size = mem.data_size(&caller);
            if !in_bounds(ptr, len, size) {
                return Err(caller.data_mut().invalid(format!(
                    "openwop_log: (ptr {ptr}, len {len}) lies past the end of memory ({size} bytes)"
                )));
            }
            // Copy at most one byte past the line cap: the log cuts it with
            // a marker, and a huge message costs the host nothing.
            let take = len.min(line_cap.saturating_add(1));
            let bytes = read(&mut caller, "openwop_log", ptr, take)?;
            let text = String::from_utf8_lossy(&bytes);
            let level = match level {
                i32::MIN..=1 => LogLevel::Debug, // 0 = trace, 1 = debug
                2 => LogLevel::Info,
                3 => LogLevel::Warn,
                _ => LogLevel::Error,
            };
            let log = caller.data().sb.log.clone();
            with_log(&log, |l| l.log(level, &text, None));
        }
        AbiImport::NowMs => {
            let t = caller.data_mut().sb.clock.now_ms();
            if let Some(r) = results.first_mut() {
                *r = Val::I64(t as i64);
            }
        }
        AbiImport::Random => {
            let (ptr, len) = (arg(params, 0), arg(params, 1));
            if len > MAX_RANDOM {
                let (limit, observed) = (MAX_RANDOM.into(), len.into());
                return Err(caller.data_mut().sb.host_cap(
                    BreachKind::RandomBytes,
                    limit,
                    observed,
                ));
            }
            let mem = memory_of(&mut caller)?;
            let size = mem.data_size(&caller);
            if !in_bounds(ptr, len, size) {
                return Err(caller.data_mut().invalid(format!(
                    "openwop_random: (ptr {ptr}, len {len}) lies past the end of memory ({size} bytes)"
                )));
            }
            caller.data_mut().sb.charge(len as usize);
            let mut buf = vec![0u8; len as usize];
            caller.data_mut().sb.rng().fill(&mut buf);
            mem.write(&mut caller, ptr as usize, &buf)
                .map_err(|e| caller.data_mut().invalid(format!("openwop_random: {e}")))?;
        }
        AbiImport::VariableGet | AbiImport::ChannelRead => {
            let enc = enc.unwrap_or(PairEncoding::MultiValue);
            let k = key(&mut caller, arg(params, 0), arg(params, 1))?;
            let value = k.and_then(|k| {
                let s = caller.data();
                let map = if abi == AbiImport::VariableGet {
                    &s.variables
                } else {
                    &s.channels
                };
                map.get(&k).map(|v| v.to_string())
            });
            let (ptr, len) = match value {
                Some(v) => give(&mut caller, v.as_bytes()).await?,
                None => (0, 0),
            };
            enc.encode(ptr, len, results);
        }
        AbiImport::VariableSet | AbiImport::ChannelWrite => {
            let st = set(&mut caller, abi, params)?;
            if let Some(r) = results.first_mut() {
                *r = Val::I32(st);
            }
        }
        AbiImport::Interrupt => {
            let enc = enc.unwrap_or(PairEncoding::MultiValue);
            let (ptr, len) = (arg(params, 0), arg(params, 1));
            caller.data_mut().sb.check_arg(len as usize)?;
            let bytes = read(&mut caller, "openwop_interrupt", ptr, len)?;
            let payload = match serde_json::from_slice::<serde::de::IgnoredAny>(&bytes)
                .map_err(|e| e.to_string())
                .and_then(|_| String::from_utf8(bytes).map_err(|e| e.to_string()))
            {
                Ok(text) => text,
                Err(e) => {
                    return Err(caller
                        .data_mut()
                        .invalid(format!("openwop_interrupt: the payload is not JSON: {e}")));
                }
            };
            match caller.data_mut().resume.take() {
                Some(resume) => {
                    let (p, l) = give(&mut caller, resume.to_string().as_bytes()).await?;
                    enc.encode(p, l, results);
                }
                None => {
                    caller.data_mut().suspended = Some(payload);
                    return Err(wasmtime::Error::msg(SUSPENDED));
                }
            }
        }
    }
    Ok(())
}

/// `openwop_variable_set` / `openwop_channel_write`: the status code.
fn set(
    caller: &mut Caller<'_, AbiV1State>,
    abi: AbiImport,
    params: &[Val],
) -> wasmtime::Result<i32> {
    let (kp, kl, vp, vl) = (
        arg(params, 0),
        arg(params, 1),
        arg(params, 2),
        arg(params, 3),
    );
    let k = key(caller, kp, kl)?;
    let cap = caller.data().sb.limits.host_arg_bytes;
    if u64::from(vl) > cap {
        let mem = memory_of(caller)?;
        let size = mem.data_size(&*caller);
        if !in_bounds(vp, vl, size) {
            return Err(caller.data_mut().invalid(format!(
                "value: (ptr {vp}, len {vl}) lies past the end of memory ({size} bytes)"
            )));
        }
        return Ok(status::CAPABILITY_BREACH);
    }
    let bytes = read(caller, "value", vp, vl)?;
    let Some(k) = k else {
        return Ok(if kl > MAX_KEY_BYTES {
            status::CAPABILITY_BREACH
        } else {
            status::VALIDATION
        });
    };
    let Ok(value) = serde_json::from_slice::<Value>(&bytes) else {
        return Ok(status::VALIDATION);
    };
    let s = caller.data_mut();
    if abi == AbiImport::ChannelWrite && !s.channels.contains_key(&k) {
        return Ok(status::NOT_FOUND);
    }
    let cap = s.state_cap();
    let map = if abi == AbiImport::VariableSet {
        &mut s.variables
    } else {
        &mut s.channels
    };
    // An overwrite frees what the old value held: the counter is the
    // bytes held now, not the bytes ever written.
    let add = entry_bytes(&k, &value);
    let freed = map.get(&k).map_or(0, |old| entry_bytes(&k, old));
    let held = s.state_bytes.saturating_sub(freed);
    if held.saturating_add(add) > cap {
        return Ok(status::CAPABILITY_BREACH);
    }
    map.insert(k, value);
    s.state_bytes = held + add;
    Ok(status::OK)
}

/// What one variable or channel entry counts against the state cap: its
/// key plus its value as JSON text.
fn entry_bytes(key: &str, value: &Value) -> u64 {
    (key.len() + wop_core::json::size::text_len(value)) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_round_trip_in_both_encodings() {
        let mut multi = [Val::I32(0), Val::I32(0)];
        PairEncoding::MultiValue.encode(0xdead_beef, 7, &mut multi);
        assert_eq!(
            PairEncoding::MultiValue.decode(&multi),
            Some((0xdead_beef, 7))
        );
        let mut packed = [Val::I64(0)];
        PairEncoding::PackedI64.encode(16, u32::MAX, &mut packed);
        assert!(matches!(packed[0], Val::I64(v) if v as u64 == (u64::from(u32::MAX) << 32) | 16));
        assert_eq!(
            PairEncoding::PackedI64.decode(&packed),
            Some((16, u32::MAX))
        );
        assert_eq!(PairEncoding::PackedI64.decode(&multi), None);
    }

    #[test]
    fn bounds() {
        assert!(in_bounds(0, 0, 0));
        assert!(in_bounds(10, 6, 16));
        assert!(!in_bounds(10, 7, 16));
        assert!(!in_bounds(u32::MAX, u32::MAX, 1 << 32));
        assert!(in_bounds(u32::MAX, 1, 1 << 32));
        assert!(!in_bounds(1, u32::MAX, 65536));
    }
}
