//! `/v1/status-pages/{id}/keys`: the keys visitors of a private page present. The raw
//! key is answered once, at creation; listings and the page show it masked. Deleting a
//! key locks out every visitor holding it (their cookie carries the key).

use axum::Json;
use axum::extract::{Path, State};
use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::Value;
use uuid::Uuid;

use crate::service::api::extract::parse_id;
use crate::service::api::route_doc::{Created, NoContent};
use crate::service::auth::ApiAuth;
use crate::service::context::AppState;
use crate::service::errors::ApiError;
use crate::service::keys::{self, STATUS_PAGE_KEY_PREFIX};
use crate::service::store::StatusPageKey;

const NOT_FOUND: &str = "No such status page.";

/// A key of a private status page as the API shows it (the reference's
/// `StatusPageKey` fields); `key`, the plaintext, only in the answer that created it.
#[derive(Serialize, JsonSchema)]
pub struct StatusPageKeyAnswer {
    pub id: Uuid,
    #[serde(rename = "maskedKey")]
    pub masked_key: String,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    /// The key itself: answered once, when it is created.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
}

/// Never the key itself: only whether the answer carries it.
impl std::fmt::Debug for StatusPageKeyAnswer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StatusPageKeyAnswer")
            .field("id", &self.id)
            .field("masked_key", &self.masked_key)
            .field("key", &self.key.as_ref().map(|_| "<hidden>"))
            .finish_non_exhaustive()
    }
}

impl StatusPageKeyAnswer {
    fn of(k: &StatusPageKey) -> StatusPageKeyAnswer {
        StatusPageKeyAnswer {
            id: k.id,
            masked_key: k.masked.clone(),
            created_at: k.created_at,
            updated_at: k.updated_at,
            key: None,
        }
    }
}

/// `StatusPageKey`: id, maskedKey, created_at, updated_at.
pub fn key_json(k: &StatusPageKey) -> Value {
    serde_json::to_value(StatusPageKeyAnswer::of(k)).unwrap_or(Value::Null)
}

pub async fn create(
    State(ctx): State<AppState>,
    auth: ApiAuth,
    Path(id): Path<String>,
) -> Result<Created<StatusPageKeyAnswer>, ApiError> {
    let id = parse_id(&id, "statusPageId")?;
    let new = keys::generate(STATUS_PAGE_KEY_PREFIX);
    match ctx
        .store
        .create_status_page_key(auth.account_id, id, &new.hash, &new.masked)
        .await?
    {
        Some(k) => Ok(Created(StatusPageKeyAnswer {
            key: Some(new.plaintext),
            ..StatusPageKeyAnswer::of(&k)
        })),
        None => Err(ApiError::not_found(NOT_FOUND)),
    }
}

pub async fn list(
    State(ctx): State<AppState>,
    auth: ApiAuth,
    Path(id): Path<String>,
) -> Result<Json<Vec<StatusPageKeyAnswer>>, ApiError> {
    let id = parse_id(&id, "statusPageId")?;
    match ctx.store.status_page_keys(auth.account_id, id).await? {
        Some(found) => Ok(Json(found.iter().map(StatusPageKeyAnswer::of).collect())),
        None => Err(ApiError::not_found(NOT_FOUND)),
    }
}

pub async fn remove(
    State(ctx): State<AppState>,
    auth: ApiAuth,
    Path((id, key_id)): Path<(String, String)>,
) -> Result<NoContent, ApiError> {
    let id = parse_id(&id, "statusPageId")?;
    let key_id = parse_id(&key_id, "keyId")?;
    if ctx
        .store
        .delete_status_page_key(auth.account_id, id, key_id)
        .await?
    {
        Ok(NoContent)
    } else {
        Err(ApiError::not_found("No such key of this status page."))
    }
}
