//! # wop-sdk: OpenWOP node packs in Rust
//!
//! A node pack is a WebAssembly component that implements one or more
//! OpenWOP node types. The runtime instantiates it in a sandbox for every node
//! invocation and hands it a capability-scoped [`Ctx`]: structured logging, a
//! replay-safe clock and random source, gated tool calls, SSRF-guarded HTTP
//! and MCP clients. Everything else (files, sockets, environment) is denied
//! unless the operator grants it.
//!
//! This crate hides the component plumbing (`wit-bindgen`, the
//! `openwop:node-pack@0.1.0` WIT contract, JSON crossing as strings):
//! implement [`Pack`] for a type and export it with [`export_pack!`]. JSON
//! values are [`serde_json::Value`] throughout.
//!
//! ## Capabilities are what you call
//!
//! The runtime judges a pack by the host interfaces its component imports, and
//! the component only imports what the pack's code actually calls. A pack that
//! only logs imports `openwop:node-pack/log` and needs no grant for `tools`,
//! `http` or `mcp`. List the interfaces you use in `pack.json`
//! (`x-wop.capabilities`): `log` ([`Ctx::log`]), `clock` ([`Ctx::now_ms`]),
//! `random` ([`Ctx::random_bytes`]), `tools` ([`Ctx::tools`]), `http`
//! ([`Ctx::http`]) and `mcp` ([`Ctx::mcp`]).
//!
//! Every component also imports `openwop:node-pack/types` (type definitions
//! only, no functions) and the WASI interfaces Rust's standard library needs
//! at minimum (`wasi:cli` stdio/environment/exit, `wasi:io`). Using
//! `std::fs`, `std::net`, `SystemTime` or OS randomness adds `wasi:filesystem`,
//! `wasi:sockets`, `wasi:clocks` or `wasi:random` imports, which the runtime
//! may refuse; prefer [`Ctx::now_ms`] and [`Ctx::random_bytes`], which are
//! replay-safe.
//!
//! ## Credentials without seeing them
//!
//! A node that calls an authenticated API declares the secret in
//! `pack.json` (`"requiresSecrets": [{"id": "stripe", "kind": "api-key"}]`
//! on the node); the operator provides the value and where it may go, and
//! the host attaches it to requests in that audience. The pack never sees
//! it (echoes come back as `[redacted:stripe]`); a node whose secret is not
//! provided fails before it runs with `credential_unavailable`. Use
//! [`HttpRequest::credential`] to make a request outside the audience fail
//! instead of going out unauthenticated.
//!
//! ## Example
//!
//! `Cargo.toml`:
//!
//! ```toml
//! [package]
//! name = "greeter"
//! version = "0.1.0"
//! edition = "2024"
//!
//! [lib]
//! crate-type = ["cdylib"]
//!
//! [dependencies]
//! wop-sdk = { path = "../sdk/rust" }
//! serde = { version = "1", features = ["derive"] }
//! serde_json = "1"
//! ```
//!
//! `src/lib.rs`:
//!
//! ```no_run
//! use serde::Deserialize;
//! use serde_json::json;
//! use wop_sdk::{Ctx, NodeError, Outcome, Pack, PackInfo, Request};
//!
//! struct Greeter;
//!
//! #[derive(Deserialize)]
//! struct Inputs {
//!     name: Option<String>,
//!     /// Optional: a tool that looks up the person's title.
//!     title_tool: Option<String>,
//! }
//!
//! impl Pack for Greeter {
//!     fn describe() -> PackInfo {
//!         // Must match pack.json: name, version and every node type.
//!         PackInfo::new("greeter", "0.1.0").node("acme.greeter", "0.1.0")
//!     }
//!
//!     fn invoke(ctx: &Ctx, request: Request) -> Result<Outcome, NodeError> {
//!         // A bad input becomes a `validation_error` node failure.
//!         let inputs: Inputs = request.inputs_as()?;
//!         let name = inputs.name.unwrap_or_else(|| "world".to_owned());
//!
//!         let mut greeting = format!("Hello, {name}!");
//!         if let Some(tool) = inputs.title_tool {
//!             // A denied or failed tool call fails the node with the tool
//!             // error's code (`forbidden`, `not_found`, ...) through `?`.
//!             let title = ctx.tools().call(&tool, &json!({ "name": name }), None)?;
//!             if let Some(title) = title.as_str() {
//!                 greeting = format!("Hello, {title} {name}!");
//!             }
//!         }
//!
//!         ctx.log().info_with("greeted", &json!({ "name": name }));
//!         Outcome::completed(json!({ "greeting": greeting }))
//!     }
//! }
//!
//! wop_sdk::export_pack!(Greeter);
//! ```
//!
//! Build it with `cargo build --release --target wasm32-wasip2`; the
//! `.wasm` file in `target/wasm32-wasip2/release/` is the component.
#![deny(missing_docs)]

mod ctx;
mod error;
mod http;
mod mcp;
mod tools;
mod types;

pub use ctx::{Ctx, Level, Log};
pub use error::{NodeError, codes};
pub use http::{Http, HttpRequest, HttpResponse};
pub use mcp::{Mcp, McpError, McpErrorKind};
pub use tools::{SafetyTier, ToolDescriptor, ToolError, ToolErrorKind, Tools};
pub use types::{NodeContext, NodeInfo, Outcome, PackInfo, Request};

/// Re-export of `serde_json`, the JSON representation used by this SDK.
pub use serde_json;

/// A node pack: its self-description and its node entry point.
///
/// Implement it for a (usually empty) type and export that type with
/// [`export_pack!`]. The runtime creates a fresh instance of the component for
/// every invocation, so state in statics does not survive between
/// invocations.
pub trait Pack {
    /// Describe the pack: name, version and the node types it implements.
    ///
    /// Must return exactly what the pack's `pack.json` declares; the runtime
    /// checks it at load. Must be pure and cheap: it runs in a sandbox with no
    /// capabilities beyond logging.
    fn describe() -> PackInfo;

    /// Run one node invocation.
    ///
    /// `request.context.type_id` says which of the pack's node types is
    /// invoked. Return [`Outcome::Completed`] with the node's output,
    /// [`Outcome::Suspended`] to wait for outside input (the runtime invokes
    /// again with [`Request::resume`] set), or a [`NodeError`]: the node's own
    /// failure, reported with its code and message.
    fn invoke(ctx: &Ctx, request: Request) -> Result<Outcome, NodeError>;
}

/// Export a [`Pack`] implementation as the component's `node` interface.
///
/// Use it exactly once, at the top level of the pack's `cdylib` crate:
///
/// ```ignore
/// struct MyPack;
/// impl wop_sdk::Pack for MyPack { /* ... */ }
/// wop_sdk::export_pack!(MyPack);
/// ```
#[macro_export]
macro_rules! export_pack {
    ($pack:ty) => {
        const _: () = {
            struct __WopPackExport;

            impl $crate::__private::Guest for __WopPackExport {
                fn describe() -> $crate::__private::WitPackInfo {
                    $crate::__private::describe::<$pack>()
                }

                fn invoke(
                    request: $crate::__private::WitRequest,
                ) -> ::core::result::Result<
                    $crate::__private::WitOutcome,
                    $crate::__private::WitErrorInfo,
                > {
                    $crate::__private::invoke::<$pack>(request)
                }
            }

            $crate::bindings::__wop_export_bindings!(__WopPackExport with_types_in $crate::bindings);
        };
    };
}

/// Generated component bindings. Not part of the public API.
#[doc(hidden)]
pub mod bindings {
    #![allow(missing_docs)]

    wit_bindgen::generate!({
        path: "../../wit",
        world: "node-pack",
        pub_export_macro: true,
        export_macro_name: "__wop_export_bindings",
        default_bindings_module: "wop_sdk::bindings",
    });
}

/// Glue used by [`export_pack!`]. Not part of the public API.
#[doc(hidden)]
pub mod __private {
    pub use crate::bindings::exports::openwop::node_pack::node::{
        Guest, Outcome as WitOutcome, PackInfo as WitPackInfo, Request as WitRequest,
    };
    pub use crate::bindings::openwop::node_pack::types::ErrorInfo as WitErrorInfo;

    use crate::{Ctx, Pack, Request};

    /// `describe` for the pack type `P`.
    pub fn describe<P: Pack>() -> WitPackInfo {
        P::describe().into_wit()
    }

    /// `invoke` for the pack type `P`.
    pub fn invoke<P: Pack>(request: WitRequest) -> Result<WitOutcome, WitErrorInfo> {
        let request = Request::from_wit(request).map_err(|e| e.into_wit())?;
        let ctx = Ctx::new();
        match P::invoke(&ctx, request) {
            Ok(outcome) => Ok(outcome.into_wit()),
            Err(error) => Err(error.into_wit()),
        }
    }
}
