//! Uploads the artifacts of a result (packet capture, traceroute) before the result is
//! handed to the reporter: `PUT /agent/v1/jobs/{jobId}/artifacts/{name}?leaseId=...`,
//! while the lease is still held and renewed. Transient failures are retried a few
//! times; an artifact that cannot be uploaded is dropped from `result.artifacts` and
//! the result's diagnostics say so. The agent's API key is masked in the bytes.

use std::time::Duration;

use super::backoff::Backoff;
use super::client::{ClientError, ServiceClient};
use super::scrub::Scrubber;
use crate::executors::netdiag::Artifact;
use crate::model::{Diagnostics, RunResult};
use crate::protocol::LeaseRef;

/// Tries per artifact (transient errors only).
pub const MAX_TRIES: u32 = 3;
/// Floor and ceiling of the delay between tries.
const RETRY_MIN: Duration = Duration::from_millis(200);
const RETRY_MAX: Duration = Duration::from_secs(2);

/// Uploads `artifacts` of `result`; those that fail are removed from
/// `result.artifacts` and named in `result.diagnostics.reason`.
pub async fn upload_all(
    client: &ServiceClient,
    scrubber: &Scrubber,
    lease: LeaseRef,
    result: &mut RunResult,
    artifacts: Vec<Artifact>,
) {
    for artifact in artifacts {
        let mut bytes = artifact.bytes.to_vec();
        scrubber.mask_bytes(&mut bytes);
        let bytes = bytes::Bytes::from(bytes);
        let mut backoff = Backoff::new(RETRY_MIN, RETRY_MAX);
        let mut tries = 0;
        let outcome = loop {
            tries += 1;
            match client
                .upload_artifact(lease, &artifact.name, &artifact.content_type, bytes.clone())
                .await
            {
                Err(ClientError::Transient(why)) if tries < MAX_TRIES => {
                    tracing::debug!(job_id = %lease.job_id, name = %artifact.name, "artifact upload failed, retrying: {why}");
                    tokio::time::sleep(backoff.next_delay()).await;
                }
                other => break other,
            }
        };
        match outcome {
            Ok(()) => {
                tracing::debug!(job_id = %lease.job_id, name = %artifact.name, size = bytes.len(), "artifact uploaded");
            }
            Err(e) => {
                let why = scrubber.scrub(&e.to_string()).into_owned();
                tracing::warn!(job_id = %lease.job_id, name = %artifact.name, "cannot upload an artifact: {why}");
                result.artifacts.retain(|a| a.name != artifact.name);
                let note = format!(
                    "the artifact {} could not be uploaded: {why}",
                    artifact.name
                );
                let diagnostics = result
                    .diagnostics
                    .get_or_insert_with(|| Diagnostics::unavailable(String::new()));
                diagnostics.reason = Some(match diagnostics.reason.take() {
                    Some(before) if !before.is_empty() => format!("{before}; {note}"),
                    _ => note,
                });
            }
        }
    }
}
