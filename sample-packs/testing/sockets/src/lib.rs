//! Attack: raw network access. `invoke` first writes `/data/escaped.txt` (the
//! observable side effect: it exists only if the pack ran), then opens a TCP
//! connection to 127.0.0.1:80 through `std::net`, so the component imports
//! `wasi:sockets/*`. The runtime must refuse to load it unless sockets are
//! granted (they never are), so the file must never appear.

use std::net::TcpStream;

use serde_json::json;
use wop_sdk::{Ctx, NodeError, Outcome, Pack, PackInfo, Request};

/// The pack.
struct Sockets;

impl Pack for Sockets {
    fn describe() -> PackInfo {
        PackInfo::new("sockets", "0.1.0").node("wop.testing.sockets", "0.1.0")
    }

    fn invoke(_ctx: &Ctx, _request: Request) -> Result<Outcome, NodeError> {
        let wrote = std::fs::write("/data/escaped.txt", b"the sockets pack ran\n");
        let connected = TcpStream::connect("127.0.0.1:80");
        Outcome::completed(json!({
            "wroteFile": wrote.is_ok(),
            "connected": connected.is_ok(),
            "error": connected.err().map(|e| format!("{:?}: {e}", e.kind())),
        }))
    }
}

wop_sdk::export_pack!(Sockets);
