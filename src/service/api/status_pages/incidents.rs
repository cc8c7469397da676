//! `/v1/status-pages/incidents` and their `incident-updates`.
//!
//! - An incident names 1 to [`MAX_SERVICES_PER_INCIDENT`] services of the account,
//!   each as `{id, name, accountId}` (the stored name is what answers show); its name
//!   is at most 255 characters. Creation takes exactly one incident update.
//! - An update's `publicIncidentUpdateDate` defaults to now and `notifySubscribers` to
//!   false, on creation and on replacement alike.
//! - Creating an incident answers 201, creating an incident update 200 (as the
//!   reference says).

use axum::Json;
use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use serde_json::{Map, Value};
use uuid::Uuid;

use super::fields::{self, MAX_NAME_CHARS, MAX_UPDATE_DESCRIPTION_CHARS};
use super::{incident_json, listing_json, update_json};
use crate::service::api::extract::{ApiJson, parse_id};
use crate::service::auth::ApiAuth;
use crate::service::context::AppState;
use crate::service::errors::ApiError;
use crate::service::store::{
    IncidentSeverity, IncidentStatus, IncidentUpdateWrite, IncidentWrite,
    MAX_SERVICES_PER_INCIDENT, now_ms,
};

const NOT_FOUND: &str = "No such incident.";
const UPDATE_NOT_FOUND: &str = "No such incident update.";
const SEVERITIES: [&str; 4] = ["CRITICAL", "MAJOR", "MEDIUM", "MINOR"];
const STATUSES: [&str; 4] = ["INVESTIGATING", "IDENTIFIED", "MONITORING", "RESOLVED"];

/// The incident fields shared by create and update bodies.
async fn incident_write(
    ctx: &AppState,
    account_id: Uuid,
    body: &Map<String, Value>,
) -> Result<IncidentWrite, ApiError> {
    let name = fields::name(body, "", "name", MAX_NAME_CHARS)?;
    fields::ignored_date(body, "created_at")?;
    fields::ignored_date(body, "updated_at")?;
    let severity = fields::opt_enum(body, "severity", IncidentSeverity::parse, &SEVERITIES)?
        .ok_or_else(|| {
            ApiError::invalid(
                "severity",
                format!("is required: one of {}", SEVERITIES.join(", ")),
            )
        })?;
    let items = match body.get("services") {
        Some(Value::Array(a)) if a.is_empty() => {
            return Err(ApiError::invalid(
                "services",
                "must name at least one service",
            ));
        }
        Some(Value::Array(_)) => fields::array(body, "", "services", MAX_SERVICES_PER_INCIDENT)?,
        None | Some(Value::Null) => {
            return Err(ApiError::invalid(
                "services",
                "is required: at least one service",
            ));
        }
        Some(_) => return Err(ApiError::invalid("services", "must be an array")),
    };
    let mut service_ids = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let at = format!("services[{i}]");
        let s = fields::item(item, &at)?;
        let id = fields::uuid(s.get("id"), &format!("{at}.id"))?;
        fields::name(s, &at, "name", MAX_NAME_CHARS)?;
        let account = fields::uuid(s.get("accountId"), &format!("{at}.accountId"))?;
        if account != account_id {
            return Err(ApiError::invalid(
                &format!("{at}.accountId"),
                "must be the account of the request",
            ));
        }
        if service_ids.contains(&id) {
            return Err(ApiError::invalid(
                &format!("{at}.id"),
                "names a service already listed",
            ));
        }
        service_ids.push(id);
    }
    let found = ctx
        .store
        .existing_status_service_ids(account_id, &service_ids)
        .await?;
    if let Some((i, id)) = service_ids
        .iter()
        .enumerate()
        .find(|(_, id)| !found.contains(id))
    {
        return Err(ApiError::invalid(
            &format!("services[{i}].id"),
            format!("no service {id} in this account"),
        ));
    }
    let last_update_status =
        fields::opt_enum(body, "lastUpdateStatus", IncidentStatus::parse, &STATUSES)?;
    let duration = match body.get("duration") {
        None => None,
        Some(Value::Null) => Some(None),
        Some(Value::Number(n)) => match n.as_i64() {
            Some(d) if d >= 0 => Some(Some(d)),
            _ => {
                return Err(ApiError::invalid(
                    "duration",
                    "must be a non-negative integer or null",
                ));
            }
        },
        Some(_) => {
            return Err(ApiError::invalid(
                "duration",
                "must be a non-negative integer or null",
            ));
        }
    };
    Ok(IncidentWrite {
        name,
        severity,
        service_ids,
        last_update_status,
        duration,
    })
}

/// An incident update body; `base` prefixes field names (`incidentUpdates[0]`).
fn update_write(body: &Map<String, Value>, base: &str) -> Result<IncidentUpdateWrite, ApiError> {
    let prefixed = |e: ApiError| {
        if base.is_empty() {
            e
        } else {
            ApiError::new(e.status, format!("{base}.{}", e.message))
        }
    };
    let description =
        fields::name(body, "", "description", MAX_UPDATE_DESCRIPTION_CHARS).map_err(prefixed)?;
    fields::ignored_date(body, "created_at").map_err(prefixed)?;
    let status =
        fields::opt_enum(body, "status", IncidentStatus::parse, &STATUSES).map_err(prefixed)?;
    let public_at = fields::opt_time(body, "publicIncidentUpdateDate")
        .map_err(prefixed)?
        .unwrap_or_else(now_ms);
    let notify_subscribers = fields::bool_or(body, "notifySubscribers", false).map_err(prefixed)?;
    Ok(IncidentUpdateWrite {
        description,
        status,
        public_at,
        notify_subscribers,
    })
}

pub async fn list(
    State(ctx): State<AppState>,
    auth: ApiAuth,
    RawQuery(raw): RawQuery,
) -> Result<Json<Value>, ApiError> {
    let cursor = fields::cursor(raw.as_deref())?;
    let listing = ctx
        .store
        .list_incidents(auth.account_id, cursor.next_id, cursor.limit)
        .await?;
    Ok(Json(listing_json(&listing, incident_json)))
}

pub async fn create(
    State(ctx): State<AppState>,
    auth: ApiAuth,
    ApiJson(body): ApiJson<Value>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let body = fields::object(body)?;
    let incident = incident_write(&ctx, auth.account_id, &body).await?;
    let first = match body.get("incidentUpdates") {
        Some(Value::Array(a)) if a.len() == 1 => update_write(
            fields::item(&a[0], "incidentUpdates[0]")?,
            "incidentUpdates[0]",
        )?,
        Some(Value::Array(_)) => {
            return Err(ApiError::invalid(
                "incidentUpdates",
                "must hold exactly one incident update",
            ));
        }
        None | Some(Value::Null) => {
            return Err(ApiError::invalid(
                "incidentUpdates",
                "is required: an array with the first incident update",
            ));
        }
        Some(_) => return Err(ApiError::invalid("incidentUpdates", "must be an array")),
    };
    let created = ctx
        .store
        .create_incident(auth.account_id, &incident, &first)
        .await?;
    if first.notify_subscribers {
        ctx.status_notify.wake();
    }
    Ok((StatusCode::CREATED, Json(incident_json(&created))))
}

pub async fn get_one(
    State(ctx): State<AppState>,
    auth: ApiAuth,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let id = parse_id(&id, "incidentId")?;
    match ctx.store.incident(auth.account_id, id).await? {
        Some(i) => Ok(Json(incident_json(&i))),
        None => Err(ApiError::not_found(NOT_FOUND)),
    }
}

pub async fn update(
    State(ctx): State<AppState>,
    auth: ApiAuth,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<Value>,
) -> Result<Json<Value>, ApiError> {
    let id = parse_id(&id, "incidentId")?;
    if ctx.store.incident(auth.account_id, id).await?.is_none() {
        return Err(ApiError::not_found(NOT_FOUND));
    }
    let body = fields::object(body)?;
    let incident = incident_write(&ctx, auth.account_id, &body).await?;
    match ctx
        .store
        .update_incident(auth.account_id, id, &incident)
        .await?
    {
        Some(i) => Ok(Json(incident_json(&i))),
        None => Err(ApiError::not_found(NOT_FOUND)),
    }
}

pub async fn remove(
    State(ctx): State<AppState>,
    auth: ApiAuth,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    let id = parse_id(&id, "incidentId")?;
    if ctx.store.delete_incident(auth.account_id, id).await? {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::not_found(NOT_FOUND))
    }
}

pub async fn list_updates(
    State(ctx): State<AppState>,
    auth: ApiAuth,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let id = parse_id(&id, "incidentId")?;
    match ctx.store.incident_updates(auth.account_id, id).await? {
        Some(updates) => Ok(Json(Value::Array(
            updates.iter().map(update_json).collect(),
        ))),
        None => Err(ApiError::not_found(NOT_FOUND)),
    }
}

pub async fn create_update(
    State(ctx): State<AppState>,
    auth: ApiAuth,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<Value>,
) -> Result<Json<Value>, ApiError> {
    let id = parse_id(&id, "incidentId")?;
    let body = fields::object(body)?;
    let update = update_write(&body, "")?;
    match ctx
        .store
        .create_incident_update(auth.account_id, id, &update)
        .await?
    {
        Some(u) => {
            if u.notify_subscribers {
                ctx.status_notify.wake();
            }
            Ok(Json(update_json(&u)))
        }
        None => Err(ApiError::not_found(NOT_FOUND)),
    }
}

fn ids(id: &str, update_id: &str) -> Result<(Uuid, Uuid), ApiError> {
    Ok((
        parse_id(id, "incidentId")?,
        parse_id(update_id, "incidentUpdateId")?,
    ))
}

pub async fn get_update(
    State(ctx): State<AppState>,
    auth: ApiAuth,
    Path((id, update_id)): Path<(String, String)>,
) -> Result<Json<Value>, ApiError> {
    let (id, update_id) = ids(&id, &update_id)?;
    match ctx
        .store
        .incident_update(auth.account_id, id, update_id)
        .await?
    {
        Some(u) => Ok(Json(update_json(&u))),
        None => Err(ApiError::not_found(UPDATE_NOT_FOUND)),
    }
}

pub async fn replace_update(
    State(ctx): State<AppState>,
    auth: ApiAuth,
    Path((id, update_id)): Path<(String, String)>,
    ApiJson(body): ApiJson<Value>,
) -> Result<Json<Value>, ApiError> {
    let (id, update_id) = ids(&id, &update_id)?;
    let body = fields::object(body)?;
    let update = update_write(&body, "")?;
    match ctx
        .store
        .update_incident_update(auth.account_id, id, update_id, &update)
        .await?
    {
        Some(u) => {
            if u.notify_subscribers {
                ctx.status_notify.wake();
            }
            Ok(Json(update_json(&u)))
        }
        None => Err(ApiError::not_found(UPDATE_NOT_FOUND)),
    }
}

pub async fn remove_update(
    State(ctx): State<AppState>,
    auth: ApiAuth,
    Path((id, update_id)): Path<(String, String)>,
) -> Result<StatusCode, ApiError> {
    let (id, update_id) = ids(&id, &update_id)?;
    if ctx
        .store
        .delete_incident_update(auth.account_id, id, update_id)
        .await?
    {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::not_found(UPDATE_NOT_FOUND))
    }
}
