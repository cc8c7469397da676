//! The job queue: leasing, renewing, releasing, accepting results and reaping expired
//! leases and stale queued jobs. Every operation is one transaction on the writer with
//! a fixed number of set-based statements, however large the batch.

use std::collections::{HashMap, HashSet};

use serde_json::json;
use sqlx::Row;
use uuid::Uuid;

use super::location_usage::stored_proxy;
use super::rows::{self, time};
use super::sessions::{FinalOutcome, apply_finals, parse_check_type};
use super::{Store, StoreError};
use crate::model::{ErrorKind, Pool, ProxyUrl, RunResult, RunStatus};
use crate::protocol::{LeaseRef, PoolCapacity, SubmitOutcome, SubmitStatus, SubmittedResult};

/// Most jobs one lease request takes per pool, whatever capacity it claims.
pub const MAX_LEASE_BATCH: u32 = 1000;
/// Most results one submit takes (the body limit bounds it too).
pub const MAX_SUBMIT_BATCH: usize = 5000;

const QUEUED: i64 = 0;
const LEASED: i64 = 1;

/// One job handed to an agent.
#[derive(Debug, Clone)]
pub struct LeaseGrant {
    pub job_id: Uuid,
    pub lease_id: Uuid,
    pub lease_expires_at: i64,
    pub pool: Pool,
    pub check_id: Uuid,
    pub session_id: Uuid,
    pub run_location: String,
    /// The check document as stored (JSON text).
    pub payload: String,
    /// The location's proxy for API checks (password included), read in the lease's
    /// transaction: a change applies to jobs leased after it.
    pub proxy_url: Option<ProxyUrl>,
}

/// What a result batch did.
#[derive(Debug, Default)]
pub struct SubmitReport {
    /// One per submitted result, in order.
    pub outcomes: Vec<SubmitOutcome>,
    /// Sessions whose status became final.
    pub finished_sessions: Vec<Uuid>,
}

/// What one reaper pass did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct ReapReport {
    /// Expired leases put back in the queue.
    pub requeued: usize,
    /// Jobs given a synthetic timed-out FINAL result (lost too often or queued too long).
    pub timed_out: usize,
    /// Jobs of cancelled sessions whose lease expired, dropped.
    pub dropped: usize,
    /// Locations with requeued jobs (their long-polls should wake).
    pub locations: Vec<Uuid>,
    /// Sessions whose status became final.
    pub finished_sessions: Vec<Uuid>,
}

fn lease_refs_json(leases: &[LeaseRef]) -> Result<String, StoreError> {
    let items: Vec<_> = leases
        .iter()
        .map(|l| json!({"jobId": l.job_id.to_string(), "leaseId": l.lease_id.to_string()}))
        .collect();
    rows::to_json(&items, "jobs")
}

/// A result row to insert, as the INSERT ... SELECT FROM json_each statement reads it.
fn result_row(
    job: &JobState,
    lease_id: Option<Uuid>,
    result: &RunResult,
    over_max: Option<bool>,
    now: i64,
) -> serde_json::Value {
    json!({
        "id": Uuid::new_v4().to_string(),
        "accountId": job.account_id,
        "checkId": job.check_id,
        "sessionId": job.session_id,
        "jobId": job.job_id,
        "leaseId": lease_id.map(|l| l.to_string()),
        "locationId": job.location_id,
        "runLocation": job.run_location,
        // The stored check's type, whatever the agent's result says.
        "checkType": job.check_type,
        "name": job.name,
        "status": status_name(result.status),
        "hasErrors": result.has_errors,
        "hasFailures": result.has_failures,
        "isDegraded": result.is_degraded,
        "aborted": result.aborted,
        "overMax": over_max,
        "responseTime": result.response_time,
        "attempts": job.expiries,
        "startedAt": result.started_at.timestamp_millis(),
        "stoppedAt": result.stopped_at.timestamp_millis(),
        "createdAt": now,
        "result": result,
    })
}

fn status_name(s: RunStatus) -> &'static str {
    match s {
        RunStatus::Passed => "PASSED",
        RunStatus::Failed => "FAILED",
        RunStatus::Degraded => "DEGRADED",
    }
}

/// The job columns result handling needs.
#[derive(Debug, Clone)]
struct JobState {
    job_id: String,
    session_id: String,
    check_id: String,
    account_id: String,
    location_id: String,
    run_location: String,
    name: String,
    /// The session's (so the stored check's) type.
    check_type: String,
    expiries: i64,
}

impl JobState {
    fn from_row(r: &sqlx::sqlite::SqliteRow) -> Result<JobState, sqlx::Error> {
        Ok(JobState {
            job_id: r.try_get("job_id")?,
            session_id: r.try_get("session_id")?,
            check_id: r.try_get("check_id")?,
            account_id: r.try_get("account_id")?,
            location_id: r.try_get("location_id")?,
            run_location: r.try_get("run_location")?,
            name: r.try_get("name")?,
            check_type: r.try_get("check_type")?,
            expiries: r.try_get("expiries")?,
        })
    }
}

/// Inserts result rows and deletes their jobs, then folds the outcomes into sessions.
async fn finish_jobs(
    conn: &mut sqlx::SqliteConnection,
    result_rows: &[serde_json::Value],
    job_ids: &[String],
    outcomes: &[FinalOutcome],
    now: i64,
) -> Result<Vec<Uuid>, StoreError> {
    if result_rows.is_empty() {
        return Ok(Vec::new());
    }
    sqlx::query(
        "INSERT INTO check_results (id, account_id, check_id, session_id, job_id, lease_id,
             location_id, run_location, result_type, check_type, name, status, has_errors,
             has_failures, is_degraded, aborted, is_cancelled, over_max_response_time,
             response_time, attempts, started_at, stopped_at, created_at, result)
         SELECT value->>'id', value->>'accountId', value->>'checkId', value->>'sessionId',
                value->>'jobId', value->>'leaseId', value->>'locationId', value->>'runLocation',
                'FINAL', value->>'checkType', value->>'name', value->>'status',
                value->>'hasErrors', value->>'hasFailures', value->>'isDegraded',
                value->>'aborted', 0, value->>'overMax', value->>'responseTime',
                value->>'attempts', value->>'startedAt', value->>'stoppedAt',
                value->>'createdAt', value->'result'
           FROM json_each(?)",
    )
    .bind(rows::to_json(&result_rows, "check_results")?)
    .execute(&mut *conn)
    .await?;
    sqlx::query("DELETE FROM jobs WHERE id IN (SELECT value FROM json_each(?))")
        .bind(rows::to_json(&job_ids, "jobs")?)
        .execute(&mut *conn)
        .await?;
    apply_finals(conn, outcomes, now).await
}

impl Store {
    /// Leases up to `capacity` queued jobs per pool of the location to `agent_id`, for
    /// `ttl_ms`, oldest first.
    pub async fn lease_jobs(
        &self,
        location_id: Uuid,
        agent_id: Uuid,
        capacity: PoolCapacity,
        ttl_ms: i64,
        now: i64,
    ) -> Result<Vec<LeaseGrant>, StoreError> {
        let mut grants = Vec::new();
        let expires = now + ttl_ms;
        let mut conn = self.write().await?;
        let mut tx = conn.begin().await?;
        for pool in [Pool::Uptime, Pool::Heavy] {
            let want = capacity.get(pool).min(MAX_LEASE_BATCH);
            if want == 0 {
                continue;
            }
            let ids: Vec<String> = sqlx::query_scalar(
                "SELECT id FROM jobs
                  WHERE location_id = ? AND pool = ? AND state = 0
                  ORDER BY available_at LIMIT ?",
            )
            .bind(location_id.to_string())
            .bind(pool.as_str())
            .bind(i64::from(want))
            .fetch_all(&mut *tx)
            .await?;
            if ids.is_empty() {
                continue;
            }
            let pairs: Vec<_> = ids
                .iter()
                .map(|id| json!({"jobId": id, "leaseId": Uuid::new_v4().to_string()}))
                .collect();
            let leased = sqlx::query(
                "UPDATE jobs SET state = 1, lease_id = x.value->>'leaseId', leased_by = ?1,
                                 lease_expires_at = ?2
                   FROM json_each(?3) x
                  WHERE jobs.id = x.value->>'jobId' AND jobs.state = 0
                 RETURNING jobs.id, jobs.lease_id, jobs.check_id, jobs.session_id,
                           jobs.run_location, jobs.payload, jobs.available_at",
            )
            .bind(agent_id.to_string())
            .bind(expires)
            .bind(rows::to_json(&pairs, "jobs")?)
            .fetch_all(&mut *tx)
            .await?;
            let mut batch = Vec::with_capacity(leased.len());
            for r in &leased {
                let order: i64 = r.try_get("available_at")?;
                batch.push((
                    order,
                    LeaseGrant {
                        job_id: rows::uuid(r, "id", "jobs")?,
                        lease_id: rows::uuid(r, "lease_id", "jobs")?,
                        lease_expires_at: expires,
                        pool,
                        check_id: rows::uuid(r, "check_id", "jobs")?,
                        session_id: rows::uuid(r, "session_id", "jobs")?,
                        run_location: r.try_get("run_location")?,
                        payload: r.try_get("payload")?,
                        proxy_url: None,
                    },
                ));
            }
            batch.sort_by_key(|(order, _)| *order);
            grants.extend(batch.into_iter().map(|(_, g)| g));
        }
        if !grants.is_empty() {
            let stored: Option<String> =
                sqlx::query_scalar("SELECT proxy_url FROM private_locations WHERE id = ?")
                    .bind(location_id.to_string())
                    .fetch_optional(&mut *tx)
                    .await?
                    .flatten();
            let proxy_url = stored_proxy(stored)?;
            for grant in &mut grants {
                grant.proxy_url.clone_from(&proxy_url);
            }
        }
        tx.commit().await?;
        Ok(grants)
    }

    /// Extends the location's unexpired leases named in `leases` to `now + ttl_ms`.
    /// Returns the renewed ones; the others (expired, foreign, or of a cancelled
    /// session) are lost.
    pub async fn renew_leases(
        &self,
        location_id: Uuid,
        leases: &[LeaseRef],
        ttl_ms: i64,
        now: i64,
    ) -> Result<Vec<LeaseRef>, StoreError> {
        if leases.is_empty() {
            return Ok(Vec::new());
        }
        let found = sqlx::query(
            "UPDATE jobs SET lease_expires_at = ?1
               FROM json_each(?2) x
              WHERE jobs.id = x.value->>'jobId' AND jobs.lease_id = x.value->>'leaseId'
                AND jobs.state = 1 AND jobs.location_id = ?3 AND jobs.cancelled = 0
                AND jobs.lease_expires_at > ?4
             RETURNING jobs.id, jobs.lease_id",
        )
        .bind(now + ttl_ms)
        .bind(lease_refs_json(leases)?)
        .bind(location_id.to_string())
        .bind(now)
        .fetch_all(&mut *self.write().await?)
        .await?;
        found
            .iter()
            .map(|r| {
                Ok(LeaseRef {
                    job_id: rows::uuid(r, "id", "jobs")?,
                    lease_id: rows::uuid(r, "lease_id", "jobs")?,
                })
            })
            .collect()
    }

    /// Gives leased jobs back: they are queued again at once, in their old place,
    /// without counting an expiry (jobs of cancelled sessions are dropped instead).
    /// Returns how many leases were released.
    pub async fn release_leases(
        &self,
        location_id: Uuid,
        leases: &[LeaseRef],
    ) -> Result<u32, StoreError> {
        if leases.is_empty() {
            return Ok(0);
        }
        let refs = lease_refs_json(leases)?;
        let mut conn = self.write().await?;
        let mut tx = conn.begin().await?;
        let requeued = sqlx::query(
            "UPDATE jobs SET state = 0, lease_id = NULL, leased_by = NULL, lease_expires_at = NULL
               FROM json_each(?1) x
              WHERE jobs.id = x.value->>'jobId' AND jobs.lease_id = x.value->>'leaseId'
                AND jobs.state = 1 AND jobs.location_id = ?2 AND jobs.cancelled = 0",
        )
        .bind(&refs)
        .bind(location_id.to_string())
        .execute(&mut *tx)
        .await?;
        let dropped = sqlx::query(
            "DELETE FROM jobs WHERE id IN (
                SELECT j.id FROM json_each(?1) x JOIN jobs j
                    ON j.id = x.value->>'jobId' AND j.lease_id = x.value->>'leaseId'
                 WHERE j.state = 1 AND j.location_id = ?2 AND j.cancelled = 1)",
        )
        .bind(&refs)
        .bind(location_id.to_string())
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(u32::try_from(requeued.rows_affected() + dropped.rows_affected()).unwrap_or(u32::MAX))
    }

    /// Stores a batch of results from an agent of `location_id`, idempotent on
    /// (jobId, leaseId):
    /// - ACCEPTED: the job is leased by that lease, unexpired: the result becomes the
    ///   job's FINAL result, the job is finished and its session updated;
    /// - DUPLICATE: that same (job, lease) was stored before; nothing changes;
    /// - REFUSED: unknown job, another location's job, an expired or replaced lease, or
    ///   a job already finished by another lease.
    pub async fn submit_results(
        &self,
        location_id: Uuid,
        results: &[SubmittedResult],
        now: i64,
    ) -> Result<SubmitReport, StoreError> {
        if results.is_empty() {
            return Ok(SubmitReport::default());
        }
        let refs: Vec<LeaseRef> = results.iter().map(SubmittedResult::lease).collect();
        let mut conn = self.write().await?;
        let mut tx = conn.begin().await?;
        let found = sqlx::query(
            "SELECT x.key AS idx, j.id AS job_id, j.state, j.lease_id, j.lease_expires_at,
                    j.location_id, j.session_id, j.check_id, j.account_id, j.run_location,
                    j.expiries, s.name, s.check_type, CAST(j.payload->>'maxResponseTime' AS REAL) AS max_rt,
                    r.lease_id AS done_lease, r.location_id AS done_location
               FROM json_each(?) x
               LEFT JOIN jobs j ON j.id = x.value->>'jobId'
               LEFT JOIN check_sessions s ON s.id = j.session_id
               LEFT JOIN check_results r
                      ON r.job_id = x.value->>'jobId' AND r.result_type = 'FINAL'",
        )
        .bind(lease_refs_json(&refs)?)
        .fetch_all(&mut *tx)
        .await?;
        let location = location_id.to_string();
        let mut by_index: HashMap<i64, &sqlx::sqlite::SqliteRow> = HashMap::new();
        for r in &found {
            by_index.insert(r.try_get("idx")?, r);
        }
        let mut outcomes = Vec::with_capacity(results.len());
        let mut accepted_now: HashMap<Uuid, Uuid> = HashMap::new();
        let mut result_rows = Vec::new();
        let mut job_ids = Vec::new();
        let mut finals = Vec::new();
        for (i, submitted) in results.iter().enumerate() {
            let lease = submitted.lease_id.to_string();
            let row = i64::try_from(i)
                .ok()
                .and_then(|i| by_index.get(&i))
                .copied();
            let (status, reason) = if let Some(prev) = accepted_now.get(&submitted.job_id) {
                if *prev == submitted.lease_id {
                    (SubmitStatus::Duplicate, None)
                } else {
                    (
                        SubmitStatus::Refused,
                        Some("the job was finished by another lease"),
                    )
                }
            } else if let Some(r) = row {
                classify(r, &lease, &location, now)?
            } else {
                (SubmitStatus::Refused, Some("unknown job"))
            };
            if status == SubmitStatus::Accepted
                && let Some(r) = row
            {
                let job = JobState::from_row(r)?;
                let max_rt: Option<f64> = r.try_get("max_rt")?;
                let over_max = match (submitted.result.response_time, max_rt) {
                    (Some(t), Some(m)) => Some(t > m),
                    _ => None,
                };
                result_rows.push(result_row(
                    &job,
                    Some(submitted.lease_id),
                    &submitted.result,
                    over_max,
                    now,
                ));
                finals.push((
                    rows::parse_uuid(&job.session_id, "jobs")?,
                    Some(submitted.result.status),
                ));
                job_ids.push(job.job_id);
                accepted_now.insert(submitted.job_id, submitted.lease_id);
            }
            outcomes.push(SubmitOutcome {
                job_id: submitted.job_id,
                lease_id: submitted.lease_id,
                status,
                reason: reason.map(str::to_owned),
            });
        }
        let finished = finish_jobs(&mut tx, &result_rows, &job_ids, &finals, now).await?;
        tx.commit().await?;
        Ok(SubmitReport {
            outcomes,
            finished_sessions: finished,
        })
    }

    /// One reaper pass at `now`:
    /// - leases of cancelled sessions that expired: job dropped;
    /// - other expired leases: job queued again (an expiry counted) unless this was its
    ///   `max_expiries`-th expiry, in which case it gets a synthetic FINAL result
    ///   (hasErrors, aborted) that counts as timed out in its session;
    /// - jobs queued since before `now - queued_max_age_ms`: the same synthetic result.
    pub async fn reap(
        &self,
        now: i64,
        max_expiries: i64,
        queued_max_age_ms: i64,
    ) -> Result<ReapReport, StoreError> {
        let mut report = ReapReport::default();
        let mut conn = self.write().await?;
        let mut tx = conn.begin().await?;
        let dropped = sqlx::query(
            "DELETE FROM jobs WHERE state = 1 AND lease_expires_at <= ? AND cancelled = 1",
        )
        .bind(now)
        .execute(&mut *tx)
        .await?;
        report.dropped = usize::try_from(dropped.rows_affected()).unwrap_or(usize::MAX);
        let requeued: Vec<String> = sqlx::query_scalar(
            "UPDATE jobs SET state = 0, expiries = expiries + 1, lease_id = NULL,
                             leased_by = NULL, lease_expires_at = NULL, available_at = ?1
              WHERE state = 1 AND lease_expires_at <= ?1 AND expiries + 1 < ?2
             RETURNING location_id",
        )
        .bind(now)
        .bind(max_expiries)
        .fetch_all(&mut *tx)
        .await?;
        report.requeued = requeued.len();
        let locations: HashSet<String> = requeued.into_iter().collect();
        report.locations = locations
            .iter()
            .map(|l| rows::parse_uuid(l, "jobs"))
            .collect::<Result<_, _>>()?;
        let stale = sqlx::query(
            "SELECT j.id AS job_id, j.session_id, j.check_id, j.account_id, j.location_id,
                    j.run_location, j.expiries, j.state, j.created_at, s.name, s.check_type
               FROM jobs j JOIN check_sessions s ON s.id = j.session_id
              WHERE j.state = 1 AND j.lease_expires_at <= ?1
             UNION ALL
             SELECT j.id AS job_id, j.session_id, j.check_id, j.account_id, j.location_id,
                    j.run_location, j.expiries, j.state, j.created_at, s.name, s.check_type
               FROM jobs j JOIN check_sessions s ON s.id = j.session_id
              WHERE j.state = 0 AND j.available_at <= ?2
             LIMIT 10000",
        )
        .bind(now)
        .bind(now - queued_max_age_ms)
        .fetch_all(&mut *tx)
        .await?;
        let mut result_rows = Vec::with_capacity(stale.len());
        let mut job_ids = Vec::with_capacity(stale.len());
        let mut finals = Vec::with_capacity(stale.len());
        for r in &stale {
            let mut job = JobState::from_row(r)?;
            let state: i64 = r.try_get("state")?;
            let check_type = parse_check_type(&job.check_type, "check_sessions")?;
            let created_at: i64 = r.try_get("created_at")?;
            let message = if state == LEASED {
                job.expiries += 1;
                format!(
                    "the run was lost {} times: its lease expired without a result",
                    job.expiries
                )
            } else {
                debug_assert_eq!(state, QUEUED);
                format!(
                    "no agent of location {:?} picked the run up within {} minutes",
                    job.run_location,
                    queued_max_age_ms / 60_000
                )
            };
            let mut result =
                RunResult::errored(check_type, time(created_at), ErrorKind::Timeout, message);
            result.stopped_at = time(now);
            result.aborted = true;
            result_rows.push(result_row(&job, None, &result, None, now));
            finals.push((rows::parse_uuid(&job.session_id, "jobs")?, None));
            job_ids.push(job.job_id);
        }
        report.timed_out = job_ids.len();
        report.finished_sessions =
            finish_jobs(&mut tx, &result_rows, &job_ids, &finals, now).await?;
        tx.commit().await?;
        Ok(report)
    }

    /// Whether a reaper pass at `now` has anything to do (a cheap read).
    pub async fn reap_needed(&self, now: i64, queued_max_age_ms: i64) -> Result<bool, StoreError> {
        let needed: bool = sqlx::query_scalar(
            "SELECT EXISTS(SELECT 1 FROM jobs WHERE state = 1 AND lease_expires_at <= ?1)
                 OR EXISTS(SELECT 1 FROM jobs WHERE state = 0 AND available_at <= ?2)",
        )
        .bind(now)
        .bind(now - queued_max_age_ms)
        .fetch_one(&mut *self.read().await?)
        .await?;
        Ok(needed)
    }

    /// At start: extends every active lease to at least `now + ttl_ms`, so that the
    /// time the service was down does not cost agents their leases.
    pub async fn extend_all_leases(&self, now: i64, ttl_ms: i64) -> Result<u64, StoreError> {
        let done = sqlx::query(
            "UPDATE jobs SET lease_expires_at = max(lease_expires_at, ?) WHERE state = 1",
        )
        .bind(now + ttl_ms)
        .execute(&mut *self.write().await?)
        .await?;
        Ok(done.rows_affected())
    }

    /// Number of queued and leased jobs (for tests and metrics).
    pub async fn job_counts(&self) -> Result<(i64, i64), StoreError> {
        let r = sqlx::query(
            "SELECT (SELECT count(*) FROM jobs WHERE state = 0) AS queued,
                    (SELECT count(*) FROM jobs WHERE state = 1) AS leased",
        )
        .fetch_one(&mut *self.read().await?)
        .await?;
        Ok((r.try_get("queued")?, r.try_get("leased")?))
    }
}

/// Decides ACCEPTED / DUPLICATE / REFUSED for one submitted result from its row of
/// the lookup query.
fn classify(
    r: &sqlx::sqlite::SqliteRow,
    lease: &str,
    location: &str,
    now: i64,
) -> Result<(SubmitStatus, Option<&'static str>), StoreError> {
    let job_id: Option<String> = r.try_get("job_id")?;
    if job_id.is_some() {
        let state: i64 = r.try_get("state")?;
        let job_lease: Option<String> = r.try_get("lease_id")?;
        let expires: Option<i64> = r.try_get("lease_expires_at")?;
        let job_location: String = r.try_get("location_id")?;
        if job_location != location {
            return Ok((
                SubmitStatus::Refused,
                Some("the job belongs to another location"),
            ));
        }
        if state == LEASED && job_lease.as_deref() == Some(lease) {
            if expires.is_some_and(|e| e > now) {
                return Ok((SubmitStatus::Accepted, None));
            }
            return Ok((SubmitStatus::Refused, Some("the lease expired")));
        }
        return Ok((SubmitStatus::Refused, Some("the lease is no longer valid")));
    }
    let done_lease: Option<String> = r.try_get("done_lease")?;
    let done_location: Option<String> = r.try_get("done_location")?;
    match done_lease {
        Some(l) if l == lease && done_location.as_deref() == Some(location) => {
            Ok((SubmitStatus::Duplicate, None))
        }
        Some(_) => Ok((
            SubmitStatus::Refused,
            Some("the job was finished by another lease"),
        )),
        None if done_location.is_some() => Ok((
            SubmitStatus::Refused,
            Some("the job timed out and was finished"),
        )),
        None => Ok((SubmitStatus::Refused, Some("unknown job"))),
    }
}
