//! Extractors whose rejections are reference error bodies: JSON bodies (size limited
//! while streaming by `DefaultBodyLimit`), optional JSON bodies, query strings, path ids.

use axum::Json;
use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Query, Request};
use axum::http::header::CONTENT_TYPE;
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode};
use serde::de::DeserializeOwned;
use uuid::Uuid;

use crate::service::errors::ApiError;

/// A JSON body; malformed JSON, a wrong content type or an oversized body are 4xx.
pub struct ApiJson<T>(pub T);

/// A JSON body that may be empty (then `T::default()`).
pub struct OptionalJson<T>(pub T);

/// A query string.
pub struct ApiQuery<T>(pub T);

/// A request body the route has no use for, read (within the body limit) and dropped,
/// so that a client still sending it gets the answer instead of a reset connection.
pub struct IgnoredBody;

fn is_json(headers: &HeaderMap) -> bool {
    let Some(ct) = headers.get(CONTENT_TYPE).and_then(|v| v.to_str().ok()) else {
        return false;
    };
    let mime = ct.split(';').next().unwrap_or("").trim();
    mime.eq_ignore_ascii_case("application/json")
        || (mime.starts_with("application/") && mime.ends_with("+json"))
}

async fn body_bytes<S: Send + Sync>(
    req: Request,
    state: &S,
) -> Result<(HeaderMap, Bytes), ApiError> {
    let headers = req.headers().clone();
    let bytes = Bytes::from_request(req, state).await.map_err(|rejection| {
        let status = rejection.status();
        if status == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::new(status, "request body too large")
        } else {
            ApiError::new(
                if status.is_server_error() {
                    StatusCode::BAD_REQUEST
                } else {
                    status
                },
                rejection.body_text(),
            )
        }
    })?;
    Ok((headers, bytes))
}

/// Parses a JSON body; errors name the path of the offending field where serde can.
pub fn parse_json<T: DeserializeOwned>(headers: &HeaderMap, bytes: &[u8]) -> Result<T, ApiError> {
    if !is_json(headers) {
        return Err(ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "expected a request with Content-Type: application/json",
        ));
    }
    match Json::<T>::from_bytes(bytes) {
        Ok(Json(value)) => Ok(value),
        Err(rejection) => Err(ApiError::bad_request(rejection.body_text())),
    }
}

impl<T, S> FromRequest<S> for ApiJson<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let (headers, bytes) = body_bytes(req, state).await?;
        if bytes.is_empty() {
            return Err(ApiError::bad_request("a JSON request body is required"));
        }
        parse_json(&headers, &bytes).map(ApiJson)
    }
}

impl<T, S> FromRequest<S> for OptionalJson<T>
where
    T: DeserializeOwned + Default,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let (headers, bytes) = body_bytes(req, state).await?;
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Ok(OptionalJson(T::default()));
        }
        parse_json(&headers, &bytes).map(OptionalJson)
    }
}

impl<S> FromRequest<S> for IgnoredBody
where
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        body_bytes(req, state).await.map(|_| IgnoredBody)
    }
}

impl<T, S> FromRequestParts<S> for ApiQuery<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        match Query::<T>::from_request_parts(parts, state).await {
            Ok(Query(value)) => Ok(ApiQuery(value)),
            Err(rejection) => Err(ApiError::bad_request(rejection.body_text())),
        }
    }
}

/// Parses a path id; a malformed one is a 400 naming the parameter.
pub fn parse_id(raw: &str, name: &str) -> Result<Uuid, ApiError> {
    Uuid::parse_str(raw).map_err(|_| ApiError::invalid(name, "must be a UUID"))
}

/// `limit` (1..=100, default 10) and `page` (>= 1, default 1) of list endpoints.
#[derive(Debug, Default, serde::Deserialize)]
pub struct Paging {
    pub limit: Option<i64>,
    pub page: Option<i64>,
}

impl Paging {
    /// (limit, offset) after validation.
    pub fn resolve(&self) -> Result<(i64, i64), ApiError> {
        let limit = self.limit.unwrap_or(10);
        if !(1..=100).contains(&limit) {
            return Err(ApiError::invalid("limit", "must be between 1 and 100"));
        }
        let page = self.page.unwrap_or(1);
        if !(1..=1_000_000).contains(&page) {
            return Err(ApiError::invalid(
                "page",
                "must be an integer of at least 1",
            ));
        }
        Ok((limit, (page - 1) * limit))
    }
}
