//! `/v1/status-pages`: status pages with their cards, services, incidents with their
//! incident updates, and page subscriptions.
//!
//! - Cursor listings (`GET /v1/status-pages`, `/services`, `/incidents`) answer
//!   `{length, entries, nextId}`: `length` counts `entries`, `nextId` is the id of the
//!   first entry of the next page (null at the end), sent back as `?nextId=`; `limit`
//!   is 1..=100, 20 by default. Pages and services come oldest first, incidents newest
//!   first.
//! - Every object belongs to the key's account: another account's object is a 404,
//!   and another account's service named in a card or an incident is a 400 naming the
//!   field, never a link.
//! - An incident's `lastUpdateStatus` follows its latest update (by
//!   `publicIncidentUpdateDate`); a PUT of the incident may set it. An update without a
//!   `status` takes the incident's current one.
//! - An incident update with `notifySubscribers` queues a notification for the
//!   verified subscribers of the pages showing the incident's services.
//! - A service named by an incident is not deleted (409); delete or edit the
//!   incidents first. A deleted service leaves the cards that showed it.
//! - `/v1/status-pages/{id}/keys`: keys of private pages (raw once at creation, masked
//!   after; the page's `keys` lists them masked).

mod fields;
mod incidents;
mod keys;
mod pages;
mod services;
mod subscriptions;

use axum::Router;
use axum::routing::{delete, get, post};
use serde_json::{Value, json};

use crate::service::context::AppState;
use crate::service::store::{Incident, IncidentUpdate, Listing, StatusService};

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/v1/status-pages", get(pages::list).post(pages::create))
        .route(
            "/v1/status-pages/services",
            get(services::list).post(services::create),
        )
        .route(
            "/v1/status-pages/services/{id}",
            get(services::get_one)
                .put(services::update)
                .delete(services::remove),
        )
        .route(
            "/v1/status-pages/incidents",
            get(incidents::list).post(incidents::create),
        )
        .route(
            "/v1/status-pages/incidents/{id}",
            get(incidents::get_one)
                .put(incidents::update)
                .delete(incidents::remove),
        )
        .route(
            "/v1/status-pages/incidents/{id}/incident-updates",
            get(incidents::list_updates).post(incidents::create_update),
        )
        .route(
            "/v1/status-pages/incidents/{id}/incident-updates/{update_id}",
            get(incidents::get_update)
                .put(incidents::replace_update)
                .delete(incidents::remove_update),
        )
        .route(
            "/v1/status-pages/{id}",
            get(pages::get_one).put(pages::update).delete(pages::remove),
        )
        .route(
            "/v1/status-pages/{id}/keys",
            get(keys::list).post(keys::create),
        )
        .route("/v1/status-pages/{id}/keys/{key_id}", delete(keys::remove))
        .route(
            "/v1/status-pages/{id}/subscriptions",
            get(subscriptions::list),
        )
        .route(
            "/v1/status-pages/{id}/subscriptions/bulk",
            post(subscriptions::bulk_create),
        )
        .route(
            "/v1/status-pages/{id}/subscriptions/{subscription_id}",
            delete(subscriptions::remove),
        )
}

/// `StatusPageV2Service`.
pub fn service_json(s: &StatusService) -> Value {
    json!({
        "name": s.name,
        "id": s.id,
        "accountId": s.account_id,
        "created_at": s.created_at,
        "updated_at": s.updated_at,
    })
}

/// `StatusPageV2IncidentUpdate` (with its id).
pub fn update_json(u: &IncidentUpdate) -> Value {
    json!({
        "id": u.id,
        "description": u.description,
        "status": u.status.as_str(),
        "publicIncidentUpdateDate": u.public_at,
        "notifySubscribers": u.notify_subscribers,
        "created_at": u.created_at,
    })
}

/// `StatusPageV2Incident`.
pub fn incident_json(i: &Incident) -> Value {
    json!({
        "id": i.id,
        "name": i.name,
        "severity": i.severity.as_str(),
        "services": i.services.iter().map(service_json).collect::<Vec<_>>(),
        "incidentUpdates": i.updates.iter().map(update_json).collect::<Vec<_>>(),
        "lastUpdateStatus": i.last_update_status.as_str(),
        "duration": i.duration,
        "created_at": i.created_at,
        "updated_at": i.updated_at,
    })
}

/// `{length, entries, nextId}` of a cursor listing.
fn listing_json<T>(listing: &Listing<T>, render: impl Fn(&T) -> Value) -> Value {
    json!({
        "length": listing.entries.len(),
        "entries": listing.entries.iter().map(render).collect::<Vec<_>>(),
        "nextId": listing.next_id,
    })
}
