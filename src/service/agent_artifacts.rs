//! `PUT /agent/v1/jobs/{jobId}/artifacts/{name}?leaseId=...`: an artifact streamed to
//! DATA_DIR/artifacts/<session>/<job>/<name>. The size cap (`MAX_ARTIFACT_BYTES`, or less
//! by `ServeOptions`) is enforced while the body streams (413 beyond it, the partial file
//! removed); the name is sanitized.

use axum::Json;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use futures_util::StreamExt;
use serde::{Deserialize, Serialize};
use tokio::io::AsyncWriteExt;
use uuid::Uuid;

use super::api::extract::{ApiQuery, parse_id};
use super::auth::AgentAuth;
use super::context::AppState;
use super::errors::ApiError;
use super::store::now_ms;

/// Longest artifact name.
pub const MAX_NAME_LEN: usize = 128;

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UploadQuery {
    lease_id: Option<String>,
}

/// Answer of an upload.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ArtifactResponse {
    pub id: Uuid,
    pub name: String,
    pub size: i64,
}

/// A safe file name: the last path component, characters outside `[A-Za-z0-9._-]`
/// replaced by `_`, no leading dot. `None` if nothing usable is left.
pub fn sanitize_name(raw: &str) -> Option<String> {
    let last = raw.rsplit(['/', '\\']).next().unwrap_or("");
    let cleaned: String = last
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect();
    let cleaned = cleaned.trim_start_matches('.');
    if cleaned.is_empty() || cleaned.len() > MAX_NAME_LEN {
        return None;
    }
    Some(cleaned.to_owned())
}

fn too_large(max: u64) -> ApiError {
    ApiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        format!("artifacts are limited to {max} bytes"),
    )
}

pub async fn upload(
    State(ctx): State<AppState>,
    AgentAuth(location): AgentAuth,
    Path((job_id, name)): Path<(String, String)>,
    ApiQuery(query): ApiQuery<UploadQuery>,
    headers: HeaderMap,
    body: Body,
) -> Result<(StatusCode, Json<ArtifactResponse>), ApiError> {
    let job_id = parse_id(&job_id, "jobId")?;
    let Some(lease) = query.lease_id else {
        return Err(ApiError::invalid("leaseId", "is required"));
    };
    let lease_id = parse_id(&lease, "leaseId")?;
    let Some(name) = sanitize_name(&name) else {
        return Err(ApiError::invalid(
            "name",
            format!("must be 1 to {MAX_NAME_LEN} characters of [A-Za-z0-9._-]"),
        ));
    };
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let max = ctx.max_artifact_bytes;
    if declared.is_some_and(|n| n > max) {
        return Err(too_large(max));
    }
    let Some(target) = ctx
        .store
        .artifact_target(location.location_id, job_id, lease_id, now_ms())
        .await?
    else {
        return Err(ApiError::not_found(
            "no valid lease of this job: the lease expired, belongs to another location, or never existed",
        ));
    };
    let dir = ctx
        .data_dir
        .join("artifacts")
        .join(target.session_id.to_string())
        .join(job_id.to_string());
    tokio::fs::create_dir_all(&dir)
        .await
        .map_err(|e| ApiError::internal(&e))?;
    let partial = dir.join(format!(".{name}.{}.part", Uuid::new_v4()));
    let size = match stream_to_file(body, &partial, max).await {
        Ok(size) => size,
        Err(e) => {
            let _ = tokio::fs::remove_file(&partial).await;
            return Err(e);
        }
    };
    let path = dir.join(&name);
    if let Err(e) = tokio::fs::rename(&partial, &path).await {
        let _ = tokio::fs::remove_file(&partial).await;
        return Err(ApiError::internal(&e));
    }
    let relative = format!("artifacts/{}/{job_id}/{name}", target.session_id);
    let size = i64::try_from(size).unwrap_or(i64::MAX);
    let record = ctx
        .store
        .record_artifact(&target, job_id, lease_id, &name, &relative, size, now_ms())
        .await?;
    Ok((
        StatusCode::CREATED,
        Json(ArtifactResponse {
            id: record.id,
            name,
            size,
        }),
    ))
}

/// Copies the body to `path`, failing with 413 as soon as it passes the cap.
async fn stream_to_file(body: Body, path: &std::path::Path, max: u64) -> Result<u64, ApiError> {
    let mut file = tokio::fs::File::create(path)
        .await
        .map_err(|e| ApiError::internal(&e))?;
    let mut stream = body.into_data_stream();
    let mut written: u64 = 0;
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| ApiError::bad_request(format!("upload interrupted: {e}")))?;
        written = written.saturating_add(chunk.len() as u64);
        if written > max {
            return Err(too_large(max));
        }
        file.write_all(&chunk)
            .await
            .map_err(|e| ApiError::internal(&e))?;
    }
    file.flush().await.map_err(|e| ApiError::internal(&e))?;
    file.sync_all().await.map_err(|e| ApiError::internal(&e))?;
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::sanitize_name;

    #[test]
    fn names_are_sanitized() {
        assert_eq!(sanitize_name("trace.zip").as_deref(), Some("trace.zip"));
        assert_eq!(sanitize_name("../../etc/passwd").as_deref(), Some("passwd"));
        assert_eq!(sanitize_name("a b?.png").as_deref(), Some("a_b_.png"));
        assert_eq!(sanitize_name(".."), None);
        assert_eq!(sanitize_name(".hidden").as_deref(), Some("hidden"));
        assert_eq!(sanitize_name(""), None);
    }
}
