//! Wire messages between the agent and the control plane (`/agent/v1/...`).
//! docs/protocol.md describes the exchange; this file is its single source of truth.
//!
//! Every request carries `Authorization: Bearer <agent key>`; the key names the private
//! location. JSON bodies, camelCase fields.

use chrono::{DateTime, Utc};
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
}

/// Largest artifact the service accepts, enforced while streaming (150 MB).
pub const MAX_ARTIFACT_BYTES: u64 = 150 * 1024 * 1024;
/// Largest JSON body of the agent API.
pub const MAX_AGENT_BODY_BYTES: usize = 16 * 1024 * 1024;
/// Longest a lease request may wait for jobs.
pub const MAX_LEASE_WAIT_SECS: u32 = 25;

/// `POST /agent/v1/hello`: the agent introduces itself; the answer confirms the key.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HelloRequest {
    pub agent_id: Uuid,
    pub agent_version: String,
    pub protocol_version: u32,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
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
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LeaseRequest {
    pub agent_id: Uuid,
    pub capacity: PoolCapacity,
    pub wait_secs: u32,
}

/// Free worker slots per pool.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PoolCapacity {
    pub uptime: u32,
    pub heavy: u32,
}

impl PoolCapacity {
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

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LeaseResponse {
    pub jobs: Vec<LeasedJob>,
}

/// One job handed to one agent until `leaseExpiresAt` unless renewed.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LeasedJob {
    pub job_id: Uuid,
    pub lease_id: Uuid,
    pub lease_expires_at: DateTime<Utc>,
    pub pool: Pool,
    pub check_id: Uuid,
    pub session_id: Uuid,
    pub run_location: String,
    /// The check document, parsed by the agent into a `CheckSpec`. Kept raw so that one
    /// malformed job yields an error result for that job instead of breaking the batch.
    pub check: serde_json::Value,
}

/// Identifies one lease of one job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LeaseRef {
    pub job_id: Uuid,
    pub lease_id: Uuid,
}

/// `POST /agent/v1/leases/renew`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RenewRequest {
    pub leases: Vec<LeaseRef>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
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
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReleaseRequest {
    pub leases: Vec<LeaseRef>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReleaseResponse {
    pub released: u32,
}

/// `POST /agent/v1/results`: idempotent on (jobId, leaseId).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SubmitResultsRequest {
    pub results: Vec<SubmittedResult>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
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

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SubmitResultsResponse {
    /// One outcome per submitted result, in order.
    pub outcomes: Vec<SubmitOutcome>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum SubmitStatus {
    /// Stored as the FINAL result of this job.
    Accepted,
    /// This very (job, lease) was stored before; nothing changed.
    Duplicate,
    /// The lease expired or belongs to someone else; the job is (or was) run again.
    Refused,
}
