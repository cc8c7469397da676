//! Heartbeat checks of the public API: `POST /v1/checks/heartbeat`, `PUT
//! /v1/checks/heartbeat/{id}` (also reached through the generic `/v1/checks` routes),
//! and their events: `GET /v1/checks/heartbeats/{checkId}/events`,
//! `/events/{id}` and `/availability`.
//!
//! Query times (`startTime`, `endTime`) are RFC 3339 date-times, dates (`2025-01-31`,
//! midnight UTC) or milliseconds since the epoch. Events of `[startTime, endTime]` come
//! newest first. See `heartbeats::stats` for the success ratios.

use crate::service::api::routes::{Area, Routes};
use axum::Json;
use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use chrono::{NaiveDate, SecondsFormat};
use serde_json::{Value, json};
use uuid::Uuid;

use super::checks::check_json;
use super::extract::{ApiJson, parse_id};
use crate::model::CheckType;
use crate::model::HeartbeatConfig;
use crate::model::heartbeat::DAY_MS;
use crate::service::auth::ApiAuth;
use crate::service::context::AppState;
use crate::service::errors::ApiError;
use crate::service::heartbeats::doc::normalize_heartbeat;
use crate::service::heartbeats::{new_token, ping_url, stats};
use crate::service::store::{
    CheckRecord, CheckSubscription, EventRecord, HeartbeatPeriods, HeartbeatWrite, now_ms,
};

/// Largest `limit` of the events list (and its default).
pub const MAX_EVENTS_LIMIT: i64 = 10;

pub fn routes() -> Routes {
    Routes::new(Area::Public)
        .post(
            "/v1/checks/heartbeat",
            |State(ctx): State<AppState>,
                 auth: ApiAuth,
                 RawQuery(raw): RawQuery,
                 ApiJson(body): ApiJson<Value>| async move {
                    let auto_assign = auto_assign_alerts(raw.as_deref())?;
                    create(&ctx, &auth, body, auto_assign).await
                },
        )
        .put(
            "/v1/checks/heartbeat/{id}",
            |State(ctx): State<AppState>,
                 auth: ApiAuth,
                 Path(id): Path<String>,
                 ApiJson(body): ApiJson<Value>| async move {
                    let id = parse_id(&id, "id")?;
                    let Some(existing) = ctx.store.get_check(auth.account_id, id).await? else {
                        return Err(ApiError::not_found("No such check."));
                    };
                    if existing.check_type != CheckType::Heartbeat {
                        return Err(ApiError::invalid(
                            "checkType",
                            format!(
                                "this check is a {} check, not HEARTBEAT; update it through /v1/checks/{id}",
                                existing.check_type
                            ),
                        ));
                    }
                    update(&ctx, &auth, existing, body).await
                },
        )
        .get("/v1/checks/heartbeats/{check_id}/events", events)
        .get("/v1/checks/heartbeats/{check_id}/events/{id}", event)
        .get(
            "/v1/checks/heartbeats/{check_id}/availability",
            availability,
        )
}

/// `autoAssignAlerts` (default true).
pub fn auto_assign_alerts(raw: Option<&str>) -> Result<bool, ApiError> {
    let mut value = true;
    for (k, v) in url::form_urlencoded::parse(raw.unwrap_or("").as_bytes()) {
        if k == "autoAssignAlerts" {
            value = match v.as_ref() {
                "true" | "" => true,
                "false" => false,
                _ => {
                    return Err(ApiError::invalid(
                        "autoAssignAlerts",
                        "must be true or false",
                    ));
                }
            };
        }
    }
    Ok(value)
}

/// A heartbeat check as the API shows it: the stored document with `heartbeat.pingUrl`
/// and the check's `alertChannelSubscriptions`.
pub fn heartbeat_check_json(ping_base: &str, c: &CheckRecord, subs: &[CheckSubscription]) -> Value {
    let mut out = check_json(c);
    if let Some(hb) = out.get_mut("heartbeat").and_then(Value::as_object_mut)
        && let Some(token) = hb
            .get("pingToken")
            .and_then(Value::as_str)
            .map(str::to_owned)
    {
        hb.insert("pingUrl".into(), json!(ping_url(ping_base, &token)));
    }
    if let Value::Object(m) = &mut out {
        m.insert(
            "alertChannelSubscriptions".into(),
            Value::Array(
                subs.iter()
                    .map(|s| json!({"alertChannelId": s.channel_id, "activated": s.activated}))
                    .collect(),
            ),
        );
    }
    out
}

fn periods(config: &HeartbeatConfig) -> HeartbeatPeriods {
    HeartbeatPeriods {
        period_ms: config.period_ms(),
        grace_ms: config.grace_ms(),
    }
}

/// Refuses subscriptions to channels the account does not have.
async fn ensure_channels(
    ctx: &AppState,
    account_id: Uuid,
    subs: &[CheckSubscription],
) -> Result<(), ApiError> {
    let ids: Vec<i64> = subs.iter().map(|s| s.channel_id).collect();
    let found = ctx.store.existing_channel_ids(account_id, &ids).await?;
    if let Some((i, s)) = subs
        .iter()
        .enumerate()
        .find(|(_, s)| !found.contains(&s.channel_id))
    {
        return Err(ApiError::invalid(
            &format!("alertChannelSubscriptions[{i}].alertChannelId"),
            format!("no alert channel {} in this account", s.channel_id),
        ));
    }
    Ok(())
}

/// A stored heartbeat check with its alert channel subscriptions.
pub type StoredHeartbeat = (CheckRecord, Vec<CheckSubscription>);

/// Creates a heartbeat check of `account_id` from an API body (the deploy endpoint
/// calls this too). Without `alertChannelSubscriptions` in the body the check is
/// subscribed to every channel of the account when `auto_assign` (the reference's
/// `autoAssignAlerts`, default true), else to the channels with `autoSubscribe`. The
/// engine knows the monitor when this returns.
pub async fn create_heartbeat_check(
    ctx: &AppState,
    account_id: Uuid,
    body: Value,
    auto_assign: bool,
) -> Result<StoredHeartbeat, ApiError> {
    let token = new_token();
    let hb = normalize_heartbeat(body, None, &token)?;
    let subs = match &hb.subscriptions {
        Some(subs) => {
            ensure_channels(ctx, account_id, subs).await?;
            subs.clone()
        }
        None => ctx
            .store
            .auto_subscribed_channels(account_id, auto_assign)
            .await?
            .into_iter()
            .map(|channel_id| CheckSubscription {
                channel_id,
                activated: true,
            })
            .collect(),
    };
    let id = Uuid::new_v4();
    let stored = ctx
        .store
        .insert_heartbeat_check(
            account_id,
            id,
            &hb.check,
            &HeartbeatWrite {
                token,
                periods: periods(&hb.config),
            },
            &subs,
            now_ms(),
        )
        .await?;
    ctx.heartbeats.reload(id).await;
    Ok((stored, subs))
}

/// Updates a heartbeat check (`existing`, as stored) from an API body: top-level fields
/// replace, the ping token is kept. The engine applies the change (a new period
/// restarts a running timer) before this returns.
pub async fn update_heartbeat_check(
    ctx: &AppState,
    existing: CheckRecord,
    body: Value,
) -> Result<StoredHeartbeat, ApiError> {
    let (id, account_id) = (existing.id, existing.account_id);
    let Some(row) = ctx.store.heartbeat_row(id).await? else {
        return Err(ApiError::internal(&format!(
            "heartbeat check {id} has no heartbeat row"
        )));
    };
    let hb = normalize_heartbeat(body, Some(&existing.document), &row.token)?;
    if let Some(subs) = &hb.subscriptions {
        ensure_channels(ctx, account_id, subs).await?;
    }
    let Some(stored) = ctx
        .store
        .update_heartbeat_check(
            account_id,
            id,
            &hb.check,
            periods(&hb.config),
            hb.subscriptions.as_deref(),
            now_ms(),
        )
        .await?
    else {
        return Err(ApiError::not_found("No such check."));
    };
    ctx.heartbeats.reload(id).await;
    let subs = ctx
        .store
        .check_subscriptions(account_id, &[id])
        .await?
        .remove(&id)
        .unwrap_or_default();
    Ok((stored, subs))
}

/// `POST /v1/checks/heartbeat` (and the generic create): 201 with the check.
pub async fn create(
    ctx: &AppState,
    auth: &ApiAuth,
    body: Value,
    auto_assign: bool,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let (stored, subs) = create_heartbeat_check(ctx, auth.account_id, body, auto_assign).await?;
    Ok((
        StatusCode::CREATED,
        Json(heartbeat_check_json(&ctx.ping_url, &stored, &subs)),
    ))
}

/// `PUT /v1/checks/heartbeat/{id}` (and the generic update) of the account's check
/// `existing`.
pub async fn update(
    ctx: &AppState,
    auth: &ApiAuth,
    existing: CheckRecord,
    body: Value,
) -> Result<Json<Value>, ApiError> {
    if existing.account_id != auth.account_id {
        return Err(ApiError::not_found("No such check."));
    }
    let (stored, subs) = update_heartbeat_check(ctx, existing, body).await?;
    Ok(Json(heartbeat_check_json(&ctx.ping_url, &stored, &subs)))
}

/// An event as the API shows it (`HeartbeatsV1Event`).
pub fn event_json(e: &EventRecord) -> Value {
    json!({
        "id": e.id,
        "state": e.state,
        "timestamp": e.timestamp.to_rfc3339_opts(SecondsFormat::Millis, true),
        "source": e.source,
        "userAgent": e.user_agent,
    })
}

/// Parses a query time (see the module documentation).
pub fn parse_time(field: &str, raw: &str) -> Result<i64, ApiError> {
    let raw = raw.trim();
    if let Ok(ms) = raw.parse::<i64>() {
        return Ok(ms);
    }
    if let Ok(t) = chrono::DateTime::parse_from_rfc3339(raw) {
        return Ok(t.timestamp_millis());
    }
    if let Ok(d) = NaiveDate::parse_from_str(raw, "%Y-%m-%d")
        && let Some(t) = d.and_hms_opt(0, 0, 0)
    {
        return Ok(t.and_utc().timestamp_millis());
    }
    Err(ApiError::invalid(
        field,
        "must be an ISO 8601 date-time or date, or milliseconds since the epoch",
    ))
}

/// The query of the events endpoints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventsQuery {
    /// Inclusive bounds, store milliseconds.
    pub start: i64,
    pub end: i64,
    pub limit: i64,
}

impl EventsQuery {
    /// `startTime` (default: 24 hours before `endTime`), `endTime` (default `now`),
    /// `limit` (1 to 10, default 10). Other parameters are ignored.
    pub fn parse(raw: Option<&str>, now: i64) -> Result<EventsQuery, ApiError> {
        let (mut start, mut end, mut limit) = (None, None, MAX_EVENTS_LIMIT);
        for (k, v) in url::form_urlencoded::parse(raw.unwrap_or("").as_bytes()) {
            match k.as_ref() {
                "startTime" => start = Some(parse_time("startTime", &v)?),
                "endTime" => end = Some(parse_time("endTime", &v)?),
                "limit" => {
                    let n =
                        v.trim().parse::<f64>().ok().filter(|n| {
                            n.fract() == 0.0 && *n >= 1.0 && *n <= MAX_EVENTS_LIMIT as f64
                        });
                    limit = match n {
                        Some(n) => n as i64,
                        None => {
                            return Err(ApiError::invalid(
                                "limit",
                                format!(
                                    "must be an integer between 1 and {MAX_EVENTS_LIMIT} (got {})",
                                    v.trim()
                                ),
                            ));
                        }
                    };
                }
                _ => {}
            }
        }
        let end = end.unwrap_or(now);
        let start = start.unwrap_or(end.saturating_sub(DAY_MS));
        if start > end {
            return Err(ApiError::invalid("startTime", "must not be after endTime"));
        }
        Ok(EventsQuery { start, end, limit })
    }
}

/// The account's heartbeat check `raw_id`, or 404.
async fn heartbeat_check(ctx: &AppState, auth: &ApiAuth, raw_id: &str) -> Result<Uuid, ApiError> {
    let id = parse_id(raw_id, "checkId")?;
    match ctx.store.get_check(auth.account_id, id).await? {
        Some(c) if c.check_type == CheckType::Heartbeat => Ok(id),
        _ => Err(ApiError::not_found("No such heartbeat check.")),
    }
}

async fn events(
    State(ctx): State<AppState>,
    auth: ApiAuth,
    Path(check_id): Path<String>,
    RawQuery(raw): RawQuery,
) -> Result<Json<Value>, ApiError> {
    let now = ctx.clock.now_ms();
    let query = EventsQuery::parse(raw.as_deref(), now)?;
    let id = heartbeat_check(&ctx, &auth, &check_id).await?;
    let found = ctx
        .store
        .heartbeat_events(id, query.start.saturating_sub(1), query.end, query.limit)
        .await?;
    let stats = stats::event_stats(&ctx.store, id, now).await?;
    Ok(Json(json!([{
        "events": found.iter().map(event_json).collect::<Vec<_>>(),
        "stats": stats,
    }])))
}

async fn event(
    State(ctx): State<AppState>,
    auth: ApiAuth,
    Path((check_id, event_id)): Path<(String, String)>,
) -> Result<Json<Value>, ApiError> {
    let event_id = parse_id(&event_id, "id")?;
    let id = heartbeat_check(&ctx, &auth, &check_id).await?;
    let Some(found) = ctx.store.heartbeat_event(id, event_id).await? else {
        return Err(ApiError::not_found("No such heartbeat event."));
    };
    let stats = stats::event_stats(&ctx.store, id, ctx.clock.now_ms()).await?;
    Ok(Json(json!({"event": event_json(&found), "stats": stats})))
}

async fn availability(
    State(ctx): State<AppState>,
    auth: ApiAuth,
    Path(check_id): Path<String>,
    RawQuery(raw): RawQuery,
) -> Result<Json<Value>, ApiError> {
    let query = EventsQuery::parse(raw.as_deref(), ctx.clock.now_ms())?;
    let id = heartbeat_check(&ctx, &auth, &check_id).await?;
    // The window [start, end] is (start - 1, end] in the store's terms.
    let length = query.end - query.start.saturating_sub(1);
    Ok(Json(
        stats::availability(&ctx.store, id, query.end, length).await?,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_query_defaults_and_limits() {
        let now = 10 * DAY_MS;
        let q = EventsQuery::parse(None, now).unwrap();
        assert_eq!(
            q,
            EventsQuery {
                start: 9 * DAY_MS,
                end: now,
                limit: 10
            }
        );
        let q = EventsQuery::parse(Some("limit=3&startTime=1970-01-02&endTime=172800000"), now)
            .unwrap();
        assert_eq!(
            q,
            EventsQuery {
                start: DAY_MS,
                end: 2 * DAY_MS,
                limit: 3
            }
        );
        let q = EventsQuery::parse(Some("startTime=1970-01-01T00:00:01Z"), now).unwrap();
        assert_eq!(q.start, 1000);
        for bad in [
            "limit=11",
            "limit=0",
            "limit=x",
            "limit=2.5",
            "startTime=yesterday",
            "startTime=5&endTime=4",
        ] {
            assert!(EventsQuery::parse(Some(bad), now).is_err(), "{bad}");
        }
        let e = EventsQuery::parse(Some("limit=11"), now).unwrap_err();
        assert!(
            e.message
                .starts_with("limit: must be an integer between 1 and 10"),
            "{}",
            e.message
        );
    }

    #[test]
    fn auto_assign_parses() {
        assert!(auto_assign_alerts(None).unwrap());
        assert!(!auto_assign_alerts(Some("autoAssignAlerts=false")).unwrap());
        assert!(auto_assign_alerts(Some("autoAssignAlerts=maybe")).is_err());
    }
}
