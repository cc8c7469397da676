//! Error reports of agents (`POST /agent/v1/error-reports`), kept per private location:
//! only the newest [`MAX_ERROR_REPORTS_PER_LOCATION`] of a location stay, trimmed in
//! the transaction that inserts.

use chrono::{DateTime, Utc};
use serde_json::json;
use sqlx::Row;
use uuid::Uuid;

use super::rows::{self, time};
use super::{LocationAuth, Store, StoreError};
use crate::protocol::ErrorReportsRequest;

/// Reports kept per private location; older ones are deleted.
pub const MAX_ERROR_REPORTS_PER_LOCATION: i64 = 1000;

/// A stored error report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrorReportRecord {
    pub id: Uuid,
    pub account_id: Uuid,
    pub location_id: Uuid,
    /// The location's slug name now (the row keeps the id).
    pub location_slug: String,
    pub event: String,
    pub message: String,
    pub backtrace: Option<String>,
    pub agent_version: String,
    pub platform: String,
    pub runtime: String,
    pub first_seen_at: DateTime<Utc>,
    pub last_seen_at: DateTime<Utc>,
    pub count: i64,
    pub received_at: DateTime<Utc>,
}

/// Which reports a listing returns, newest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ErrorReportFilter {
    pub account_id: Option<Uuid>,
    pub location_id: Option<Uuid>,
    pub limit: i64,
}

impl Store {
    /// Stores the reports of one request from `location`, received at `now` (ms), and
    /// trims the location's reports to the newest [`MAX_ERROR_REPORTS_PER_LOCATION`].
    /// Returns how many were stored. The request must have been validated.
    pub async fn record_error_reports(
        &self,
        location: &LocationAuth,
        request: &ErrorReportsRequest,
        now: i64,
    ) -> Result<usize, StoreError> {
        let rows: Vec<serde_json::Value> = request
            .reports
            .iter()
            .map(|r| {
                json!({
                    "id": Uuid::new_v4().to_string(),
                    "event": r.event,
                    "message": r.message,
                    "backtrace": r.backtrace,
                    "firstSeenAt": r.first_seen_at.timestamp_millis(),
                    "lastSeenAt": r.last_seen_at.timestamp_millis(),
                    "count": r.count,
                })
            })
            .collect();
        let mut conn = self.write().await?;
        let mut tx = conn.begin().await?;
        let done = sqlx::query(
            "INSERT INTO agent_error_reports (id, account_id, location_id, event, message,
                 backtrace, agent_version, platform, runtime, first_seen_at, last_seen_at,
                 count, received_at)
             SELECT value->>'id', ?1, ?2, value->>'event', value->>'message',
                    value->>'backtrace', ?3, ?4, ?5, value->>'firstSeenAt',
                    value->>'lastSeenAt', value->>'count', ?6
               FROM json_each(?7)",
        )
        .bind(location.account_id.to_string())
        .bind(location.location_id.to_string())
        .bind(&request.agent_version)
        .bind(&request.platform)
        .bind(&request.runtime)
        .bind(now)
        .bind(rows::to_json(&rows, "agent_error_reports")?)
        .execute(&mut *tx)
        .await?;
        sqlx::query(
            "DELETE FROM agent_error_reports WHERE rowid IN (
                SELECT rowid FROM agent_error_reports WHERE location_id = ?1
                 ORDER BY received_at DESC, rowid DESC LIMIT -1 OFFSET ?2)",
        )
        .bind(location.location_id.to_string())
        .bind(MAX_ERROR_REPORTS_PER_LOCATION)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(usize::try_from(done.rows_affected()).unwrap_or(usize::MAX))
    }

    /// Stored reports, newest first, of one account and/or one location.
    pub async fn list_error_reports(
        &self,
        filter: ErrorReportFilter,
    ) -> Result<Vec<ErrorReportRecord>, StoreError> {
        let found = sqlx::query(
            "SELECT r.id, r.account_id, r.location_id, l.slug_name, r.event, r.message,
                    r.backtrace, r.agent_version, r.platform, r.runtime, r.first_seen_at,
                    r.last_seen_at, r.count, r.received_at
               FROM agent_error_reports r
               JOIN private_locations l ON l.id = r.location_id
              WHERE (?1 IS NULL OR r.account_id = ?1) AND (?2 IS NULL OR r.location_id = ?2)
              ORDER BY r.received_at DESC, r.rowid DESC LIMIT ?3",
        )
        .bind(filter.account_id.map(|id| id.to_string()))
        .bind(filter.location_id.map(|id| id.to_string()))
        .bind(filter.limit)
        .fetch_all(&mut *self.read().await?)
        .await?;
        found
            .iter()
            .map(|r| {
                Ok(ErrorReportRecord {
                    id: rows::uuid(r, "id", "agent_error_reports")?,
                    account_id: rows::uuid(r, "account_id", "agent_error_reports")?,
                    location_id: rows::uuid(r, "location_id", "agent_error_reports")?,
                    location_slug: r.try_get("slug_name")?,
                    event: r.try_get("event")?,
                    message: r.try_get("message")?,
                    backtrace: r.try_get("backtrace")?,
                    agent_version: r.try_get("agent_version")?,
                    platform: r.try_get("platform")?,
                    runtime: r.try_get("runtime")?,
                    first_seen_at: rows::ts(r, "first_seen_at")?,
                    last_seen_at: rows::ts(r, "last_seen_at")?,
                    count: r.try_get("count")?,
                    received_at: time(r.try_get("received_at")?),
                })
            })
            .collect()
    }
}
