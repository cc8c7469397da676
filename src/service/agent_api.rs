//! The agent API (`/agent/v1`), exactly the messages of `crate::protocol`: HELLO,
//! LEASE (long-poll woken by the location's notifier), RENEW, RELEASE, RESULTS, and
//! artifact uploads (in `agent_artifacts`), error reports (in `agent_error_reports`).

use crate::service::api::routes::{Area, Routes};
use std::time::Duration;

use axum::Json;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::Method;

use super::agent_artifacts::upload;
use super::agent_error_reports;
use super::api::extract::ApiJson;
use super::auth::AgentAuth;
use super::context::{AppState, Ctx};
use super::errors::ApiError;
use super::store::to_time as store_time;
use super::store::{LeaseGrant, MAX_SUBMIT_BATCH, now_ms};
use crate::model::ProxyUrl;
use crate::protocol::{
    HelloRequest, HelloResponse, LeaseRequest, LeaseResponse, LeasedJob, MAX_AGENT_BODY_BYTES,
    MAX_ERROR_REPORT_BODY_BYTES, MAX_LEASE_WAIT_SECS, PROTOCOL_VERSION, ReleaseRequest,
    ReleaseResponse, RenewRequest, RenewResponse, SubmitResultsRequest, SubmitResultsResponse,
    paths,
};

/// Most leases one RENEW or RELEASE names.
pub const MAX_LEASE_REFS: usize = 10_000;

pub fn routes() -> Routes {
    let json = Routes::new(Area::Agent)
        .documented(Method::POST, paths::HELLO, hello)
        .documented(Method::POST, paths::LEASE, lease)
        .documented(Method::POST, paths::RENEW, renew)
        .documented(Method::POST, paths::RELEASE, release)
        .documented(Method::POST, paths::RESULTS, results)
        .map(|r| r.layer(DefaultBodyLimit::max(MAX_AGENT_BODY_BYTES)));
    let artifacts = Routes::new(Area::Agent)
        .put(
            &format!("{}/{{job_id}}/artifacts/{{name}}", paths::ARTIFACTS_PREFIX),
            upload,
        )
        .map(|r| r.layer(DefaultBodyLimit::disable()));
    let error_reports = Routes::new(Area::Agent)
        .documented(
            Method::POST,
            paths::ERROR_REPORTS,
            agent_error_reports::receive,
        )
        .map(|r| r.layer(DefaultBodyLimit::max(MAX_ERROR_REPORT_BODY_BYTES)));
    json.merge(artifacts).merge(error_reports)
}

async fn hello(
    State(ctx): State<AppState>,
    AgentAuth(location): AgentAuth,
    ApiJson(req): ApiJson<HelloRequest>,
) -> Result<Json<HelloResponse>, ApiError> {
    if req.protocol_version != PROTOCOL_VERSION {
        return Err(ApiError::bad_request(format!(
            "protocolVersion {} is not supported; this service speaks {PROTOCOL_VERSION}",
            req.protocol_version
        )));
    }
    let version: String = req.agent_version.chars().take(64).collect();
    ctx.store
        .record_agent(req.agent_id, location.location_id, &version, now_ms())
        .await?;
    tracing::info!(agent = %req.agent_id, location = %location.slug_name, version = %version, "agent said hello");
    Ok(Json(HelloResponse {
        location_id: location.location_id,
        location_name: location.slug_name,
        lease_ttl_secs: ctx.lease_ttl.as_secs().max(1),
        server_version: crate::VERSION.to_owned(),
    }))
}

fn leased_job(g: LeaseGrant) -> LeasedJob {
    LeasedJob {
        job_id: g.job_id,
        lease_id: g.lease_id,
        lease_expires_at: store_time(g.lease_expires_at),
        pool: g.pool,
        check_id: g.check_id,
        session_id: g.session_id,
        run_location: g.run_location,
        // A payload that is not JSON reaches the agent as a string; it reports an
        // invalid-job result for it instead of the whole batch failing here.
        check: serde_json::from_str(&g.payload).unwrap_or_else(|_| {
            serde_json::value::to_raw_value(&g.payload)
                .unwrap_or_else(|_| serde_json::value::RawValue::NULL.to_owned())
        }),
        proxy_url: g.proxy_url.as_ref().map(ProxyUrl::expose),
    }
}

/// Leases jobs, waiting up to `waitSecs` for some to arrive. Returns at once when jobs
/// exist, when the capacity is zero, or when the service drains (with no jobs).
async fn lease(
    State(ctx): State<AppState>,
    AgentAuth(location): AgentAuth,
    ApiJson(req): ApiJson<LeaseRequest>,
) -> Result<Json<LeaseResponse>, ApiError> {
    let jobs = lease_wait(&ctx, &location.location_id, &req).await?;
    Ok(Json(LeaseResponse {
        jobs: jobs.into_iter().map(leased_job).collect(),
    }))
}

async fn lease_wait(
    ctx: &Ctx,
    location_id: &uuid::Uuid,
    req: &LeaseRequest,
) -> Result<Vec<LeaseGrant>, ApiError> {
    if ctx.stop.is_draining() || req.capacity.total() == 0 {
        return Ok(Vec::new());
    }
    let wait = Duration::from_secs(u64::from(req.wait_secs.min(MAX_LEASE_WAIT_SECS)));
    let deadline = tokio::time::Instant::now() + wait;
    let notify = ctx.hub.location(*location_id);
    loop {
        let notified = notify.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        let jobs = ctx
            .store
            .lease_jobs(
                *location_id,
                req.agent_id,
                req.capacity,
                ctx.lease_ttl_ms(),
                now_ms(),
            )
            .await?;
        if !jobs.is_empty() {
            return Ok(jobs);
        }
        let _waiting = ctx.hub.poll_waiting();
        tokio::select! {
            _ = &mut notified => {}
            _ = tokio::time::sleep_until(deadline) => return Ok(Vec::new()),
            _ = ctx.stop.draining() => return Ok(Vec::new()),
        }
    }
}

async fn renew(
    State(ctx): State<AppState>,
    AgentAuth(location): AgentAuth,
    ApiJson(req): ApiJson<RenewRequest>,
) -> Result<Json<RenewResponse>, ApiError> {
    if req.leases.len() > MAX_LEASE_REFS {
        return Err(ApiError::invalid(
            "leases",
            format!("must have at most {MAX_LEASE_REFS} items"),
        ));
    }
    let now = now_ms();
    let ttl = ctx.lease_ttl_ms();
    let renewed = ctx
        .store
        .renew_leases(location.location_id, &req.leases, ttl, now)
        .await?;
    let kept: std::collections::HashSet<_> = renewed.iter().copied().collect();
    let lost = req
        .leases
        .iter()
        .filter(|l| !kept.contains(*l))
        .copied()
        .collect();
    Ok(Json(RenewResponse {
        renewed,
        lost,
        lease_expires_at: store_time(now + ttl),
    }))
}

async fn release(
    State(ctx): State<AppState>,
    AgentAuth(location): AgentAuth,
    ApiJson(req): ApiJson<ReleaseRequest>,
) -> Result<Json<ReleaseResponse>, ApiError> {
    if req.leases.len() > MAX_LEASE_REFS {
        return Err(ApiError::invalid(
            "leases",
            format!("must have at most {MAX_LEASE_REFS} items"),
        ));
    }
    let released = ctx
        .store
        .release_leases(location.location_id, &req.leases)
        .await?;
    if released > 0 {
        ctx.hub.wake_locations(&[location.location_id]);
    }
    Ok(Json(ReleaseResponse { released }))
}

async fn results(
    State(ctx): State<AppState>,
    AgentAuth(location): AgentAuth,
    ApiJson(req): ApiJson<SubmitResultsRequest>,
) -> Result<Json<SubmitResultsResponse>, ApiError> {
    if req.results.len() > MAX_SUBMIT_BATCH {
        return Err(ApiError::invalid(
            "results",
            format!("must have at most {MAX_SUBMIT_BATCH} items"),
        ));
    }
    let report = ctx
        .store
        .submit_results(location.location_id, &req.results, now_ms())
        .await?;
    ctx.hub.sessions_finished(&report.finished_sessions);
    Ok(Json(SubmitResultsResponse {
        outcomes: report.outcomes,
    }))
}
