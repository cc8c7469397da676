//! Per-subscriber outcomes of status notifications: which addresses (e-mail or webhook)
//! were sent an incident update (or refused it for good), so that a restart resends
//! nothing that was delivered and loses nothing that was not.

use std::collections::HashSet;

use uuid::Uuid;

use super::super::{Store, StoreError};

/// What became of a notification for one subscriber.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeliveryOutcome {
    /// The SMTP server accepted the message, or the webhook answered 2xx.
    Sent,
    /// Refused for good (an SMTP 5xx, an unusable address, a webhook's 4xx) or given
    /// up.
    Failed,
}

impl DeliveryOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            DeliveryOutcome::Sent => "SENT",
            DeliveryOutcome::Failed => "FAILED",
        }
    }
}

/// One subscriber's outcome, as recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliveryWrite<'a> {
    pub notification_id: Uuid,
    /// The address as subscribed.
    pub address: &'a str,
    /// The subscription's `address_key` (lowercased e-mail address, or the URL).
    pub key: &'a str,
    pub outcome: DeliveryOutcome,
    pub attempts: i64,
    /// Why it failed (never holds the SMTP URL or the webhook URL).
    pub error: Option<&'a str>,
    pub at_ms: i64,
}

impl Store {
    /// The address keys that already have an outcome for `notification_id`.
    pub async fn status_delivery_keys(
        &self,
        notification_id: Uuid,
    ) -> Result<HashSet<String>, StoreError> {
        let keys: Vec<String> = sqlx::query_scalar(
            "SELECT address_key FROM status_notification_deliveries WHERE notification_id = ?",
        )
        .bind(notification_id.to_string())
        .fetch_all(&mut *self.read().await?)
        .await?;
        Ok(keys.into_iter().collect())
    }

    /// Records one subscriber's outcome; false if it already had one (or the
    /// notification is gone).
    pub async fn record_status_delivery(
        &self,
        delivery: &DeliveryWrite<'_>,
    ) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "INSERT INTO status_notification_deliveries
                 (notification_id, address_key, address, outcome, attempts, error, at)
             SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7
             WHERE EXISTS (SELECT 1 FROM status_notifications WHERE id = ?1)
             ON CONFLICT (notification_id, address_key) DO NOTHING",
        )
        .bind(delivery.notification_id.to_string())
        .bind(delivery.key)
        .bind(delivery.address)
        .bind(delivery.outcome.as_str())
        .bind(delivery.attempts)
        .bind(delivery.error)
        .bind(delivery.at_ms)
        .execute(&mut *self.write().await?)
        .await?;
        Ok(done.rows_affected() > 0)
    }
}
