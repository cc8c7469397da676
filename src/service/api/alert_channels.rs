//! `/v1/alert-channels`: list, create, read, replace and delete alert channels, and set
//! one subscription (`PUT /v1/alert-channels/{id}/subscriptions`). Channel ids are
//! positive integers, as in the reference.

use crate::service::api::routes::{Area, Routes};
use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde_json::Value;
use uuid::Uuid;

use super::extract::{ApiJson, ApiQuery, Paging};
use crate::service::alerts::channels::{
    channel_json, normalize_channel, subscription, subscription_json,
};
use crate::service::auth::ApiAuth;
use crate::service::context::AppState;
use crate::service::errors::ApiError;
use crate::service::store::{ChannelWrite, now_ms};

pub fn routes() -> Routes {
    Routes::new(Area::Public)
        .get("/v1/alert-channels", list)
        .post("/v1/alert-channels", create)
        .get("/v1/alert-channels/{id}", get_one)
        .put("/v1/alert-channels/{id}", replace)
        .delete("/v1/alert-channels/{id}", delete)
        .put("/v1/alert-channels/{id}/subscriptions", subscribe)
}

/// Parses a channel id.
pub fn parse_channel_id(raw: &str) -> Result<i64, ApiError> {
    match raw.trim().parse::<i64>() {
        Ok(id) if id > 0 => Ok(id),
        _ => Err(ApiError::invalid("id", "must be a positive integer")),
    }
}

/// Refuses subscriptions to checks the account does not have.
async fn ensure_checks(ctx: &AppState, account_id: Uuid, c: &ChannelWrite) -> Result<(), ApiError> {
    let Some(subs) = &c.subscriptions else {
        return Ok(());
    };
    let ids: Vec<Uuid> = subs.iter().filter_map(|s| s.check_id).collect();
    let found = ctx.store.existing_check_ids(account_id, &ids).await?;
    for (i, s) in subs.iter().enumerate() {
        if let Some(id) = s.check_id
            && !found.contains(&id)
        {
            return Err(ApiError::invalid(
                &format!("subscriptions[{i}].checkId"),
                format!("no check {id} in this account"),
            ));
        }
    }
    Ok(())
}

async fn list(
    State(ctx): State<AppState>,
    auth: ApiAuth,
    ApiQuery(paging): ApiQuery<Paging>,
) -> Result<Json<Value>, ApiError> {
    let (limit, offset) = paging.resolve()?;
    let channels = ctx
        .store
        .list_channels(auth.account_id, limit, offset)
        .await?;
    Ok(Json(Value::Array(
        channels.iter().map(channel_json).collect(),
    )))
}

async fn create(
    State(ctx): State<AppState>,
    auth: ApiAuth,
    ApiJson(body): ApiJson<Value>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let channel = normalize_channel(body, None)?;
    ensure_checks(&ctx, auth.account_id, &channel).await?;
    let stored = ctx
        .store
        .create_channel(auth.account_id, &channel, now_ms())
        .await?;
    Ok((StatusCode::CREATED, Json(channel_json(&stored))))
}

async fn get_one(
    State(ctx): State<AppState>,
    auth: ApiAuth,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let id = parse_channel_id(&id)?;
    match ctx.store.get_channel(auth.account_id, id).await? {
        Some(c) => Ok(Json(channel_json(&c))),
        None => Err(ApiError::not_found("No such alert channel.")),
    }
}

async fn replace(
    State(ctx): State<AppState>,
    auth: ApiAuth,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<Value>,
) -> Result<Json<Value>, ApiError> {
    let id = parse_channel_id(&id)?;
    let Some(existing) = ctx.store.get_channel(auth.account_id, id).await? else {
        return Err(ApiError::not_found("No such alert channel."));
    };
    let channel = normalize_channel(body, Some(&existing))?;
    ensure_checks(&ctx, auth.account_id, &channel).await?;
    match ctx
        .store
        .update_channel(auth.account_id, id, &channel, now_ms())
        .await?
    {
        Some(c) => Ok(Json(channel_json(&c))),
        None => Err(ApiError::not_found("No such alert channel.")),
    }
}

async fn delete(
    State(ctx): State<AppState>,
    auth: ApiAuth,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    let id = parse_channel_id(&id)?;
    if ctx.store.delete_channel(auth.account_id, id).await? {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::not_found("No such alert channel."))
    }
}

async fn subscribe(
    State(ctx): State<AppState>,
    auth: ApiAuth,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<Value>,
) -> Result<Json<Value>, ApiError> {
    let id = parse_channel_id(&id)?;
    let sub = subscription(&body, "")?;
    if let Some(check_id) = sub.check_id
        && ctx
            .store
            .existing_check_ids(auth.account_id, &[check_id])
            .await?
            .is_empty()
    {
        return Err(ApiError::not_found("No such check."));
    }
    match ctx
        .store
        .upsert_subscription(auth.account_id, id, sub)
        .await?
    {
        Some(s) => Ok(Json(subscription_json(&s))),
        None => Err(ApiError::not_found("No such alert channel.")),
    }
}
