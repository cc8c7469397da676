//! What the vendor CLI asks before a deploy: `GET /next/accounts/{accountId}` (the
//! account of the API key), `GET /v1/runtimes` and `GET /v1/runtimes/{id}`.

use crate::service::api::routes::{Area, Routes};
use axum::Json;
use axum::extract::{Path, State};
use axum::http::Method;
use schemars::JsonSchema;
use serde::Serialize;
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

pub fn routes() -> Routes {
    Routes::new(Area::Public)
        .documented(Method::GET, "/next/accounts/{account_id}", account)
        .area(Area::Open)
        .get("/v1/runtimes", list)
        .get("/v1/runtimes/{id}", one)
}

/// A runtime as the API shows it (`Runtime`). `runtimeEndOfLife` (a non-empty string
/// in the reference) is left out: no runtime has an end of life yet.
pub fn runtime_json(r: &(&str, &str, &str, &str)) -> Value {
    let (name, node, playwright, stage) = *r;
    json!({
        "name": name,
        "multiStepSupport": true,
        "nodeJsVersion": node,
        "stage": stage,
        "description": format!("Main updates are Playwright {playwright} and Node.js {node}"),
        "dependencies": {"@playwright/test": playwright, "playwright": playwright},
    })
}

/// The account of the API key, as the vendor CLI reads it.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AccountAnswer {
    pub id: Uuid,
    pub name: String,
    /// The account's default runtime: none (checks name theirs).
    pub runtime_id: Option<String>,
}

async fn account(
    State(ctx): State<AppState>,
    auth: ApiAuth,
    Path(id): Path<String>,
) -> Result<Json<AccountAnswer>, ApiError> {
    if Uuid::parse_str(id.trim()).ok() != Some(auth.account_id) {
        return Err(ApiError::not_found("No such account."));
    }
    match ctx.store.account(auth.account_id).await? {
        Some(a) => Ok(Json(AccountAnswer {
            id: a.id,
            name: a.name,
            runtime_id: None,
        })),
        None => Err(ApiError::not_found("No such account.")),
    }
}

/// Public, as in the reference (no 401 documented): runtimes say nothing of an account.
async fn list() -> Json<Value> {
    Json(Value::Array(RUNTIMES.iter().map(runtime_json).collect()))
}

async fn one(Path(id): Path<String>) -> Result<Json<Value>, ApiError> {
    RUNTIMES
        .iter()
        .find(|r| r.0 == id)
        .map(|r| Json(runtime_json(r)))
        .ok_or_else(|| ApiError::not_found("No such runtime."))
}
