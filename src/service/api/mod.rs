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
pub mod openapi;
pub mod private_locations;
pub mod projects;
pub mod result_assets;
pub mod route_doc;
pub mod routes;
pub mod runtimes;
pub mod status_pages;
pub mod unread_body;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::Method;
use axum::http::header::CONTENT_TYPE;
use bytes::Bytes;
use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use routes::{Area, RouteEntry, Routes};

use super::context::AppState;
use super::errors::{json_errors, method_not_allowed, not_found_route};

/// Largest JSON body of the public API, enforced while the body streams in.
pub const MAX_PUBLIC_BODY_BYTES: usize = 1024 * 1024;

/// A time the reference types `format: date` (status pages, their cards, services,
/// incidents and subscriptions; private locations and their keys): the spec calls
/// these calendar dates, so the API shows the UTC day, `YYYY-MM-DD`.
pub fn calendar_date(t: DateTime<Utc>) -> Value {
    json!(t.date_naive().format("%Y-%m-%d").to_string())
}

/// The whole router of the service: every route comes from the route table
/// (`routes::Routes`), which also yields `GET /openapi.json`.
pub fn router(ctx: AppState) -> Router {
    let (router, _entries) = route_table().into_parts();
    router
        .fallback(not_found_route)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(axum::middleware::map_response(json_errors))
        .layer(axum::middleware::from_fn(unread_body::close_if_unread))
        .with_state(ctx)
}

/// Every route of the service with its entry; `GET /openapi.json` serves the document
/// of all of them, itself included.
pub fn route_table() -> Routes {
    let public = Routes::new(Area::Public)
        .merge(checks::routes())
        .merge(check_sessions::routes())
        .merge(check_results::routes())
        .merge(heartbeats::routes())
        .merge(alert_channels::routes())
        .merge(locations::routes())
        .merge(private_locations::routes())
        .merge(status_pages::routes())
        .map(|r| r.layer(DefaultBodyLimit::max(MAX_PUBLIC_BODY_BYTES)));
    let served = Routes::new(Area::Public)
        .merge(public)
        .merge(projects::routes())
        .merge(runtimes::routes())
        .merge(super::ping::routes())
        .merge(super::status_html::routes())
        .merge(super::agent_api::routes())
        .area(Area::Open);
    let mut entries = served.entries().to_vec();
    entries.push(RouteEntry {
        method: Method::GET,
        path: openapi::OPENAPI_PATH.to_owned(),
        area: Area::Open,
        json: None,
    });
    let body = Bytes::from(openapi::document(&entries).to_string());
    served.get(openapi::OPENAPI_PATH, move || {
        let body = body.clone();
        async move { ([(CONTENT_TYPE, "application/json")], body) }
    })
}
