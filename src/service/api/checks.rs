//! `/v1/checks`: create and update URL monitors, list, read and delete checks.

use std::collections::HashSet;

use axum::Json;
use axum::Router;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{get, post, put};
use serde_json::{Value, json};
use uuid::Uuid;

use super::extract::{ApiJson, ApiQuery, Paging, parse_id};
use crate::service::auth::ApiAuth;
use crate::service::check_doc::{interval_ms, normalize_url_check};
use crate::service::context::AppState;
use crate::service::errors::ApiError;
use crate::service::scheduler::next_slot;
use crate::service::store::{CheckRecord, CheckWrite, ScheduleWrite, now_ms};

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/v1/checks", get(list))
        .route("/v1/checks/url", post(create_url))
        .route("/v1/checks/url/{id}", put(update_url))
        .route("/v1/checks/{id}", get(get_one).delete(delete))
}

/// The check as the API shows it: the stored document plus id and timestamps.
pub fn check_json(c: &CheckRecord) -> Value {
    let mut doc = match &c.document {
        Value::Object(m) => m.clone(),
        _ => serde_json::Map::new(),
    };
    doc.insert("id".into(), json!(c.id));
    doc.insert("checkType".into(), json!(c.check_type));
    doc.insert("created_at".into(), json!(c.created_at));
    doc.insert("updated_at".into(), json!(c.updated_at));
    Value::Object(doc)
}

/// The schedule of an activated check: its first run is the next slot after `now`.
fn schedule_for(c: &CheckWrite, id: Uuid, now: i64) -> Option<ScheduleWrite> {
    c.activated.then(|| {
        let interval = interval_ms(c.frequency, c.frequency_offset);
        ScheduleWrite {
            interval_ms: interval,
            next_run_at: next_slot(id, interval, now),
        }
    })
}

async fn known_slugs(ctx: &AppState, account_id: Uuid) -> Result<HashSet<String>, ApiError> {
    Ok(ctx
        .store
        .list_private_locations(account_id)
        .await?
        .into_iter()
        .map(|l| l.slug_name)
        .collect())
}

async fn create_url(
    State(ctx): State<AppState>,
    auth: ApiAuth,
    ApiJson(body): ApiJson<Value>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let slugs = known_slugs(&ctx, auth.account_id).await?;
    let check = normalize_url_check(body, None, &slugs)?;
    let id = Uuid::new_v4();
    let now = now_ms();
    let stored = ctx
        .store
        .insert_check(
            auth.account_id,
            id,
            &check,
            schedule_for(&check, id, now),
            now,
        )
        .await?;
    Ok((StatusCode::CREATED, Json(check_json(&stored))))
}

async fn update_url(
    State(ctx): State<AppState>,
    auth: ApiAuth,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<Value>,
) -> Result<Json<Value>, ApiError> {
    let id = parse_id(&id, "id")?;
    let Some(existing) = ctx.store.get_check(auth.account_id, id).await? else {
        return Err(ApiError::not_found("No such check."));
    };
    if existing.check_type != crate::model::CheckType::Url {
        return Err(ApiError::invalid(
            "checkType",
            "this check is not a URL monitor",
        ));
    }
    let slugs = known_slugs(&ctx, auth.account_id).await?;
    let check = normalize_url_check(body, Some(&existing.document), &slugs)?;
    let now = now_ms();
    let Some(stored) = ctx
        .store
        .update_check(
            auth.account_id,
            id,
            &check,
            schedule_for(&check, id, now),
            now,
        )
        .await?
    else {
        return Err(ApiError::not_found("No such check."));
    };
    Ok(Json(check_json(&stored)))
}

async fn list(
    State(ctx): State<AppState>,
    auth: ApiAuth,
    ApiQuery(paging): ApiQuery<Paging>,
) -> Result<Json<Value>, ApiError> {
    let (limit, offset) = paging.resolve()?;
    let checks = ctx
        .store
        .list_checks(auth.account_id, limit, offset)
        .await?;
    Ok(Json(Value::Array(checks.iter().map(check_json).collect())))
}

async fn get_one(
    State(ctx): State<AppState>,
    auth: ApiAuth,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let id = parse_id(&id, "id")?;
    match ctx.store.get_check(auth.account_id, id).await? {
        Some(c) => Ok(Json(check_json(&c))),
        None => Err(ApiError::not_found("No such check.")),
    }
}

async fn delete(
    State(ctx): State<AppState>,
    auth: ApiAuth,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    let id = parse_id(&id, "id")?;
    let Some(sessions) = ctx.store.delete_check(auth.account_id, id).await? else {
        return Err(ApiError::not_found("No such check."));
    };
    for session in sessions {
        let dir = ctx.data_dir.join("artifacts").join(session.to_string());
        if let Err(e) = tokio::fs::remove_dir_all(&dir).await
            && e.kind() != std::io::ErrorKind::NotFound
        {
            tracing::warn!(path = %dir.display(), error = %e, "cannot remove artifacts of a deleted check");
        }
    }
    Ok(StatusCode::NO_CONTENT)
}
