//! Private locations, their agent keys (at most two active per location) and the agents
//! that said HELLO.

use chrono::{DateTime, Utc};
use sqlx::Row;
use uuid::Uuid;

use super::auth_cache::Principal;
use super::location_usage::LocationRecord;
use super::rows::{self, time};
use super::{Store, StoreError, now_ms};
use crate::model::ProxyUrl;
use crate::service::keys;

/// Most active keys a location may have (one in use, one being rotated in).
pub const MAX_ACTIVE_LOCATION_KEYS: i64 = 2;
/// Longest slug name.
pub const MAX_SLUG_LEN: usize = 64;

/// A private location: where agents run checks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrivateLocation {
    pub id: Uuid,
    pub account_id: Uuid,
    pub name: String,
    /// What checks name in `privateLocations`.
    pub slug_name: String,
    pub created_at: DateTime<Utc>,
}

/// An agent key as listed (never the plaintext).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocationKeyInfo {
    pub id: Uuid,
    pub location_id: Uuid,
    pub masked: String,
    pub created_at: DateTime<Utc>,
}

/// Who an agent key identifies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocationAuth {
    pub location_id: Uuid,
    pub account_id: Uuid,
    pub slug_name: String,
}

/// Whether `slug` is a valid slug name: lowercase letters, digits and dashes, starting
/// with a letter or digit.
pub fn valid_slug(slug: &str) -> bool {
    !slug.is_empty()
        && slug.len() <= MAX_SLUG_LEN
        && slug
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !slug.starts_with('-')
}

fn location_from_row(r: &sqlx::sqlite::SqliteRow) -> Result<PrivateLocation, StoreError> {
    Ok(PrivateLocation {
        id: rows::uuid(r, "id", "private_locations")?,
        account_id: rows::uuid(r, "account_id", "private_locations")?,
        name: r.try_get("name")?,
        slug_name: r.try_get("slug_name")?,
        created_at: rows::ts(r, "created_at")?,
    })
}

impl Store {
    /// Creates a private location without a proxy; the slug name must be unique within
    /// the account.
    pub async fn create_private_location(
        &self,
        account_id: Uuid,
        name: &str,
        slug_name: &str,
    ) -> Result<PrivateLocation, StoreError> {
        self.create_private_location_with_proxy(account_id, name, slug_name, None)
            .await
            .map(|record| record.location)
    }

    /// Creates a private location whose agents send API checks through `proxy_url`
    /// (`None`: directly); the slug name must be unique within the account.
    pub async fn create_private_location_with_proxy(
        &self,
        account_id: Uuid,
        name: &str,
        slug_name: &str,
        proxy_url: Option<&ProxyUrl>,
    ) -> Result<LocationRecord, StoreError> {
        if name.trim().is_empty() {
            return Err(StoreError::Invalid {
                field: "name",
                message: "must not be empty".into(),
            });
        }
        if !valid_slug(slug_name) {
            return Err(StoreError::Invalid {
                field: "slugName",
                message: format!("must be 1 to {MAX_SLUG_LEN} lowercase letters, digits or dashes"),
            });
        }
        let id = Uuid::new_v4();
        let now = now_ms();
        let mut conn = self.write().await?;
        let mut tx = conn.begin().await?;
        let taken =
            sqlx::query("SELECT 1 FROM private_locations WHERE account_id = ? AND slug_name = ?")
                .bind(account_id.to_string())
                .bind(slug_name)
                .fetch_optional(&mut *tx)
                .await?;
        if taken.is_some() {
            return Err(StoreError::SlugTaken(slug_name.to_owned()));
        }
        let done = sqlx::query(
            "INSERT INTO private_locations
                 (id, account_id, name, slug_name, created_at, updated_at, proxy_url)
             SELECT ?, id, ?, ?, ?, ?, ? FROM accounts WHERE id = ?",
        )
        .bind(id.to_string())
        .bind(name.trim())
        .bind(slug_name)
        .bind(now)
        .bind(now)
        .bind(proxy_url.map(ProxyUrl::expose))
        .bind(account_id.to_string())
        .execute(&mut *tx)
        .await?;
        if done.rows_affected() == 0 {
            return Err(StoreError::NotFound("account"));
        }
        tx.commit().await?;
        Ok(LocationRecord {
            location: PrivateLocation {
                id,
                account_id,
                name: name.trim().to_owned(),
                slug_name: slug_name.to_owned(),
                created_at: time(now),
            },
            updated_at: time(now),
            proxy_url: proxy_url.cloned(),
        })
    }

    /// The account's private locations, oldest first.
    pub async fn list_private_locations(
        &self,
        account_id: Uuid,
    ) -> Result<Vec<PrivateLocation>, StoreError> {
        let found = sqlx::query(
            "SELECT id, account_id, name, slug_name, created_at FROM private_locations
             WHERE account_id = ? ORDER BY created_at, id",
        )
        .bind(account_id.to_string())
        .fetch_all(&mut *self.read().await?)
        .await?;
        found.iter().map(location_from_row).collect()
    }

    /// One private location of the account.
    pub async fn private_location(
        &self,
        account_id: Uuid,
        id: Uuid,
    ) -> Result<Option<PrivateLocation>, StoreError> {
        let row = sqlx::query(
            "SELECT id, account_id, name, slug_name, created_at FROM private_locations
             WHERE account_id = ? AND id = ?",
        )
        .bind(account_id.to_string())
        .bind(id.to_string())
        .fetch_optional(&mut *self.read().await?)
        .await?;
        row.as_ref().map(location_from_row).transpose()
    }

    /// Deletes a private location with its keys and queued jobs; false if unknown.
    pub async fn delete_private_location(
        &self,
        account_id: Uuid,
        id: Uuid,
    ) -> Result<bool, StoreError> {
        let done = sqlx::query("DELETE FROM private_locations WHERE account_id = ? AND id = ?")
            .bind(account_id.to_string())
            .bind(id.to_string())
            .execute(&mut *self.write().await?)
            .await?;
        // Its agent keys are refused from now on, before the deletion is answered.
        self.inner.auth.invalidate();
        Ok(done.rows_affected() > 0)
    }

    /// Creates an agent key for the location. Fails with
    /// [`StoreError::TooManyLocationKeys`] when two keys are already active.
    pub async fn create_location_key(
        &self,
        location_id: Uuid,
    ) -> Result<(LocationKeyInfo, String), StoreError> {
        let key = keys::generate(keys::AGENT_KEY_PREFIX);
        let id = Uuid::new_v4();
        let now = now_ms();
        let mut conn = self.write().await?;
        let mut tx = conn.begin().await?;
        let row = sqlx::query(
            "SELECT (SELECT count(*) FROM private_locations WHERE id = ?1) AS found,
                    (SELECT count(*) FROM location_keys
                      WHERE location_id = ?1 AND revoked_at IS NULL) AS active",
        )
        .bind(location_id.to_string())
        .fetch_one(&mut *tx)
        .await?;
        let found: i64 = row.try_get("found")?;
        let active: i64 = row.try_get("active")?;
        if found == 0 {
            return Err(StoreError::NotFound("private location"));
        }
        if active >= MAX_ACTIVE_LOCATION_KEYS {
            return Err(StoreError::TooManyLocationKeys {
                location_id,
                max: MAX_ACTIVE_LOCATION_KEYS,
            });
        }
        sqlx::query(
            "INSERT INTO location_keys (id, location_id, key_hash, masked, created_at)
             VALUES (?, ?, ?, ?, ?)",
        )
        .bind(id.to_string())
        .bind(location_id.to_string())
        .bind(&key.hash)
        .bind(&key.masked)
        .bind(now)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        // A new key is no longer an unknown one.
        self.inner.auth.invalidate();
        Ok((
            LocationKeyInfo {
                id,
                location_id,
                masked: key.masked,
                created_at: time(now),
            },
            key.plaintext,
        ))
    }

    /// The location's active keys.
    pub async fn list_location_keys(
        &self,
        location_id: Uuid,
    ) -> Result<Vec<LocationKeyInfo>, StoreError> {
        let found = sqlx::query(
            "SELECT id, masked, created_at FROM location_keys
             WHERE location_id = ? AND revoked_at IS NULL ORDER BY created_at, id",
        )
        .bind(location_id.to_string())
        .fetch_all(&mut *self.read().await?)
        .await?;
        found
            .iter()
            .map(|r| {
                Ok(LocationKeyInfo {
                    id: rows::uuid(r, "id", "location_keys")?,
                    location_id,
                    masked: r.try_get("masked")?,
                    created_at: rows::ts(r, "created_at")?,
                })
            })
            .collect()
    }

    /// Revokes an agent key; false if the location has no such active key.
    pub async fn revoke_location_key(
        &self,
        location_id: Uuid,
        key_id: Uuid,
    ) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "UPDATE location_keys SET revoked_at = ?
             WHERE id = ? AND location_id = ? AND revoked_at IS NULL",
        )
        .bind(now_ms())
        .bind(key_id.to_string())
        .bind(location_id.to_string())
        .execute(&mut *self.write().await?)
        .await?;
        // Refused from now on, before the revocation is answered.
        self.inner.auth.invalidate();
        Ok(done.rows_affected() > 0)
    }

    /// The location an active agent key belongs to. Answered from memory when it can
    /// be (see `auth_cache.rs`); only well-formed keys are looked up.
    pub async fn authenticate_location_key(
        &self,
        presented: &str,
    ) -> Result<Option<LocationAuth>, StoreError> {
        if !keys::well_formed(presented, keys::AGENT_KEY_PREFIX) {
            return Ok(None);
        }
        let found = self
            .inner
            .auth
            .resolve(keys::digest(presented), |hash| {
                self.lookup_location_key(hash)
            })
            .await?;
        Ok(match found {
            Some(Principal::Location(location)) => Some(location),
            _ => None,
        })
    }

    async fn lookup_location_key(&self, hash: [u8; 32]) -> Result<Option<Principal>, StoreError> {
        let row = sqlx::query(
            "SELECT l.id, l.account_id, l.slug_name
               FROM location_keys k JOIN private_locations l ON l.id = k.location_id
              WHERE k.key_hash = ? AND k.revoked_at IS NULL",
        )
        .bind(&hash[..])
        .fetch_optional(&mut *self.read().await?)
        .await?;
        row.map(|r| {
            Ok(Principal::Location(LocationAuth {
                location_id: rows::uuid(&r, "id", "private_locations")?,
                account_id: rows::uuid(&r, "account_id", "private_locations")?,
                slug_name: r.try_get("slug_name")?,
            }))
        })
        .transpose()
    }

    /// Records that an agent said HELLO.
    pub async fn record_agent(
        &self,
        agent_id: Uuid,
        location_id: Uuid,
        version: &str,
        now: i64,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO agents (id, location_id, version, first_seen_at, last_seen_at)
             VALUES (?1, ?2, ?3, ?4, ?4)
             ON CONFLICT(id) DO UPDATE SET location_id = ?2, version = ?3, last_seen_at = ?4",
        )
        .bind(agent_id.to_string())
        .bind(location_id.to_string())
        .bind(version)
        .bind(now)
        .execute(&mut *self.write().await?)
        .await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::valid_slug;

    #[test]
    fn slugs() {
        assert!(valid_slug("local"));
        assert!(valid_slug("eu-dc-2"));
        assert!(!valid_slug(""));
        assert!(!valid_slug("Local"));
        assert!(!valid_slug("-x"));
        assert!(!valid_slug("a b"));
    }
}
