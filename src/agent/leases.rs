//! Lease upkeep: one loop renews every in-flight lease in a single RENEW batch every
//! ttl/3 and cancels the runs of leases the service reports lost; RELEASE gives back
//! leases of jobs this agent will not run (drain, grace period over).

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::AgentError;
use super::backoff::Backoff;
use super::client::{ClientError, ServiceClient};
use super::events::{Events, names};
use super::inflight::LeaseTable;
use super::state::Fatal;
use crate::protocol::{LeaseRef, ReleaseRequest, RenewRequest};

/// Most leases in one RENEW or RELEASE request.
pub const MAX_LEASES_PER_REQUEST: usize = 1000;
/// Attempts of one RELEASE before the leases are left to expire.
const RELEASE_ATTEMPTS: u32 = 3;

/// How often to renew for a lease time-to-live: a third of it, at least one second.
pub fn renew_interval(ttl: Duration) -> Duration {
    (ttl / 3).max(Duration::from_secs(1))
}

/// The renewal loop's parts.
pub struct Renewer {
    pub client: Arc<ServiceClient>,
    pub leases: Arc<LeaseTable>,
    pub interval: Duration,
    pub fatal: Arc<Fatal>,
}

impl Renewer {
    /// Renews until `stop` fires or the key is refused.
    pub async fn run(self, stop: CancellationToken) {
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tokio::time::sleep(self.interval) => {}
            }
            let all = self.leases.all();
            for chunk in all.chunks(MAX_LEASES_PER_REQUEST) {
                let request = RenewRequest {
                    leases: chunk.to_vec(),
                };
                let answer = tokio::select! {
                    _ = stop.cancelled() => return,
                    a = self.client.renew(&request) => a,
                };
                match answer {
                    Ok(response) => {
                        if !response.lost.is_empty() {
                            let cancelled = self.leases.lose(&response.lost);
                            tracing::warn!(
                                lost = response.lost.len(),
                                cancelled = cancelled.len(),
                                "leases lost; their runs were cancelled and their results dropped"
                            );
                        }
                    }
                    Err(ClientError::Unauthorized { .. }) => {
                        self.fatal.raise(AgentError::Unauthorized);
                        return;
                    }
                    Err(e) => tracing::warn!("cannot renew leases: {e}"),
                }
            }
        }
    }
}

/// Gives `leases` back to the queue, retrying transient errors a few times; leases that
/// cannot be released simply expire.
pub async fn release(client: &ServiceClient, leases: &[LeaseRef], events: &Events) {
    for chunk in leases.chunks(MAX_LEASES_PER_REQUEST) {
        let request = ReleaseRequest {
            leases: chunk.to_vec(),
        };
        let mut backoff = Backoff::new(Duration::from_millis(250), Duration::from_secs(2));
        let mut attempt = 0;
        loop {
            attempt += 1;
            match client.release(&request).await {
                Ok(r) => {
                    tracing::info!(released = r.released, "released leases of jobs not run");
                    break;
                }
                Err(e) if e.is_transient() && attempt < RELEASE_ATTEMPTS => {
                    tokio::time::sleep(backoff.next_delay()).await;
                }
                Err(e) => {
                    events.internal_error(
                        names::RELEASE_FAILED,
                        &format!(
                            "cannot release {} leases (they will expire): {e}",
                            chunk.len()
                        ),
                    );
                    break;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renews_three_times_per_ttl() {
        assert_eq!(
            renew_interval(Duration::from_secs(15)),
            Duration::from_secs(5)
        );
        assert_eq!(
            renew_interval(Duration::from_secs(2)),
            Duration::from_secs(1)
        );
    }
}
