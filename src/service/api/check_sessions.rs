//! `/v1|v2/check-sessions`: trigger, read, await completion, cancel.

use crate::service::api::routes::{Area, Routes};
use std::time::Duration;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};

use super::extract::{ApiQuery, OptionalJson, parse_id};
use crate::model::RunSource;
use crate::service::auth::ApiAuth;
use crate::service::context::AppState;
use crate::service::errors::ApiError;
use crate::service::sessions::{
    Selection, SessionAnswer, SessionView, TriggerRequest, await_final, session_answer,
    session_view,
};
use crate::service::store::now_ms;

/// Default and largest `maxWaitSeconds` of the completion endpoints.
pub const MAX_WAIT_SECS: u64 = 30;

pub fn routes() -> Routes {
    Routes::new(Area::Public)
        .post("/v1/check-sessions/trigger", trigger)
        .post("/v2/check-sessions/trigger", trigger)
        .get("/v1/check-sessions/{id}", get_one)
        .get("/v2/check-sessions/{id}", get_one)
        .get("/v1/check-sessions/{id}/completion", completion)
        .get("/v2/check-sessions/{id}/completion", completion)
        .post("/v1/check-sessions/{id}/cancel", cancel)
}

/// Answer of the trigger endpoints.
#[derive(Debug, Serialize)]
pub struct TriggerResponse {
    pub sessions: Vec<SessionView>,
}

async fn trigger(
    State(ctx): State<AppState>,
    auth: ApiAuth,
    OptionalJson(body): OptionalJson<TriggerRequest>,
) -> Result<(StatusCode, Json<TriggerResponse>), ApiError> {
    let selection = Selection::from_request(&body)?;
    let now = now_ms();
    let created = ctx
        .store
        .trigger(
            auth.account_id,
            selection.only_ids(),
            |c| selection.selects(c),
            RunSource::TriggerApi,
            now,
        )
        .await?;
    ctx.hub.wake_locations(&created.locations);
    if !created.not_runnable.is_empty() {
        tracing::info!(
            skipped = created.not_runnable.len(),
            "trigger skipped checks of types no agent can run yet"
        );
    }
    if created.sessions.is_empty() {
        if let Some(message) = not_runnable_message(&created.not_runnable) {
            return Err(ApiError::bad_request(message));
        }
        return Err(ApiError::not_found("No matching checks were found."));
    }
    let sessions = created
        .sessions
        .iter()
        .map(|s| session_view(&ctx.public_url, s, None))
        .collect();
    Ok((StatusCode::CREATED, Json(TriggerResponse { sessions })))
}

/// Why a trigger that selected only checks of stored-only types (browser, multistep)
/// started nothing; `None` when it selected none of them.
fn not_runnable_message(skipped: &[(uuid::Uuid, crate::model::CheckType)]) -> Option<String> {
    const SHOWN: usize = 5;
    if skipped.is_empty() {
        return None;
    }
    let mut types: Vec<&str> = skipped.iter().map(|(_, t)| t.as_str()).collect();
    types.sort_unstable();
    types.dedup();
    let ids: Vec<String> = skipped
        .iter()
        .take(SHOWN)
        .map(|(id, t)| format!("{id} ({t})"))
        .collect();
    let more = match skipped.len().saturating_sub(SHOWN) {
        0 => String::new(),
        n => format!(" and {n} more"),
    };
    Some(format!(
        "No check could be started: {} checks are stored but cannot run yet, this version has no executor for them (selected: {}{more}).",
        types.join(" and "),
        ids.join(", ")
    ))
}

async fn get_one(
    State(ctx): State<AppState>,
    auth: ApiAuth,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let id = parse_id(&id, "checkSessionId")?;
    match session_answer(&ctx, auth.account_id, id).await? {
        SessionAnswer::Missing => Err(ApiError::not_found("No such check session.")),
        SessionAnswer::Found { body, .. } => Ok(json_answer(body)),
    }
}

/// A JSON answer of already serialized bytes (the session views).
fn json_answer(body: Bytes) -> Response {
    (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        body,
    )
        .into_response()
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct CompletionQuery {
    max_wait_seconds: Option<f64>,
}

async fn completion(
    State(ctx): State<AppState>,
    auth: ApiAuth,
    Path(id): Path<String>,
    ApiQuery(query): ApiQuery<CompletionQuery>,
) -> Result<Response, ApiError> {
    let id = parse_id(&id, "checkSessionId")?;
    let wait = match query.max_wait_seconds {
        None => MAX_WAIT_SECS as f64,
        Some(w) if (1.0..=MAX_WAIT_SECS as f64).contains(&w) => w,
        Some(_) => {
            return Err(ApiError::invalid(
                "maxWaitSeconds",
                format!("must be between 1 and {MAX_WAIT_SECS}"),
            ));
        }
    };
    match await_final(&ctx, auth.account_id, id, Duration::from_secs_f64(wait)).await? {
        Some(body) => Ok(json_answer(body)),
        None => Err(ApiError::new(
            StatusCode::REQUEST_TIMEOUT,
            "Check session is still in progress, but maximum per-request wait time was exceeded. Please retry.",
        )),
    }
}

/// Body of the cancel endpoint; `sequenceId` is accepted and ignored (a session has
/// one sequence per location and all of them are cancelled).
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct CancelRequest {
    #[serde(default)]
    #[allow(dead_code)]
    sequence_id: Option<Vec<String>>,
}

async fn cancel(
    State(ctx): State<AppState>,
    auth: ApiAuth,
    Path(id): Path<String>,
    OptionalJson(_body): OptionalJson<CancelRequest>,
) -> Result<StatusCode, ApiError> {
    let id = parse_id(&id, "checkSessionId")?;
    match ctx
        .store
        .cancel_session(auth.account_id, id, now_ms())
        .await?
    {
        None => Err(ApiError::not_found("No such check session.")),
        Some(changed) => {
            if changed {
                ctx.hub.sessions_finished(&[id]);
            }
            Ok(StatusCode::NO_CONTENT)
        }
    }
}
