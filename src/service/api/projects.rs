//! Projects of monitoring as code (see `service::projects`): `POST
//! /v1/projects/deploy?dryRun&scheduleOnDeploy` (a JSON body, plain or gzip),
//! `GET /v1/projects/{logicalId}/deployments/{id}/events` (server-sent events) and
//! `DELETE /v1/projects/{logicalId}?preserveResources&dryRun`.
//!
//! The body is gzip when `Content-Encoding: gzip` says so or when it starts with the
//! gzip magic number. Both the body as sent and the decompressed JSON are limited to
//! [`MAX_DEPLOY_BYTES`] while they stream (413 beyond).

use crate::service::api::routes::{Area, Routes};
use std::io::Read;

use axum::Json;
use axum::body::Body;
use axum::extract::{Path, RawQuery, Request, State};
use axum::http::header::{CACHE_CONTROL, CONTENT_ENCODING, CONTENT_TYPE};
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use http_body_util::{BodyExt, LengthLimitError, Limited};
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::{Value, json};
use uuid::Uuid;

use super::extract::parse_id;
use crate::service::auth::ApiAuth;
use crate::service::context::AppState;
use crate::service::errors::ApiError;
use crate::service::projects::{self, diff_json};
use crate::service::store::{DeploymentRecord, now_ms};

/// Largest deploy body, compressed or not.
pub const MAX_DEPLOY_BYTES: usize = 16 * 1024 * 1024;

pub fn routes() -> Routes {
    Routes::new(Area::Public)
        .documented(Method::POST, "/v1/projects/deploy", deploy)
        .get("/v1/projects/{logical_id}/deployments/{id}/events", events)
        .documented(Method::DELETE, "/v1/projects/{logical_id}", destroy)
}

/// The answer of a deploy.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum DeployAnswer {
    /// `dryRun=true`: the changes the deploy would make.
    Diff {
        #[schemars(with = "Vec<Value>")]
        diff: Value,
    },
    /// The recorded deployment, whose events are at
    /// `/v1/projects/{logicalId}/deployments/{id}/events`.
    Recorded { id: Uuid },
}

/// The answer of a project's deletion: the diff (200, nothing to delete or a dry run),
/// or the recorded deployment that deleted something (202).
#[derive(Debug, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum DestroyAnswer {
    Diff {
        #[schemars(with = "Vec<Value>")]
        diff: Value,
    },
    Recorded {
        id: Uuid,
        status: DeploymentStatus,
    },
}

/// The state of a recorded deployment.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum DeploymentStatus {
    Succeeded,
}

fn too_large() -> ApiError {
    ApiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        format!("request body too large (at most {MAX_DEPLOY_BYTES} bytes, decompressed too)"),
    )
}

/// Reads the body (at most `limit` bytes) and decompresses it when it is gzip.
pub async fn read_body(headers: &HeaderMap, body: Body, limit: usize) -> Result<Vec<u8>, ApiError> {
    let bytes = match Limited::new(body, limit).collect().await {
        Ok(c) => c.to_bytes(),
        Err(e) if e.downcast_ref::<LengthLimitError>().is_some() => return Err(too_large()),
        Err(e) => return Err(ApiError::bad_request(format!("cannot read the body: {e}"))),
    };
    let declared_gzip = headers
        .get(CONTENT_ENCODING)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("gzip"));
    if !declared_gzip && !bytes.starts_with(&[0x1f, 0x8b]) {
        return Ok(bytes.to_vec());
    }
    let mut out = Vec::new();
    let cap = u64::try_from(limit).unwrap_or(u64::MAX).saturating_add(1);
    flate2::read::GzDecoder::new(&bytes[..])
        .take(cap)
        .read_to_end(&mut out)
        .map_err(|e| ApiError::bad_request(format!("body: not valid gzip ({e})")))?;
    if out.len() > limit {
        return Err(too_large());
    }
    Ok(out)
}

/// A boolean query parameter (absent: `default`).
fn flag(raw: Option<&str>, name: &str, default: bool) -> Result<bool, ApiError> {
    let mut value = default;
    for (k, v) in url::form_urlencoded::parse(raw.unwrap_or("").as_bytes()) {
        if k == name {
            value = match v.as_ref() {
                "true" | "" => true,
                "false" => false,
                _ => return Err(ApiError::invalid(name, "must be true or false")),
            };
        }
    }
    Ok(value)
}

async fn deploy(
    State(ctx): State<AppState>,
    auth: ApiAuth,
    RawQuery(raw): RawQuery,
    req: Request,
) -> Result<Json<DeployAnswer>, ApiError> {
    let dry_run = flag(raw.as_deref(), "dryRun", false)?;
    // Heartbeat checks run nowhere: scheduleOnDeploy is accepted and changes nothing.
    flag(raw.as_deref(), "scheduleOnDeploy", true)?;
    let (parts, body) = req.into_parts();
    let bytes = read_body(&parts.headers, body, MAX_DEPLOY_BYTES).await?;
    if bytes.is_empty() {
        return Err(ApiError::bad_request("a JSON request body is required"));
    }
    let body: Value = serde_json::from_slice(&bytes)
        .map_err(|e| ApiError::bad_request(format!("body: not valid JSON ({e})")))?;
    let request = projects::parse_request(body)?;
    if dry_run {
        let diff = projects::dry_run(&ctx, auth.account_id, &request).await?;
        return Ok(Json(DeployAnswer::Diff {
            diff: diff_json(&diff),
        }));
    }
    let id = Uuid::new_v4();
    let (status, diff, message) = match projects::deploy(&ctx, auth.account_id, &request).await {
        Ok(diff) => ("SUCCEEDED", diff_json(&diff), None),
        Err(e) if e.status.is_client_error() => ("FAILED", json!([]), Some(e.message)),
        Err(e) => return Err(e),
    };
    ctx.store
        .insert_deployment(
            auth.account_id,
            &DeploymentRecord {
                id,
                project: request.project.clone(),
                status: status.to_owned(),
                diff,
                message,
            },
            now_ms(),
        )
        .await?;
    tracing::info!(project = %request.project, deployment = %id, status, "project deployed");
    Ok(Json(DeployAnswer::Recorded { id }))
}

/// The event stream of a finished deployment.
pub fn event_stream(d: &DeploymentRecord) -> String {
    let mut out = String::new();
    for progress in [50, 100] {
        out.push_str(&format!(
            "event: progress\ndata: {}\n\n",
            json!({"progress": progress})
        ));
    }
    if d.status == "SUCCEEDED" {
        out.push_str(&format!(
            "event: complete\ndata: {}\n\n",
            json!({"status": "SUCCEEDED", "result": {"diff": d.diff}})
        ));
    } else {
        out.push_str(&format!(
            "event: error\ndata: {}\n\n",
            json!({"message": d.message.clone().unwrap_or_else(|| "deployment failed".into())})
        ));
    }
    out
}

async fn events(
    State(ctx): State<AppState>,
    auth: ApiAuth,
    Path((project, id)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    let id = parse_id(&id, "id")?;
    let Some(d) = ctx
        .store
        .get_deployment(auth.account_id, &project, id)
        .await?
    else {
        return Err(ApiError::not_found("No such deployment."));
    };
    Ok((
        [
            (CONTENT_TYPE, "text/event-stream"),
            (CACHE_CONTROL, "no-cache"),
        ],
        event_stream(&d),
    )
        .into_response())
}

/// Deletes the project's resources. With something deleted the answer is 202 with a
/// recorded deployment to follow (`{id, status}`, as the vendor CLI expects); with
/// nothing to delete (or `dryRun=true`) it is 200 with the diff.
async fn destroy(
    State(ctx): State<AppState>,
    auth: ApiAuth,
    RawQuery(raw): RawQuery,
    Path(project): Path<String>,
) -> Result<(StatusCode, Json<DestroyAnswer>), ApiError> {
    let preserve = flag(raw.as_deref(), "preserveResources", false)?;
    let dry_run = flag(raw.as_deref(), "dryRun", false)?;
    let diff = projects::destroy(&ctx, auth.account_id, &project, preserve, dry_run).await?;
    if dry_run || diff.is_empty() {
        let diff = diff_json(&diff);
        return Ok((StatusCode::OK, Json(DestroyAnswer::Diff { diff })));
    }
    let id = Uuid::new_v4();
    ctx.store
        .insert_deployment(
            auth.account_id,
            &DeploymentRecord {
                id,
                project: project.clone(),
                status: "SUCCEEDED".into(),
                diff: diff_json(&diff),
                message: None,
            },
            now_ms(),
        )
        .await?;
    tracing::info!(project = %project, deployment = %id, resources = diff.len(), preserve, "project destroyed");
    let status = DeploymentStatus::Succeeded;
    Ok((
        StatusCode::ACCEPTED,
        Json(DestroyAnswer::Recorded { id, status }),
    ))
}
