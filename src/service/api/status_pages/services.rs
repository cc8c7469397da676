//! `/v1/status-pages/services`: the services cards show and incidents affect.
//! Create answers 200 (as the reference says); `paginated=false` lists every service.

use axum::Json;
use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use serde_json::Value;

use super::fields::{self, MAX_NAME_CHARS};
use super::{listing_json, service_json};
use crate::service::api::extract::{ApiJson, parse_id};
use crate::service::auth::ApiAuth;
use crate::service::context::AppState;
use crate::service::errors::ApiError;
use crate::service::store::ServiceDeletion;

const NOT_FOUND: &str = "No such service.";

fn service_name(body: Value) -> Result<String, ApiError> {
    let body = fields::object(body)?;
    fields::name(&body, "", "name", MAX_NAME_CHARS)
}

pub async fn list(
    State(ctx): State<AppState>,
    auth: ApiAuth,
    RawQuery(raw): RawQuery,
) -> Result<Json<Value>, ApiError> {
    let cursor = fields::cursor(raw.as_deref())?;
    let limit = cursor.paginated.then_some(cursor.limit);
    let listing = ctx
        .store
        .list_status_services(auth.account_id, cursor.next_id, limit)
        .await?;
    Ok(Json(listing_json(&listing, service_json)))
}

pub async fn create(
    State(ctx): State<AppState>,
    auth: ApiAuth,
    ApiJson(body): ApiJson<Value>,
) -> Result<Json<Value>, ApiError> {
    let name = service_name(body)?;
    let service = ctx
        .store
        .create_status_service(auth.account_id, &name)
        .await?;
    Ok(Json(service_json(&service)))
}

pub async fn get_one(
    State(ctx): State<AppState>,
    auth: ApiAuth,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let id = parse_id(&id, "serviceId")?;
    match ctx.store.status_service(auth.account_id, id).await? {
        Some(s) => Ok(Json(service_json(&s))),
        None => Err(ApiError::not_found(NOT_FOUND)),
    }
}

pub async fn update(
    State(ctx): State<AppState>,
    auth: ApiAuth,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<Value>,
) -> Result<Json<Value>, ApiError> {
    let id = parse_id(&id, "serviceId")?;
    let name = service_name(body)?;
    match ctx
        .store
        .rename_status_service(auth.account_id, id, &name)
        .await?
    {
        Some(s) => Ok(Json(service_json(&s))),
        None => Err(ApiError::not_found(NOT_FOUND)),
    }
}

pub async fn remove(
    State(ctx): State<AppState>,
    auth: ApiAuth,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    let id = parse_id(&id, "serviceId")?;
    match ctx.store.delete_status_service(auth.account_id, id).await? {
        ServiceDeletion::Deleted => Ok(StatusCode::NO_CONTENT),
        ServiceDeletion::NotFound => Err(ApiError::not_found(NOT_FOUND)),
        ServiceDeletion::InUse(n) => Err(ApiError::new(
            StatusCode::CONFLICT,
            format!(
                "serviceId: the service is affected by {n} incident{}; remove it from them or delete them first",
                if n == 1 { "" } else { "s" }
            ),
        )),
    }
}
