//! Checks: the stored document plus the columns that queries filter on, and the
//! schedule row of every activated check.

use chrono::{DateTime, Utc};
use sqlx::Row;
use sqlx::SqliteConnection;
use sqlx::sqlite::SqliteRow;
use uuid::Uuid;

use super::rows::{self, time};
use super::{Store, StoreError};
use crate::model::CheckType;

/// A stored check.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckRecord {
    pub id: Uuid,
    pub account_id: Uuid,
    pub check_type: CheckType,
    pub name: String,
    pub activated: bool,
    pub frequency: i64,
    pub frequency_offset: Option<i64>,
    pub tags: Vec<String>,
    /// Slug names of the private locations the check runs on.
    pub private_locations: Vec<String>,
    /// The normalized check document (defaults filled in), without id and timestamps.
    pub document: serde_json::Value,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// What a create or update writes; the API layer validates and normalizes it.
#[derive(Debug, Clone)]
pub struct CheckWrite {
    pub check_type: CheckType,
    pub name: String,
    pub activated: bool,
    pub frequency: i64,
    pub frequency_offset: Option<i64>,
    pub tags: Vec<String>,
    pub private_locations: Vec<String>,
    pub document: serde_json::Value,
}

/// Which checks a list returns; every set part must match.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CheckFilter {
    pub check_type: Option<CheckType>,
    /// At least one of these tags (none: any tags).
    pub tags_any: Vec<String>,
    /// Case-insensitive substring of the name.
    pub name_contains: Option<String>,
    /// The check's status now (see [`CheckStatus`]).
    pub status: Option<CheckStatus>,
}

/// A check's status, as `GET /v1/checks?status=` filters it: the outcome of the
/// check's latest FINAL result (PASSED, FAILED, DEGRADED; a synthetic timed-out result
/// is FAILED). A heartbeat monitor is failing while its deadline is missed, else passing
/// once it received a ping. A check without any (no run yet, a stored-only type, a
/// heartbeat never pinged) has no status and matches none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CheckStatus {
    Passing,
    Failing,
    Degraded,
}

impl CheckStatus {
    /// `passing`, `failing` or `degraded`, as the query names them.
    pub fn parse(name: &str) -> Option<CheckStatus> {
        match name {
            "passing" => Some(CheckStatus::Passing),
            "failing" => Some(CheckStatus::Failing),
            "degraded" => Some(CheckStatus::Degraded),
            _ => None,
        }
    }

    /// The status column of a result with this outcome.
    fn result_status(self) -> &'static str {
        match self {
            CheckStatus::Passing => "PASSED",
            CheckStatus::Failing => "FAILED",
            CheckStatus::Degraded => "DEGRADED",
        }
    }
}

/// When an activated check runs: every `interval_ms`, next at `next_run_at`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScheduleWrite {
    pub interval_ms: i64,
    pub next_run_at: i64,
}

const COLUMNS: &str = "id, account_id, check_type, name, activated, frequency, frequency_offset,
                       tags, private_locations, document, created_at, updated_at";

fn check_from_row(r: &SqliteRow) -> Result<CheckRecord, StoreError> {
    let type_name: String = r.try_get("check_type")?;
    let check_type = CheckType::parse(&type_name).ok_or_else(|| StoreError::Corrupt {
        table: "checks",
        message: format!("unknown check type {type_name:?}"),
    })?;
    Ok(CheckRecord {
        id: rows::uuid(r, "id", "checks")?,
        account_id: rows::uuid(r, "account_id", "checks")?,
        check_type,
        name: r.try_get("name")?,
        activated: r.try_get("activated")?,
        frequency: r.try_get("frequency")?,
        frequency_offset: r.try_get("frequency_offset")?,
        tags: rows::json(r, "tags", "checks")?,
        private_locations: rows::json(r, "private_locations", "checks")?,
        document: rows::json(r, "document", "checks")?,
        created_at: rows::ts(r, "created_at")?,
        updated_at: rows::ts(r, "updated_at")?,
    })
}

impl Store {
    /// Stores a new check (and its schedule when activated).
    pub async fn insert_check(
        &self,
        account_id: Uuid,
        id: Uuid,
        check: &CheckWrite,
        schedule: Option<ScheduleWrite>,
        now: i64,
    ) -> Result<CheckRecord, StoreError> {
        let mut conn = self.write().await?;
        let mut tx = conn.begin().await?;
        insert_check_row(&mut tx, account_id, id, check, now).await?;
        if let Some(s) = schedule {
            sqlx::query(
                "INSERT INTO check_schedules (check_id, interval_ms, next_run_at) VALUES (?, ?, ?)",
            )
            .bind(id.to_string())
            .bind(s.interval_ms)
            .bind(s.next_run_at)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(record(id, account_id, check, now, now))
    }

    /// Replaces a check's fields. The schedule is kept when its interval is unchanged,
    /// replaced when it changed, removed when `schedule` is `None` (deactivated).
    /// Returns `None` when the account has no such check.
    pub async fn update_check(
        &self,
        account_id: Uuid,
        id: Uuid,
        check: &CheckWrite,
        schedule: Option<ScheduleWrite>,
        now: i64,
    ) -> Result<Option<CheckRecord>, StoreError> {
        let mut conn = self.write().await?;
        let mut tx = conn.begin().await?;
        let Some(created_at) = update_check_row(&mut tx, account_id, id, check, now).await? else {
            return Ok(None);
        };
        match schedule {
            Some(s) => {
                sqlx::query(
                    "INSERT INTO check_schedules (check_id, interval_ms, next_run_at)
                     VALUES (?, ?, ?)
                     ON CONFLICT(check_id) DO UPDATE
                        SET interval_ms = excluded.interval_ms,
                            next_run_at = excluded.next_run_at
                      WHERE check_schedules.interval_ms != excluded.interval_ms",
                )
                .bind(id.to_string())
                .bind(s.interval_ms)
                .bind(s.next_run_at)
                .execute(&mut *tx)
                .await?;
            }
            None => {
                sqlx::query("DELETE FROM check_schedules WHERE check_id = ?")
                    .bind(id.to_string())
                    .execute(&mut *tx)
                    .await?;
            }
        }
        tx.commit().await?;
        Ok(Some(record(id, account_id, check, created_at, now)))
    }

    /// One check of the account.
    pub async fn get_check(
        &self,
        account_id: Uuid,
        id: Uuid,
    ) -> Result<Option<CheckRecord>, StoreError> {
        let row = sqlx::query(&format!(
            "SELECT {COLUMNS} FROM checks WHERE id = ? AND account_id = ?"
        ))
        .bind(id.to_string())
        .bind(account_id.to_string())
        .fetch_optional(&mut *self.read().await?)
        .await?;
        row.as_ref().map(check_from_row).transpose()
    }

    /// A page of the account's checks, oldest first.
    pub async fn list_checks(
        &self,
        account_id: Uuid,
        limit: i64,
        offset: i64,
    ) -> Result<Vec<CheckRecord>, StoreError> {
        let found = sqlx::query(&format!(
            "SELECT {COLUMNS} FROM checks WHERE account_id = ?
              ORDER BY created_at, id LIMIT ? OFFSET ?"
        ))
        .bind(account_id.to_string())
        .bind(limit)
        .bind(offset)
        .fetch_all(&mut *self.read().await?)
        .await?;
        found.iter().map(check_from_row).collect()
    }

    /// A page of the account's checks that pass `filter`, oldest first. With a name
    /// filter, names are matched in Rust (Unicode lower case; SQLite's `lower` only
    /// folds ASCII): the matching ids are found first, then only their page is read.
    pub async fn list_checks_matching(
        &self,
        account_id: Uuid,
        filter: &CheckFilter,
        limit: i64,
        offset: i64,
    ) -> Result<Vec<CheckRecord>, StoreError> {
        let check_type = filter.check_type.map(CheckType::as_str);
        let tags = if filter.tags_any.is_empty() {
            None
        } else {
            Some(rows::to_json(&filter.tags_any, "checks")?)
        };
        let status = filter.status.map(CheckStatus::result_status);
        // ?4: the status as a result's status column; a heartbeat's comes from its
        // failing flag and whether any ping arrived.
        const WHERE: &str = "account_id = ?1
              AND (?2 IS NULL OR check_type = ?2)
              AND (?3 IS NULL OR EXISTS (SELECT 1 FROM json_each(checks.tags) t
                                          WHERE t.value IN (SELECT value FROM json_each(?3))))
              AND (?4 IS NULL OR ?4 = CASE WHEN check_type = 'HEARTBEAT' THEN
                     (SELECT CASE WHEN h.failing THEN 'FAILED'
                                  WHEN EXISTS (SELECT 1 FROM heartbeat_events e
                                                WHERE e.check_id = h.check_id) THEN 'PASSED'
                             END
                        FROM heartbeats h WHERE h.check_id = checks.id)
                   ELSE
                     (SELECT r.status FROM check_results r
                       WHERE r.check_id = checks.id AND r.result_type = 'FINAL'
                       ORDER BY r.created_at DESC, r.rowid DESC LIMIT 1)
                   END)";
        let Some(needle) = filter.name_contains.as_deref().map(str::to_lowercase) else {
            let found = sqlx::query(&format!(
                "SELECT {COLUMNS} FROM checks WHERE {WHERE}
                  ORDER BY created_at, id LIMIT ?5 OFFSET ?6"
            ))
            .bind(account_id.to_string())
            .bind(check_type)
            .bind(tags)
            .bind(status)
            .bind(limit)
            .bind(offset)
            .fetch_all(&mut *self.read().await?)
            .await?;
            return found.iter().map(check_from_row).collect();
        };
        let names = sqlx::query(&format!(
            "SELECT id, name FROM checks WHERE {WHERE} ORDER BY created_at, id"
        ))
        .bind(account_id.to_string())
        .bind(check_type)
        .bind(tags)
        .bind(status)
        .fetch_all(&mut *self.read().await?)
        .await?;
        let mut ids = Vec::new();
        for r in &names {
            let name: String = r.try_get("name")?;
            if name.to_lowercase().contains(&needle) {
                ids.push(r.try_get::<String, _>("id")?);
            }
        }
        let skip = usize::try_from(offset).unwrap_or(usize::MAX);
        let take = usize::try_from(limit).unwrap_or(0);
        let page: Vec<String> = ids.into_iter().skip(skip).take(take).collect();
        if page.is_empty() {
            return Ok(Vec::new());
        }
        let found = sqlx::query(&format!(
            "SELECT {COLUMNS} FROM checks
              WHERE account_id = ? AND id IN (SELECT value FROM json_each(?))
              ORDER BY created_at, id"
        ))
        .bind(account_id.to_string())
        .bind(rows::to_json(&page, "checks")?)
        .fetch_all(&mut *self.read().await?)
        .await?;
        found.iter().map(check_from_row).collect()
    }

    /// Deletes a check with its schedule, sessions, queued jobs and results. Returns the
    /// ids of the deleted sessions (their artifact files can then be removed), or
    /// `None` when the account has no such check.
    pub async fn delete_check(
        &self,
        account_id: Uuid,
        id: Uuid,
    ) -> Result<Option<Vec<Uuid>>, StoreError> {
        let mut conn = self.write().await?;
        let mut tx = conn.begin().await?;
        let sessions = sqlx::query(
            "SELECT DISTINCT session_id FROM artifacts WHERE session_id IN
               (SELECT id FROM check_sessions WHERE check_id = ? AND account_id = ?)",
        )
        .bind(id.to_string())
        .bind(account_id.to_string())
        .fetch_all(&mut *tx)
        .await?;
        let done = sqlx::query("DELETE FROM checks WHERE id = ? AND account_id = ?")
            .bind(id.to_string())
            .bind(account_id.to_string())
            .execute(&mut *tx)
            .await?;
        if done.rows_affected() == 0 {
            return Ok(None);
        }
        tx.commit().await?;
        self.sessions_deleted();
        sessions
            .iter()
            .map(|r| rows::uuid(r, "session_id", "artifacts"))
            .collect::<Result<Vec<_>, _>>()
            .map(Some)
    }

    /// The schedule row of a check, if it is scheduled.
    pub async fn check_schedule(&self, id: Uuid) -> Result<Option<ScheduleWrite>, StoreError> {
        let row =
            sqlx::query("SELECT interval_ms, next_run_at FROM check_schedules WHERE check_id = ?")
                .bind(id.to_string())
                .fetch_optional(&mut *self.read().await?)
                .await?;
        row.map(|r| {
            Ok(ScheduleWrite {
                interval_ms: r.try_get("interval_ms")?,
                next_run_at: r.try_get("next_run_at")?,
            })
        })
        .transpose()
    }
}

/// Inserts the row of a new check inside a transaction.
pub(super) async fn insert_check_row(
    conn: &mut SqliteConnection,
    account_id: Uuid,
    id: Uuid,
    check: &CheckWrite,
    now: i64,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO checks (id, account_id, check_type, name, activated, frequency,
                             frequency_offset, tags, private_locations, document,
                             created_at, updated_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
    )
    .bind(id.to_string())
    .bind(account_id.to_string())
    .bind(check.check_type.as_str())
    .bind(&check.name)
    .bind(check.activated)
    .bind(check.frequency)
    .bind(check.frequency_offset)
    .bind(rows::to_json(&check.tags, "checks")?)
    .bind(rows::to_json(&check.private_locations, "checks")?)
    .bind(rows::to_json(&check.document, "checks")?)
    .bind(now)
    .bind(now)
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// Replaces the fields of a check's row inside a transaction; returns its creation
/// time, or `None` when the account has no such check.
pub(super) async fn update_check_row(
    conn: &mut SqliteConnection,
    account_id: Uuid,
    id: Uuid,
    check: &CheckWrite,
    now: i64,
) -> Result<Option<i64>, StoreError> {
    let row = sqlx::query(
        "UPDATE checks SET check_type = ?, name = ?, activated = ?, frequency = ?,
                           frequency_offset = ?, tags = ?, private_locations = ?,
                           document = ?, updated_at = ?
          WHERE id = ? AND account_id = ?
         RETURNING created_at",
    )
    .bind(check.check_type.as_str())
    .bind(&check.name)
    .bind(check.activated)
    .bind(check.frequency)
    .bind(check.frequency_offset)
    .bind(rows::to_json(&check.tags, "checks")?)
    .bind(rows::to_json(&check.private_locations, "checks")?)
    .bind(rows::to_json(&check.document, "checks")?)
    .bind(now)
    .bind(id.to_string())
    .bind(account_id.to_string())
    .fetch_optional(&mut *conn)
    .await?;
    row.map(|r| r.try_get::<i64, _>("created_at"))
        .transpose()
        .map_err(StoreError::from)
}

pub(super) fn record(
    id: Uuid,
    account_id: Uuid,
    check: &CheckWrite,
    created_at: i64,
    updated_at: i64,
) -> CheckRecord {
    CheckRecord {
        id,
        account_id,
        check_type: check.check_type,
        name: check.name.clone(),
        activated: check.activated,
        frequency: check.frequency,
        frequency_offset: check.frequency_offset,
        tags: check.tags.clone(),
        private_locations: check.private_locations.clone(),
        document: check.document.clone(),
        created_at: time(created_at),
        updated_at: time(updated_at),
    }
}
