//! `/v1/status-pages/{id}/keys`: the keys visitors of a private page present. The raw
//! key is answered once, at creation; listings and the page show it masked. Deleting a
//! key locks out every visitor holding it (their cookie carries the key).

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde_json::{Value, json};

use crate::service::api::extract::parse_id;
use crate::service::auth::ApiAuth;
use crate::service::context::AppState;
use crate::service::errors::ApiError;
use crate::service::keys::{self, STATUS_PAGE_KEY_PREFIX};
use crate::service::store::StatusPageKey;

const NOT_FOUND: &str = "No such status page.";

/// `StatusPageKey`: id, maskedKey, created_at, updated_at.
pub fn key_json(k: &StatusPageKey) -> Value {
    json!({
        "id": k.id,
        "maskedKey": k.masked,
        "created_at": k.created_at,
        "updated_at": k.updated_at,
    })
}

pub async fn create(
    State(ctx): State<AppState>,
    auth: ApiAuth,
    Path(id): Path<String>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let id = parse_id(&id, "statusPageId")?;
    let new = keys::generate(STATUS_PAGE_KEY_PREFIX);
    match ctx
        .store
        .create_status_page_key(auth.account_id, id, &new.hash, &new.masked)
        .await?
    {
        Some(k) => {
            let mut body = key_json(&k);
            body["key"] = json!(new.plaintext);
            Ok((StatusCode::CREATED, Json(body)))
        }
        None => Err(ApiError::not_found(NOT_FOUND)),
    }
}

pub async fn list(
    State(ctx): State<AppState>,
    auth: ApiAuth,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let id = parse_id(&id, "statusPageId")?;
    match ctx.store.status_page_keys(auth.account_id, id).await? {
        Some(found) => Ok(Json(Value::Array(found.iter().map(key_json).collect()))),
        None => Err(ApiError::not_found(NOT_FOUND)),
    }
}

pub async fn remove(
    State(ctx): State<AppState>,
    auth: ApiAuth,
    Path((id, key_id)): Path<(String, String)>,
) -> Result<StatusCode, ApiError> {
    let id = parse_id(&id, "statusPageId")?;
    let key_id = parse_id(&key_id, "keyId")?;
    if ctx
        .store
        .delete_status_page_key(auth.account_id, id, key_id)
        .await?
    {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::not_found("No such key of this status page."))
    }
}
