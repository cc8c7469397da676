//! The tokens of subscribers' links: confirmation (VERIFY) and unsubscribe links. The
//! token is the credential, so these are the only subscription functions not scoped
//! by account; only the hex SHA-256 of a token is stored (`keys::hash`).

use sqlx::Row;
use uuid::Uuid;

use super::super::rows;
use super::super::{Store, StoreError};
use super::{SubscriptionKind, SubscriptionStatus, enum_col};

/// What a link does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TokenPurpose {
    /// Confirms a PENDING e-mail subscription (once).
    Verify,
    /// Removes the subscription.
    Unsubscribe,
}

impl TokenPurpose {
    pub fn as_str(self) -> &'static str {
        match self {
            TokenPurpose::Verify => "VERIFY",
            TokenPurpose::Unsubscribe => "UNSUBSCRIBE",
        }
    }
}

/// A token to keep, as the hex of its SHA-256.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewToken {
    pub subscription_id: Uuid,
    pub purpose: TokenPurpose,
    pub hash_hex: String,
}

/// The subscription a token belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubscriberRef {
    pub subscription_id: Uuid,
    pub account_id: Uuid,
    pub page_id: Uuid,
    pub kind: SubscriptionKind,
    pub address: String,
}

/// What presenting a token did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenUse {
    /// No such token for that purpose (never issued, or its subscription is gone).
    Unknown,
    /// A VERIFY token used before; the subscription is verified.
    AlreadyUsed(SubscriberRef),
    /// The subscription is VERIFIED now.
    Verified(SubscriberRef),
    /// The subscription was deleted.
    Unsubscribed(SubscriberRef),
}

impl Store {
    /// Keeps `tokens` (one statement); tokens of subscriptions deleted meanwhile are
    /// left out. Returns how many were kept.
    pub async fn add_subscription_tokens(
        &self,
        tokens: &[NewToken],
        at_ms: i64,
    ) -> Result<u64, StoreError> {
        if tokens.is_empty() {
            return Ok(0);
        }
        let list: Vec<serde_json::Value> = tokens
            .iter()
            .map(|t| {
                serde_json::json!({
                    "h": t.hash_hex,
                    "s": t.subscription_id.to_string(),
                    "p": t.purpose.as_str(),
                })
            })
            .collect();
        let done = sqlx::query(
            "INSERT INTO status_subscription_tokens
                 (token_hash, subscription_id, purpose, created_at)
             SELECT json_extract(j.value, '$.h'), s.id, json_extract(j.value, '$.p'), ?2
             FROM json_each(?1) j
             JOIN status_page_subscriptions s ON s.id = json_extract(j.value, '$.s')
             WHERE true
             ON CONFLICT (token_hash) DO NOTHING",
        )
        .bind(serde_json::Value::Array(list).to_string())
        .bind(at_ms)
        .execute(&mut *self.write().await?)
        .await?;
        Ok(done.rows_affected())
    }

    /// Uses the token whose SHA-256 (hex) is `hash_hex` for `purpose`, in one
    /// transaction: a VERIFY token marks its subscription VERIFIED (each token once),
    /// an UNSUBSCRIBE token deletes its subscription (with every token of it).
    pub async fn use_subscription_token(
        &self,
        hash_hex: &str,
        purpose: TokenPurpose,
        at_ms: i64,
    ) -> Result<TokenUse, StoreError> {
        const TABLE: &str = "status_subscription_tokens";
        let mut conn = self.write().await?;
        let mut tx = conn.begin().await?;
        let found = sqlx::query(
            "SELECT t.used_at, s.id, s.page_id, s.type, s.address, p.account_id
             FROM status_subscription_tokens t
             JOIN status_page_subscriptions s ON s.id = t.subscription_id
             JOIN status_pages p ON p.id = s.page_id
             WHERE t.token_hash = ? AND t.purpose = ?",
        )
        .bind(hash_hex)
        .bind(purpose.as_str())
        .fetch_optional(&mut *tx)
        .await?;
        let Some(row) = found else {
            return Ok(TokenUse::Unknown);
        };
        let kind: String = row.try_get("type")?;
        let used_at: Option<i64> = row.try_get("used_at")?;
        let subscriber = SubscriberRef {
            subscription_id: rows::uuid(&row, "id", TABLE)?,
            account_id: rows::uuid(&row, "account_id", TABLE)?,
            page_id: rows::uuid(&row, "page_id", TABLE)?,
            kind: enum_col(&kind, SubscriptionKind::parse, TABLE)?,
            address: row.try_get("address")?,
        };
        let id = subscriber.subscription_id.to_string();
        let used = match purpose {
            TokenPurpose::Verify if used_at.is_some() => {
                return Ok(TokenUse::AlreadyUsed(subscriber));
            }
            TokenPurpose::Verify => {
                sqlx::query(
                    "UPDATE status_subscription_tokens SET used_at = ? WHERE token_hash = ?",
                )
                .bind(at_ms)
                .bind(hash_hex)
                .execute(&mut *tx)
                .await?;
                sqlx::query(
                    "UPDATE status_page_subscriptions SET status = ?, updated_at = ?
                     WHERE id = ? AND status <> ?",
                )
                .bind(SubscriptionStatus::Verified.as_str())
                .bind(at_ms)
                .bind(&id)
                .bind(SubscriptionStatus::Verified.as_str())
                .execute(&mut *tx)
                .await?;
                TokenUse::Verified(subscriber)
            }
            TokenPurpose::Unsubscribe => {
                sqlx::query("DELETE FROM status_page_subscriptions WHERE id = ?")
                    .bind(&id)
                    .execute(&mut *tx)
                    .await?;
                TokenUse::Unsubscribed(subscriber)
            }
        };
        tx.commit().await?;
        Ok(used)
    }
}
