//! `openwop:node-pack/http` (safe-fetch).
//!
//! Deny by default: no destination is granted to any pack yet, so every
//! fetch is refused with `egress_denied` (`reason: not-allowed`) before any
//! name is resolved or any connection is made.

use crate::bindings::http::{Host, Request, Response};
use crate::bindings::types::ErrorInfo;
use crate::capability::Capability;
use crate::error::ErrorCode;
use crate::host::error_info;
use crate::state::HostState;
use serde_json::json;

impl Host for HostState {
    async fn safe_fetch(
        &mut self,
        request: Request,
    ) -> wasmtime::Result<Result<Response, ErrorInfo>> {
        self.count("http");
        self.require(Capability::Http)?;
        let size = request.url.len()
            + request.body.as_ref().map_or(0, Vec::len)
            + request
                .headers
                .iter()
                .map(|h| h.name.len() + h.value.len())
                .sum::<usize>();
        self.check_arg(size)?;
        Ok(Err(error_info(
            ErrorCode::EgressDenied,
            "no egress destination is granted to this pack",
            json!({"reason": "not-allowed"}),
        )))
    }
}
