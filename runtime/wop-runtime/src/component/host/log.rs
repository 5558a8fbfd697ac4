//! `openwop:node-pack/log`: lines into the bounded invocation log.

use crate::component::bindings::log::{Host, Level};
use crate::component::state::HostState;
use crate::sandbox::Loop;
use wop_core::capability::Capability;
use wop_core::events::LogLevel;
use wop_core::logbuf::with_log;

impl Host for HostState {
    fn log(
        &mut self,
        level: Level,
        message: String,
        fields: Option<String>,
    ) -> wasmtime::Result<()> {
        // Fields count against the argument cap because they are parsed; a
        // message is capped per line (cut, not a trap) but was copied out
        // of the guest whole, so it is charged all the same.
        let fields_len = fields.as_ref().map_or(0, String::len);
        self.sb
            .enter("log", Some(Capability::Log), fields_len, Loop::Outside)?;
        self.sb.charge(message.len());
        let level = match level {
            Level::Debug => LogLevel::Debug,
            Level::Info => LogLevel::Info,
            Level::Warn => LogLevel::Warn,
            Level::Error => LogLevel::Error,
        };
        let fields = match fields.map(|f| serde_json::from_str::<serde_json::Value>(&f)) {
            None => None,
            Some(Ok(v)) if v.is_object() => Some(v),
            Some(_) => {
                with_log(&self.sb.log, |l| {
                    l.log(
                        LogLevel::Warn,
                        "[wop] log fields dropped: they must be a JSON object",
                        None,
                    )
                });
                None
            }
        };
        with_log(&self.sb.log, |l| l.log_owned(level, message, fields));
        Ok(())
    }
}
