//! Reading check results (writing happens with the job that produced them, in `jobs`).

use chrono::{DateTime, Utc};
use sqlx::Row;
use sqlx::sqlite::SqliteRow;
use uuid::Uuid;

use super::rows;
use super::sessions::parse_check_type;
use super::{Store, StoreError};
use crate::model::{CheckType, ResultType};

/// A stored result. `result` (the agent's full RunResult JSON) is loaded only by the
/// check-results endpoints, not for session listings.
#[derive(Debug, Clone, PartialEq)]
pub struct ResultRecord {
    pub id: Uuid,
    pub check_id: Uuid,
    pub session_id: Uuid,
    /// The job and lease that produced the result (its artifacts carry the same pair).
    pub job_id: Uuid,
    pub lease_id: Option<Uuid>,
    pub run_location: String,
    pub result_type: ResultType,
    pub check_type: CheckType,
    pub name: String,
    /// PASSED, FAILED or DEGRADED.
    pub status: String,
    pub has_errors: bool,
    pub has_failures: bool,
    pub is_degraded: bool,
    pub aborted: bool,
    pub is_cancelled: bool,
    pub over_max_response_time: Option<bool>,
    pub response_time: Option<f64>,
    pub attempts: i64,
    pub started_at: Option<DateTime<Utc>>,
    pub stopped_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
    pub result: Option<serde_json::Value>,
}

/// Which of a check's results a listing returns.
#[derive(Debug, Clone, PartialEq)]
pub struct ResultFilter {
    /// Created at or after (milliseconds since the epoch).
    pub from_ms: i64,
    /// Created before.
    pub to_ms: i64,
    /// Only this run location (slug name).
    pub location: Option<String>,
    pub has_failures: Option<bool>,
    /// None: FINAL and ATTEMPT results.
    pub result_type: Option<ResultType>,
    pub check_type: Option<CheckType>,
}

const SUMMARY_COLUMNS: &str =
    "id, check_id, session_id, job_id, lease_id, run_location, result_type, check_type,
    name, status, has_errors, has_failures, is_degraded, aborted, is_cancelled,
    over_max_response_time, response_time, attempts, started_at, stopped_at, created_at";

/// `SUMMARY_COLUMNS` of a table aliased `r`, under their own names.
pub(super) const SUMMARY_COLUMNS_OF_R: &str =
    "r.id, r.check_id, r.session_id, r.job_id, r.lease_id, r.run_location, r.result_type,
    r.check_type, r.name, r.status, r.has_errors, r.has_failures, r.is_degraded, r.aborted,
    r.is_cancelled, r.over_max_response_time, r.response_time, r.attempts, r.started_at,
    r.stopped_at, r.created_at";

/// A result read with the summary columns (no full document).
pub(super) fn summary_from_row(r: &SqliteRow) -> Result<ResultRecord, StoreError> {
    result_from_row(r, false)
}

fn result_from_row(r: &SqliteRow, full: bool) -> Result<ResultRecord, StoreError> {
    let result_type: String = r.try_get("result_type")?;
    let check_type: String = r.try_get("check_type")?;
    Ok(ResultRecord {
        id: rows::uuid(r, "id", "check_results")?,
        check_id: rows::uuid(r, "check_id", "check_results")?,
        session_id: rows::uuid(r, "session_id", "check_results")?,
        job_id: rows::uuid(r, "job_id", "check_results")?,
        lease_id: r
            .try_get::<Option<String>, _>("lease_id")?
            .map(|l| {
                Uuid::parse_str(&l).map_err(|_| StoreError::Corrupt {
                    table: "check_results",
                    message: format!("lease_id is not a UUID: {l:?}"),
                })
            })
            .transpose()?,
        run_location: r.try_get("run_location")?,
        result_type: if result_type == "ATTEMPT" {
            ResultType::Attempt
        } else {
            ResultType::Final
        },
        check_type: parse_check_type(&check_type, "check_results")?,
        name: r.try_get("name")?,
        status: r.try_get("status")?,
        has_errors: r.try_get("has_errors")?,
        has_failures: r.try_get("has_failures")?,
        is_degraded: r.try_get("is_degraded")?,
        aborted: r.try_get("aborted")?,
        is_cancelled: r.try_get("is_cancelled")?,
        over_max_response_time: r.try_get("over_max_response_time")?,
        response_time: r.try_get("response_time")?,
        attempts: r.try_get("attempts")?,
        started_at: rows::opt_ts(r, "started_at")?,
        stopped_at: rows::opt_ts(r, "stopped_at")?,
        created_at: rows::ts(r, "created_at")?,
        result: if full {
            Some(rows::json(r, "result", "check_results")?)
        } else {
            None
        },
    })
}

impl Store {
    /// The results of a session (without the full result documents), in arrival order.
    pub async fn session_results(&self, session_id: Uuid) -> Result<Vec<ResultRecord>, StoreError> {
        let found = sqlx::query(&format!(
            "SELECT {SUMMARY_COLUMNS} FROM check_results WHERE session_id = ?
              ORDER BY created_at, id"
        ))
        .bind(session_id.to_string())
        .fetch_all(&mut *self.read().await?)
        .await?;
        found.iter().map(|r| result_from_row(r, false)).collect()
    }

    /// One result of one of the account's checks, with its full document.
    pub async fn get_result(
        &self,
        account_id: Uuid,
        check_id: Uuid,
        result_id: Uuid,
    ) -> Result<Option<ResultRecord>, StoreError> {
        let row = sqlx::query(&format!(
            "SELECT {SUMMARY_COLUMNS}, result FROM check_results
              WHERE id = ? AND check_id = ? AND account_id = ?"
        ))
        .bind(result_id.to_string())
        .bind(check_id.to_string())
        .bind(account_id.to_string())
        .fetch_optional(&mut *self.read().await?)
        .await?;
        row.map(|r| result_from_row(&r, true)).transpose()
    }

    /// A page of a check's results matching `filter`, newest first, with full documents.
    pub async fn list_results(
        &self,
        account_id: Uuid,
        check_id: Uuid,
        filter: &ResultFilter,
        limit: i64,
        offset: i64,
    ) -> Result<Vec<ResultRecord>, StoreError> {
        let result_type = filter.result_type.map(|t| match t {
            ResultType::Final => "FINAL",
            ResultType::Attempt => "ATTEMPT",
        });
        let found = sqlx::query(&format!(
            "SELECT {SUMMARY_COLUMNS}, result FROM check_results
              WHERE check_id = ?1 AND account_id = ?2
                AND created_at >= ?3 AND created_at < ?4
                AND (?5 IS NULL OR run_location = ?5)
                AND (?6 IS NULL OR has_failures = ?6)
                AND (?7 IS NULL OR result_type = ?7)
                AND (?8 IS NULL OR check_type = ?8)
              ORDER BY created_at DESC, id DESC LIMIT ?9 OFFSET ?10"
        ))
        .bind(check_id.to_string())
        .bind(account_id.to_string())
        .bind(filter.from_ms)
        .bind(filter.to_ms)
        .bind(filter.location.as_deref())
        .bind(filter.has_failures)
        .bind(result_type)
        .bind(filter.check_type.map(CheckType::as_str))
        .bind(limit)
        .bind(offset)
        .fetch_all(&mut *self.read().await?)
        .await?;
        found.iter().map(|r| result_from_row(r, true)).collect()
    }
}
