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
//!   verified subscribers (e-mail and webhook) of the pages showing the incident's
//!   services; a new PENDING e-mail subscription queues its confirmation mail
//!   (`subscriptions`, delivered by `status_notify`).
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

use crate::service::api::routes::{Area, Routes};
use axum::http::Method;
use serde_json::{Value, json};

use super::calendar_date;
use crate::service::store::{Incident, IncidentUpdate, Listing, StatusService};

pub fn routes() -> Routes {
    const UPDATE: &str = "/v1/status-pages/incidents/{id}/incident-updates/{update_id}";
    Routes::new(Area::Public)
        .get("/v1/status-pages", pages::list)
        .post("/v1/status-pages", pages::create)
        .get("/v1/status-pages/services", services::list)
        .post("/v1/status-pages/services", services::create)
        .get("/v1/status-pages/services/{id}", services::get_one)
        .put("/v1/status-pages/services/{id}", services::update)
        .delete("/v1/status-pages/services/{id}", services::remove)
        .get("/v1/status-pages/incidents", incidents::list)
        .post("/v1/status-pages/incidents", incidents::create)
        .get("/v1/status-pages/incidents/{id}", incidents::get_one)
        .put("/v1/status-pages/incidents/{id}", incidents::update)
        .delete("/v1/status-pages/incidents/{id}", incidents::remove)
        .get(
            "/v1/status-pages/incidents/{id}/incident-updates",
            incidents::list_updates,
        )
        .post(
            "/v1/status-pages/incidents/{id}/incident-updates",
            incidents::create_update,
        )
        .get(UPDATE, incidents::get_update)
        .put(UPDATE, incidents::replace_update)
        .delete(UPDATE, incidents::remove_update)
        .get("/v1/status-pages/{id}", pages::get_one)
        .put("/v1/status-pages/{id}", pages::update)
        .delete("/v1/status-pages/{id}", pages::remove)
        .documented(Method::GET, "/v1/status-pages/{id}/keys", keys::list)
        .documented(Method::POST, "/v1/status-pages/{id}/keys", keys::create)
        .documented(
            Method::DELETE,
            "/v1/status-pages/{id}/keys/{key_id}",
            keys::remove,
        )
        .get("/v1/status-pages/{id}/subscriptions", subscriptions::list)
        .post(
            "/v1/status-pages/{id}/subscriptions/bulk",
            subscriptions::bulk_create,
        )
        .delete(
            "/v1/status-pages/{id}/subscriptions/{subscription_id}",
            subscriptions::remove,
        )
}

/// `StatusPageV2Service`.
pub fn service_json(s: &StatusService) -> Value {
    json!({
        "name": s.name,
        "id": s.id,
        "accountId": s.account_id,
        "created_at": calendar_date(s.created_at),
        "updated_at": calendar_date(s.updated_at),
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
        "created_at": calendar_date(u.created_at),
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
        "created_at": calendar_date(i.created_at),
        "updated_at": calendar_date(i.updated_at),
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
