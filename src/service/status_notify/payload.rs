//! The JSON a webhook subscriber gets for an incident update (POST,
//! `content-type: application/json`, header `x-outpost-event: status-page.incident-update`):
//!
//! ```json
//! {"type": "INCIDENT_UPDATE", "id": "<notification id>", "subscriptionId": "...",
//!  "page": {"id": "...", "name": "Acme Status", "url": "acme", "link": "http://.../status/acme"},
//!  "incident": {"id": "...", "name": "Checkout is slow", "severity": "MAJOR"},
//!  "update": {"id": "...", "status": "IDENTIFIED", "description": "...",
//!             "date": "2026-01-02T03:04:05.678Z",
//!             "services": [{"id": "...", "name": "Checkout"}]}}
//! ```
//!
//! `id` is the same in retries and in the one resend a crash can cause: with
//! `subscriptionId` it lets a receiver drop duplicates. `update.date` is the update's
//! `publicIncidentUpdateDate`; `update.services` are the incident's services.

use chrono::SecondsFormat;
use serde::Serialize;
use uuid::Uuid;

use crate::service::store::{Incident, IncidentUpdate, StatusPage};

/// The `x-outpost-event` header's value.
pub const EVENT: &str = "status-page.incident-update";

#[derive(Debug, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct IncidentUpdatePayload<'a> {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub id: Uuid,
    pub subscription_id: Uuid,
    pub page: PagePart<'a>,
    pub incident: IncidentPart<'a>,
    pub update: UpdatePart<'a>,
}

#[derive(Debug, Serialize, PartialEq)]
pub struct PagePart<'a> {
    pub id: Uuid,
    pub name: &'a str,
    pub url: &'a str,
    pub link: String,
}

#[derive(Debug, Serialize, PartialEq)]
pub struct IncidentPart<'a> {
    pub id: Uuid,
    pub name: &'a str,
    pub severity: &'static str,
}

#[derive(Debug, Serialize, PartialEq)]
pub struct UpdatePart<'a> {
    pub id: Uuid,
    pub status: &'static str,
    pub description: &'a str,
    pub date: String,
    pub services: Vec<ServicePart<'a>>,
}

#[derive(Debug, Serialize, PartialEq)]
pub struct ServicePart<'a> {
    pub id: Uuid,
    pub name: &'a str,
}

/// The payload of `update` for one subscriber of `page`.
pub fn incident_update<'a>(
    notification_id: Uuid,
    subscription_id: Uuid,
    page: &'a StatusPage,
    page_link: String,
    incident: &'a Incident,
    update: &'a IncidentUpdate,
) -> IncidentUpdatePayload<'a> {
    IncidentUpdatePayload {
        kind: "INCIDENT_UPDATE",
        id: notification_id,
        subscription_id,
        page: PagePart {
            id: page.id,
            name: &page.name,
            url: &page.url,
            link: page_link,
        },
        incident: IncidentPart {
            id: incident.id,
            name: &incident.name,
            severity: incident.severity.as_str(),
        },
        update: UpdatePart {
            id: update.id,
            status: update.status.as_str(),
            description: &update.description,
            date: update
                .public_at
                .to_rfc3339_opts(SecondsFormat::Millis, true),
            services: incident
                .services
                .iter()
                .map(|s| ServicePart {
                    id: s.id,
                    name: &s.name,
                })
                .collect(),
        },
    }
}
