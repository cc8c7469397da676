//! `GET /v1/locations`: the reference's public (vendor-run) locations. Outpost runs no
//! public locations — every check runs in one of the account's private locations — so
//! the list is always empty. Like the reference's, it needs no API key.

use crate::service::api::routes::{Area, Routes};
use axum::Json;
use serde_json::{Value, json};

pub fn routes() -> Routes {
    Routes::new(Area::Open).get("/v1/locations", list)
}

/// Public, as in the reference (no 401 documented).
async fn list() -> Json<Value> {
    Json(json!([]))
}
