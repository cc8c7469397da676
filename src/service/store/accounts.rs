//! Accounts and their API keys.

use chrono::{DateTime, Utc};
use sqlx::Row;
use uuid::Uuid;

use super::auth_cache::Principal;
use super::rows::{self, time};
use super::{Store, StoreError, now_ms};
use crate::service::keys;

/// A tenant: owns checks, locations and keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Account {
    pub id: Uuid,
    pub name: String,
    pub created_at: DateTime<Utc>,
}

/// An API key as listed (never the plaintext).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiKeyInfo {
    pub id: Uuid,
    pub account_id: Uuid,
    pub name: String,
    pub masked: String,
    pub created_at: DateTime<Utc>,
}

impl Store {
    /// Creates an account.
    pub async fn create_account(&self, name: &str) -> Result<Account, StoreError> {
        let name = name.trim();
        if name.is_empty() {
            return Err(StoreError::Invalid {
                field: "name",
                message: "must not be empty".into(),
            });
        }
        let id = Uuid::new_v4();
        let now = now_ms();
        sqlx::query("INSERT INTO accounts (id, name, created_at) VALUES (?, ?, ?)")
            .bind(id.to_string())
            .bind(name)
            .bind(now)
            .execute(&mut *self.write().await?)
            .await?;
        Ok(Account {
            id,
            name: name.to_owned(),
            created_at: time(now),
        })
    }

    /// The account with this id, if any.
    pub async fn account(&self, id: Uuid) -> Result<Option<Account>, StoreError> {
        let row = sqlx::query("SELECT id, name, created_at FROM accounts WHERE id = ?")
            .bind(id.to_string())
            .fetch_optional(&mut *self.read().await?)
            .await?;
        row.map(|r| {
            Ok(Account {
                id: rows::uuid(&r, "id", "accounts")?,
                name: r.try_get("name")?,
                created_at: rows::ts(&r, "created_at")?,
            })
        })
        .transpose()
    }

    /// Every account, oldest first (for operators).
    pub async fn list_accounts(&self) -> Result<Vec<Account>, StoreError> {
        let found =
            sqlx::query("SELECT id, name, created_at FROM accounts ORDER BY created_at, id")
                .fetch_all(&mut *self.read().await?)
                .await?;
        found
            .iter()
            .map(|r| {
                Ok(Account {
                    id: rows::uuid(r, "id", "accounts")?,
                    name: r.try_get("name")?,
                    created_at: rows::ts(r, "created_at")?,
                })
            })
            .collect()
    }

    /// Creates an API key for the account; the plaintext is returned only here.
    pub async fn create_api_key(
        &self,
        account_id: Uuid,
        name: &str,
    ) -> Result<(ApiKeyInfo, String), StoreError> {
        let key = keys::generate(keys::API_KEY_PREFIX);
        let id = Uuid::new_v4();
        let now = now_ms();
        let done = sqlx::query(
            "INSERT INTO api_keys (id, account_id, name, key_hash, masked, created_at)
             SELECT ?, id, ?, ?, ?, ? FROM accounts WHERE id = ?",
        )
        .bind(id.to_string())
        .bind(name)
        .bind(&key.hash)
        .bind(&key.masked)
        .bind(now)
        .bind(account_id.to_string())
        .execute(&mut *self.write().await?)
        .await?;
        // A new key is no longer an unknown one.
        self.inner.auth.invalidate();
        if done.rows_affected() == 0 {
            return Err(StoreError::NotFound("account"));
        }
        Ok((
            ApiKeyInfo {
                id,
                account_id,
                name: name.to_owned(),
                masked: key.masked,
                created_at: time(now),
            },
            key.plaintext,
        ))
    }

    /// The account's active API keys.
    pub async fn list_api_keys(&self, account_id: Uuid) -> Result<Vec<ApiKeyInfo>, StoreError> {
        let found = sqlx::query(
            "SELECT id, name, masked, created_at FROM api_keys
             WHERE account_id = ? AND revoked_at IS NULL ORDER BY created_at, id",
        )
        .bind(account_id.to_string())
        .fetch_all(&mut *self.read().await?)
        .await?;
        found
            .iter()
            .map(|r| {
                Ok(ApiKeyInfo {
                    id: rows::uuid(r, "id", "api_keys")?,
                    account_id,
                    name: r.try_get("name")?,
                    masked: r.try_get("masked")?,
                    created_at: rows::ts(r, "created_at")?,
                })
            })
            .collect()
    }

    /// Revokes an API key; false if the account has no such active key.
    pub async fn revoke_api_key(&self, account_id: Uuid, key_id: Uuid) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "UPDATE api_keys SET revoked_at = ?
             WHERE id = ? AND account_id = ? AND revoked_at IS NULL",
        )
        .bind(now_ms())
        .bind(key_id.to_string())
        .bind(account_id.to_string())
        .execute(&mut *self.write().await?)
        .await?;
        // Refused from now on, before the revocation is answered.
        self.inner.auth.invalidate();
        Ok(done.rows_affected() > 0)
    }

    /// The account an active API key belongs to. Answered from memory when it can be
    /// (see `auth_cache.rs`); only well-formed keys are looked up.
    pub async fn authenticate_api_key(&self, presented: &str) -> Result<Option<Uuid>, StoreError> {
        if !keys::well_formed(presented, keys::API_KEY_PREFIX) {
            return Ok(None);
        }
        let found = self
            .inner
            .auth
            .resolve(keys::digest(presented), |hash| self.lookup_api_key(hash))
            .await?;
        Ok(match found {
            Some(Principal::Account(id)) => Some(id),
            _ => None,
        })
    }

    async fn lookup_api_key(&self, hash: [u8; 32]) -> Result<Option<Principal>, StoreError> {
        let row = sqlx::query(
            "SELECT account_id FROM api_keys WHERE key_hash = ? AND revoked_at IS NULL",
        )
        .bind(&hash[..])
        .fetch_optional(&mut *self.read().await?)
        .await?;
        row.map(|r| rows::uuid(&r, "account_id", "api_keys").map(Principal::Account))
            .transpose()
    }
}
