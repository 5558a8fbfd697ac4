//! # wop-serve
//!
//! The executor service: attaches `wop` to a workflow host over HTTP.
//!
//! - `POST /mcp`: a stateless MCP server mount (Streamable HTTP, one
//!   `application/json` answer per POST), one tool per loaded node type.
//! - `POST /host/wop/invocations`: the invoke API (JSON, or
//!   `text/event-stream` with events as they arrive).
//! - `GET /.well-known/openwop`, `/tools`, `/tools/{toolId}`,
//!   `/runs/{runId}/effects`, `/host/wop/usage`, `/healthz`.
//!
//! ```no_run
//! # async fn demo() -> Result<(), wop_serve::ServeError> {
//! let mut opts = wop_serve::ServeOptions::new("127.0.0.1:8787".parse().unwrap_or_else(|_| unreachable!()));
//! opts.packs_dir("packs").memory_store();
//! wop_serve::serve(opts, async { let _ = tokio::signal::ctrl_c().await; }).await
//! # }
//! ```
//!
//! Server settings (tokens, limits, anonymous loopback) are a
//! [`ServeConfig`] (`serve.toml`); the operator policy stays a
//! [`wop_runtime::Policy`]. See the crate README.
//!
//! ## Rooms
//!
//! Each file uses only the rooms above it (no import circle; checked by
//! `.ci/structure.py`). From the bottom:
//!
//! - `config`: `serve.toml` ([`ServeConfig`], tokens, trusted proxies,
//!   origin normalization); uses nothing.
//! - `allocator`: the binaries' global allocator and its purge; uses
//!   nothing.
//! - `wire`: RFC 3339 times and run ids in paths; uses nothing.
//! - `detach`, `io`, `sse`, `inline_wake`: an invocation the caller
//!   cannot cancel, the connection write timeout, one caller's event
//!   stream, a connection's own wake-ups polled in place (decision 0060);
//!   use nothing.
//! - `observe/`: what operators see of finished invocations (`metrics`:
//!   `/metrics`; `recent`: the console's ring and cost series), fed by one
//!   `Observers::observe`; uses nothing.
//! - `console/sessions`: the console's sign-in sessions; uses nothing.
//! - `state`: what every handler shares (`Shared`: runtime, settings,
//!   tokens, node types, slots, observers, sessions); uses config,
//!   observe, console/sessions.
//! - `api`: error bodies, bounded body reading, authentication and the
//!   operator scope; uses config, state.
//! - `idem`: idempotency keys as effect claims (claim → settle, release
//!   on a cut drain); uses state.
//! - `idle`: the idle memory release; uses allocator, state.
//! - `guard`: `Origin`/`Host` checks before anything runs; uses api,
//!   config, state.
//! - `invoke`: one node invocation (prepare → claim → perform → settle)
//!   and its response shape; uses idem, detach, sse, state.
//! - `invocations`: `POST /host/wop/invocations`; uses api, invoke, idem,
//!   sse, state.
//! - `mcp`: the `POST /mcp` mount; uses api, invoke, state.
//! - `routes`: the OpenWOP read routes and the capability document; uses
//!   api, state, wire.
//! - `console/`: `GET /console` and sign-in (`page`, `chart`, `html`);
//!   uses api, config, observe, state, wire.
//! - `router`: every route behind the guard; uses invocations, mcp,
//!   routes, console, guard, api, state.
//! - `server`, `cli`: start-up, the accept loop, the drain, the command
//!   line; use router, inline_wake and the rooms they start.

pub mod allocator;
mod api;
pub mod cli;
pub mod config;
mod console;
mod detach;
mod guard;
mod idem;
mod idle;
mod ids;
mod inline_wake;
mod invocations;
mod invoke;
mod io;
mod mcp;
mod observe;
mod retention;
mod router;
mod routes;
mod server;
mod slots;
mod sse;
mod state;
mod store_choice;
mod wire;

pub use api::OPERATOR_SCOPE;
pub use config::{ServeConfig, TokenEntry, token_sha256};
pub use mcp::{PREFERRED as MCP_PREFERRED_VERSION, REVISIONS as MCP_REVISIONS};
pub use routes::OPENWOP_VERSION;
pub use server::{ServeError, ServeOptions, Server, StoreChoice, serve};

/// How long a binary waits, once the service (or any command) has
/// returned, for blocking tasks still running before it exits: a sled
/// flush parked after the store failed never ends (decision 0056), and
/// the async runtime would otherwise wait for it forever.
pub const SHUTDOWN_GRACE: std::time::Duration = std::time::Duration::from_secs(5);

/// What the service adds to every finished invocation for its operators,
/// exposed for `fuel-benches` only (not part of the API).
#[doc(hidden)]
pub mod bench {
    use std::time::{Duration, Instant};
    use wop_runtime::InvocationReport;

    /// Records `report` `n` times, exactly as the service does after each
    /// invocation (`Observers::observe`): into the `/metrics` families and
    /// the console's recent ring and cost series. Returns the time the `n` records took.
    pub fn record_observability(
        type_id: &str,
        tenant: &str,
        report: &InvocationReport,
        n: usize,
    ) -> Duration {
        let one = |s: &str| [s.to_owned()].into_iter().collect();
        let observers = crate::observe::Observers::new(crate::observe::metrics::Vocab {
            packs: one(&report.usage.pack),
            node_types: one(type_id),
            tenants: one(tenant),
            ..Default::default()
        });
        let t = Instant::now();
        for i in 0..n {
            observers.observe(&i.to_string(), type_id, tenant, report);
        }
        t.elapsed()
    }
}
