//! Attack: HTTP egress around safe-fetch. `invoke` sends a GET to
//! `http://127.0.0.1:<inputs.port>/` with `wasi:http/outgoing-handler`, so
//! the component imports `wasi:http/*`. The runtime must refuse to load it
//! (`network-escape`), so the request never leaves.

use serde_json::json;
use wasip2::http::outgoing_handler;
use wasip2::http::types::{Fields, OutgoingRequest, Scheme};
use wop_sdk::{Ctx, NodeError, Outcome, Pack, PackInfo, Request};

/// The pack.
struct WasiHttp;

impl Pack for WasiHttp {
    fn describe() -> PackInfo {
        PackInfo::new("wasi-http", "0.1.0").node("wop.testing.wasi-http", "0.1.0")
    }

    fn invoke(_ctx: &Ctx, request: Request) -> Result<Outcome, NodeError> {
        let port = request.inputs["port"].as_u64().unwrap_or(80);
        let req = OutgoingRequest::new(Fields::new());
        let authority = format!("127.0.0.1:{port}");
        let _ = req.set_scheme(Some(&Scheme::Http));
        let _ = req.set_authority(Some(&authority));
        let _ = req.set_path_with_query(Some("/"));
        let sent = outgoing_handler::handle(req, None);
        Outcome::completed(json!({ "sent": sent.is_ok() }))
    }
}

wop_sdk::export_pack!(WasiHttp);
