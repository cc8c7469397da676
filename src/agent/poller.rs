//! The lease loop: long-polls the service for as many jobs as there are free slots per
//! pool, waits for a slot when both pools are full, and backs off (1 s to 30 s, jittered)
//! on transient errors until a healthy exchange resets the backoff.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use super::AgentError;
use super::backoff::Backoff;
use super::client::{ClientError, ServiceClient};
use super::dispatcher::Dispatcher;
use super::events::{Events, names};
use super::state::Fatal;
use crate::protocol::{LeaseRequest, MAX_LEASE_WAIT_SECS};

/// The lease loop's parts.
pub struct Poller {
    pub agent_id: Uuid,
    pub client: Arc<ServiceClient>,
    pub dispatcher: Arc<Dispatcher>,
    pub events: Events,
    pub fatal: Arc<Fatal>,
}

impl Poller {
    /// Polls until `stop` fires (an in-flight long-poll is abandoned) or the key is refused.
    pub async fn run(self, stop: CancellationToken) {
        let mut backoff = Backoff::default();
        loop {
            let capacity = tokio::select! {
                _ = stop.cancelled() => return,
                c = self.dispatcher.wait_for_capacity() => c,
            };
            let request = LeaseRequest {
                agent_id: self.agent_id,
                capacity,
                wait_secs: MAX_LEASE_WAIT_SECS,
            };
            let answer = tokio::select! {
                _ = stop.cancelled() => return,
                a = self.client.lease(&request) => a,
            };
            let error = match answer {
                Ok(response) => {
                    backoff.reset();
                    if response.jobs.is_empty() {
                        tracing::debug!("No jobs. Waiting..");
                    } else {
                        tracing::debug!(count = response.jobs.len(), "leased jobs");
                    }
                    for job in response.jobs {
                        self.dispatcher.accept(job).await;
                    }
                    continue;
                }
                Err(ClientError::Unauthorized { .. }) => {
                    self.fatal.raise(AgentError::Unauthorized);
                    return;
                }
                Err(e) => e,
            };
            let delay = backoff.next_delay();
            match &error {
                ClientError::Rejected { .. } => self.events.internal_error(
                    names::REQUEST_REJECTED,
                    &format!("cannot lease jobs: {error}"),
                ),
                _ => tracing::warn!(
                    retry_in_ms = delay.as_millis() as u64,
                    "cannot lease jobs: {error}"
                ),
            }
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tokio::time::sleep(delay) => {}
            }
        }
    }
}
