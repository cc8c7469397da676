//! Heartbeat monitors: their configuration and timer rows, their events, the counts
//! behind the success ratios, and the batch commit of the heartbeat engine (events,
//! timers and alert notices of many pings in one transaction).

use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::Row;
use sqlx::sqlite::SqliteRow;
use uuid::Uuid;

use super::alerts::{CheckSubscription, replace_check_subscriptions};
use super::checks::{CheckRecord, CheckWrite, insert_check_row, record, update_check_row};
use super::rows;
use super::{Store, StoreError};
use crate::model::HeartbeatState;

/// A heartbeat monitor as the engine loads it: the check's fields it needs, the
/// configuration and the timer.
#[derive(Debug, Clone, PartialEq)]
pub struct HeartbeatRow {
    pub check_id: Uuid,
    pub account_id: Uuid,
    pub name: String,
    pub activated: bool,
    pub muted: bool,
    pub tags: Vec<String>,
    pub token: String,
    pub period_ms: i64,
    pub grace_ms: i64,
    pub timer_started_at: Option<i64>,
    pub timer_period_ms: Option<i64>,
    pub failing: bool,
    pub last_ping_at: Option<i64>,
}

/// Period and grace of a monitor, in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeartbeatPeriods {
    pub period_ms: i64,
    pub grace_ms: i64,
}

/// The configuration a create writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeartbeatWrite {
    /// The secret of the ping address.
    pub token: String,
    pub periods: HeartbeatPeriods,
}

/// An event to store.
#[derive(Debug, Clone, PartialEq)]
pub struct NewEvent {
    pub id: Uuid,
    pub check_id: Uuid,
    pub state: HeartbeatState,
    pub ts: i64,
    pub method: Option<String>,
    pub source: Option<String>,
    pub user_agent: Option<String>,
    pub body: Option<String>,
}

/// The timer columns of a monitor after a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TimerWrite {
    pub check_id: Uuid,
    pub timer_started_at: Option<i64>,
    pub timer_period_ms: Option<i64>,
    pub failing: bool,
    pub last_ping_at: Option<i64>,
}

/// An alert notice to put in the outbox.
#[derive(Debug, Clone, PartialEq)]
pub struct NoticeWrite {
    pub account_id: Uuid,
    pub check_id: Uuid,
    pub notice: serde_json::Value,
}

/// A stored event.
#[derive(Debug, Clone, PartialEq)]
pub struct EventRecord {
    pub id: Uuid,
    pub check_id: Uuid,
    pub state: HeartbeatState,
    pub timestamp: DateTime<Utc>,
    pub source: Option<String>,
    pub user_agent: Option<String>,
}

/// Events of a window: all of them, and those that are pings in time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct EventCounts {
    pub total: i64,
    pub successes: i64,
}

const ROW_QUERY: &str = "SELECT h.check_id, h.account_id, c.name, c.activated,
        json_extract(c.document, '$.muted') AS muted, c.tags, h.token, h.period_ms,
        h.grace_ms, h.timer_started_at, h.timer_period_ms, h.failing, h.last_ping_at,
        (SELECT max(e.ts) FROM heartbeat_events e
          WHERE e.check_id = h.check_id AND e.state <> 'FAILING') AS last_event_ping
   FROM heartbeats h JOIN checks c ON c.id = h.check_id";

/// A heartbeat row as the engine left it. The engine does not write the timer columns
/// for a ping that only moves the timer to that ping (see `Engine::flush`), so the
/// newest ping event completes them: the last ping is the newer of the column and the
/// event, and a running timer started no earlier than that ping.
fn heartbeat_from_row(r: &SqliteRow) -> Result<HeartbeatRow, StoreError> {
    let muted: Option<i64> = r.try_get("muted")?;
    let last_event_ping: Option<i64> = r.try_get("last_event_ping")?;
    let last_ping_at: Option<i64> = r.try_get("last_ping_at")?;
    let timer_started_at: Option<i64> = r.try_get("timer_started_at")?;
    let newer = |stored: Option<i64>| match (stored, last_event_ping) {
        (Some(s), Some(e)) => Some(s.max(e)),
        (s, e) => s.or(e),
    };
    Ok(HeartbeatRow {
        check_id: rows::uuid(r, "check_id", "heartbeats")?,
        account_id: rows::uuid(r, "account_id", "heartbeats")?,
        name: r.try_get("name")?,
        activated: r.try_get("activated")?,
        muted: muted.unwrap_or(0) != 0,
        tags: rows::json(r, "tags", "checks")?,
        token: r.try_get("token")?,
        period_ms: r.try_get("period_ms")?,
        grace_ms: r.try_get("grace_ms")?,
        timer_started_at: timer_started_at.map(|s| last_event_ping.map_or(s, |e| s.max(e))),
        timer_period_ms: r.try_get("timer_period_ms")?,
        failing: r.try_get("failing")?,
        last_ping_at: newer(last_ping_at),
    })
}

/// Rows of the largest events INSERT; a batch with more goes in several statements.
const MAX_EVENT_ROWS: usize = 1024;

/// `INSERT ... SELECT ... FROM (VALUES (?, ...), ...)` of `rows` rows of bound
/// parameters, for `rows` a power of two: a handful of distinct statements, each
/// prepared once and kept in the connection's statement cache. Padding rows are all
/// NULL and fall out with the events of checks deleted while their pings were in
/// flight (no such check).
fn insert_events_sql(rows: usize) -> &'static str {
    static STATEMENTS: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    let statements = STATEMENTS.get_or_init(|| {
        (0..=MAX_EVENT_ROWS.trailing_zeros())
            .map(|shift| {
                let values = vec!["(?, ?, ?, ?, ?, ?, ?, ?)"; 1 << shift].join(", ");
                format!(
                    "INSERT INTO heartbeat_events (id, check_id, state, ts, method, source,
                                                   user_agent, body)
                     SELECT v.column1, v.column2, v.column3, v.column4, v.column5,
                            v.column6, v.column7, v.column8
                       FROM (VALUES {values}) v
                      WHERE EXISTS (SELECT 1 FROM checks c WHERE c.id = v.column2)"
                )
            })
            .collect()
    });
    let shift = rows.next_power_of_two().trailing_zeros() as usize;
    statements.get(shift).map_or("", String::as_str)
}

/// Inserts heartbeat events, [`MAX_EVENT_ROWS`] per statement, with bound parameters
/// (no JSON to write and parse). Events of checks deleted while their pings were in
/// flight are dropped. More than one statement only inside a transaction.
async fn insert_events(
    events: &[NewEvent],
    conn: &mut sqlx::SqliteConnection,
) -> Result<(), StoreError> {
    for chunk in events.chunks(MAX_EVENT_ROWS) {
        let mut query = sqlx::query(insert_events_sql(chunk.len()));
        for e in chunk {
            query = query
                .bind(e.id.to_string())
                .bind(e.check_id.to_string())
                .bind(e.state.as_str())
                .bind(e.ts)
                .bind(e.method.as_deref())
                .bind(e.source.as_deref())
                .bind(e.user_agent.as_deref())
                .bind(e.body.as_deref());
        }
        for _ in chunk.len()..chunk.len().next_power_of_two() {
            query = query
                .bind(None::<&str>)
                .bind(None::<&str>)
                .bind(None::<&str>)
                .bind(None::<i64>)
                .bind(None::<&str>)
                .bind(None::<&str>)
                .bind(None::<&str>)
                .bind(None::<&str>);
        }
        query.execute(&mut *conn).await?;
    }
    Ok(())
}

fn event_from_row(r: &SqliteRow) -> Result<EventRecord, StoreError> {
    let state: String = r.try_get("state")?;
    Ok(EventRecord {
        id: rows::uuid(r, "id", "heartbeat_events")?,
        check_id: rows::uuid(r, "check_id", "heartbeat_events")?,
        state: HeartbeatState::parse(&state).ok_or_else(|| StoreError::Corrupt {
            table: "heartbeat_events",
            message: format!("unknown state {state:?}"),
        })?,
        timestamp: rows::ts(r, "ts")?,
        source: r.try_get("source")?,
        user_agent: r.try_get("user_agent")?,
    })
}

/// `('EARLY','RECEIVED','GRACE')`: the states counted as successes.
fn success_states() -> String {
    let names: Vec<String> = HeartbeatState::ALL
        .into_iter()
        .filter(|s| s.is_success())
        .map(|s| format!("'{}'", s.as_str()))
        .collect();
    format!("({})", names.join(","))
}

impl Store {
    /// Stores a new heartbeat check: the check row (never scheduled), its heartbeat row
    /// and its alert subscriptions.
    pub async fn insert_heartbeat_check(
        &self,
        account_id: Uuid,
        id: Uuid,
        check: &CheckWrite,
        heartbeat: &HeartbeatWrite,
        subscriptions: &[CheckSubscription],
        now: i64,
    ) -> Result<CheckRecord, StoreError> {
        let mut conn = self.write().await?;
        let mut tx = conn.begin().await?;
        insert_check_row(&mut tx, account_id, id, check, now).await?;
        sqlx::query(
            "INSERT INTO heartbeats (check_id, account_id, token, period_ms, grace_ms)
             VALUES (?, ?, ?, ?, ?)",
        )
        .bind(id.to_string())
        .bind(account_id.to_string())
        .bind(&heartbeat.token)
        .bind(heartbeat.periods.period_ms)
        .bind(heartbeat.periods.grace_ms)
        .execute(&mut *tx)
        .await?;
        replace_check_subscriptions(&mut tx, account_id, id, subscriptions).await?;
        tx.commit().await?;
        Ok(record(id, account_id, check, now, now))
    }

    /// Replaces a heartbeat check's fields, its period and grace, and its subscriptions
    /// when given. The token and the timer are kept (the engine restarts the timer when
    /// it sees the change). `None`: no such heartbeat check in the account.
    pub async fn update_heartbeat_check(
        &self,
        account_id: Uuid,
        id: Uuid,
        check: &CheckWrite,
        periods: HeartbeatPeriods,
        subscriptions: Option<&[CheckSubscription]>,
        now: i64,
    ) -> Result<Option<CheckRecord>, StoreError> {
        let mut conn = self.write().await?;
        let mut tx = conn.begin().await?;
        let Some(created_at) = update_check_row(&mut tx, account_id, id, check, now).await? else {
            return Ok(None);
        };
        let done =
            sqlx::query("UPDATE heartbeats SET period_ms = ?, grace_ms = ? WHERE check_id = ?")
                .bind(periods.period_ms)
                .bind(periods.grace_ms)
                .bind(id.to_string())
                .execute(&mut *tx)
                .await?;
        if done.rows_affected() == 0 {
            return Err(StoreError::Corrupt {
                table: "heartbeats",
                message: format!("heartbeat check {id} has no heartbeat row"),
            });
        }
        if let Some(subs) = subscriptions {
            replace_check_subscriptions(&mut tx, account_id, id, subs).await?;
        }
        tx.commit().await?;
        Ok(Some(record(id, account_id, check, created_at, now)))
    }

    /// Every heartbeat monitor (at start).
    pub async fn heartbeat_rows(&self) -> Result<Vec<HeartbeatRow>, StoreError> {
        let found = sqlx::query(ROW_QUERY)
            .fetch_all(&mut *self.read().await?)
            .await?;
        found.iter().map(heartbeat_from_row).collect()
    }

    /// One heartbeat monitor.
    pub async fn heartbeat_row(&self, check_id: Uuid) -> Result<Option<HeartbeatRow>, StoreError> {
        // Read through the writer: the caller has just committed a change to it.
        let row = sqlx::query(&format!("{ROW_QUERY} WHERE h.check_id = ?"))
            .bind(check_id.to_string())
            .fetch_optional(&mut *self.write().await?)
            .await?;
        row.as_ref().map(heartbeat_from_row).transpose()
    }

    /// Commits the work of one engine batch in one transaction: new events, timer
    /// columns, and alert notices (returns the outbox ids of the notices, in order).
    /// Events and timers of checks deleted meanwhile are skipped.
    pub async fn commit_heartbeats(
        &self,
        events: &[NewEvent],
        timers: &[TimerWrite],
        notices: &[NoticeWrite],
    ) -> Result<Vec<i64>, StoreError> {
        if timers.is_empty() && notices.is_empty() && events.len() <= MAX_EVENT_ROWS {
            // The common batch, pings only: one statement is atomic on its own, so it
            // goes in one round trip to the writer, without BEGIN and COMMIT. It writes
            // only `heartbeat_events`, which no cached view reads (status pages read
            // the `failing` column): a quiet write, the write generation stays.
            if !events.is_empty() {
                let mut conn = self.write().await?;
                conn.quiet();
                insert_events(events, &mut conn).await?;
            }
            return Ok(Vec::new());
        }
        let mut conn = self.write().await?;
        let mut tx = conn.begin().await?;
        if !events.is_empty() {
            insert_events(events, &mut tx).await?;
        }
        if !timers.is_empty() {
            sqlx::query(
                "UPDATE heartbeats
                    SET timer_started_at = t.value ->> 'timerStartedAt',
                        timer_period_ms = t.value ->> 'timerPeriodMs',
                        failing = t.value ->> 'failing',
                        last_ping_at = t.value ->> 'lastPingAt'
                   FROM json_each(?) t
                  WHERE heartbeats.check_id = t.value ->> 'checkId'",
            )
            .bind(rows::to_json(&timers, "heartbeats")?)
            .execute(&mut *tx)
            .await?;
        }
        let mut ids = Vec::with_capacity(notices.len());
        for n in notices {
            let id: i64 = sqlx::query_scalar(
                "INSERT INTO alert_outbox (account_id, check_id, notice, created_at)
                 VALUES (?, ?, ?, ?) RETURNING id",
            )
            .bind(n.account_id.to_string())
            .bind(n.check_id.to_string())
            .bind(rows::to_json(&n.notice, "alert_outbox")?)
            .bind(super::now_ms())
            .fetch_one(&mut *tx)
            .await?;
            ids.push(id);
        }
        tx.commit().await?;
        Ok(ids)
    }

    /// Events of a check with `after < ts <= until`, newest first.
    pub async fn heartbeat_events(
        &self,
        check_id: Uuid,
        after: i64,
        until: i64,
        limit: i64,
    ) -> Result<Vec<EventRecord>, StoreError> {
        let found = sqlx::query(
            "SELECT id, check_id, state, ts, source, user_agent FROM heartbeat_events
              WHERE check_id = ? AND ts > ? AND ts <= ?
              ORDER BY ts DESC, id DESC LIMIT ?",
        )
        .bind(check_id.to_string())
        .bind(after)
        .bind(until)
        .bind(limit)
        .fetch_all(&mut *self.read().await?)
        .await?;
        found.iter().map(event_from_row).collect()
    }

    /// One event of a check.
    pub async fn heartbeat_event(
        &self,
        check_id: Uuid,
        id: Uuid,
    ) -> Result<Option<EventRecord>, StoreError> {
        let row = sqlx::query(
            "SELECT id, check_id, state, ts, source, user_agent FROM heartbeat_events
              WHERE check_id = ? AND id = ?",
        )
        .bind(check_id.to_string())
        .bind(id.to_string())
        .fetch_optional(&mut *self.read().await?)
        .await?;
        row.as_ref().map(event_from_row).transpose()
    }

    /// Counts the events of a check with `after < ts <= until`.
    pub async fn heartbeat_event_counts(
        &self,
        check_id: Uuid,
        after: i64,
        until: i64,
    ) -> Result<EventCounts, StoreError> {
        let row = sqlx::query(&format!(
            "SELECT count(*) AS total, coalesce(sum(state IN {}), 0) AS successes
               FROM heartbeat_events WHERE check_id = ? AND ts > ? AND ts <= ?",
            success_states()
        ))
        .bind(check_id.to_string())
        .bind(after)
        .bind(until)
        .fetch_one(&mut *self.read().await?)
        .await?;
        Ok(EventCounts {
            total: row.try_get("total")?,
            successes: row.try_get("successes")?,
        })
    }

    /// Stores events as they are, outside the engine (tests and imports build histories
    /// with it). The monitors' timers are not touched.
    pub async fn insert_heartbeat_events(&self, events: &[NewEvent]) -> Result<(), StoreError> {
        self.commit_heartbeats(events, &[], &[]).await.map(|_| ())
    }
}
