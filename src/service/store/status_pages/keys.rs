//! Keys of private status pages: visitors present one to see the page. Only the hash
//! and a masked form are stored; every call made for the API is scoped by account.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use sqlx::Row;
use sqlx::sqlite::SqliteRow;
use uuid::Uuid;

use super::super::rows;
use super::super::{Store, StoreError, now_ms};
use super::id_list;
use super::pages::page_owned;

/// Most keys of one page.
pub const MAX_KEYS_PER_PAGE: i64 = 50;

/// A stored key of a page (never its plaintext).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusPageKey {
    pub id: Uuid,
    pub page_id: Uuid,
    pub masked: String,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

const KEY_COLUMNS: &str = "id, page_id, masked, created_at, updated_at";

fn key_from_row(r: &SqliteRow) -> Result<StatusPageKey, StoreError> {
    Ok(StatusPageKey {
        id: rows::uuid(r, "id", "status_page_keys")?,
        page_id: rows::uuid(r, "page_id", "status_page_keys")?,
        masked: r.try_get("masked")?,
        created_at: rows::ts(r, "created_at")?,
        updated_at: rows::ts(r, "updated_at")?,
    })
}

impl Store {
    /// Stores a new key (its hash and masked form) for a page of the account; `None` if
    /// the account has no such page.
    pub async fn create_status_page_key(
        &self,
        account_id: Uuid,
        page_id: Uuid,
        hash: &[u8],
        masked: &str,
    ) -> Result<Option<StatusPageKey>, StoreError> {
        let mut conn = self.write().await?;
        let mut tx = conn.begin().await?;
        if !page_owned(&mut tx, account_id, page_id).await? {
            return Ok(None);
        }
        let count: i64 =
            sqlx::query_scalar("SELECT count(*) FROM status_page_keys WHERE page_id = ?")
                .bind(page_id.to_string())
                .fetch_one(&mut *tx)
                .await?;
        if count >= MAX_KEYS_PER_PAGE {
            return Err(StoreError::Conflict {
                field: "keys",
                message: format!(
                    "a status page has at most {MAX_KEYS_PER_PAGE} keys; delete one first"
                ),
            });
        }
        let id = Uuid::new_v4();
        let now = now_ms();
        sqlx::query(
            "INSERT INTO status_page_keys (id, page_id, key_hash, masked, created_at, updated_at)
             VALUES (?, ?, ?, ?, ?, ?)",
        )
        .bind(id.to_string())
        .bind(page_id.to_string())
        .bind(hash)
        .bind(masked)
        .bind(now)
        .bind(now)
        .execute(&mut *tx)
        .await?;
        let row = sqlx::query(&format!(
            "SELECT {KEY_COLUMNS} FROM status_page_keys WHERE id = ?"
        ))
        .bind(id.to_string())
        .fetch_one(&mut *tx)
        .await?;
        let key = key_from_row(&row)?;
        tx.commit().await?;
        Ok(Some(key))
    }

    /// The keys of a page of the account, oldest first; `None` if no such page.
    pub async fn status_page_keys(
        &self,
        account_id: Uuid,
        page_id: Uuid,
    ) -> Result<Option<Vec<StatusPageKey>>, StoreError> {
        let mut conn = self.read().await?;
        if !page_owned(&mut conn, account_id, page_id).await? {
            return Ok(None);
        }
        let found = sqlx::query(&format!(
            "SELECT {KEY_COLUMNS} FROM status_page_keys WHERE page_id = ?
             ORDER BY created_at, id"
        ))
        .bind(page_id.to_string())
        .fetch_all(&mut *conn)
        .await?;
        Ok(Some(
            found.iter().map(key_from_row).collect::<Result<_, _>>()?,
        ))
    }

    /// The keys of each of `page_ids` (one query), oldest first.
    pub async fn keys_of_status_pages(
        &self,
        page_ids: &[Uuid],
    ) -> Result<HashMap<Uuid, Vec<StatusPageKey>>, StoreError> {
        let mut out: HashMap<Uuid, Vec<StatusPageKey>> = HashMap::new();
        if page_ids.is_empty() {
            return Ok(out);
        }
        let found = sqlx::query(&format!(
            "SELECT {KEY_COLUMNS} FROM status_page_keys
             WHERE page_id IN (SELECT value FROM json_each(?))
             ORDER BY page_id, created_at, id"
        ))
        .bind(id_list(page_ids))
        .fetch_all(&mut *self.read().await?)
        .await?;
        for r in &found {
            let key = key_from_row(r)?;
            out.entry(key.page_id).or_default().push(key);
        }
        Ok(out)
    }

    /// Deletes a key of a page of the account; false if either is unknown.
    pub async fn delete_status_page_key(
        &self,
        account_id: Uuid,
        page_id: Uuid,
        key_id: Uuid,
    ) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "DELETE FROM status_page_keys WHERE id = ? AND page_id = ?
               AND page_id IN (SELECT id FROM status_pages WHERE account_id = ?)",
        )
        .bind(key_id.to_string())
        .bind(page_id.to_string())
        .bind(account_id.to_string())
        .execute(&mut *self.write().await?)
        .await?;
        Ok(done.rows_affected() > 0)
    }

    /// Whether `hash` is the hash of a key of page `page_id` (public visitors).
    pub async fn status_page_key_valid(
        &self,
        page_id: Uuid,
        hash: &[u8],
    ) -> Result<bool, StoreError> {
        let found =
            sqlx::query("SELECT 1 FROM status_page_keys WHERE key_hash = ? AND page_id = ?")
                .bind(hash)
                .bind(page_id.to_string())
                .fetch_optional(&mut *self.read().await?)
                .await?;
        Ok(found.is_some())
    }
}
