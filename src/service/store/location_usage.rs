//! What the public API shows of private locations beyond their identity: update of the
//! name and proxy, the checks that name a location (a location in use cannot be deleted), the
//! agents that said HELLO and the location's live job queue.

use chrono::{DateTime, Utc};
use sqlx::Row;
use uuid::Uuid;

use super::rows;
use super::{PrivateLocation, Store, StoreError, now_ms};
use crate::model::ProxyUrl;

/// A private location with its last update time and its proxy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocationRecord {
    pub location: PrivateLocation,
    pub updated_at: DateTime<Utc>,
    /// The proxy of its API checks (`proxyUrl`), password included.
    pub proxy_url: Option<ProxyUrl>,
}

/// An agent that said HELLO for a location.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentRecord {
    pub id: Uuid,
    pub version: String,
    pub first_seen_at: DateTime<Utc>,
    pub last_seen_at: DateTime<Utc>,
}

/// The live queue of a location at one instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct QueueStats {
    /// Jobs waiting for an agent.
    pub queued: i64,
    /// Jobs leased to an agent and not finished yet.
    pub leased: i64,
    /// When the oldest queued job entered the queue (store milliseconds).
    pub oldest_queued_at: Option<i64>,
}

/// Outcome of [`Store::delete_unused_private_location`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LocationDeletion {
    Deleted,
    NotFound,
    /// Refused: this many checks name the location.
    InUse(i64),
}

const LOCATION_COLUMNS: &str = "id, account_id, name, slug_name, created_at, updated_at, proxy_url";

/// A stored proxy URL (written validated by the API).
pub(super) fn stored_proxy(text: Option<String>) -> Result<Option<ProxyUrl>, StoreError> {
    text.map(|t| {
        // The error names what is wrong, never the URL (it holds a password).
        ProxyUrl::parse(&t).map_err(|e| StoreError::Corrupt {
            table: "private_locations",
            message: format!("proxy_url {e}"),
        })
    })
    .transpose()
}

fn record_from_row(r: &sqlx::sqlite::SqliteRow) -> Result<LocationRecord, StoreError> {
    Ok(LocationRecord {
        location: PrivateLocation {
            id: rows::uuid(r, "id", "private_locations")?,
            account_id: rows::uuid(r, "account_id", "private_locations")?,
            name: r.try_get("name")?,
            slug_name: r.try_get("slug_name")?,
            created_at: rows::ts(r, "created_at")?,
        },
        updated_at: rows::ts(r, "updated_at")?,
        proxy_url: stored_proxy(r.try_get("proxy_url")?)?,
    })
}

/// Counts the account's checks whose `privateLocations` name `slug`.
const CHECKS_USING: &str = "SELECT count(*) FROM checks
     WHERE account_id = ?1
       AND EXISTS (SELECT 1 FROM json_each(checks.private_locations) WHERE value = ?2)";

impl Store {
    /// The account's private locations with update times, oldest first.
    pub async fn list_location_records(
        &self,
        account_id: Uuid,
    ) -> Result<Vec<LocationRecord>, StoreError> {
        let found = sqlx::query(&format!(
            "SELECT {LOCATION_COLUMNS} FROM private_locations
             WHERE account_id = ? ORDER BY created_at, id"
        ))
        .bind(account_id.to_string())
        .fetch_all(&mut *self.read().await?)
        .await?;
        found.iter().map(record_from_row).collect()
    }

    /// One private location of the account with its update time.
    pub async fn location_record(
        &self,
        account_id: Uuid,
        id: Uuid,
    ) -> Result<Option<LocationRecord>, StoreError> {
        let row = sqlx::query(&format!(
            "SELECT {LOCATION_COLUMNS} FROM private_locations WHERE account_id = ? AND id = ?"
        ))
        .bind(account_id.to_string())
        .bind(id.to_string())
        .fetch_optional(&mut *self.read().await?)
        .await?;
        row.as_ref().map(record_from_row).transpose()
    }

    /// Sets a private location's name and proxy (`None`: no proxy); None if the
    /// account has no such location. Jobs leased afterwards carry the new proxy.
    pub async fn update_private_location(
        &self,
        account_id: Uuid,
        id: Uuid,
        name: &str,
        proxy_url: Option<&ProxyUrl>,
    ) -> Result<Option<LocationRecord>, StoreError> {
        let name = name.trim();
        if name.is_empty() {
            return Err(StoreError::Invalid {
                field: "name",
                message: "must not be empty".into(),
            });
        }
        let row = sqlx::query(&format!(
            "UPDATE private_locations SET name = ?, proxy_url = ?, updated_at = ?
             WHERE account_id = ? AND id = ? RETURNING {LOCATION_COLUMNS}"
        ))
        .bind(name)
        .bind(proxy_url.map(ProxyUrl::expose))
        .bind(now_ms())
        .bind(account_id.to_string())
        .bind(id.to_string())
        .fetch_optional(&mut *self.write().await?)
        .await?;
        row.as_ref().map(record_from_row).transpose()
    }

    /// How many of the account's checks name the location `slug` in `privateLocations`.
    pub async fn checks_using_location(
        &self,
        account_id: Uuid,
        slug: &str,
    ) -> Result<i64, StoreError> {
        let n: i64 = sqlx::query_scalar(CHECKS_USING)
            .bind(account_id.to_string())
            .bind(slug)
            .fetch_one(&mut *self.read().await?)
            .await?;
        Ok(n)
    }

    /// Deletes a private location (with its keys, agents and queued jobs) unless some
    /// check names it; the check and the delete share one transaction.
    pub async fn delete_unused_private_location(
        &self,
        account_id: Uuid,
        id: Uuid,
    ) -> Result<LocationDeletion, StoreError> {
        let mut conn = self.write().await?;
        let mut tx = conn.begin().await?;
        let slug: Option<String> = sqlx::query_scalar(
            "SELECT slug_name FROM private_locations WHERE account_id = ? AND id = ?",
        )
        .bind(account_id.to_string())
        .bind(id.to_string())
        .fetch_optional(&mut *tx)
        .await?;
        let Some(slug) = slug else {
            return Ok(LocationDeletion::NotFound);
        };
        let using: i64 = sqlx::query_scalar(CHECKS_USING)
            .bind(account_id.to_string())
            .bind(&slug)
            .fetch_one(&mut *tx)
            .await?;
        if using > 0 {
            return Ok(LocationDeletion::InUse(using));
        }
        sqlx::query("DELETE FROM private_locations WHERE account_id = ? AND id = ?")
            .bind(account_id.to_string())
            .bind(id.to_string())
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        // Its agent keys are refused from now on, before the deletion is answered.
        self.inner.auth.invalidate();
        Ok(LocationDeletion::Deleted)
    }

    /// The agents that said HELLO for the location, most recent first.
    pub async fn location_agents(&self, location_id: Uuid) -> Result<Vec<AgentRecord>, StoreError> {
        let found = sqlx::query(
            "SELECT id, version, first_seen_at, last_seen_at FROM agents
             WHERE location_id = ? ORDER BY last_seen_at DESC, id",
        )
        .bind(location_id.to_string())
        .fetch_all(&mut *self.read().await?)
        .await?;
        found
            .iter()
            .map(|r| {
                Ok(AgentRecord {
                    id: rows::uuid(r, "id", "agents")?,
                    version: r.try_get("version")?,
                    first_seen_at: rows::ts(r, "first_seen_at")?,
                    last_seen_at: rows::ts(r, "last_seen_at")?,
                })
            })
            .collect()
    }

    /// Queued and leased jobs of the location right now.
    pub async fn location_queue(&self, location_id: Uuid) -> Result<QueueStats, StoreError> {
        let row = sqlx::query(
            "SELECT coalesce(sum(state = 0), 0) AS queued,
                    coalesce(sum(state = 1), 0) AS leased,
                    min(CASE WHEN state = 0 THEN available_at END) AS oldest
               FROM jobs WHERE location_id = ?",
        )
        .bind(location_id.to_string())
        .fetch_one(&mut *self.read().await?)
        .await?;
        Ok(QueueStats {
            queued: row.try_get("queued")?,
            leased: row.try_get("leased")?,
            oldest_queued_at: row.try_get("oldest")?,
        })
    }
}
