//! Wire messages between the agent and the control plane (`/agent/v1/...`).
//! docs/protocol.md describes the exchange; this file is its single source of truth.
//!
//! Every request carries `Authorization: Bearer <agent key>`; the key names the private
//! location. JSON bodies, camelCase fields.

use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::model::{Pool, RunResult};

/// Bumped on any incompatible change; the service refuses agents it cannot talk to.
pub const PROTOCOL_VERSION: u32 = 1;

/// Paths of the agent API, relative to the service's base URL.
pub mod paths {
    pub const HELLO: &str = "/agent/v1/hello";
    pub const LEASE: &str = "/agent/v1/jobs/lease";
    pub const RENEW: &str = "/agent/v1/leases/renew";
    pub const RELEASE: &str = "/agent/v1/leases/release";
    pub const RESULTS: &str = "/agent/v1/results";
    /// `PUT /agent/v1/jobs/{jobId}/artifacts/{name}?leaseId=...`, body streamed.
    pub const ARTIFACTS_PREFIX: &str = "/agent/v1/jobs";
    /// `POST /agent/v1/error-reports`: error-level events of the agent itself.
    pub const ERROR_REPORTS: &str = "/agent/v1/error-reports";
}

/// Largest artifact the service accepts, enforced while streaming (150 MB).
pub const MAX_ARTIFACT_BYTES: u64 = 150 * 1024 * 1024;
/// Largest JSON body of the agent API.
pub const MAX_AGENT_BODY_BYTES: usize = 16 * 1024 * 1024;
/// Longest a lease request may wait for jobs.
pub const MAX_LEASE_WAIT_SECS: u32 = 25;
/// Largest body of an error report request, enforced while streaming.
pub const MAX_ERROR_REPORT_BODY_BYTES: usize = 2 * 1024 * 1024;
/// Most reports in one error report request.
pub const MAX_ERROR_REPORTS_PER_REQUEST: usize = 20;
/// Longest event name of a report (`[a-z0-9._-]`).
pub const MAX_ERROR_EVENT_LEN: usize = 128;
/// Longest message of a report, in bytes.
pub const MAX_ERROR_MESSAGE_BYTES: usize = 4096;
/// Longest backtrace of a report, in bytes.
pub const MAX_ERROR_BACKTRACE_BYTES: usize = 32 * 1024;
/// Longest agent version, platform or runtime of a report request, in bytes.
pub const MAX_ERROR_META_BYTES: usize = 128;

/// `POST /agent/v1/hello`: the agent introduces itself; the answer confirms the key.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HelloRequest {
    pub agent_id: Uuid,
    pub agent_version: String,
    pub protocol_version: u32,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HelloResponse {
    pub location_id: Uuid,
    /// The location's slug name, as used in a check's `privateLocations`.
    pub location_name: String,
    /// How long a lease lives without renewal.
    pub lease_ttl_secs: u64,
    pub server_version: String,
}

/// `POST /agent/v1/jobs/lease`: long-poll for up to `capacity` jobs per pool.
/// The service answers as soon as at least one job is available, or with an empty list
/// after `waitSecs` (at most [`MAX_LEASE_WAIT_SECS`]).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LeaseRequest {
    pub agent_id: Uuid,
    pub capacity: PoolCapacity,
    pub wait_secs: u32,
}

/// Free worker slots per pool.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PoolCapacity {
    pub uptime: u32,
    pub heavy: u32,
}

impl PoolCapacity {
    /// `free` slots of `pool`, none of the other.
    pub fn only(pool: Pool, free: u32) -> PoolCapacity {
        match pool {
            Pool::Uptime => PoolCapacity {
                uptime: free,
                heavy: 0,
            },
            Pool::Heavy => PoolCapacity {
                uptime: 0,
                heavy: free,
            },
        }
    }

    pub fn get(&self, pool: Pool) -> u32 {
        match pool {
            Pool::Uptime => self.uptime,
            Pool::Heavy => self.heavy,
        }
    }

    pub fn total(&self) -> u32 {
        self.uptime.saturating_add(self.heavy)
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LeaseResponse {
    pub jobs: Vec<LeasedJob>,
}

/// One job handed to one agent until `leaseExpiresAt` unless renewed.
#[derive(Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LeasedJob {
    pub job_id: Uuid,
    pub lease_id: Uuid,
    pub lease_expires_at: DateTime<Utc>,
    pub pool: Pool,
    pub check_id: Uuid,
    pub session_id: Uuid,
    pub run_location: String,
    /// The check document, parsed by the agent into a `CheckSpec`. Kept raw (the JSON
    /// text as stored) so that one malformed job yields an error result for that job
    /// instead of breaking the batch, and so that neither side builds a JSON tree of it.
    pub check: Box<serde_json::value::RawValue>,
    /// The proxy of the location's API checks (`proxyUrl` of the public API, password
    /// included), as it was when the job was leased; absent for none. Kept as text like
    /// `check`, so that a bad one fails this job only; the agent reads it with
    /// `model::ProxyUrl::parse`. Agents that do not know the field ignore it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proxy_url: Option<String>,
}

impl std::fmt::Debug for LeasedJob {
    /// Like a derived `Debug`, but the proxy URL's password never shows.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let proxy =
            self.proxy_url
                .as_deref()
                .map(|text| match crate::model::ProxyUrl::parse(text) {
                    Ok(p) => p.masked(),
                    Err(_) => "<invalid>".to_owned(),
                });
        f.debug_struct("LeasedJob")
            .field("job_id", &self.job_id)
            .field("lease_id", &self.lease_id)
            .field("lease_expires_at", &self.lease_expires_at)
            .field("pool", &self.pool)
            .field("check_id", &self.check_id)
            .field("session_id", &self.session_id)
            .field("run_location", &self.run_location)
            .field("check", &self.check)
            .field("proxy_url", &proxy)
            .finish()
    }
}

/// Identifies one lease of one job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LeaseRef {
    pub job_id: Uuid,
    pub lease_id: Uuid,
}

/// `POST /agent/v1/leases/renew`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RenewRequest {
    pub leases: Vec<LeaseRef>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RenewResponse {
    /// Leases extended to `leaseExpiresAt`.
    pub renewed: Vec<LeaseRef>,
    /// Leases that expired or were never this agent's; their jobs should be abandoned.
    pub lost: Vec<LeaseRef>,
    pub lease_expires_at: DateTime<Utc>,
}

/// `POST /agent/v1/leases/release`: give back jobs that were leased but not started.
/// They go back to the queue at once, without counting as an attempt.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReleaseRequest {
    pub leases: Vec<LeaseRef>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReleaseResponse {
    pub released: u32,
}

/// `POST /agent/v1/results`: idempotent on (jobId, leaseId).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SubmitResultsRequest {
    pub results: Vec<SubmittedResult>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SubmittedResult {
    pub job_id: Uuid,
    pub lease_id: Uuid,
    pub result: RunResult,
}

impl SubmittedResult {
    pub fn lease(&self) -> LeaseRef {
        LeaseRef {
            job_id: self.job_id,
            lease_id: self.lease_id,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SubmitResultsResponse {
    /// One outcome per submitted result, in order.
    pub outcomes: Vec<SubmitOutcome>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SubmitOutcome {
    pub job_id: Uuid,
    pub lease_id: Uuid,
    pub status: SubmitStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// What the service did with a submitted result. All three are final for the agent:
/// it drops the result from its spool; only transport errors and 5xx are retried.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum SubmitStatus {
    /// Stored as the FINAL result of this job.
    Accepted,
    /// This very (job, lease) was stored before; nothing changed.
    Duplicate,
    /// The lease expired or belongs to someone else; the job is (or was) run again.
    Refused,
}

/// `POST /agent/v1/error-reports`: error-level events of the agent itself (internal
/// errors, panics), sent unless `EXTERNAL_OBSERVABILITY=off`. Only this technical
/// metadata travels: no keys, environment, check configuration, URLs, headers or bodies;
/// every string has passed the agent's scrubber.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ErrorReportsRequest {
    /// The agent's version (`outpost --version`).
    #[schemars(length(min = 1, max = MAX_ERROR_META_BYTES))]
    pub agent_version: String,
    /// Operating system and CPU architecture, e.g. `linux-x86_64`.
    #[schemars(length(min = 1, max = MAX_ERROR_META_BYTES))]
    pub platform: String,
    /// Compiler and async runtime, e.g. `rustc 1.95.0 (...); tokio 1.54.1`.
    #[schemars(length(min = 1, max = MAX_ERROR_META_BYTES))]
    pub runtime: String,
    /// At most [`MAX_ERROR_REPORTS_PER_REQUEST`], at least one.
    #[schemars(length(min = 1, max = MAX_ERROR_REPORTS_PER_REQUEST))]
    pub reports: Vec<ErrorReport>,
}

/// One error event, or several identical ones (same event and message) folded together.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ErrorReport {
    /// Stable event name, e.g. `agent.spool.corrupt_file` or `agent.panic`.
    #[schemars(length(min = 1, max = MAX_ERROR_EVENT_LEN), regex(pattern = r"^[a-z0-9._-]+$"))]
    pub event: String,
    #[schemars(length(min = 1, max = MAX_ERROR_MESSAGE_BYTES))]
    pub message: String,
    /// The stack of a panic.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = MAX_ERROR_BACKTRACE_BYTES))]
    pub backtrace: Option<String>,
    pub first_seen_at: DateTime<Utc>,
    pub last_seen_at: DateTime<Utc>,
    /// How many times it happened between the two times (at least 1).
    #[schemars(range(min = 1))]
    pub count: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ErrorReportsResponse {
    /// Reports stored.
    pub stored: u32,
}
