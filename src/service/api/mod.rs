//! The HTTP surface: the public API (`/v1`, `/v2`, one router file per resource), the
//! ping address of heartbeats (`/ping`, see `service::ping`) and the agent API
//! (`/agent/v1`), with JSON error bodies for every failure including
//! unknown routes, wrong methods and axum's own rejections.

pub mod alert_channels;
pub mod check_results;
pub mod check_sessions;
pub mod checks;
pub mod extract;
pub mod heartbeats;
pub mod locations;
pub mod private_locations;
pub mod projects;
pub mod result_assets;
pub mod runtimes;
pub mod status_pages;
pub mod unread_body;

use axum::Router;
use axum::extract::DefaultBodyLimit;

use super::context::AppState;
use super::errors::{json_errors, method_not_allowed, not_found_route};

/// Largest JSON body of the public API, enforced while the body streams in.
pub const MAX_PUBLIC_BODY_BYTES: usize = 1024 * 1024;

/// The whole router of the service.
pub fn router(ctx: AppState) -> Router {
    let public = Router::new()
        .merge(checks::routes())
        .merge(check_sessions::routes())
        .merge(check_results::routes())
        .merge(heartbeats::routes())
        .merge(alert_channels::routes())
        .merge(locations::routes())
        .merge(private_locations::routes())
        .merge(status_pages::routes())
        .layer(DefaultBodyLimit::max(MAX_PUBLIC_BODY_BYTES));
    Router::new()
        .merge(public)
        .merge(projects::routes())
        .merge(runtimes::routes())
        .merge(super::ping::routes())
        .merge(super::status_html::routes())
        .merge(super::agent_api::routes())
        .fallback(not_found_route)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(axum::middleware::map_response(json_errors))
        .layer(axum::middleware::from_fn(unread_body::close_if_unread))
        .with_state(ctx)
}
