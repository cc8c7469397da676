//! What the vendor CLI asks before a deploy: `GET /next/accounts/{accountId}` (the
//! account of the API key), `GET /v1/runtimes` and `GET /v1/runtimes/{id}`.

use axum::Json;
use axum::Router;
use axum::extract::{Path, State};
use axum::routing::get;
use serde_json::{Value, json};
use uuid::Uuid;

use crate::service::auth::ApiAuth;
use crate::service::context::AppState;
use crate::service::errors::ApiError;

/// The runtimes: (name, Node.js version, Playwright version, stage).
pub const RUNTIMES: [(&str, &str, &str, &str); 2] = [
    ("2025.04", "v22.11.0", "1.51.1", "STABLE"),
    ("2026.04", "v24.13.1", "1.58.2", "CURRENT"),
];

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/next/accounts/{account_id}", get(account))
        .route("/v1/runtimes", get(list))
        .route("/v1/runtimes/{id}", get(one))
}

/// A runtime as the API shows it (`Runtime`).
pub fn runtime_json(r: &(&str, &str, &str, &str)) -> Value {
    let (name, node, playwright, stage) = *r;
    json!({
        "name": name,
        "multiStepSupport": true,
        "nodeJsVersion": node,
        "stage": stage,
        "runtimeEndOfLife": Value::Null,
        "description": format!("Main updates are Playwright {playwright} and Node.js {node}"),
        "dependencies": {"@playwright/test": playwright, "playwright": playwright},
    })
}

async fn account(
    State(ctx): State<AppState>,
    auth: ApiAuth,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    if Uuid::parse_str(id.trim()).ok() != Some(auth.account_id) {
        return Err(ApiError::not_found("No such account."));
    }
    match ctx.store.account(auth.account_id).await? {
        Some(a) => Ok(Json(
            json!({"id": a.id, "name": a.name, "runtimeId": Value::Null}),
        )),
        None => Err(ApiError::not_found("No such account.")),
    }
}

async fn list(_auth: ApiAuth) -> Json<Value> {
    Json(Value::Array(RUNTIMES.iter().map(runtime_json).collect()))
}

async fn one(_auth: ApiAuth, Path(id): Path<String>) -> Result<Json<Value>, ApiError> {
    RUNTIMES
        .iter()
        .find(|r| r.0 == id)
        .map(|r| Json(runtime_json(r)))
        .ok_or_else(|| ApiError::not_found("No such runtime."))
}
