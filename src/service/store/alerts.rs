//! Alert channels, their subscriptions (which checks a channel alerts for), and the
//! outbox of alert notices waiting for delivery.

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Utc};
use sqlx::Row;
use sqlx::SqliteConnection;
use sqlx::sqlite::SqliteRow;
use uuid::Uuid;

use super::rows;
use super::{Store, StoreError};

/// A stored alert channel with its subscriptions.
#[derive(Debug, Clone, PartialEq)]
pub struct ChannelRecord {
    pub id: i64,
    pub account_id: Uuid,
    /// EMAIL, WEBHOOK, ... (validated by the API layer).
    pub channel_type: String,
    /// The normalized configuration (secrets included: mask before showing).
    pub config: serde_json::Value,
    pub send_recovery: bool,
    pub send_failure: bool,
    pub send_degraded: bool,
    pub ssl_expiry: bool,
    pub ssl_expiry_threshold: i64,
    pub auto_subscribe: bool,
    pub created_at: DateTime<Utc>,
    pub updated_at: Option<DateTime<Utc>>,
    pub subscriptions: Vec<SubscriptionRecord>,
}

/// What a create or update of a channel writes.
#[derive(Debug, Clone)]
pub struct ChannelWrite {
    pub channel_type: String,
    pub config: serde_json::Value,
    pub send_recovery: bool,
    pub send_failure: bool,
    pub send_degraded: bool,
    pub ssl_expiry: bool,
    pub ssl_expiry_threshold: i64,
    pub auto_subscribe: bool,
    /// Replaces the channel's subscriptions when set.
    pub subscriptions: Option<Vec<SubscriptionWrite>>,
}

/// One subscription of a channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SubscriptionRecord {
    pub id: i64,
    pub channel_id: i64,
    pub check_id: Option<Uuid>,
    pub group_id: Option<i64>,
    pub activated: bool,
}

/// A subscription as a channel's API sets it (a check or a group, not both).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SubscriptionWrite {
    pub check_id: Option<Uuid>,
    pub group_id: Option<i64>,
    pub activated: bool,
}

/// A subscription as a check's API sets it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CheckSubscription {
    pub channel_id: i64,
    pub activated: bool,
}

/// A notice waiting in the outbox.
#[derive(Debug, Clone, PartialEq)]
pub struct OutboxRecord {
    pub id: i64,
    pub notice: serde_json::Value,
}

const CHANNEL_COLUMNS: &str = "id, account_id, type, config, send_recovery, send_failure,
    send_degraded, ssl_expiry, ssl_expiry_threshold, auto_subscribe, created_at, updated_at";

fn channel_from_row(r: &SqliteRow) -> Result<ChannelRecord, StoreError> {
    Ok(ChannelRecord {
        id: r.try_get("id")?,
        account_id: rows::uuid(r, "account_id", "alert_channels")?,
        channel_type: r.try_get("type")?,
        config: rows::json(r, "config", "alert_channels")?,
        send_recovery: r.try_get("send_recovery")?,
        send_failure: r.try_get("send_failure")?,
        send_degraded: r.try_get("send_degraded")?,
        ssl_expiry: r.try_get("ssl_expiry")?,
        ssl_expiry_threshold: r.try_get("ssl_expiry_threshold")?,
        auto_subscribe: r.try_get("auto_subscribe")?,
        created_at: rows::ts(r, "created_at")?,
        updated_at: rows::opt_ts(r, "updated_at")?,
        subscriptions: Vec::new(),
    })
}

fn subscription_from_row(r: &SqliteRow) -> Result<SubscriptionRecord, StoreError> {
    let check_id: Option<String> = r.try_get("check_id")?;
    Ok(SubscriptionRecord {
        id: r.try_get("id")?,
        channel_id: r.try_get("channel_id")?,
        check_id: check_id
            .map(|s| rows::parse_uuid(&s, "alert_subscriptions"))
            .transpose()?,
        group_id: r.try_get("group_id")?,
        activated: r.try_get("activated")?,
    })
}

/// Inserts or updates the subscription of `channel_id` to a check (or a group).
async fn upsert_subscription_row(
    conn: &mut SqliteConnection,
    account_id: Uuid,
    channel_id: i64,
    s: SubscriptionWrite,
) -> Result<SubscriptionRecord, StoreError> {
    let check_id = s.check_id.map(|c| c.to_string());
    let existing: Option<i64> = match &check_id {
        Some(c) => {
            sqlx::query_scalar(
                "SELECT id FROM alert_subscriptions WHERE channel_id = ? AND check_id = ?",
            )
            .bind(channel_id)
            .bind(c)
            .fetch_optional(&mut *conn)
            .await?
        }
        None => {
            sqlx::query_scalar(
                "SELECT id FROM alert_subscriptions
                  WHERE channel_id = ? AND check_id IS NULL AND group_id IS ?",
            )
            .bind(channel_id)
            .bind(s.group_id)
            .fetch_optional(&mut *conn)
            .await?
        }
    };
    let id = match existing {
        Some(id) => {
            sqlx::query("UPDATE alert_subscriptions SET activated = ? WHERE id = ?")
                .bind(s.activated)
                .bind(id)
                .execute(&mut *conn)
                .await?;
            id
        }
        None => {
            sqlx::query_scalar(
                "INSERT INTO alert_subscriptions (account_id, channel_id, check_id, group_id, activated)
                 VALUES (?, ?, ?, ?, ?) RETURNING id",
            )
            .bind(account_id.to_string())
            .bind(channel_id)
            .bind(&check_id)
            .bind(s.group_id)
            .bind(s.activated)
            .fetch_one(&mut *conn)
            .await?
        }
    };
    Ok(SubscriptionRecord {
        id,
        channel_id,
        check_id: s.check_id,
        group_id: s.group_id,
        activated: s.activated,
    })
}

/// Replaces the subscriptions of a check (the check's `alertChannelSubscriptions`).
pub(super) async fn replace_check_subscriptions(
    conn: &mut SqliteConnection,
    account_id: Uuid,
    check_id: Uuid,
    subscriptions: &[CheckSubscription],
) -> Result<(), StoreError> {
    sqlx::query("DELETE FROM alert_subscriptions WHERE check_id = ? AND account_id = ?")
        .bind(check_id.to_string())
        .bind(account_id.to_string())
        .execute(&mut *conn)
        .await?;
    for s in subscriptions {
        upsert_subscription_row(
            conn,
            account_id,
            s.channel_id,
            SubscriptionWrite {
                check_id: Some(check_id),
                group_id: None,
                activated: s.activated,
            },
        )
        .await?;
    }
    Ok(())
}

impl Store {
    async fn attach_subscriptions(
        &self,
        mut channels: Vec<ChannelRecord>,
    ) -> Result<Vec<ChannelRecord>, StoreError> {
        if channels.is_empty() {
            return Ok(channels);
        }
        let ids: Vec<i64> = channels.iter().map(|c| c.id).collect();
        let found = sqlx::query(
            "SELECT id, channel_id, check_id, group_id, activated FROM alert_subscriptions
              WHERE channel_id IN (SELECT value FROM json_each(?)) ORDER BY id",
        )
        .bind(rows::to_json(&ids, "alert_subscriptions")?)
        .fetch_all(&mut *self.read().await?)
        .await?;
        let mut by_channel: HashMap<i64, Vec<SubscriptionRecord>> = HashMap::new();
        for r in &found {
            let s = subscription_from_row(r)?;
            by_channel.entry(s.channel_id).or_default().push(s);
        }
        for c in &mut channels {
            c.subscriptions = by_channel.remove(&c.id).unwrap_or_default();
        }
        Ok(channels)
    }

    /// Stores a new channel (and its subscriptions).
    pub async fn create_channel(
        &self,
        account_id: Uuid,
        channel: &ChannelWrite,
        now: i64,
    ) -> Result<ChannelRecord, StoreError> {
        let mut conn = self.write().await?;
        let mut tx = conn.begin().await?;
        let id: i64 = sqlx::query_scalar(
            "INSERT INTO alert_channels (account_id, type, config, send_recovery, send_failure,
                 send_degraded, ssl_expiry, ssl_expiry_threshold, auto_subscribe, created_at,
                 updated_at)
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NULL) RETURNING id",
        )
        .bind(account_id.to_string())
        .bind(&channel.channel_type)
        .bind(rows::to_json(&channel.config, "alert_channels")?)
        .bind(channel.send_recovery)
        .bind(channel.send_failure)
        .bind(channel.send_degraded)
        .bind(channel.ssl_expiry)
        .bind(channel.ssl_expiry_threshold)
        .bind(channel.auto_subscribe)
        .bind(now)
        .fetch_one(&mut *tx)
        .await?;
        for s in channel.subscriptions.iter().flatten() {
            upsert_subscription_row(&mut tx, account_id, id, *s).await?;
        }
        tx.commit().await?;
        self.get_channel_on(account_id, id, &mut conn)
            .await?
            .ok_or(StoreError::NotFound("alert channel"))
    }

    /// Replaces a channel's fields (and its subscriptions when given). `None`: no such
    /// channel in the account.
    pub async fn update_channel(
        &self,
        account_id: Uuid,
        id: i64,
        channel: &ChannelWrite,
        now: i64,
    ) -> Result<Option<ChannelRecord>, StoreError> {
        let mut conn = self.write().await?;
        let mut tx = conn.begin().await?;
        let done = sqlx::query(
            "UPDATE alert_channels SET type = ?, config = ?, send_recovery = ?, send_failure = ?,
                    send_degraded = ?, ssl_expiry = ?, ssl_expiry_threshold = ?,
                    auto_subscribe = ?, updated_at = ?
              WHERE id = ? AND account_id = ?",
        )
        .bind(&channel.channel_type)
        .bind(rows::to_json(&channel.config, "alert_channels")?)
        .bind(channel.send_recovery)
        .bind(channel.send_failure)
        .bind(channel.send_degraded)
        .bind(channel.ssl_expiry)
        .bind(channel.ssl_expiry_threshold)
        .bind(channel.auto_subscribe)
        .bind(now)
        .bind(id)
        .bind(account_id.to_string())
        .execute(&mut *tx)
        .await?;
        if done.rows_affected() == 0 {
            return Ok(None);
        }
        if let Some(subs) = &channel.subscriptions {
            sqlx::query("DELETE FROM alert_subscriptions WHERE channel_id = ?")
                .bind(id)
                .execute(&mut *tx)
                .await?;
            for s in subs {
                upsert_subscription_row(&mut tx, account_id, id, *s).await?;
            }
        }
        tx.commit().await?;
        self.get_channel_on(account_id, id, &mut conn).await
    }

    async fn get_channel_on(
        &self,
        account_id: Uuid,
        id: i64,
        conn: &mut sqlx::SqliteConnection,
    ) -> Result<Option<ChannelRecord>, StoreError> {
        let row = sqlx::query(&format!(
            "SELECT {CHANNEL_COLUMNS} FROM alert_channels WHERE id = ? AND account_id = ?"
        ))
        .bind(id)
        .bind(account_id.to_string())
        .fetch_optional(&mut *conn)
        .await?;
        let Some(row) = row else {
            return Ok(None);
        };
        let mut channel = channel_from_row(&row)?;
        channel.subscriptions = sqlx::query(
            "SELECT id, channel_id, check_id, group_id, activated FROM alert_subscriptions
              WHERE channel_id = ? ORDER BY id",
        )
        .bind(id)
        .fetch_all(&mut *conn)
        .await?
        .iter()
        .map(subscription_from_row)
        .collect::<Result<_, _>>()?;
        Ok(Some(channel))
    }

    /// One channel of the account, with its subscriptions.
    pub async fn get_channel(
        &self,
        account_id: Uuid,
        id: i64,
    ) -> Result<Option<ChannelRecord>, StoreError> {
        self.get_channel_on(account_id, id, &mut *self.read().await?)
            .await
    }

    /// A page of the account's channels, oldest first, with their subscriptions.
    pub async fn list_channels(
        &self,
        account_id: Uuid,
        limit: i64,
        offset: i64,
    ) -> Result<Vec<ChannelRecord>, StoreError> {
        let found = sqlx::query(&format!(
            "SELECT {CHANNEL_COLUMNS} FROM alert_channels WHERE account_id = ?
              ORDER BY id LIMIT ? OFFSET ?"
        ))
        .bind(account_id.to_string())
        .bind(limit)
        .bind(offset)
        .fetch_all(&mut *self.read().await?)
        .await?;
        let channels = found
            .iter()
            .map(channel_from_row)
            .collect::<Result<Vec<_>, _>>()?;
        self.attach_subscriptions(channels).await
    }

    /// Deletes a channel and its subscriptions; false when the account has no such channel.
    pub async fn delete_channel(&self, account_id: Uuid, id: i64) -> Result<bool, StoreError> {
        let done = sqlx::query("DELETE FROM alert_channels WHERE id = ? AND account_id = ?")
            .bind(id)
            .bind(account_id.to_string())
            .execute(&mut *self.write().await?)
            .await?;
        Ok(done.rows_affected() > 0)
    }

    /// Subscribes a check (or a group) to a channel, or changes whether the subscription
    /// is activated. `None`: no such channel in the account.
    pub async fn upsert_subscription(
        &self,
        account_id: Uuid,
        channel_id: i64,
        subscription: SubscriptionWrite,
    ) -> Result<Option<SubscriptionRecord>, StoreError> {
        let mut conn = self.write().await?;
        let mut tx = conn.begin().await?;
        let found: Option<i64> =
            sqlx::query_scalar("SELECT id FROM alert_channels WHERE id = ? AND account_id = ?")
                .bind(channel_id)
                .bind(account_id.to_string())
                .fetch_optional(&mut *tx)
                .await?;
        if found.is_none() {
            return Ok(None);
        }
        let record = upsert_subscription_row(&mut tx, account_id, channel_id, subscription).await?;
        tx.commit().await?;
        Ok(Some(record))
    }

    /// The ids among `ids` of the account's channels.
    pub async fn existing_channel_ids(
        &self,
        account_id: Uuid,
        ids: &[i64],
    ) -> Result<HashSet<i64>, StoreError> {
        let found: Vec<i64> = sqlx::query_scalar(
            "SELECT id FROM alert_channels
              WHERE account_id = ? AND id IN (SELECT value FROM json_each(?))",
        )
        .bind(account_id.to_string())
        .bind(rows::to_json(&ids, "alert_channels")?)
        .fetch_all(&mut *self.read().await?)
        .await?;
        Ok(found.into_iter().collect())
    }

    /// The ids of the account's channels a new check is subscribed to: all of them
    /// (`all`), else those with `autoSubscribe`.
    pub async fn auto_subscribed_channels(
        &self,
        account_id: Uuid,
        all: bool,
    ) -> Result<Vec<i64>, StoreError> {
        Ok(sqlx::query_scalar(
            "SELECT id FROM alert_channels WHERE account_id = ? AND (? OR auto_subscribe)
              ORDER BY id",
        )
        .bind(account_id.to_string())
        .bind(all)
        .fetch_all(&mut *self.read().await?)
        .await?)
    }

    /// The ids among `ids` of the account's checks.
    pub async fn existing_check_ids(
        &self,
        account_id: Uuid,
        ids: &[Uuid],
    ) -> Result<HashSet<Uuid>, StoreError> {
        let ids: Vec<String> = ids.iter().map(Uuid::to_string).collect();
        let found: Vec<String> = sqlx::query_scalar(
            "SELECT id FROM checks WHERE account_id = ? AND id IN (SELECT value FROM json_each(?))",
        )
        .bind(account_id.to_string())
        .bind(rows::to_json(&ids, "checks")?)
        .fetch_all(&mut *self.read().await?)
        .await?;
        found
            .iter()
            .map(|s| rows::parse_uuid(s, "checks"))
            .collect()
    }

    /// The subscriptions of each of these checks, by check.
    pub async fn check_subscriptions(
        &self,
        account_id: Uuid,
        check_ids: &[Uuid],
    ) -> Result<HashMap<Uuid, Vec<CheckSubscription>>, StoreError> {
        let ids: Vec<String> = check_ids.iter().map(Uuid::to_string).collect();
        let found = sqlx::query(
            "SELECT channel_id, check_id, activated FROM alert_subscriptions
              WHERE account_id = ? AND check_id IN (SELECT value FROM json_each(?))
              ORDER BY channel_id",
        )
        .bind(account_id.to_string())
        .bind(rows::to_json(&ids, "alert_subscriptions")?)
        .fetch_all(&mut *self.read().await?)
        .await?;
        let mut out: HashMap<Uuid, Vec<CheckSubscription>> = HashMap::new();
        for r in &found {
            let check_id = rows::uuid(r, "check_id", "alert_subscriptions")?;
            out.entry(check_id).or_default().push(CheckSubscription {
                channel_id: r.try_get("channel_id")?,
                activated: r.try_get("activated")?,
            });
        }
        Ok(out)
    }

    /// The channels that alert for a check: those with an activated subscription to it.
    /// (Subscriptions are loaded empty.)
    pub async fn alert_targets(
        &self,
        account_id: Uuid,
        check_id: Uuid,
    ) -> Result<Vec<ChannelRecord>, StoreError> {
        let found = sqlx::query(&format!(
            "SELECT {CHANNEL_COLUMNS} FROM alert_channels
              WHERE account_id = ?1 AND id IN (SELECT channel_id FROM alert_subscriptions
                                                WHERE check_id = ?2 AND activated)
              ORDER BY id"
        ))
        .bind(account_id.to_string())
        .bind(check_id.to_string())
        .fetch_all(&mut *self.read().await?)
        .await?;
        found.iter().map(channel_from_row).collect()
    }

    /// Notices still in the outbox, oldest first.
    pub async fn pending_notices(&self, limit: i64) -> Result<Vec<OutboxRecord>, StoreError> {
        let found = sqlx::query("SELECT id, notice FROM alert_outbox ORDER BY id LIMIT ?")
            .bind(limit)
            .fetch_all(&mut *self.read().await?)
            .await?;
        found
            .iter()
            .map(|r| {
                Ok(OutboxRecord {
                    id: r.try_get("id")?,
                    notice: rows::json(r, "notice", "alert_outbox")?,
                })
            })
            .collect()
    }

    /// Removes a delivered (or given up) notice from the outbox.
    pub async fn remove_notice(&self, id: i64) -> Result<(), StoreError> {
        sqlx::query("DELETE FROM alert_outbox WHERE id = ?")
            .bind(id)
            .execute(&mut *self.write().await?)
            .await?;
        Ok(())
    }
}
