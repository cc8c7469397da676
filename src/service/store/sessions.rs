//! Check sessions: creating them with their jobs (trigger and scheduler), reading them,
//! cancelling them, and folding FINAL results into their status.

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Utc};
use serde_json::json;
use sqlx::sqlite::SqliteRow;
use sqlx::{Row, SqliteConnection};
use uuid::Uuid;

use super::rows::{self, time};
use super::{ResultRecord, Store, StoreError};
use crate::model::{CheckType, RunSource, RunStatus, SessionStatus};
use crate::service::check_kinds::agents_run;
use crate::service::scheduler::next_slot;

/// A session to create, with one job per run location.
#[derive(Debug, Clone)]
pub struct NewSession {
    pub id: Uuid,
    pub account_id: Uuid,
    pub check_id: Uuid,
    pub check_type: CheckType,
    pub name: String,
    pub run_source: RunSource,
    pub started_at: i64,
    /// (location id, slug name) of every run location.
    pub locations: Vec<(Uuid, String)>,
}

/// A stored session.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionRecord {
    pub id: Uuid,
    pub account_id: Uuid,
    pub check_id: Uuid,
    pub check_type: CheckType,
    pub name: String,
    pub status: SessionStatus,
    pub run_source: RunSource,
    pub run_locations: Vec<String>,
    pub started_at: DateTime<Utc>,
    pub stopped_at: Option<DateTime<Utc>>,
}

/// What the trigger filter sees of a check.
#[derive(Debug, Clone)]
pub struct TriggerCandidate {
    pub id: Uuid,
    pub name: String,
    pub check_type: CheckType,
    pub activated: bool,
    pub tags: Vec<String>,
    pub private_locations: Vec<String>,
}

/// Sessions just created and the locations that got jobs (to wake their agents).
#[derive(Debug, Default)]
pub struct CreatedSessions {
    pub sessions: Vec<SessionRecord>,
    pub locations: Vec<Uuid>,
    /// Selected checks of a type agents cannot run yet (see
    /// `check_kinds::agents_run`): no session was created for them.
    pub not_runnable: Vec<(Uuid, CheckType)>,
}

/// Wire names of enums that serde knows (RunSource has no `as_str`).
pub(super) fn enum_name<T: serde::Serialize>(value: &T) -> String {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::String(s)) => s,
        _ => String::new(),
    }
}

fn parse_enum<T: serde::de::DeserializeOwned>(
    s: &str,
    table: &'static str,
) -> Result<T, StoreError> {
    serde_json::from_value(serde_json::Value::String(s.to_owned())).map_err(|_| {
        StoreError::Corrupt {
            table,
            message: format!("unknown enum value {s:?}"),
        }
    })
}

pub(super) fn parse_check_type(s: &str, table: &'static str) -> Result<CheckType, StoreError> {
    CheckType::parse(s).ok_or_else(|| StoreError::Corrupt {
        table,
        message: format!("unknown check type {s:?}"),
    })
}

const SESSION_COLUMNS: &str = "id, account_id, check_id, check_type, name, status, run_source,
                               run_locations, started_at, stopped_at";

/// The names a query gives the session columns.
struct SessionCols {
    id: &'static str,
    account_id: &'static str,
    check_id: &'static str,
    check_type: &'static str,
    name: &'static str,
    status: &'static str,
    run_source: &'static str,
    run_locations: &'static str,
    started_at: &'static str,
    stopped_at: &'static str,
}

/// As `SESSION_COLUMNS` names them.
const PLAIN: SessionCols = SessionCols {
    id: "id",
    account_id: "account_id",
    check_id: "check_id",
    check_type: "check_type",
    name: "name",
    status: "status",
    run_source: "run_source",
    run_locations: "run_locations",
    started_at: "started_at",
    stopped_at: "stopped_at",
};

/// As the session-with-results query names them (its result columns keep theirs).
const JOINED: SessionCols = SessionCols {
    id: "s_id",
    account_id: "s_account_id",
    check_id: "s_check_id",
    check_type: "s_check_type",
    name: "s_name",
    status: "s_status",
    run_source: "s_run_source",
    run_locations: "s_run_locations",
    started_at: "s_started_at",
    stopped_at: "s_stopped_at",
};

fn session_from_row(r: &SqliteRow) -> Result<SessionRecord, StoreError> {
    session_from_cols(r, &PLAIN)
}

fn session_from_cols(r: &SqliteRow, c: &SessionCols) -> Result<SessionRecord, StoreError> {
    let check_type: String = r.try_get(c.check_type)?;
    let status: String = r.try_get(c.status)?;
    let run_source: String = r.try_get(c.run_source)?;
    Ok(SessionRecord {
        id: rows::uuid(r, c.id, "check_sessions")?,
        account_id: rows::uuid(r, c.account_id, "check_sessions")?,
        check_id: rows::uuid(r, c.check_id, "check_sessions")?,
        check_type: parse_check_type(&check_type, "check_sessions")?,
        name: r.try_get(c.name)?,
        status: SessionStatus::parse(&status).ok_or_else(|| StoreError::Corrupt {
            table: "check_sessions",
            message: format!("unknown status {status:?}"),
        })?,
        run_source: parse_enum(&run_source, "check_sessions")?,
        run_locations: rows::json(r, c.run_locations, "check_sessions")?,
        started_at: rows::ts(r, c.started_at)?,
        stopped_at: rows::opt_ts(r, c.stopped_at)?,
    })
}

fn candidate_from_row(r: &SqliteRow) -> Result<TriggerCandidate, StoreError> {
    let check_type: String = r.try_get("check_type")?;
    Ok(TriggerCandidate {
        id: rows::uuid(r, "id", "checks")?,
        name: r.try_get("name")?,
        check_type: parse_check_type(&check_type, "checks")?,
        activated: r.try_get("activated")?,
        tags: rows::json(r, "tags", "checks")?,
        private_locations: rows::json(r, "private_locations", "checks")?,
    })
}

/// Inserts sessions and their jobs (payload = the check's stored document) with two
/// statements. Returns the distinct locations that got jobs.
pub(super) async fn insert_sessions(
    conn: &mut SqliteConnection,
    sessions: &[NewSession],
    now: i64,
) -> Result<Vec<Uuid>, StoreError> {
    if sessions.is_empty() {
        return Ok(Vec::new());
    }
    let mut session_rows = Vec::with_capacity(sessions.len());
    let mut job_rows = Vec::new();
    let mut locations = HashSet::new();
    for s in sessions {
        let slugs: Vec<&str> = s.locations.iter().map(|(_, slug)| slug.as_str()).collect();
        session_rows.push(json!({
            "id": s.id.to_string(),
            "accountId": s.account_id.to_string(),
            "checkId": s.check_id.to_string(),
            "checkType": s.check_type.as_str(),
            "name": s.name,
            "runSource": enum_name(&s.run_source),
            "runLocations": slugs,
            "total": s.locations.len(),
            "startedAt": s.started_at,
        }));
        for (location_id, slug) in &s.locations {
            locations.insert(*location_id);
            job_rows.push(json!({
                "id": Uuid::new_v4().to_string(),
                "sessionId": s.id.to_string(),
                "checkId": s.check_id.to_string(),
                "accountId": s.account_id.to_string(),
                "locationId": location_id.to_string(),
                "runLocation": slug,
                "pool": s.check_type.pool().as_str(),
            }));
        }
    }
    sqlx::query(
        "INSERT INTO check_sessions (id, account_id, check_id, check_type, name, status,
                                     run_source, run_locations, locations_total, started_at)
         SELECT value->>'id', value->>'accountId', value->>'checkId', value->>'checkType',
                value->>'name', 'STARTED', value->>'runSource', value->'runLocations',
                value->>'total', value->>'startedAt'
           FROM json_each(?)",
    )
    .bind(rows::to_json(&session_rows, "check_sessions")?)
    .execute(&mut *conn)
    .await?;
    sqlx::query(
        "INSERT INTO jobs (id, session_id, check_id, account_id, location_id, run_location,
                           pool, state, available_at, created_at, payload)
         SELECT x.value->>'id', x.value->>'sessionId', x.value->>'checkId',
                x.value->>'accountId', x.value->>'locationId', x.value->>'runLocation',
                x.value->>'pool', 0, ?2, ?2, c.document
           FROM json_each(?1) x JOIN checks c ON c.id = x.value->>'checkId'",
    )
    .bind(rows::to_json(&job_rows, "jobs")?)
    .bind(now)
    .execute(&mut *conn)
    .await?;
    Ok(locations.into_iter().collect())
}

/// Resolves slug names to the account's locations, keeping the check's order and
/// dropping names that no longer exist.
fn resolve_locations(slugs: &[String], by_slug: &HashMap<String, Uuid>) -> Vec<(Uuid, String)> {
    let mut seen = HashSet::new();
    slugs
        .iter()
        .filter_map(|s| by_slug.get(s).map(|id| (*id, s.clone())))
        .filter(|(id, _)| seen.insert(*id))
        .collect()
}

fn record_of(s: &NewSession) -> SessionRecord {
    SessionRecord {
        id: s.id,
        account_id: s.account_id,
        check_id: s.check_id,
        check_type: s.check_type,
        name: s.name.clone(),
        status: SessionStatus::Started,
        run_source: s.run_source,
        run_locations: s.locations.iter().map(|(_, slug)| slug.clone()).collect(),
        started_at: time(s.started_at),
        stopped_at: None,
    }
}

/// A session's tallies, as `apply_finals` reads and writes them.
struct Tally {
    status: SessionStatus,
    total: i64,
    passed: i64,
    failed: i64,
    degraded: i64,
    timed_out: i64,
    stopped_at: Option<i64>,
}

/// One FINAL outcome to fold into its session: `None` = the run timed out (no verdict).
pub(super) type FinalOutcome = (Uuid, Option<RunStatus>);

/// Adds FINAL outcomes to their sessions' counters and recomputes each status with
/// [`SessionStatus::aggregate`]; a session already final (e.g. CANCELLED) keeps its
/// status. Returns the sessions that became final now.
pub(super) async fn apply_finals(
    conn: &mut SqliteConnection,
    outcomes: &[FinalOutcome],
    now: i64,
) -> Result<Vec<Uuid>, StoreError> {
    if outcomes.is_empty() {
        return Ok(Vec::new());
    }
    let ids: Vec<String> = outcomes
        .iter()
        .map(|(id, _)| id.to_string())
        .collect::<HashSet<_>>()
        .into_iter()
        .collect();
    let found = sqlx::query(
        "SELECT id, status, locations_total, n_passed, n_failed, n_degraded, n_timed_out,
                stopped_at
           FROM check_sessions WHERE id IN (SELECT value FROM json_each(?))",
    )
    .bind(rows::to_json(&ids, "check_sessions")?)
    .fetch_all(&mut *conn)
    .await?;
    let mut tallies = HashMap::with_capacity(found.len());
    for r in &found {
        let status: String = r.try_get("status")?;
        tallies.insert(
            rows::uuid(r, "id", "check_sessions")?,
            Tally {
                status: SessionStatus::parse(&status).ok_or_else(|| StoreError::Corrupt {
                    table: "check_sessions",
                    message: format!("unknown status {status:?}"),
                })?,
                total: r.try_get("locations_total")?,
                passed: r.try_get("n_passed")?,
                failed: r.try_get("n_failed")?,
                degraded: r.try_get("n_degraded")?,
                timed_out: r.try_get("n_timed_out")?,
                stopped_at: r.try_get("stopped_at")?,
            },
        );
    }
    for (id, outcome) in outcomes {
        if let Some(t) = tallies.get_mut(id) {
            match outcome {
                Some(RunStatus::Passed) => t.passed += 1,
                Some(RunStatus::Failed) => t.failed += 1,
                Some(RunStatus::Degraded) => t.degraded += 1,
                None => t.timed_out += 1,
            }
        }
    }
    let mut finished = Vec::new();
    let mut updates = Vec::with_capacity(tallies.len());
    for (id, t) in &mut tallies {
        if !t.status.is_final() {
            let finals = finals_of(t);
            let total = usize::try_from(t.total).unwrap_or(0);
            t.status = SessionStatus::aggregate(total, &finals);
            if t.status.is_final() {
                t.stopped_at = Some(now);
                finished.push(*id);
            }
        }
        updates.push(json!({
            "id": id.to_string(),
            "status": t.status.as_str(),
            "p": t.passed, "f": t.failed, "d": t.degraded, "t": t.timed_out,
            "stoppedAt": t.stopped_at,
        }));
    }
    sqlx::query(
        "UPDATE check_sessions
            SET status = x.value->>'status', n_passed = x.value->>'p',
                n_failed = x.value->>'f', n_degraded = x.value->>'d',
                n_timed_out = x.value->>'t', stopped_at = x.value->>'stoppedAt'
           FROM json_each(?) x
          WHERE check_sessions.id = x.value->>'id'",
    )
    .bind(rows::to_json(&updates, "check_sessions")?)
    .execute(&mut *conn)
    .await?;
    Ok(finished)
}

/// The FINAL verdicts a tally stands for, in the shape `SessionStatus::aggregate` takes.
fn finals_of(t: &Tally) -> Vec<Option<RunStatus>> {
    let n = |v: i64| usize::try_from(v).unwrap_or(0);
    let mut finals = Vec::with_capacity(n(t.passed + t.failed + t.degraded + t.timed_out));
    finals.extend(std::iter::repeat_n(Some(RunStatus::Passed), n(t.passed)));
    finals.extend(std::iter::repeat_n(Some(RunStatus::Failed), n(t.failed)));
    finals.extend(std::iter::repeat_n(
        Some(RunStatus::Degraded),
        n(t.degraded),
    ));
    finals.extend(std::iter::repeat_n(None, n(t.timed_out)));
    finals
}

/// What one scheduler pass did.
#[derive(Debug, Default)]
pub struct ScheduledRuns {
    pub sessions: usize,
    pub locations: Vec<Uuid>,
}

impl Store {
    /// In one transaction: reads the account's checks (only `only_ids` if given),
    /// keeps those `select` accepts and that have at least one existing run location,
    /// and creates a session with its jobs for each.
    pub async fn trigger(
        &self,
        account_id: Uuid,
        only_ids: Option<&[Uuid]>,
        select: impl Fn(&TriggerCandidate) -> bool,
        run_source: RunSource,
        now: i64,
    ) -> Result<CreatedSessions, StoreError> {
        let mut conn = self.write().await?;
        let mut tx = conn.begin().await?;
        let found =
            match only_ids {
                Some(ids) => {
                    let ids: Vec<String> = ids.iter().map(Uuid::to_string).collect();
                    sqlx::query(
                    "SELECT id, name, check_type, activated, tags, private_locations FROM checks
                      WHERE +account_id = ? AND id IN (SELECT value FROM json_each(?))
                      ORDER BY created_at, id",
                )
                .bind(account_id.to_string())
                .bind(rows::to_json(&ids, "checks")?)
                .fetch_all(&mut *tx)
                .await?
                }
                None => sqlx::query(
                    "SELECT id, name, check_type, activated, tags, private_locations FROM checks
                      WHERE account_id = ? ORDER BY created_at, id",
                )
                .bind(account_id.to_string())
                .fetch_all(&mut *tx)
                .await?,
            };
        let by_slug: HashMap<String, Uuid> =
            sqlx::query("SELECT id, slug_name FROM private_locations WHERE account_id = ?")
                .bind(account_id.to_string())
                .fetch_all(&mut *tx)
                .await?
                .iter()
                .map(|r| {
                    Ok((
                        r.try_get::<String, _>("slug_name")?,
                        rows::uuid(r, "id", "private_locations")?,
                    ))
                })
                .collect::<Result<_, StoreError>>()?;
        let mut sessions = Vec::new();
        let mut not_runnable = Vec::new();
        for r in &found {
            let c = candidate_from_row(r)?;
            // Heartbeat monitors are passive: nothing runs them.
            if c.check_type == CheckType::Heartbeat || !select(&c) {
                continue;
            }
            // Stored-only types (browser, multistep): no agent can run them yet.
            if !agents_run(c.check_type) {
                not_runnable.push((c.id, c.check_type));
                continue;
            }
            let locations = resolve_locations(&c.private_locations, &by_slug);
            if locations.is_empty() {
                continue;
            }
            sessions.push(NewSession {
                id: Uuid::new_v4(),
                account_id,
                check_id: c.id,
                check_type: c.check_type,
                name: c.name,
                run_source,
                started_at: now,
                locations,
            });
        }
        let locations = insert_sessions(&mut tx, &sessions, now).await?;
        tx.commit().await?;
        Ok(CreatedSessions {
            sessions: sessions.iter().map(record_of).collect(),
            locations,
            not_runnable,
        })
    }

    /// One scheduler pass: every scheduled check whose `next_run_at <= now` (at most
    /// `limit` of them) gets a SCHEDULER session and its next run time (the next slot
    /// after `now`: runs missed while the service was down are skipped, not caught up).
    pub async fn run_due_schedules(
        &self,
        now: i64,
        limit: i64,
    ) -> Result<ScheduledRuns, StoreError> {
        let mut conn = self.write().await?;
        let mut tx = conn.begin().await?;
        let due = sqlx::query(
            "SELECT s.check_id, s.interval_ms, c.account_id, c.name, c.check_type,
                    c.private_locations
               FROM check_schedules s JOIN checks c ON c.id = s.check_id
              WHERE s.next_run_at <= ? ORDER BY s.next_run_at LIMIT ?",
        )
        .bind(now)
        .bind(limit)
        .fetch_all(&mut *tx)
        .await?;
        if due.is_empty() {
            return Ok(ScheduledRuns::default());
        }
        let accounts: Vec<String> = due
            .iter()
            .map(|r| r.try_get::<String, _>("account_id"))
            .collect::<Result<HashSet<_>, _>>()?
            .into_iter()
            .collect();
        let mut by_account: HashMap<Uuid, HashMap<String, Uuid>> = HashMap::new();
        for r in sqlx::query(
            "SELECT id, account_id, slug_name FROM private_locations
              WHERE account_id IN (SELECT value FROM json_each(?))",
        )
        .bind(rows::to_json(&accounts, "private_locations")?)
        .fetch_all(&mut *tx)
        .await?
        {
            by_account
                .entry(rows::uuid(&r, "account_id", "private_locations")?)
                .or_default()
                .insert(
                    r.try_get("slug_name")?,
                    rows::uuid(&r, "id", "private_locations")?,
                );
        }
        let empty = HashMap::new();
        let mut sessions = Vec::with_capacity(due.len());
        let mut next = Vec::with_capacity(due.len());
        for r in &due {
            let check_id = rows::uuid(r, "check_id", "check_schedules")?;
            let account_id = rows::uuid(r, "account_id", "checks")?;
            let interval_ms: i64 = r.try_get("interval_ms")?;
            let check_type: String = r.try_get("check_type")?;
            let slugs: Vec<String> = rows::json(r, "private_locations", "checks")?;
            next.push(json!({
                "id": check_id.to_string(),
                "next": next_slot(check_id, interval_ms, now),
            }));
            let check_type = parse_check_type(&check_type, "checks")?;
            // The schedule advances, but a type agents cannot run yet gets no session
            // (its schedule starts working once the type has an executor).
            if !agents_run(check_type) {
                continue;
            }
            let locations =
                resolve_locations(&slugs, by_account.get(&account_id).unwrap_or(&empty));
            if locations.is_empty() {
                continue;
            }
            sessions.push(NewSession {
                id: Uuid::new_v4(),
                account_id,
                check_id,
                check_type,
                name: r.try_get("name")?,
                run_source: RunSource::Scheduler,
                started_at: now,
                locations,
            });
        }
        let locations = insert_sessions(&mut tx, &sessions, now).await?;
        sqlx::query(
            "UPDATE check_schedules SET next_run_at = x.value->>'next'
               FROM json_each(?) x WHERE check_schedules.check_id = x.value->>'id'",
        )
        .bind(rows::to_json(&next, "check_schedules")?)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(ScheduledRuns {
            sessions: sessions.len(),
            locations,
        })
    }

    /// The earliest `next_run_at` of any scheduled check (a cheap read that lets the
    /// scheduler skip passes with nothing due).
    pub async fn earliest_schedule(&self) -> Result<Option<i64>, StoreError> {
        Ok(
            sqlx::query_scalar("SELECT min(next_run_at) FROM check_schedules")
                .fetch_one(&mut *self.read().await?)
                .await?,
        )
    }

    /// One session of the account.
    pub async fn get_session(
        &self,
        account_id: Uuid,
        id: Uuid,
    ) -> Result<Option<SessionRecord>, StoreError> {
        let row = sqlx::query(&format!(
            "SELECT {SESSION_COLUMNS} FROM check_sessions WHERE id = ? AND account_id = ?"
        ))
        .bind(id.to_string())
        .bind(account_id.to_string())
        .fetch_optional(&mut *self.read().await?)
        .await?;
        row.as_ref().map(session_from_row).transpose()
    }

    /// One session of the account with its results (in arrival order), in one
    /// statement. The flag says whether the session is *settled*: final and without
    /// jobs left, so that nothing about it changes any more (a CANCELLED session can
    /// still get the result of a job leased before the cancel; see `cancel_session`).
    /// Only deleting its check removes it then ([`Store::session_deletions`]).
    pub async fn session_with_results(
        &self,
        account_id: Uuid,
        id: Uuid,
    ) -> Result<Option<(SessionRecord, Vec<ResultRecord>, bool)>, StoreError> {
        let found = sqlx::query(&format!(
            "SELECT s.id AS s_id, s.account_id AS s_account_id, s.check_id AS s_check_id,
                    s.check_type AS s_check_type, s.name AS s_name, s.status AS s_status,
                    s.run_source AS s_run_source, s.run_locations AS s_run_locations,
                    s.started_at AS s_started_at, s.stopped_at AS s_stopped_at,
                    EXISTS (SELECT 1 FROM jobs j WHERE j.session_id = s.id) AS s_pending,
                    {}
               FROM check_sessions s LEFT JOIN check_results r ON r.session_id = s.id
              WHERE s.id = ? AND s.account_id = ?
              ORDER BY r.created_at, r.id",
            super::results::SUMMARY_COLUMNS_OF_R
        ))
        .bind(id.to_string())
        .bind(account_id.to_string())
        .fetch_all(&mut *self.read().await?)
        .await?;
        let Some(first) = found.first() else {
            return Ok(None);
        };
        let session = session_from_cols(first, &JOINED)?;
        let pending: bool = first.try_get("s_pending")?;
        let mut results = Vec::with_capacity(found.len());
        for r in &found {
            if r.try_get::<Option<String>, _>("id")?.is_some() {
                results.push(super::results::summary_from_row(r)?);
            }
        }
        let settled = session.status.is_final() && !pending;
        Ok(Some((session, results, settled)))
    }

    /// Sessions of a check, newest first.
    pub async fn list_sessions_of_check(
        &self,
        account_id: Uuid,
        check_id: Uuid,
        limit: i64,
    ) -> Result<Vec<SessionRecord>, StoreError> {
        let found = sqlx::query(&format!(
            "SELECT {SESSION_COLUMNS} FROM check_sessions WHERE check_id = ? AND account_id = ?
              ORDER BY started_at DESC LIMIT ?"
        ))
        .bind(check_id.to_string())
        .bind(account_id.to_string())
        .bind(limit)
        .fetch_all(&mut *self.read().await?)
        .await?;
        found.iter().map(session_from_row).collect()
    }

    /// Cancels a session: status CANCELLED, queued jobs dropped, leased jobs marked so
    /// that renewals report them lost and expiry drops them. A result that still
    /// arrives on a valid lease is recorded without changing the status. Returns
    /// `None` if the account has no such session, `Some(false)` if it was already
    /// final (nothing changed).
    pub async fn cancel_session(
        &self,
        account_id: Uuid,
        id: Uuid,
        now: i64,
    ) -> Result<Option<bool>, StoreError> {
        let mut conn = self.write().await?;
        let mut tx = conn.begin().await?;
        let row = sqlx::query("SELECT status FROM check_sessions WHERE id = ? AND account_id = ?")
            .bind(id.to_string())
            .bind(account_id.to_string())
            .fetch_optional(&mut *tx)
            .await?;
        let Some(row) = row else {
            return Ok(None);
        };
        let status: String = row.try_get("status")?;
        if SessionStatus::parse(&status).is_some_and(SessionStatus::is_final) {
            return Ok(Some(false));
        }
        sqlx::query("UPDATE check_sessions SET status = 'CANCELLED', stopped_at = ? WHERE id = ?")
            .bind(now)
            .bind(id.to_string())
            .execute(&mut *tx)
            .await?;
        sqlx::query("DELETE FROM jobs WHERE session_id = ? AND state = 0")
            .bind(id.to_string())
            .execute(&mut *tx)
            .await?;
        sqlx::query("UPDATE jobs SET cancelled = 1 WHERE session_id = ?")
            .bind(id.to_string())
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(Some(true))
    }
}
