//! Subscriptions of status pages: e-mail addresses (the reference's EMAIL) and webhook
//! URLs (Outpost's WEBHOOK) told of incident updates.

use chrono::{DateTime, Utc};
use sqlx::Row;
use sqlx::sqlite::SqliteRow;
use uuid::Uuid;

use super::super::rows;
use super::super::{Store, StoreError, now_ms};
use super::pages::page_owned;
use super::{MAX_SUBSCRIPTIONS_PER_PAGE, SubscriptionKind, SubscriptionStatus, enum_col};

/// A subscription of a page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageSubscription {
    pub id: Uuid,
    pub page_id: Uuid,
    pub kind: SubscriptionKind,
    /// The e-mail address or the webhook URL.
    pub address: String,
    /// What makes the address unique ([`SubscriptionKind::address_key`]); also the key
    /// of its delivery outcomes.
    pub address_key: String,
    pub status: SubscriptionStatus,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// One subscription to create.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewSubscription {
    pub kind: SubscriptionKind,
    /// An e-mail address, or a normalized http(s) URL.
    pub address: String,
    pub status: SubscriptionStatus,
}

/// What a bulk creation did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BulkOutcome {
    pub created: usize,
    /// Addresses the page already had (or that repeat one of the same request).
    pub skipped: usize,
    /// Confirmation mails queued (created PENDING e-mail subscriptions).
    pub confirmations: usize,
}

const COLUMNS: &str = "id, page_id, type, address, address_key, status, created_at, updated_at";

fn subscription_from_row(r: &SqliteRow) -> Result<PageSubscription, StoreError> {
    const TABLE: &str = "status_page_subscriptions";
    let kind: String = r.try_get("type")?;
    let status: String = r.try_get("status")?;
    Ok(PageSubscription {
        id: rows::uuid(r, "id", TABLE)?,
        page_id: rows::uuid(r, "page_id", TABLE)?,
        kind: enum_col(&kind, SubscriptionKind::parse, TABLE)?,
        address: r.try_get("address")?,
        address_key: r.try_get("address_key")?,
        status: enum_col(&status, SubscriptionStatus::parse, TABLE)?,
        created_at: rows::ts(r, "created_at")?,
        updated_at: rows::ts(r, "updated_at")?,
    })
}

impl Store {
    /// The subscriptions of one of the account's pages, oldest first; `None` if the
    /// account has no such page.
    pub async fn page_subscriptions(
        &self,
        account_id: Uuid,
        page_id: Uuid,
    ) -> Result<Option<Vec<PageSubscription>>, StoreError> {
        let mut conn = self.read().await?;
        if !page_owned(&mut conn, account_id, page_id).await? {
            return Ok(None);
        }
        let found = sqlx::query(&format!(
            "SELECT {COLUMNS} FROM status_page_subscriptions
             WHERE page_id = ? ORDER BY created_at, rowid"
        ))
        .bind(page_id.to_string())
        .fetch_all(&mut *conn)
        .await?;
        found
            .iter()
            .map(subscription_from_row)
            .collect::<Result<Vec<_>, _>>()
            .map(Some)
    }

    /// Subscribes `items` to a page; addresses already there (by type and
    /// [`SubscriptionKind::address_key`]) are skipped. Every created PENDING e-mail
    /// subscription gets its confirmation mail queued in the same transaction. `None`
    /// if the account has no such page.
    pub async fn subscribe_to_page(
        &self,
        account_id: Uuid,
        page_id: Uuid,
        items: &[NewSubscription],
    ) -> Result<Option<BulkOutcome>, StoreError> {
        let now = now_ms();
        let mut conn = self.write().await?;
        let mut tx = conn.begin().await?;
        if !page_owned(&mut tx, account_id, page_id).await? {
            return Ok(None);
        }
        let existing: i64 =
            sqlx::query_scalar("SELECT count(*) FROM status_page_subscriptions WHERE page_id = ?")
                .bind(page_id.to_string())
                .fetch_one(&mut *tx)
                .await?;
        let mut created = 0usize;
        let mut confirmations = 0usize;
        for item in items {
            let id = Uuid::new_v4().to_string();
            let done = sqlx::query(
                "INSERT INTO status_page_subscriptions
                     (id, page_id, type, address, address_key, status, created_at, updated_at)
                 VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                 ON CONFLICT (page_id, type, address_key) DO NOTHING",
            )
            .bind(&id)
            .bind(page_id.to_string())
            .bind(item.kind.as_str())
            .bind(&item.address)
            .bind(item.kind.address_key(&item.address))
            .bind(item.status.as_str())
            .bind(now)
            .bind(now)
            .execute(&mut *tx)
            .await?;
            if done.rows_affected() == 0 {
                continue;
            }
            created += 1;
            if item.kind == SubscriptionKind::Email && item.status == SubscriptionStatus::Pending {
                sqlx::query(
                    "INSERT INTO status_subscription_confirmations (subscription_id, created_at)
                     VALUES (?, ?)",
                )
                .bind(&id)
                .bind(now)
                .execute(&mut *tx)
                .await?;
                confirmations += 1;
            }
        }
        let total = existing.saturating_add(i64::try_from(created).unwrap_or(i64::MAX));
        if total > MAX_SUBSCRIPTIONS_PER_PAGE {
            return Err(StoreError::Conflict {
                field: "subscriptions",
                message: format!(
                    "a status page has at most {MAX_SUBSCRIPTIONS_PER_PAGE} subscriptions; it has {existing}"
                ),
            });
        }
        tx.commit().await?;
        Ok(Some(BulkOutcome {
            created,
            skipped: items.len() - created,
            confirmations,
        }))
    }

    /// Deletes a subscription of one of the account's pages; false if unknown.
    pub async fn delete_page_subscription(
        &self,
        account_id: Uuid,
        page_id: Uuid,
        subscription_id: Uuid,
    ) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "DELETE FROM status_page_subscriptions WHERE id = ?1 AND page_id = ?2
               AND EXISTS (SELECT 1 FROM status_pages WHERE id = ?2 AND account_id = ?3)",
        )
        .bind(subscription_id.to_string())
        .bind(page_id.to_string())
        .bind(account_id.to_string())
        .execute(&mut *self.write().await?)
        .await?;
        Ok(done.rows_affected() > 0)
    }

    /// The verified subscribers (e-mail and webhook) of the pages that show a service
    /// of incident `incident_id`, each address once (its oldest subscription), for
    /// delivering its notifications.
    pub async fn incident_subscribers(
        &self,
        incident_id: Uuid,
    ) -> Result<Vec<PageSubscription>, StoreError> {
        let found = sqlx::query(&format!(
            "SELECT {COLUMNS}, min(rowid) AS first_rowid
             FROM status_page_subscriptions
             WHERE status = 'VERIFIED' AND page_id IN (
                 SELECT c.page_id FROM status_incident_services x
                 JOIN status_card_services cs ON cs.service_id = x.service_id
                 JOIN status_page_cards c ON c.id = cs.card_id
                 WHERE x.incident_id = ?)
             GROUP BY type, address_key ORDER BY created_at, id"
        ))
        .bind(incident_id.to_string())
        .fetch_all(&mut *self.read().await?)
        .await?;
        found.iter().map(subscription_from_row).collect()
    }
}
