//! Host side of the WIT imports: one module per interface, each small.
//! Every module translates WIT ⇄ domain; policy lives below (gate, policy).

mod clock;
mod http;
mod log;
mod mcp;
mod random;
mod stdio;
mod streams;
mod tools;
pub(crate) mod wasi;
pub(crate) mod wasi_ctx;

use crate::component::bindings::{NodePack, types};
use crate::component::state::HostState;
use wasmtime::component::{HasSelf, Linker};

impl types::Host for HostState {}

/// Builds the linker shared by every component pack: WASI with no ambient
/// authority (no sockets at all) plus the `openwop:node-pack` imports.
pub(crate) fn linker(engine: &wasmtime::Engine) -> wasmtime::Result<Linker<HostState>> {
    let mut l = Linker::new(engine);
    wasi::add_to_linker(&mut l)?;
    NodePack::add_to_linker::<HostState, HasSelf<HostState>>(&mut l, |s| s)?;
    Ok(l)
}

/// The WIT `error-info` of a gate error.
pub(crate) fn gate_error_info(e: wop_gate::GateError) -> types::ErrorInfo {
    types::ErrorInfo {
        code: e.code.as_str().to_owned(),
        message: e.message,
        details: if e.details.is_null() {
            None
        } else {
            Some(e.details.to_string())
        },
    }
}

/// Builds an `error-info` value.
pub(crate) fn error_info(
    code: wop_core::error::ErrorCode,
    message: impl Into<String>,
    details: serde_json::Value,
) -> types::ErrorInfo {
    types::ErrorInfo {
        code: code.as_str().to_owned(),
        message: message.into(),
        details: if details.is_null() {
            None
        } else {
            Some(details.to_string())
        },
    }
}
