//! Assets of a check result: `GET /v1/check-results/{checkId}/{checkResultId}/assets`
//! (the reference `AssetManifest`: one entry per file the agent uploaded for the result,
//! e.g. the packet capture and traceroute of network diagnostics, filtered by `type`
//! and a `name` glob) and `.../assets/{name}`, which streams one file. Both are scoped
//! by the key's account: another account's result is a 404.

use crate::service::api::routes::{Area, Routes};
use axum::Json;
use axum::body::Body;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use futures_util::stream;
use serde_json::{Value, json};
use tokio::io::AsyncReadExt;
use uuid::Uuid;

use super::extract::parse_id;
use crate::service::auth::ApiAuth;
use crate::service::context::AppState;
use crate::service::errors::ApiError;
use crate::service::store::{ArtifactRecord, ResultRecord};

/// Asset types of the reference.
pub const ASSET_TYPES: [&str; 7] = [
    "log",
    "trace",
    "video",
    "screenshot",
    "pcap",
    "report",
    "file",
];
/// Longest `name` glob (reference).
pub const MAX_GLOB_LEN: usize = 200;
/// Bytes read from disk per chunk of a download.
const CHUNK: usize = 64 * 1024;

pub fn routes() -> Routes {
    Routes::new(Area::Public)
        .get("/v1/check-results/{check_id}/{result_id}/assets", manifest)
        .get(
            "/v1/check-results/{check_id}/{result_id}/assets/{name}",
            download,
        )
}

/// The normalized type of an asset, from its name.
pub fn asset_type(name: &str) -> &'static str {
    let lower = name.to_ascii_lowercase();
    let ext = lower.rsplit_once('.').map(|(_, e)| e).unwrap_or("");
    match ext {
        "pcap" | "pcapng" => "pcap",
        "png" | "jpg" | "jpeg" | "webp" | "gif" => "screenshot",
        "webm" | "mp4" => "video",
        "zip" if lower.contains("trace") => "trace",
        "log" | "txt" => "log",
        "html" => "report",
        "json" if lower.starts_with("traceroute") => "report",
        _ => "file",
    }
}

/// The media type of an asset when the result does not name one.
fn guessed_content_type(name: &str) -> &'static str {
    match asset_type(name) {
        "pcap" => "application/vnd.tcpdump.pcap",
        _ => match name.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase()) {
            Some(e) if e == "json" => "application/json",
            Some(e) if e == "png" => "image/png",
            Some(e) if e == "jpg" || e == "jpeg" => "image/jpeg",
            Some(e) if e == "webm" => "video/webm",
            Some(e) if e == "zip" => "application/zip",
            Some(e) if e == "html" => "text/html",
            Some(e) if e == "txt" || e == "log" => "text/plain",
            _ => "application/octet-stream",
        },
    }
}

/// The download URL of an asset of a result.
pub fn asset_url(public_url: &str, r: &ResultRecord, name: &str) -> String {
    let name: String = url::form_urlencoded::byte_serialize(name.as_bytes()).collect();
    format!(
        "{public_url}/v1/check-results/{}/{}/assets/{name}",
        r.check_id, r.id
    )
}

/// The media type the result's `artifacts` list gives the file, else a guess.
fn content_type(r: &ResultRecord, name: &str) -> String {
    r.result
        .as_ref()
        .and_then(|v| v.get("artifacts"))
        .and_then(Value::as_array)
        .and_then(|list| {
            list.iter()
                .find(|a| a.get("name").and_then(Value::as_str) == Some(name))
        })
        .and_then(|a| a.get("contentType"))
        .and_then(Value::as_str)
        .filter(|ct| !ct.is_empty() && HeaderValue::from_str(ct).is_ok())
        .map(str::to_owned)
        .unwrap_or_else(|| guessed_content_type(name).to_owned())
}

/// `*` (any run of characters) and `?` (one character), case-insensitive.
pub fn glob_matches(pattern: &str, name: &str) -> bool {
    let p: Vec<char> = pattern.to_lowercase().chars().collect();
    let n: Vec<char> = name.to_lowercase().chars().collect();
    let (mut pi, mut ni) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ni < n.len() {
        match p.get(pi) {
            Some('*') => {
                star = Some((pi, ni));
                pi += 1;
            }
            Some(c) if *c == '?' || *c == n[ni] => {
                pi += 1;
                ni += 1;
            }
            _ => match star {
                Some((sp, sn)) => {
                    pi = sp + 1;
                    ni = sn + 1;
                    star = Some((sp, sn + 1));
                }
                None => return false,
            },
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

/// The query of the manifest: `type` (repeatable) and `name` (a glob).
#[derive(Debug, Default, PartialEq)]
pub struct AssetQuery {
    pub types: Vec<&'static str>,
    pub name: Option<String>,
}

impl AssetQuery {
    pub fn parse(raw: Option<&str>) -> Result<AssetQuery, ApiError> {
        let mut q = AssetQuery::default();
        for (key, value) in url::form_urlencoded::parse(raw.unwrap_or("").as_bytes()) {
            match key.as_ref() {
                "type" => match ASSET_TYPES.iter().find(|t| **t == value) {
                    Some(t) => q.types.push(t),
                    None => {
                        return Err(ApiError::invalid(
                            "type",
                            format!("must be one of {}", ASSET_TYPES.join(", ")),
                        ));
                    }
                },
                "name" => {
                    if value.chars().count() > MAX_GLOB_LEN {
                        return Err(ApiError::invalid(
                            "name",
                            format!("must be at most {MAX_GLOB_LEN} characters"),
                        ));
                    }
                    q.name = (!value.is_empty()).then(|| value.into_owned());
                }
                _ => {}
            }
        }
        Ok(q)
    }

    fn admits(&self, name: &str) -> bool {
        (self.types.is_empty() || self.types.contains(&asset_type(name)))
            && self.name.as_deref().is_none_or(|g| glob_matches(g, name))
    }
}

/// One manifest entry (`AssetManifestEntry`).
fn entry_json(public_url: &str, r: &ResultRecord, a: &ArtifactRecord) -> Value {
    json!({
        "type": asset_type(&a.name),
        "name": a.name,
        "url": asset_url(public_url, r, &a.name),
        "contentType": content_type(r, &a.name),
        "size": a.size,
        "source": {
            "type": "check-result",
            "checkId": r.check_id,
            "checkName": r.name,
            "checkType": r.check_type,
            "resultId": r.id,
        },
    })
}

/// The result and its artifacts, or a 404 if the account has no such result.
async fn result_and_artifacts(
    ctx: &AppState,
    account_id: Uuid,
    check_id: &str,
    result_id: &str,
) -> Result<(ResultRecord, Vec<ArtifactRecord>), ApiError> {
    let check_id = parse_id(check_id, "checkId")?;
    let result_id = parse_id(result_id, "checkResultId")?;
    let Some(result) = ctx
        .store
        .get_result(account_id, check_id, result_id)
        .await?
    else {
        return Err(ApiError::not_found("No such check result."));
    };
    let artifacts = match result.lease_id {
        Some(lease) => {
            ctx.store
                .result_artifacts(account_id, result.job_id, lease)
                .await?
        }
        None => Vec::new(),
    };
    Ok((result, artifacts))
}

async fn manifest(
    State(ctx): State<AppState>,
    auth: ApiAuth,
    Path((check_id, result_id)): Path<(String, String)>,
    RawQuery(raw): RawQuery,
) -> Result<Json<Value>, ApiError> {
    let query = AssetQuery::parse(raw.as_deref())?;
    let (result, artifacts) =
        result_and_artifacts(&ctx, auth.account_id, &check_id, &result_id).await?;
    let assets: Vec<Value> = artifacts
        .iter()
        .filter(|a| query.admits(&a.name))
        .map(|a| entry_json(&ctx.public_url, &result, a))
        .collect();
    Ok(Json(json!({"assets": assets, "truncated": false})))
}

async fn download(
    State(ctx): State<AppState>,
    auth: ApiAuth,
    Path((check_id, result_id, name)): Path<(String, String, String)>,
) -> Result<Response, ApiError> {
    let (result, artifacts) =
        result_and_artifacts(&ctx, auth.account_id, &check_id, &result_id).await?;
    let Some(artifact) = artifacts.into_iter().find(|a| a.name == name) else {
        return Err(ApiError::not_found("No such asset."));
    };
    // Stored paths are relative to the data directory and built from sanitized names.
    let path = ctx.data_dir.join(&artifact.path);
    let file = match tokio::fs::File::open(&path).await {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(ApiError::not_found("The asset's file is gone."));
        }
        Err(e) => return Err(ApiError::internal(&e)),
    };
    let body = Body::from_stream(stream::unfold(file, |mut file| async move {
        let mut buf = vec![0u8; CHUNK];
        match file.read(&mut buf).await {
            Ok(0) => None,
            Ok(n) => {
                buf.truncate(n);
                Some((Ok::<_, std::io::Error>(buf), file))
            }
            Err(e) => Some((Err(e), file)),
        }
    }));
    let content_type = content_type(&result, &artifact.name);
    let mut response = body.into_response();
    let headers = response.headers_mut();
    if let Ok(v) = HeaderValue::from_str(&content_type) {
        headers.insert(header::CONTENT_TYPE, v);
    }
    if let Ok(v) = HeaderValue::from_str(&artifact.size.to_string()) {
        headers.insert(header::CONTENT_LENGTH, v);
    }
    if let Ok(v) = HeaderValue::from_str(&format!("attachment; filename=\"{}\"", artifact.name)) {
        headers.insert(header::CONTENT_DISPOSITION, v);
    }
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn types_from_names() {
        assert_eq!(asset_type("capture.pcap"), "pcap");
        assert_eq!(asset_type("traceroute.json"), "report");
        assert_eq!(asset_type("trace.zip"), "trace");
        assert_eq!(asset_type("shot.PNG"), "screenshot");
        assert_eq!(asset_type("data.bin"), "file");
        assert_eq!(asset_type("noext"), "file");
        assert_eq!(
            guessed_content_type("capture.pcap"),
            "application/vnd.tcpdump.pcap"
        );
        assert_eq!(guessed_content_type("x"), "application/octet-stream");
    }

    #[test]
    fn globs() {
        assert!(glob_matches("*.pcap", "capture.pcap"));
        assert!(glob_matches("CAPTURE*", "capture.pcap"));
        assert!(glob_matches("trace?oute.json", "traceroute.json"));
        assert!(glob_matches("*", ""));
        assert!(glob_matches("*a*b*", "xxaxxbxx"));
        assert!(!glob_matches("*.json", "capture.pcap"));
        assert!(!glob_matches("?", ""));
        assert!(!glob_matches("a", "ab"));
    }

    #[test]
    fn queries() {
        let q = AssetQuery::parse(Some("type=pcap&type=report&name=*.json&other=1")).unwrap();
        assert_eq!(q.types, vec!["pcap", "report"]);
        assert!(q.admits("traceroute.json"));
        assert!(!q.admits("capture.pcap"));
        assert_eq!(AssetQuery::parse(Some("name=")).unwrap().name, None);
        assert!(AssetQuery::parse(Some("type=movie")).is_err());
        let long = format!("name={}", "a".repeat(201));
        assert!(AssetQuery::parse(Some(&long)).is_err());
    }
}
