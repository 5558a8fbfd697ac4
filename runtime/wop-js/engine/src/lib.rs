//! QuickJS behind the `openwop:node-pack` world: the engine every registry
//! JavaScript pack runs in.
//!
//! Two phases, one binary:
//! - **build time** (`wop-js-init`, called once by `wop` under wizer): read
//!   the pack bundle from stdin, evaluate the prelude (`js/`, the protocol's
//!   `ctx` and the web/Node globals the registry's code uses) and the pack's
//!   modules, hand the entry module to the prelude's dispatcher. The heap
//!   is then snapshotted into the component, so a fresh instance starts
//!   with the pack already loaded;
//! - **run time** (`node.invoke`): call the dispatcher, then drive the
//!   promise it returns to completion — run QuickJS's job queue, and when it
//!   is empty fire the next virtual timer — because every host call is
//!   synchronous and nothing else would ever run the queue.
//!
//! Nothing in here decides policy: the host grants, meters and gates every
//! import this engine calls.

mod bundle;
mod drive;
mod init;
mod modules;
mod native;
mod state;

wit_bindgen::generate!({
    path: "../../../wit",
    world: "node-pack",
});

use exports::openwop::node_pack::node::{Guest, Outcome, PackInfo, Request};
use openwop::node_pack::types::ErrorInfo;

struct Engine;

impl Guest for Engine {
    fn describe() -> PackInfo {
        state::describe()
    }

    fn invoke(request: Request) -> Result<Outcome, ErrorInfo> {
        drive::invoke(request)
    }
}

export!(Engine);

/// Build-time initializer (wizer's init function): never called at run time
/// (wizer removes the export from the snapshot).
#[unsafe(no_mangle)]
pub extern "C" fn wop_js_init() {
    init::run();
}
