//! `POST /agent/v1/error-reports`: error reports of an agent (internal errors, panics),
//! validated field by field (a 400 names the field) and stored for the agent's private
//! location. The body limit
//! ([`crate::protocol::MAX_ERROR_REPORT_BODY_BYTES`]) is enforced while the body
//! streams (413).

use axum::Json;
use axum::extract::State;

use super::api::extract::ApiJson;
use super::auth::AgentAuth;
use super::context::AppState;
use super::errors::ApiError;
use super::store::now_ms;
use crate::protocol::{
    ErrorReport, ErrorReportsRequest, ErrorReportsResponse, MAX_ERROR_BACKTRACE_BYTES,
    MAX_ERROR_EVENT_LEN, MAX_ERROR_MESSAGE_BYTES, MAX_ERROR_META_BYTES,
    MAX_ERROR_REPORTS_PER_REQUEST,
};

pub async fn receive(
    State(ctx): State<AppState>,
    AgentAuth(location): AgentAuth,
    ApiJson(request): ApiJson<ErrorReportsRequest>,
) -> Result<Json<ErrorReportsResponse>, ApiError> {
    validate(&request)?;
    let stored = ctx
        .store
        .record_error_reports(&location, &request, now_ms())
        .await?;
    tracing::info!(
        location = %location.slug_name,
        count = stored,
        "error reports received from an agent"
    );
    Ok(Json(ErrorReportsResponse {
        stored: u32::try_from(stored).unwrap_or(u32::MAX),
    }))
}

/// Every field within the protocol's limits; the error names the first bad one.
pub fn validate(request: &ErrorReportsRequest) -> Result<(), ApiError> {
    for (field, value) in [
        ("agentVersion", &request.agent_version),
        ("platform", &request.platform),
        ("runtime", &request.runtime),
    ] {
        one_line(field, value, MAX_ERROR_META_BYTES)?;
    }
    if request.reports.is_empty() || request.reports.len() > MAX_ERROR_REPORTS_PER_REQUEST {
        return Err(ApiError::invalid(
            "reports",
            format!("must have 1 to {MAX_ERROR_REPORTS_PER_REQUEST} items"),
        ));
    }
    for (i, report) in request.reports.iter().enumerate() {
        validate_report(i, report)?;
    }
    Ok(())
}

fn validate_report(i: usize, r: &ErrorReport) -> Result<(), ApiError> {
    let field = |name: &str| format!("reports[{i}].{name}");
    let event_ok = !r.event.is_empty()
        && r.event.len() <= MAX_ERROR_EVENT_LEN
        && r.event.bytes().all(|b| {
            b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'.' | b'_' | b'-')
        });
    if !event_ok {
        return Err(ApiError::invalid(
            &field("event"),
            format!("must be 1 to {MAX_ERROR_EVENT_LEN} characters of [a-z0-9._-]"),
        ));
    }
    text(&field("message"), &r.message, MAX_ERROR_MESSAGE_BYTES)?;
    if let Some(backtrace) = &r.backtrace {
        text(&field("backtrace"), backtrace, MAX_ERROR_BACKTRACE_BYTES)?;
    }
    if r.count == 0 {
        return Err(ApiError::invalid(&field("count"), "must be at least 1"));
    }
    if r.first_seen_at > r.last_seen_at {
        return Err(ApiError::invalid(
            &field("firstSeenAt"),
            "must not be after lastSeenAt",
        ));
    }
    Ok(())
}

/// Non-empty, at most `max` bytes, no control characters.
fn one_line(field: &str, value: &str, max: usize) -> Result<(), ApiError> {
    if value.trim().is_empty() || value.len() > max || value.chars().any(char::is_control) {
        return Err(ApiError::invalid(
            field,
            format!("must be 1 to {max} bytes on one line"),
        ));
    }
    Ok(())
}

/// Non-empty, at most `max` bytes, no control characters but line breaks and tabs.
fn text(field: &str, value: &str, max: usize) -> Result<(), ApiError> {
    let printable = value
        .chars()
        .all(|c| !c.is_control() || matches!(c, '\n' | '\r' | '\t'));
    if value.trim().is_empty() || value.len() > max || !printable {
        return Err(ApiError::invalid(
            field,
            format!(
                "must be 1 to {max} bytes without control characters other than line breaks and tabs"
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::Utc;

    fn request() -> ErrorReportsRequest {
        let now = Utc::now();
        ErrorReportsRequest {
            agent_version: "0.1.0".into(),
            platform: "linux-x86_64".into(),
            runtime: "rustc 1.95.0; tokio 1.54.1".into(),
            reports: vec![ErrorReport {
                event: "agent.panic".into(),
                message: "thread 'main' panicked".into(),
                backtrace: Some("0: main\n1: start".into()),
                first_seen_at: now,
                last_seen_at: now,
                count: 1,
            }],
        }
    }

    fn message_of(r: ErrorReportsRequest) -> String {
        match validate(&r) {
            Ok(()) => panic!("accepted"),
            Err(e) => e.message,
        }
    }

    #[test]
    fn bad_fields_are_named() {
        assert!(validate(&request()).is_ok());
        let mut r = request();
        r.reports.clear();
        assert!(message_of(r).starts_with("reports:"));
        let mut r = request();
        r.reports = vec![r.reports[0].clone(); MAX_ERROR_REPORTS_PER_REQUEST + 1];
        assert!(message_of(r).starts_with("reports:"));
        let mut r = request();
        r.platform = "linux\nx".into();
        assert!(message_of(r).starts_with("platform:"));
        let mut r = request();
        r.reports[0].event = "Agent Panic".into();
        assert!(message_of(r).starts_with("reports[0].event:"));
        let mut r = request();
        r.reports[0].message = "x".repeat(MAX_ERROR_MESSAGE_BYTES + 1);
        assert!(message_of(r).starts_with("reports[0].message:"));
        let mut r = request();
        r.reports[0].backtrace = Some("\u{0}".into());
        assert!(message_of(r).starts_with("reports[0].backtrace:"));
        let mut r = request();
        r.reports[0].count = 0;
        assert!(message_of(r).starts_with("reports[0].count:"));
        let mut r = request();
        r.reports[0].first_seen_at = r.reports[0].last_seen_at + chrono::Duration::seconds(1);
        assert!(message_of(r).starts_with("reports[0].firstSeenAt:"));
    }
}
