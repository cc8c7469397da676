//! Authentication extractors: API keys for the public API, agent keys for the agent API.
//! Failures are 401 with the reference error body; the presented key is never logged.

use axum::extract::FromRequestParts;
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use uuid::Uuid;

use super::context::AppState;
use super::errors::ApiError;
use super::store::LocationAuth;

/// Account headers: ours and the vendor CLI's name for it.
pub const ACCOUNT_HEADERS: [&str; 2] = ["x-service-account", "x-checkly-account"];

/// The account a public API request acts for.
#[derive(Debug, Clone, Copy)]
pub struct ApiAuth {
    pub account_id: Uuid,
}

/// The private location an agent request comes from.
#[derive(Debug, Clone)]
pub struct AgentAuth(pub LocationAuth);

/// The token of `Authorization: Bearer <token>`.
fn bearer(parts: &Parts) -> Option<&str> {
    let value = parts.headers.get(AUTHORIZATION)?.to_str().ok()?.trim();
    let (scheme, token) = value.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then_some(token.trim())
        .filter(|t| !t.is_empty())
}

impl FromRequestParts<AppState> for ApiAuth {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, ctx: &AppState) -> Result<Self, ApiError> {
        let Some(token) = bearer(parts) else {
            return Err(ApiError::unauthorized(
                "missing API key: send Authorization: Bearer <API key>",
            ));
        };
        let Some(account_id) = ctx.store.authenticate_api_key(token).await? else {
            return Err(ApiError::unauthorized("invalid API key"));
        };
        for name in ACCOUNT_HEADERS {
            if let Some(value) = parts.headers.get(name) {
                let matches = value
                    .to_str()
                    .ok()
                    .and_then(|v| Uuid::parse_str(v.trim()).ok())
                    .is_some_and(|id| id == account_id);
                if !matches {
                    return Err(ApiError::unauthorized(format!(
                        "the API key does not belong to the account named in {name}"
                    )));
                }
            }
        }
        Ok(ApiAuth { account_id })
    }
}

impl FromRequestParts<AppState> for AgentAuth {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, ctx: &AppState) -> Result<Self, ApiError> {
        let Some(token) = bearer(parts) else {
            return Err(ApiError::unauthorized(
                "missing agent key: send Authorization: Bearer <API_KEY of the private location>",
            ));
        };
        match ctx.store.authenticate_location_key(token).await? {
            Some(location) => Ok(AgentAuth(location)),
            None => Err(ApiError::unauthorized(
                "invalid agent key: it is not an active key of any private location",
            )),
        }
    }
}
