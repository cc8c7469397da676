//! The lease loops: one per worker pool (uptime, heavy), each long-polling the service
//! for as many jobs of its pool as it has free slots, waiting for a slot while its pool
//! is full, and backing off (1 s to 30 s, jittered) on transient errors until a healthy
//! exchange resets the backoff.
//!
//! One loop per pool, not one request for both: a long-poll cannot take more slots once
//! it is sent, so a single request sent while the uptime pool was full would ask for
//! heavy jobs only and hold the agent there for the whole wait while uptime slots free
//! up and uptime jobs queue at the service.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use super::AgentError;
use super::backoff::Backoff;
use super::client::{ClientError, ServiceClient};
use super::dispatcher::Dispatcher;
use super::events::{Events, names};
use super::state::Fatal;
use crate::model::Pool;
use crate::protocol::{LeaseRequest, MAX_LEASE_WAIT_SECS, PoolCapacity};

/// The lease loop's parts.
pub struct Poller {
    pub agent_id: Uuid,
    pub client: Arc<ServiceClient>,
    pub dispatcher: Arc<Dispatcher>,
    pub events: Events,
    pub fatal: Arc<Fatal>,
}

impl Poller {
    /// Polls until `stop` fires (in-flight long-polls are abandoned) or the key is
    /// refused.
    pub async fn run(self, stop: CancellationToken) {
        tokio::join!(
            self.pool_loop(Pool::Uptime, &stop),
            self.pool_loop(Pool::Heavy, &stop)
        );
    }

    /// The lease loop of one pool.
    async fn pool_loop(&self, pool: Pool, stop: &CancellationToken) {
        let mut backoff = Backoff::default();
        loop {
            let free = tokio::select! {
                _ = stop.cancelled() => return,
                c = self.dispatcher.wait_for_capacity(pool) => c,
            };
            let capacity = PoolCapacity::only(pool, free);
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
                        tracing::debug!(pool = pool.as_str(), "No jobs. Waiting..");
                    } else {
                        tracing::debug!(
                            pool = pool.as_str(),
                            count = response.jobs.len(),
                            "leased jobs"
                        );
                    }
                    for job in response.jobs {
                        self.dispatcher.accept(job).await;
                    }
                    continue;
                }
                Err(ClientError::Unauthorized { .. }) => {
                    // The agent stops on it, and `stop` ends the other pool's loop.
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
                    pool = pool.as_str(),
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
