//! The ping address of heartbeat monitors: `GET|POST /ping/<token>`.
//!
//! - GET and POST record a ping; it is committed to the store before the answer, `200`
//!   with the text `OK`. HEAD, PUT, DELETE, PATCH and the rest are `405` and record
//!   nothing.
//! - A token of the wrong shape or of no monitor is `404` (never a 5xx).
//! - Pings whose User-Agent is a link-preview bot (Twitterbot, Slackbot, Googlebot,
//!   Discordbot, Facebot, TelegramBot, WhatsApp, LinkedInBot) are answered `200` with
//!   `OK (ignored: link preview)` and recorded nowhere, so that pasting a ping URL into
//!   a chat does not fake a heartbeat.
//! - The event keeps its source (the `Origin` header, else `Referer`) and User-Agent,
//!   each cut to [`MAX_HEADER_CHARS`] characters, and the first [`MAX_KEPT_BODY`] bytes
//!   of the body (lossy UTF-8); the rest is read and discarded up to
//!   [`MAX_PING_BODY`], beyond which the ping is refused with `413`.

use crate::service::api::routes::{Area, Routes};
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use http_body_util::BodyExt;

use super::context::AppState;
use super::errors::{ApiError, method_not_allowed};
use super::heartbeats::{PingIn, PingOutcome, is_token_shaped};

/// Path prefix of ping addresses served by this process.
pub const PING_PATH: &str = "/ping";
/// Body bytes kept with the event.
pub const MAX_KEPT_BODY: usize = 10 * 1024;
/// Largest body read; a larger one is refused with 413.
pub const MAX_PING_BODY: usize = 1024 * 1024;
/// Characters kept of `source` and `userAgent`.
pub const MAX_HEADER_CHARS: usize = 512;
/// User-Agent substrings of link-preview bots (matched case-insensitively).
pub const PREVIEW_BOTS: [&str; 8] = [
    "twitterbot",
    "slackbot",
    "googlebot",
    "discordbot",
    "facebot",
    "telegrambot",
    "whatsapp",
    "linkedinbot",
];

pub fn routes() -> Routes {
    let path = format!("{PING_PATH}/{{token}}");
    Routes::new(Area::Ping)
        .get(&path, ping)
        .post(&path, ping)
        .on(Method::HEAD, &path, method_not_allowed)
}

/// Whether a User-Agent is a link-preview bot's.
pub fn is_preview_bot(user_agent: &str) -> bool {
    let ua = user_agent.to_ascii_lowercase();
    PREVIEW_BOTS.iter().any(|bot| ua.contains(bot))
}

/// A header as text (lossy), cut to [`MAX_HEADER_CHARS`] characters; None when absent
/// or empty.
fn header_text(headers: &HeaderMap, name: header::HeaderName) -> Option<String> {
    let raw = headers.get(name)?;
    let text = String::from_utf8_lossy(raw.as_bytes());
    let cut: String = text.chars().take(MAX_HEADER_CHARS).collect();
    let cut = cut.trim().to_owned();
    (!cut.is_empty()).then_some(cut)
}

/// Why a body was not read.
enum BodyError {
    TooLarge,
    Broken,
}

/// Reads the body: keeps the first [`MAX_KEPT_BODY`] bytes, discards the rest, stops
/// beyond [`MAX_PING_BODY`].
async fn read_body(mut body: Body) -> Result<Vec<u8>, BodyError> {
    let mut kept = Vec::new();
    let mut total = 0usize;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|_| BodyError::Broken)?;
        let Ok(data) = frame.into_data() else {
            continue;
        };
        total = total.saturating_add(data.len());
        if total > MAX_PING_BODY {
            return Err(BodyError::TooLarge);
        }
        let room = MAX_KEPT_BODY.saturating_sub(kept.len());
        kept.extend_from_slice(&data[..data.len().min(room)]);
    }
    Ok(kept)
}

fn text(status: StatusCode, body: &'static str) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        body,
    )
        .into_response()
}

async fn ping(
    State(ctx): State<AppState>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let at = ctx.clock.now_ms();
    // The raw segment: anything percent-encoded or oddly shaped is no token of ours.
    let token = uri
        .path()
        .strip_prefix(PING_PATH)
        .and_then(|rest| rest.strip_prefix('/'))
        .unwrap_or("");
    if !is_token_shaped(token) {
        return ApiError::not_found("No such heartbeat.").into_response();
    }
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > MAX_PING_BODY as u64) {
        return too_large();
    }
    let kept = match read_body(body).await {
        Ok(kept) => kept,
        Err(BodyError::TooLarge) => return too_large(),
        Err(BodyError::Broken) => {
            return ApiError::bad_request("the request body could not be read").into_response();
        }
    };
    let user_agent = header_text(&headers, header::USER_AGENT);
    let source =
        header_text(&headers, header::ORIGIN).or_else(|| header_text(&headers, header::REFERER));
    let ignored = user_agent.as_deref().is_some_and(is_preview_bot);
    let outcome = ctx
        .heartbeats
        .ping(PingIn {
            token: token.to_owned(),
            at,
            method: if method == Method::POST {
                "POST"
            } else {
                "GET"
            },
            source,
            user_agent,
            body: (!kept.is_empty()).then(|| String::from_utf8_lossy(&kept).into_owned()),
            ignored,
        })
        .await;
    match outcome {
        PingOutcome::Recorded { .. } => text(StatusCode::OK, "OK"),
        PingOutcome::Ignored => text(StatusCode::OK, "OK (ignored: link preview)"),
        PingOutcome::NotFound => ApiError::not_found("No such heartbeat.").into_response(),
        PingOutcome::Unavailable => ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "the ping could not be recorded; try again",
        )
        .into_response(),
    }
}

fn too_large() -> Response {
    ApiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        format!("ping bodies are limited to {MAX_PING_BODY} bytes"),
    )
    .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn preview_bots_are_recognised() {
        assert!(is_preview_bot(
            "Mozilla/5.0 (compatible; Discordbot/2.0; +https://discordapp.com)"
        ));
        assert!(is_preview_bot("Slackbot-LinkExpanding 1.0"));
        assert!(is_preview_bot("WhatsApp/2.23"));
        assert!(!is_preview_bot("curl/8.5.0"));
    }
}
