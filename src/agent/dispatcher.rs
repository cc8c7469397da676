//! Turns leased jobs into runs: two bounded worker pools (uptime and heavy, one
//! semaphore each, so a long browser job never starves uptime checks), a check document
//! parsed per job (a bad one becomes an InvalidJob result, reported like any other), and
//! the result handed to the reporter unless the lease was lost meanwhile. A result's
//! artifacts (network diagnostics) are uploaded before the result is handed over.
//! A job's `proxyUrl` (its location's proxy, for API checks) is read with the job; a
//! bad one makes an InvalidJob result that does not quote it.

use std::sync::Arc;

use chrono::Utc;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};

use super::artifacts::upload_all;
use super::client::ServiceClient;
use super::inflight::{LeaseTable, Phase};
use super::scrub::Scrubber;
use super::state::AgentState;
use crate::executors::{ExecEnv, RunOutput, run_check_with_proxy};
use crate::model::{CheckSpec, CheckType, ErrorKind, Pool, ProxyUrl, RunResult};
use crate::protocol::{LeaseRef, LeasedJob, PoolCapacity, SubmittedResult};

/// Runs leased jobs within the configured concurrency.
pub struct Dispatcher {
    ctx: Arc<JobContext>,
    uptime: Arc<Semaphore>,
    heavy: Arc<Semaphore>,
}

/// What every job task needs.
struct JobContext {
    leases: Arc<LeaseTable>,
    env: Arc<ExecEnv>,
    results: mpsc::Sender<SubmittedResult>,
    state: Arc<AgentState>,
    scrubber: Scrubber,
    /// Where artifacts go; without it they are dropped (and not listed in results).
    uploads: Option<Arc<ServiceClient>>,
}

impl Dispatcher {
    pub fn new(
        uptime_concurrency: u32,
        job_concurrency: u32,
        leases: Arc<LeaseTable>,
        env: Arc<ExecEnv>,
        results: mpsc::Sender<SubmittedResult>,
        state: Arc<AgentState>,
        scrubber: Scrubber,
    ) -> Dispatcher {
        Dispatcher {
            ctx: Arc::new(JobContext {
                leases,
                env,
                results,
                state,
                scrubber,
                uploads: None,
            }),
            uptime: Arc::new(Semaphore::new(uptime_concurrency as usize)),
            heavy: Arc::new(Semaphore::new(job_concurrency as usize)),
        }
    }

    /// Uploads the artifacts of results through `client` before reporting them. Call it
    /// right after [`Dispatcher::new`], before any job is accepted.
    pub fn with_artifact_uploads(mut self, client: Arc<ServiceClient>) -> Dispatcher {
        match Arc::get_mut(&mut self.ctx) {
            Some(ctx) => ctx.uploads = Some(client),
            None => tracing::error!("artifact uploads set up after jobs started; ignored"),
        }
        self
    }

    fn semaphore(&self, pool: Pool) -> &Arc<Semaphore> {
        match pool {
            Pool::Uptime => &self.uptime,
            Pool::Heavy => &self.heavy,
        }
    }

    /// Free slots per pool: free permits minus jobs leased but not started yet.
    pub fn capacity(&self) -> PoolCapacity {
        let free = |pool: Pool| {
            let n = self
                .semaphore(pool)
                .available_permits()
                .saturating_sub(self.ctx.leases.queued(pool));
            u32::try_from(n).unwrap_or(u32::MAX)
        };
        PoolCapacity {
            uptime: free(Pool::Uptime),
            heavy: free(Pool::Heavy),
        }
    }

    /// Waits until `pool` has a free slot and returns its free slots.
    pub async fn wait_for_capacity(&self, pool: Pool) -> u32 {
        loop {
            let changed = self.ctx.leases.changed();
            tokio::pin!(changed);
            changed.as_mut().enable();
            let free = self.capacity().get(pool);
            if free > 0 {
                return free;
            }
            changed.await;
        }
    }

    /// Takes one leased job: queues its run, or reports why it cannot run.
    pub async fn accept(&self, job: LeasedJob) {
        let lease = LeaseRef {
            job_id: job.job_id,
            lease_id: job.lease_id,
        };
        let parsed = CheckSpec::from_json(job.check.get())
            .map_err(|e| (e.field.clone(), format!("invalid job: {e}")))
            .and_then(|spec| match job.proxy_url.as_deref().map(ProxyUrl::parse) {
                None => Ok((spec, None)),
                Some(Ok(proxy)) => Ok((spec, Some(proxy))),
                // The error never quotes the URL.
                Some(Err(e)) => Err((
                    "proxyUrl".to_owned(),
                    format!("invalid job: the location's proxyUrl {e}"),
                )),
            });
        match parsed {
            Ok((spec, proxy)) => {
                self.ctx.leases.insert(lease, job.pool, Phase::Queued);
                let task = tokio::spawn(run_job(
                    self.ctx.clone(),
                    self.semaphore(job.pool).clone(),
                    lease,
                    spec,
                    proxy,
                ));
                self.ctx.leases.set_task(lease, task.abort_handle());
                tracing::debug!(job_id = %job.job_id, pool = job.pool.as_str(), "job queued");
            }
            Err((field, message)) => {
                let check_type = document_check_type(job.check.get()).unwrap_or(match job.pool {
                    Pool::Uptime => CheckType::Url,
                    Pool::Heavy => CheckType::Browser,
                });
                let message = self.ctx.scrubber.scrub(&message).into_owned();
                tracing::warn!(job_id = %job.job_id, field = %field, "{message}");
                let mut result =
                    RunResult::errored(check_type, Utc::now(), ErrorKind::InvalidJob, message);
                self.ctx.scrubber.scrub_result(&mut result);
                self.ctx.leases.insert(lease, job.pool, Phase::Reporting);
                self.ctx.report(lease, result).await;
            }
        }
    }
}

impl JobContext {
    async fn report(&self, lease: LeaseRef, result: RunResult) {
        let submitted = SubmittedResult {
            job_id: lease.job_id,
            lease_id: lease.lease_id,
            result,
        };
        if self.results.send(submitted).await.is_err() {
            // The reporter is gone (fatal stop): the lease expires and the job reruns.
            self.leases.settle(lease);
        }
    }
}

/// The check type a document names, if it names a known one.
fn document_check_type(doc: &str) -> Option<CheckType> {
    serde_json::from_str::<serde_json::Value>(doc)
        .ok()?
        .get("checkType")
        .and_then(serde_json::Value::as_str)
        .and_then(CheckType::parse)
}

/// One job: wait for a slot, run, hand the result over.
async fn run_job(
    ctx: Arc<JobContext>,
    slots: Arc<Semaphore>,
    lease: LeaseRef,
    spec: CheckSpec,
    proxy: Option<ProxyUrl>,
) {
    let Ok(permit) = slots.acquire_owned().await else {
        return;
    };
    if !ctx.leases.try_start(lease) {
        drop(permit);
        ctx.leases.notify();
        return;
    }
    let mut slot = Slot::new(permit, ctx.clone());
    tracing::debug!(job_id = %lease.job_id, check_type = %spec.check_type(), "job started");
    let RunOutput {
        mut result,
        artifacts,
    } = run_check_with_proxy(&spec, &ctx.env, proxy.as_ref()).await;
    slot.release();
    if !ctx.leases.finish(lease) {
        tracing::info!(job_id = %lease.job_id, "lease lost during the run; result dropped");
        return;
    }
    ctx.scrubber.scrub_result(&mut result);
    match &ctx.uploads {
        Some(client) if !artifacts.is_empty() => {
            upload_all(client, &ctx.scrubber, lease, &mut result, artifacts).await;
        }
        _ => result.artifacts.clear(),
    }
    tracing::debug!(job_id = %lease.job_id, status = ?result.status, "job finished");
    ctx.report(lease, result).await;
}

/// A worker slot held by a running job. Counts the job as running until dropped (also
/// when the task is aborted) and wakes slot waiters when the permit goes back.
struct Slot {
    permit: Option<OwnedSemaphorePermit>,
    ctx: Arc<JobContext>,
}

impl Slot {
    fn new(permit: OwnedSemaphorePermit, ctx: Arc<JobContext>) -> Slot {
        ctx.state.job_started();
        Slot {
            permit: Some(permit),
            ctx,
        }
    }

    /// Gives the worker slot back early (the job still counts as running).
    fn release(&mut self) {
        if self.permit.take().is_some() {
            self.ctx.leases.notify();
        }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        drop(self.permit.take());
        self.ctx.state.job_ended();
        self.ctx.leases.notify();
    }
}
