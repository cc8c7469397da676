//! What ties status pages to the rest: the checks linked to services (through the check
//! document's `triggerIncident.serviceId`) with their latest outcome, and the queue of
//! incident-update notifications.

use chrono::{DateTime, Utc};
use sqlx::Row;
use uuid::Uuid;

use super::super::rows;
use super::super::{Store, StoreError};
use super::id_list;

/// A check linked to a service, with what it last reported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceCheck {
    pub service_id: Uuid,
    pub check_id: Uuid,
    pub check_name: String,
    /// The check type as stored (`API`, `URL`, `HEARTBEAT`, ...).
    pub check_type: String,
    pub activated: bool,
    /// Status of the check's latest finished session (`PASSED`, `FAILED`, `DEGRADED`,
    /// `TIMED_OUT`, `CANCELLED`), if any.
    pub last_status: Option<String>,
    /// When that session finished.
    pub last_finished_at: Option<DateTime<Utc>>,
    /// For heartbeat monitors: whether the monitor is failing now.
    pub heartbeat_failing: Option<bool>,
}

/// An incident update whose subscribers are still to be told.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusNotification {
    pub id: Uuid,
    pub account_id: Uuid,
    pub incident_id: Uuid,
    pub incident_update_id: Uuid,
    pub created_at: DateTime<Utc>,
}

impl Store {
    /// The checks of the account linked to each of `service_ids`, with the latest
    /// outcome of each (one statement whatever the number of services).
    pub async fn service_checks(
        &self,
        account_id: Uuid,
        service_ids: &[Uuid],
    ) -> Result<Vec<ServiceCheck>, StoreError> {
        let found = sqlx::query(
            "SELECT sv.value AS service_id, c.id, c.name, c.check_type, c.activated,
                    h.failing AS heartbeat_failing,
                    (SELECT status FROM check_sessions cs
                      WHERE cs.check_id = c.id AND cs.stopped_at IS NOT NULL
                      ORDER BY cs.started_at DESC LIMIT 1) AS last_status,
                    (SELECT stopped_at FROM check_sessions cs
                      WHERE cs.check_id = c.id AND cs.stopped_at IS NOT NULL
                      ORDER BY cs.started_at DESC LIMIT 1) AS last_finished_at
             FROM json_each(?2) sv
             JOIN status_services s ON s.id = sv.value AND s.account_id = ?1
             JOIN checks c ON c.account_id = ?1
                  AND json_extract(c.document, '$.triggerIncident.serviceId') = sv.value
             LEFT JOIN heartbeats h ON h.check_id = c.id
             ORDER BY sv.key, c.created_at, c.id",
        )
        .bind(account_id.to_string())
        .bind(id_list(service_ids))
        .fetch_all(&mut *self.read().await?)
        .await?;
        found
            .iter()
            .map(|r| {
                Ok(ServiceCheck {
                    service_id: rows::uuid(r, "service_id", "status_services")?,
                    check_id: rows::uuid(r, "id", "checks")?,
                    check_name: r.try_get("name")?,
                    check_type: r.try_get("check_type")?,
                    activated: r.try_get("activated")?,
                    last_status: r.try_get("last_status")?,
                    last_finished_at: rows::opt_ts(r, "last_finished_at")?,
                    heartbeat_failing: r.try_get("heartbeat_failing")?,
                })
            })
            .collect()
    }

    /// Notifications not delivered yet, oldest first, at most `limit`.
    pub async fn pending_status_notifications(
        &self,
        limit: i64,
    ) -> Result<Vec<StatusNotification>, StoreError> {
        let found = sqlx::query(
            "SELECT id, account_id, incident_id, incident_update_id, created_at
             FROM status_notifications WHERE delivered_at IS NULL
             ORDER BY created_at, id LIMIT ?",
        )
        .bind(limit)
        .fetch_all(&mut *self.read().await?)
        .await?;
        found
            .iter()
            .map(|r| {
                Ok(StatusNotification {
                    id: rows::uuid(r, "id", "status_notifications")?,
                    account_id: rows::uuid(r, "account_id", "status_notifications")?,
                    incident_id: rows::uuid(r, "incident_id", "status_notifications")?,
                    incident_update_id: rows::uuid(
                        r,
                        "incident_update_id",
                        "status_notifications",
                    )?,
                    created_at: rows::ts(r, "created_at")?,
                })
            })
            .collect()
    }

    /// Records that a notification was delivered; false if it is unknown.
    pub async fn mark_status_notification_delivered(
        &self,
        id: Uuid,
        at_ms: i64,
    ) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "UPDATE status_notifications SET delivered_at = ? WHERE id = ? AND delivered_at IS NULL",
        )
        .bind(at_ms)
        .bind(id.to_string())
        .execute(&mut *self.write().await?)
        .await?;
        Ok(done.rows_affected() > 0)
    }
}
