//! The invocation context: the host capabilities a pack may use.

use std::marker::PhantomData;

use serde_json::Value;

use crate::bindings::openwop::node_pack::{clock, log, random};
use crate::http::Http;
use crate::mcp::Mcp;
use crate::tools::Tools;

/// The host capabilities available to one node invocation.
///
/// Every call is bound by the host to this invocation (run, node, tenant,
/// attempt, principal). Each accessor corresponds to one host interface; a
/// pack only imports (and so only needs grants for) the interfaces it
/// actually calls.
#[derive(Debug)]
pub struct Ctx {
    _private: (),
}

impl Ctx {
    pub(crate) fn new() -> Self {
        Self { _private: () }
    }

    /// Structured logging (`log` capability). Every line becomes a
    /// `log.appended` event of the run.
    pub fn log(&self) -> Log<'_> {
        Log { _ctx: PhantomData }
    }

    /// The host clock in milliseconds since the Unix epoch (`clock`
    /// capability).
    ///
    /// Replay-safe: derived from the invocation, so a re-execution of the same
    /// attempt sees the same values; it advances by 1 ms per call.
    pub fn now_ms(&self) -> u64 {
        clock::now_ms()
    }

    /// `len` bytes from the host's random stream (`random` capability).
    ///
    /// Replay-safe: seeded per (run, node, attempt), so a re-execution of the
    /// same attempt sees identical bytes. Not for key material. Large requests
    /// are split into host calls of at most 64 KiB.
    pub fn random_bytes(&self, len: usize) -> Vec<u8> {
        const MAX_CHUNK: usize = 65536;
        let mut out = Vec::with_capacity(len);
        while out.len() < len {
            let chunk = (len - out.len()).min(MAX_CHUNK);
            // `chunk` <= 65536 always fits in a u32.
            let chunk = u32::try_from(chunk).unwrap_or(u32::MAX);
            let bytes = random::fill(chunk);
            if bytes.is_empty() {
                break;
            }
            out.extend_from_slice(&bytes);
        }
        out.truncate(len);
        out
    }

    /// Tool calls through the host's gate (`tools` capability).
    pub fn tools(&self) -> Tools<'_> {
        Tools::new()
    }

    /// SSRF-guarded HTTP egress (`http` capability).
    pub fn http(&self) -> Http<'_> {
        Http::new()
    }

    /// The MCP servers the operator attached (`mcp` capability).
    pub fn mcp(&self) -> Mcp<'_> {
        Mcp::new()
    }
}

/// Severity of a log line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Level {
    /// Diagnostic detail.
    Debug,
    /// Normal progress.
    Info,
    /// Something unexpected that the node handled.
    Warn,
    /// A failure.
    Error,
}

/// Structured logging, from [`Ctx::log`].
///
/// Messages longer than the host's cap are truncated; `fields` must be a JSON
/// object (the host drops anything else with a warning).
#[derive(Debug, Clone, Copy)]
pub struct Log<'a> {
    _ctx: PhantomData<&'a Ctx>,
}

impl Log<'_> {
    /// Append one line at `level`, with optional structured `fields`.
    pub fn write(&self, level: Level, message: &str, fields: Option<&Value>) {
        let level = match level {
            Level::Debug => log::Level::Debug,
            Level::Info => log::Level::Info,
            Level::Warn => log::Level::Warn,
            Level::Error => log::Level::Error,
        };
        let fields = fields.map(Value::to_string);
        log::log(level, message, fields.as_deref());
    }

    /// Log `message` at debug level.
    pub fn debug(&self, message: &str) {
        self.write(Level::Debug, message, None);
    }

    /// Log `message` at info level.
    pub fn info(&self, message: &str) {
        self.write(Level::Info, message, None);
    }

    /// Log `message` at warn level.
    pub fn warn(&self, message: &str) {
        self.write(Level::Warn, message, None);
    }

    /// Log `message` at error level.
    pub fn error(&self, message: &str) {
        self.write(Level::Error, message, None);
    }

    /// Log `message` with `fields` (a JSON object) at debug level.
    pub fn debug_with(&self, message: &str, fields: &Value) {
        self.write(Level::Debug, message, Some(fields));
    }

    /// Log `message` with `fields` (a JSON object) at info level.
    pub fn info_with(&self, message: &str, fields: &Value) {
        self.write(Level::Info, message, Some(fields));
    }

    /// Log `message` with `fields` (a JSON object) at warn level.
    pub fn warn_with(&self, message: &str, fields: &Value) {
        self.write(Level::Warn, message, Some(fields));
    }

    /// Log `message` with `fields` (a JSON object) at error level.
    pub fn error_with(&self, message: &str, fields: &Value) {
        self.write(Level::Error, message, Some(fields));
    }
}
