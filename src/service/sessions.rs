//! Check sessions as the public API shows them: JSON views with links, the trigger's
//! target selection (checkId / matchTags), and waiting for completion.

use std::collections::HashSet;
use std::time::Duration;

use axum::body::Bytes;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::context::Ctx;
use super::errors::ApiError;
use super::store::{ResultRecord, SessionRecord, TriggerCandidate};
use crate::model::{CheckType, ResultType, RunSource, SessionStatus};

/// A session as the API returns it; `results` only where the endpoint includes them.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionView {
    pub check_session_id: Uuid,
    pub check_session_link: String,
    pub check_id: Uuid,
    pub check_type: CheckType,
    pub name: String,
    pub status: SessionStatus,
    pub started_at: DateTime<Utc>,
    pub stopped_at: Option<DateTime<Utc>>,
    /// Milliseconds from start to stop (or to now while running).
    pub time_elapsed: i64,
    pub run_locations: Vec<String>,
    pub run_source: RunSource,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub results: Option<Vec<ResultSummaryView>>,
}

/// A result inside a session view.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ResultSummaryView {
    pub check_result_id: Uuid,
    pub check_result_link: String,
    pub check_id: Uuid,
    pub check_type: CheckType,
    pub name: String,
    pub run_location: String,
    pub result_type: ResultType,
    pub has_errors: bool,
    pub has_failures: bool,
    pub is_degraded: bool,
    pub aborted: bool,
    pub is_cancelled: bool,
    pub response_time: Option<f64>,
    pub started_at: Option<DateTime<Utc>>,
    pub stopped_at: Option<DateTime<Utc>>,
}

/// Link of a session (the API resource; Outpost has no web UI).
pub fn session_link(public_url: &str, id: Uuid) -> String {
    format!("{public_url}/v1/check-sessions/{id}")
}

/// Link of a result.
pub fn result_link(public_url: &str, check_id: Uuid, result_id: Uuid) -> String {
    format!("{public_url}/v1/check-results/{check_id}/{result_id}")
}

/// The API view of a session.
pub fn session_view(
    public_url: &str,
    s: &SessionRecord,
    results: Option<&[ResultRecord]>,
) -> SessionView {
    let end = s.stopped_at.unwrap_or_else(Utc::now);
    SessionView {
        check_session_id: s.id,
        check_session_link: session_link(public_url, s.id),
        check_id: s.check_id,
        check_type: s.check_type,
        name: s.name.clone(),
        status: s.status,
        started_at: s.started_at,
        stopped_at: s.stopped_at,
        time_elapsed: (end - s.started_at).num_milliseconds().max(0),
        run_locations: s.run_locations.clone(),
        run_source: s.run_source,
        results: results.map(|rs| rs.iter().map(|r| result_summary(public_url, r)).collect()),
    }
}

fn result_summary(public_url: &str, r: &ResultRecord) -> ResultSummaryView {
    ResultSummaryView {
        check_result_id: r.id,
        check_result_link: result_link(public_url, r.check_id, r.id),
        check_id: r.check_id,
        check_type: r.check_type,
        name: r.name.clone(),
        run_location: r.run_location.clone(),
        result_type: r.result_type,
        has_errors: r.has_errors,
        has_failures: r.has_failures,
        is_degraded: r.is_degraded,
        aborted: r.aborted,
        is_cancelled: r.is_cancelled,
        response_time: r.response_time,
        started_at: r.started_at,
        stopped_at: r.stopped_at,
    }
}

/// Body of `POST /v1|v2/check-sessions/trigger`.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TriggerRequest {
    #[serde(default, deserialize_with = "present")]
    pub target: Option<TriggerTarget>,
    /// Accepted and ignored (only Playwright suites have caches).
    #[serde(default, deserialize_with = "present")]
    pub refresh_cache: Option<bool>,
}

/// Which checks a trigger selects.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TriggerTarget {
    #[serde(default, deserialize_with = "present")]
    pub check_id: Option<Vec<String>>,
    #[serde(default, deserialize_with = "present")]
    pub match_tags: Option<Vec<Vec<String>>>,
}

/// An optional field that, when present, must hold a value: `null` is refused (the
/// reference types these fields without `nullable`); an absent field is `None`.
fn present<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    T::deserialize(d).map(Some)
}

/// Most entries in `checkId` and most groups in `matchTags`.
pub const MAX_TARGET_ITEMS: usize = 1000;

/// A validated trigger target.
///
/// Selection rule: with neither `checkId` nor `matchTags`, every activated check of the
/// account. Otherwise a check is selected if its id is listed in `checkId` (activated
/// or not: naming a check is an explicit request) OR it is activated and matches
/// `matchTags` (outer list OR, inner list AND, a leading `!` negates a tag).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Selection {
    pub check_ids: Vec<Uuid>,
    pub match_tags: Vec<Vec<String>>,
}

impl Selection {
    /// Validates the request body's target.
    pub fn from_request(req: &TriggerRequest) -> Result<Selection, ApiError> {
        let Some(target) = &req.target else {
            return Ok(Selection::default());
        };
        let mut check_ids = Vec::new();
        if let Some(ids) = &target.check_id {
            if ids.len() > MAX_TARGET_ITEMS {
                return Err(ApiError::invalid(
                    "target.checkId",
                    format!("must have at most {MAX_TARGET_ITEMS} items"),
                ));
            }
            for (i, id) in ids.iter().enumerate() {
                let id = Uuid::parse_str(id.trim()).map_err(|_| {
                    ApiError::invalid(&format!("target.checkId[{i}]"), "must be a UUID")
                })?;
                check_ids.push(id);
            }
        }
        let mut match_tags = Vec::new();
        if let Some(groups) = &target.match_tags {
            if groups.len() > MAX_TARGET_ITEMS {
                return Err(ApiError::invalid(
                    "target.matchTags",
                    format!("must have at most {MAX_TARGET_ITEMS} groups"),
                ));
            }
            for (i, group) in groups.iter().enumerate() {
                if group.is_empty() || group.iter().any(|t| t.trim_start_matches('!').is_empty()) {
                    return Err(ApiError::invalid(
                        &format!("target.matchTags[{i}]"),
                        "must be a non-empty list of non-empty tags",
                    ));
                }
                match_tags.push(group.clone());
            }
        }
        Ok(Selection {
            check_ids,
            match_tags,
        })
    }

    /// No filter at all: every activated check.
    pub fn is_everything(&self) -> bool {
        self.check_ids.is_empty() && self.match_tags.is_empty()
    }

    /// Whether the check is selected (see the type's documentation).
    pub fn selects(&self, c: &TriggerCandidate) -> bool {
        if self.is_everything() {
            return c.activated;
        }
        if self.check_ids.contains(&c.id) {
            return true;
        }
        c.activated && !self.match_tags.is_empty() && matches_tags(&c.tags, &self.match_tags)
    }

    /// When only ids are given, the store need only read those checks.
    pub fn only_ids(&self) -> Option<&[Uuid]> {
        (!self.check_ids.is_empty() && self.match_tags.is_empty()).then_some(&self.check_ids)
    }
}

/// `[[a, b], [c, !d]]` = (a AND b) OR (c AND NOT d).
pub fn matches_tags(tags: &[String], groups: &[Vec<String>]) -> bool {
    let have: HashSet<&str> = tags.iter().map(String::as_str).collect();
    groups.iter().any(|group| {
        group.iter().all(|t| match t.strip_prefix('!') {
            Some(negated) => !have.contains(negated),
            None => have.contains(t.as_str()),
        })
    })
}

/// A session as the API answers it.
#[derive(Debug)]
pub enum SessionAnswer {
    /// The account has no such session.
    Missing,
    /// Its JSON view (with results); `is_final`: its status is final.
    Found { body: Bytes, is_final: bool },
}

/// The JSON view of a session with its results: from the settled sessions' cache
/// ([`FinalSessions`]) without a query, else read in one statement (and kept when the
/// session is settled).
///
/// [`FinalSessions`]: super::final_sessions::FinalSessions
pub async fn session_answer(
    ctx: &Ctx,
    account_id: Uuid,
    id: Uuid,
) -> Result<SessionAnswer, ApiError> {
    let deletions = ctx.store.session_deletions();
    if let Some(body) = ctx.final_sessions.get(account_id, id, deletions) {
        return Ok(SessionAnswer::Found {
            body,
            is_final: true,
        });
    }
    let Some((session, results, settled)) = ctx.store.session_with_results(account_id, id).await?
    else {
        return Ok(SessionAnswer::Missing);
    };
    let view = session_view(&ctx.public_url, &session, Some(&results));
    let body = Bytes::from(serde_json::to_vec(&view).map_err(|e| ApiError::internal(&e))?);
    if settled {
        ctx.final_sessions.put(
            account_id,
            id,
            body.clone(),
            deletions,
            ctx.store.session_deletions(),
        );
    }
    Ok(SessionAnswer::Found {
        body,
        is_final: session.status.is_final(),
    })
}

/// Waits up to `max_wait` for the session to be final; returns its JSON view then.
/// `Ok(None)`: the wait ran out (or the service is draining) first. Woken by the hub,
/// never by polling.
pub async fn await_final(
    ctx: &Ctx,
    account_id: Uuid,
    id: Uuid,
    max_wait: Duration,
) -> Result<Option<Bytes>, ApiError> {
    let deadline = tokio::time::Instant::now() + max_wait;
    let watch = ctx.hub.watch_session(id);
    loop {
        let notified = watch.notify().notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        match session_answer(ctx, account_id, id).await? {
            SessionAnswer::Missing => {
                return Err(ApiError::not_found("No such check session."));
            }
            SessionAnswer::Found {
                body,
                is_final: true,
            } => return Ok(Some(body)),
            SessionAnswer::Found { .. } => {}
        }
        tokio::select! {
            _ = &mut notified => {}
            _ = tokio::time::sleep_until(deadline) => return Ok(None),
            _ = ctx.stop.draining() => return Ok(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn tag_groups() {
        let groups = vec![s(&["a", "b"]), s(&["c", "!d"])];
        assert!(matches_tags(&s(&["a", "b"]), &groups));
        assert!(!matches_tags(&s(&["a"]), &groups));
        assert!(matches_tags(&s(&["c"]), &groups));
        assert!(!matches_tags(&s(&["c", "d"]), &groups));
        assert!(matches_tags(&s(&["a", "b", "d"]), &groups));
        assert!(!matches_tags(&[], &groups));
    }
}
