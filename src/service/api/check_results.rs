//! `/v1/check-results`: one stored result, or a page of a check's results.

use axum::Json;
use axum::Router;
use axum::extract::{Path, State};
use axum::routing::get;
use serde_json::{Map, Value, json};

use super::extract::{ApiQuery, Paging, parse_id};
use crate::service::auth::ApiAuth;
use crate::service::context::AppState;
use crate::service::errors::ApiError;
use crate::service::sessions::result_link;
use crate::service::store::ResultRecord;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/v1/check-results/{check_id}", get(list))
        .route("/v1/check-results/{check_id}/{result_id}", get(get_one))
}

/// A result as the API shows it: the agent's RunResult fields (timingPhases, response,
/// assertions, error, ...) with the reference CheckResult fields on top.
pub fn result_json(public_url: &str, r: &ResultRecord) -> Value {
    let mut out = match &r.result {
        Some(Value::Object(m)) => m.clone(),
        _ => Map::new(),
    };
    let fields = [
        ("id", json!(r.id)),
        (
            "checkResultLink",
            json!(result_link(public_url, r.check_id, r.id)),
        ),
        ("name", json!(r.name)),
        ("checkId", json!(r.check_id)),
        ("checkSessionId", json!(r.session_id)),
        ("checkType", json!(r.check_type)),
        ("status", json!(r.status)),
        ("hasFailures", json!(r.has_failures)),
        ("hasErrors", json!(r.has_errors)),
        ("isDegraded", json!(r.is_degraded)),
        ("isCancelled", json!(r.is_cancelled)),
        ("aborted", json!(r.aborted)),
        ("overMaxResponseTime", json!(r.over_max_response_time)),
        ("runLocation", json!(r.run_location)),
        ("startedAt", json!(r.started_at)),
        ("stoppedAt", json!(r.stopped_at)),
        ("created_at", json!(r.created_at)),
        ("responseTime", json!(r.response_time)),
        ("attempts", json!(r.attempts)),
        ("resultType", json!(r.result_type)),
        ("sequenceId", Value::Null),
        ("traceId", Value::Null),
        ("errorGroupIds", json!([])),
    ];
    for (k, v) in fields {
        out.insert(k.to_owned(), v);
    }
    Value::Object(out)
}

async fn get_one(
    State(ctx): State<AppState>,
    auth: ApiAuth,
    Path((check_id, result_id)): Path<(String, String)>,
) -> Result<Json<Value>, ApiError> {
    let check_id = parse_id(&check_id, "checkId")?;
    let result_id = parse_id(&result_id, "checkResultId")?;
    match ctx
        .store
        .get_result(auth.account_id, check_id, result_id)
        .await?
    {
        Some(r) => Ok(Json(result_json(&ctx.public_url, &r))),
        None => Err(ApiError::not_found("No such check result.")),
    }
}

async fn list(
    State(ctx): State<AppState>,
    auth: ApiAuth,
    Path(check_id): Path<String>,
    ApiQuery(paging): ApiQuery<Paging>,
) -> Result<Json<Value>, ApiError> {
    let check_id = parse_id(&check_id, "checkId")?;
    let (limit, offset) = paging.resolve()?;
    if ctx
        .store
        .get_check(auth.account_id, check_id)
        .await?
        .is_none()
    {
        return Err(ApiError::not_found("No such check."));
    }
    let results = ctx
        .store
        .list_results(auth.account_id, check_id, limit, offset)
        .await?;
    Ok(Json(Value::Array(
        results
            .iter()
            .map(|r| result_json(&ctx.public_url, r))
            .collect(),
    )))
}
