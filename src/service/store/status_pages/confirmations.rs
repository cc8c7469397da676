//! The queue of confirmation mails: one row per PENDING e-mail subscription, written
//! with it ([`Store::subscribe_to_page`]), with its outcome once the SMTP server
//! answered for good. A row without an outcome is sent (again) after a restart.

use chrono::{DateTime, Utc};
use sqlx::Row;
use uuid::Uuid;

use super::super::rows;
use super::super::{Store, StoreError};
use super::DeliveryOutcome;

/// A confirmation mail still to be sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingConfirmation {
    pub subscription_id: Uuid,
    pub account_id: Uuid,
    pub page_id: Uuid,
    pub address: String,
    /// When it was queued (the 24 hours of retries count from here).
    pub created_at: DateTime<Utc>,
}

/// The outcome of a confirmation mail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfirmationWrite<'a> {
    pub subscription_id: Uuid,
    pub outcome: DeliveryOutcome,
    pub attempts: i64,
    /// Why it failed (never holds the SMTP URL).
    pub error: Option<&'a str>,
    pub at_ms: i64,
}

impl Store {
    /// Confirmation mails without an outcome, oldest first, at most `limit`.
    pub async fn pending_confirmations(
        &self,
        limit: i64,
    ) -> Result<Vec<PendingConfirmation>, StoreError> {
        const TABLE: &str = "status_subscription_confirmations";
        let found = sqlx::query(
            "SELECT c.subscription_id, p.account_id, s.page_id, s.address, c.created_at
             FROM status_subscription_confirmations c
             JOIN status_page_subscriptions s ON s.id = c.subscription_id
             JOIN status_pages p ON p.id = s.page_id
             WHERE c.outcome IS NULL
             ORDER BY c.created_at, c.subscription_id LIMIT ?",
        )
        .bind(limit)
        .fetch_all(&mut *self.read().await?)
        .await?;
        found
            .iter()
            .map(|r| {
                Ok(PendingConfirmation {
                    subscription_id: rows::uuid(r, "subscription_id", TABLE)?,
                    account_id: rows::uuid(r, "account_id", TABLE)?,
                    page_id: rows::uuid(r, "page_id", TABLE)?,
                    address: r.try_get("address")?,
                    created_at: rows::ts(r, "created_at")?,
                })
            })
            .collect()
    }

    /// Records the outcome of a confirmation mail; false if it already had one (or the
    /// subscription is gone).
    pub async fn record_confirmation(
        &self,
        write: &ConfirmationWrite<'_>,
    ) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "UPDATE status_subscription_confirmations
             SET outcome = ?, attempts = ?, error = ?, at = ?
             WHERE subscription_id = ? AND outcome IS NULL",
        )
        .bind(write.outcome.as_str())
        .bind(write.attempts)
        .bind(write.error)
        .bind(write.at_ms)
        .bind(write.subscription_id.to_string())
        .execute(&mut *self.write().await?)
        .await?;
        Ok(done.rows_affected() > 0)
    }
}
