//! `GET /v1/locations`: the reference's public (vendor-run) locations. Outpost runs no
//! public locations — every check runs in one of the account's private locations — so
//! the list is always empty.

use axum::Json;
use axum::Router;
use axum::routing::get;
use serde_json::{Value, json};

use crate::service::auth::ApiAuth;
use crate::service::context::AppState;

pub fn routes() -> Router<AppState> {
    Router::new().route("/v1/locations", get(list))
}

async fn list(_auth: ApiAuth) -> Json<Value> {
    Json(json!([]))
}
