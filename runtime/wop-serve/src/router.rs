//! Every route of the service in one table, behind the `Origin`/`Host`
//! guard, with the error bodies of an unknown route and a method a route
//! does not serve.

use crate::api::{ApiCode, ApiError};
use crate::state::AppState;
use crate::{console, guard, invocations, mcp, routes};
use axum::Router;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get, post};
use wop_runtime::error::ErrorCode;

/// Every route.
pub(crate) fn router(state: AppState) -> Router {
    Router::new()
        .route("/.well-known/openwop", get(routes::well_known))
        .route("/healthz", get(routes::healthz))
        .route("/metrics", get(routes::metrics))
        .route("/console", get(console::get))
        .route("/console/login", post(console::login))
        .route("/console/logout", post(console::logout))
        .route("/mcp", post(mcp::post).fallback(any(mcp::not_allowed)))
        .route("/tools", get(routes::tools))
        .route("/tools/{tool_id}", get(routes::tool))
        .route("/runs/{run_id}/effects", get(routes::effects))
        .route("/host/wop/invocations", post(invocations::post))
        .route("/host/wop/usage", get(routes::usage))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        // Origin and Host first, on every route (crate::guard).
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            guard::layer,
        ))
        .with_state(state)
}

async fn not_found() -> Response {
    ApiError::new(StatusCode::NOT_FOUND, ErrorCode::NotFound, "no such route").into_response()
}

async fn method_not_allowed() -> Response {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        ApiCode::MethodNotAllowed,
        "this route does not serve that method",
    )
    .into_response()
}
