//! Status page services: what cards show and incidents affect.

use std::collections::HashSet;

use chrono::{DateTime, Utc};
use sqlx::sqlite::SqliteRow;
use sqlx::{Row, SqliteConnection};
use uuid::Uuid;

use super::super::rows::{self, time};
use super::super::{Store, StoreError, now_ms};
use super::{Listing, id_list};

/// A service of a status page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusService {
    pub id: Uuid,
    pub account_id: Uuid,
    pub name: String,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// The outcome of deleting a service.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServiceDeletion {
    Deleted,
    NotFound,
    /// Named by this many incidents (every incident keeps at least one service).
    InUse(i64),
}

pub(super) const SERVICE_COLUMNS: &str = "s.id, s.account_id, s.name, s.created_at, s.updated_at";

pub(super) fn service_from_row(r: &SqliteRow) -> Result<StatusService, StoreError> {
    Ok(StatusService {
        id: rows::uuid(r, "id", "status_services")?,
        account_id: rows::uuid(r, "account_id", "status_services")?,
        name: r.try_get("name")?,
        created_at: rows::ts(r, "created_at")?,
        updated_at: rows::ts(r, "updated_at")?,
    })
}

/// How many of `ids` (distinct) are services of the account.
pub(super) async fn count_owned(
    conn: &mut SqliteConnection,
    account_id: Uuid,
    ids: &[Uuid],
) -> Result<usize, StoreError> {
    let n: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM status_services
         WHERE account_id = ? AND id IN (SELECT DISTINCT value FROM json_each(?))",
    )
    .bind(account_id.to_string())
    .bind(id_list(ids))
    .fetch_one(conn)
    .await?;
    Ok(usize::try_from(n).unwrap_or(0))
}

/// Fails unless every id of `ids` is a service of the account.
pub(super) async fn ensure_owned(
    conn: &mut SqliteConnection,
    account_id: Uuid,
    ids: &[Uuid],
    field: &'static str,
) -> Result<(), StoreError> {
    let wanted = super::distinct(ids).len();
    if count_owned(conn, account_id, ids).await? != wanted {
        return Err(StoreError::Invalid {
            field,
            message: "names a service that is not in this account".into(),
        });
    }
    Ok(())
}

impl Store {
    /// Creates a service.
    pub async fn create_status_service(
        &self,
        account_id: Uuid,
        name: &str,
    ) -> Result<StatusService, StoreError> {
        let id = Uuid::new_v4();
        let now = now_ms();
        let done = sqlx::query(
            "INSERT INTO status_services (id, account_id, name, created_at, updated_at)
             SELECT ?, id, ?, ?, ? FROM accounts WHERE id = ?",
        )
        .bind(id.to_string())
        .bind(name)
        .bind(now)
        .bind(now)
        .bind(account_id.to_string())
        .execute(&mut *self.write().await?)
        .await?;
        if done.rows_affected() == 0 {
            return Err(StoreError::NotFound("account"));
        }
        Ok(StatusService {
            id,
            account_id,
            name: name.to_owned(),
            created_at: time(now),
            updated_at: time(now),
        })
    }

    /// One service of the account.
    pub async fn status_service(
        &self,
        account_id: Uuid,
        id: Uuid,
    ) -> Result<Option<StatusService>, StoreError> {
        let row = sqlx::query(&format!(
            "SELECT {SERVICE_COLUMNS} FROM status_services s WHERE s.account_id = ? AND s.id = ?"
        ))
        .bind(account_id.to_string())
        .bind(id.to_string())
        .fetch_optional(&mut *self.read().await?)
        .await?;
        row.as_ref().map(service_from_row).transpose()
    }

    /// The account's services, oldest first, from `next_id` on (that service included),
    /// at most `limit` of them (all with `None`). An unknown `next_id` is invalid.
    pub async fn list_status_services(
        &self,
        account_id: Uuid,
        next_id: Option<Uuid>,
        limit: Option<i64>,
    ) -> Result<Listing<StatusService>, StoreError> {
        let cursor = match next_id {
            Some(id) => Some(self.service_cursor(account_id, id).await?),
            None => None,
        };
        let (from_at, from_id) = cursor.unwrap_or((i64::MIN, String::new()));
        let fetch = limit.map(|l| l.saturating_add(1)).unwrap_or(-1);
        let found = sqlx::query(&format!(
            "SELECT {SERVICE_COLUMNS} FROM status_services s
             WHERE s.account_id = ?1 AND (s.created_at > ?2 OR (s.created_at = ?2 AND s.id >= ?3))
             ORDER BY s.created_at, s.id LIMIT ?4"
        ))
        .bind(account_id.to_string())
        .bind(from_at)
        .bind(from_id)
        .bind(fetch)
        .fetch_all(&mut *self.read().await?)
        .await?;
        let mut entries = found
            .iter()
            .map(service_from_row)
            .collect::<Result<Vec<_>, _>>()?;
        let next_id = split_next(&mut entries, limit, |s| s.id);
        Ok(Listing { entries, next_id })
    }

    async fn service_cursor(
        &self,
        account_id: Uuid,
        id: Uuid,
    ) -> Result<(i64, String), StoreError> {
        let row =
            sqlx::query("SELECT created_at FROM status_services WHERE account_id = ? AND id = ?")
                .bind(account_id.to_string())
                .bind(id.to_string())
                .fetch_optional(&mut *self.read().await?)
                .await?;
        match row {
            Some(r) => Ok((r.try_get("created_at")?, id.to_string())),
            None => Err(StoreError::Invalid {
                field: "nextId",
                message: "is not a service of this account (use the nextId of the previous answer)"
                    .into(),
            }),
        }
    }

    /// Renames a service; `None` if the account has no such service.
    pub async fn rename_status_service(
        &self,
        account_id: Uuid,
        id: Uuid,
        name: &str,
    ) -> Result<Option<StatusService>, StoreError> {
        let row = sqlx::query(
            "UPDATE status_services SET name = ?, updated_at = ?
             WHERE account_id = ? AND id = ?
             RETURNING id, account_id, name, created_at, updated_at",
        )
        .bind(name)
        .bind(now_ms())
        .bind(account_id.to_string())
        .bind(id.to_string())
        .fetch_optional(&mut *self.write().await?)
        .await?;
        row.as_ref().map(service_from_row).transpose()
    }

    /// Deletes a service (it leaves the cards that showed it), unless an incident names it.
    pub async fn delete_status_service(
        &self,
        account_id: Uuid,
        id: Uuid,
    ) -> Result<ServiceDeletion, StoreError> {
        let mut conn = self.write().await?;
        let mut tx = conn.begin().await?;
        let row = sqlx::query(
            "SELECT (SELECT count(*) FROM status_services WHERE account_id = ?1 AND id = ?2) AS found,
                    (SELECT count(*) FROM status_incident_services WHERE service_id = ?2) AS used",
        )
        .bind(account_id.to_string())
        .bind(id.to_string())
        .fetch_one(&mut *tx)
        .await?;
        let found: i64 = row.try_get("found")?;
        let used: i64 = row.try_get("used")?;
        if found == 0 {
            return Ok(ServiceDeletion::NotFound);
        }
        if used > 0 {
            return Ok(ServiceDeletion::InUse(used));
        }
        sqlx::query("DELETE FROM status_services WHERE account_id = ? AND id = ?")
            .bind(account_id.to_string())
            .bind(id.to_string())
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(ServiceDeletion::Deleted)
    }

    /// Which of `ids` are services of the account.
    pub async fn existing_status_service_ids(
        &self,
        account_id: Uuid,
        ids: &[Uuid],
    ) -> Result<HashSet<Uuid>, StoreError> {
        let found = sqlx::query(
            "SELECT id FROM status_services
             WHERE account_id = ? AND id IN (SELECT value FROM json_each(?))",
        )
        .bind(account_id.to_string())
        .bind(id_list(ids))
        .fetch_all(&mut *self.read().await?)
        .await?;
        found
            .iter()
            .map(|r| rows::uuid(r, "id", "status_services"))
            .collect()
    }
}

/// Cuts a listing fetched with `limit + 1` rows to `limit`; the extra row's id is the
/// next cursor.
pub(super) fn split_next<T>(
    entries: &mut Vec<T>,
    limit: Option<i64>,
    id: impl Fn(&T) -> Uuid,
) -> Option<Uuid> {
    let limit = usize::try_from(limit?).ok()?;
    if entries.len() > limit {
        let next = entries.get(limit).map(id);
        entries.truncate(limit);
        next
    } else {
        None
    }
}
