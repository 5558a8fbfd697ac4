//! `openwop:node-pack/http` (safe-fetch): converts WIT ⇄ the gate
//! session's fetch (egress checks, `egress.decided`, the gate as the tool
//! `http:<host>`; see `wop_gate::fetch`). Never decides.

use crate::component::bindings::http::{Header, Host, Request, Response};
use crate::component::bindings::types::ErrorInfo;
use crate::component::host::gate_error_info;
use crate::component::state::HostState;
use crate::sandbox::Loop;
use wop_core::capability::Capability;
use wop_gate::fetch::{self, FetchRequest};

impl Host for HostState {
    async fn safe_fetch(
        &mut self,
        request: Request,
    ) -> wasmtime::Result<Result<Response, ErrorInfo>> {
        let size = request.url.len()
            + request.method.len()
            + request.idempotency_key.as_ref().map_or(0, String::len)
            + request.body.as_ref().map_or(0, Vec::len)
            + request
                .headers
                .iter()
                .map(|h| h.name.len() + h.value.len())
                .sum::<usize>();
        self.sb
            .enter("http", Some(Capability::Http), size, Loop::Round)?;
        if let Ok(u) = wop_core::egress::parse_url(&request.url) {
            self.sb.meter.target(&wop_core::egress::rough_authority(&u));
        }
        let request = FetchRequest {
            method: request.method,
            url: request.url,
            headers: request
                .headers
                .into_iter()
                .map(|h| fetch::Header {
                    name: h.name,
                    value: h.value,
                })
                .collect(),
            body: request.body,
            idempotency_key: request.idempotency_key,
        };
        let r = self.session.fetch(request).await;
        Ok(r.map(|r| Response {
            status: r.status,
            headers: r
                .headers
                .into_iter()
                .map(|h| Header {
                    name: h.name,
                    value: h.value,
                })
                .collect(),
            body: r.body,
        })
        .map_err(gate_error_info))
    }
}
