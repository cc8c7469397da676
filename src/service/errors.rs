//! The error body of every 4xx/5xx answer: `{"statusCode", "error", "message"}`, and
//! the mapping of store errors and axum rejections onto it.

use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use super::store::StoreError;

/// An HTTP error answer with the reference error body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    pub status: StatusCode,
    pub message: String,
}

/// The JSON body of an error.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ErrorBody {
    pub status_code: u16,
    pub error: &'static str,
    pub message: String,
}

/// The reason phrase used in `error`; 408 is spelled as the reference spells it.
pub fn reason(status: StatusCode) -> &'static str {
    match status {
        StatusCode::REQUEST_TIMEOUT => "Request Time-out",
        s => s.canonical_reason().unwrap_or("Error"),
    }
}

impl ApiError {
    pub fn new(status: StatusCode, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            message: message.into(),
        }
    }

    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, message)
    }

    /// A 400 whose message starts with the offending field.
    pub fn invalid(field: &str, message: impl std::fmt::Display) -> ApiError {
        ApiError::bad_request(format!("{field}: {message}"))
    }

    pub fn unauthorized(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::UNAUTHORIZED, message)
    }

    pub fn not_found(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::NOT_FOUND, message)
    }

    /// A 500 that tells the client nothing of the cause; the cause is logged.
    pub fn internal(cause: &dyn std::fmt::Display) -> ApiError {
        tracing::error!(error = %cause, "request failed");
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal error")
    }

    fn body(&self) -> ErrorBody {
        ErrorBody {
            status_code: self.status.as_u16(),
            error: reason(self.status),
            message: self.message.clone(),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = (self.status, Json(self.body())).into_response();
        if self.status == StatusCode::REQUEST_TIMEOUT {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        }
        response
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> ApiError {
        match e {
            StoreError::Invalid { field, message } => ApiError::invalid(field, message),
            StoreError::NotFound(what) => ApiError::not_found(format!("{what} not found")),
            StoreError::Conflict { field, message } => {
                ApiError::new(StatusCode::CONFLICT, format!("{field}: {message}"))
            }
            e @ (StoreError::SlugTaken(_) | StoreError::TooManyLocationKeys { .. }) => {
                ApiError::new(StatusCode::CONFLICT, e.to_string())
            }
            e => ApiError::internal(&e),
        }
    }
}

/// Middleware (`map_response`): any error answer that is not JSON yet (axum's own 405,
/// 413, ...) gets the reference error body. HTML answers (the status pages served to
/// browsers) are left alone.
pub async fn json_errors(response: Response) -> Response {
    let status = response.status();
    if !(status.is_client_error() || status.is_server_error()) {
        return response;
    }
    let keep = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json") || v.starts_with("text/html"));
    if keep {
        return response;
    }
    let message = match status {
        StatusCode::METHOD_NOT_ALLOWED => "method not allowed on this path".to_owned(),
        StatusCode::PAYLOAD_TOO_LARGE => "request body too large".to_owned(),
        StatusCode::NOT_FOUND => "no such route".to_owned(),
        s => reason(s).to_owned(),
    };
    let (mut parts, _) = response.into_parts();
    parts.headers.remove(header::CONTENT_LENGTH);
    let mut fresh = ApiError::new(status, message).into_response();
    for (name, value) in parts.headers.iter() {
        if name != header::CONTENT_TYPE && !fresh.headers().contains_key(name) {
            fresh.headers_mut().insert(name.clone(), value.clone());
        }
    }
    fresh
}

/// Fallback of unknown routes.
pub async fn not_found_route() -> ApiError {
    ApiError::not_found("no such route")
}

/// Fallback of known paths called with a wrong method.
pub async fn method_not_allowed() -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method not allowed on this path",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reason_phrases() {
        assert_eq!(reason(StatusCode::REQUEST_TIMEOUT), "Request Time-out");
        assert_eq!(reason(StatusCode::NOT_FOUND), "Not Found");
        assert_eq!(reason(StatusCode::PAYLOAD_TOO_LARGE), "Payload Too Large");
    }
}
