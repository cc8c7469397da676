//! Delivers results to the service: batched (up to [`MAX_BATCH`] per request, after a
//! short linger), with ACCEPTED, DUPLICATE and REFUSED all final. Results that cannot
//! be delivered right away go to the on-disk spool, which is swept at start, when the
//! retry backoff expires, and as soon as the service is reachable again. Spool files are
//! removed only after a final outcome, so nothing is lost across a restart.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::AgentError;
use super::backoff::Backoff;
use super::client::{ClientError, ServiceClient};
use super::events::{Events, names};
use super::inflight::LeaseTable;
use super::spool::{Loaded, Spool};
use super::state::{AgentState, Fatal};
use crate::protocol::{LeaseRef, SubmitStatus, SubmittedResult};

/// Most results in one RESULTS request.
pub const MAX_BATCH: usize = 500;
/// How long the reporter waits for more results before sending a batch.
pub const LINGER: Duration = Duration::from_millis(10);
/// Capacity of the channel from the job tasks to the reporter.
pub const CHANNEL_CAPACITY: usize = 1024;
/// How long the final flush at shutdown may try to deliver.
pub const FLUSH_DEADLINE: Duration = Duration::from_secs(15);
/// Results kept in memory when even the spool cannot take them.
const MAX_UNSPOOLED: usize = 10_000;

/// A result on its way, and whether a spool file holds it.
struct Item {
    result: SubmittedResult,
    spooled: bool,
}

/// How a delivery pass ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pass {
    /// Every result got a final outcome.
    Done,
    /// The service is unreachable or failing; retry later.
    Transient,
    /// The key was refused: never try again.
    Refused,
}

/// The reporter loop and what it owns.
pub struct Reporter {
    rx: mpsc::Receiver<SubmittedResult>,
    client: Arc<ServiceClient>,
    spool: Arc<Spool>,
    leases: Arc<LeaseTable>,
    state: Arc<AgentState>,
    events: Events,
    fatal: Arc<Fatal>,
    backoff: Backoff,
    /// Deliveries are paused until this instant (service unreachable).
    retry_at: Option<Instant>,
    /// The key was refused: only spool from now on.
    refused: bool,
    /// The spool may hold results.
    spool_dirty: bool,
    /// Results that neither the service nor the spool took.
    unspooled: Vec<Item>,
}

impl Reporter {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        rx: mpsc::Receiver<SubmittedResult>,
        client: Arc<ServiceClient>,
        spool: Arc<Spool>,
        leases: Arc<LeaseTable>,
        state: Arc<AgentState>,
        events: Events,
        fatal: Arc<Fatal>,
    ) -> Reporter {
        Reporter {
            rx,
            client,
            spool,
            leases,
            state,
            events,
            fatal,
            backoff: Backoff::default(),
            retry_at: None,
            refused: false,
            spool_dirty: true,
            unspooled: Vec::new(),
        }
    }

    fn paused(&self) -> bool {
        self.refused || self.retry_at.is_some()
    }

    /// Runs until `finish` fires (or every sender is gone), then flushes: what is left
    /// goes to the spool and is delivered within [`FLUSH_DEADLINE`] if the service answers.
    pub async fn run(mut self, finish: CancellationToken) {
        loop {
            if !self.paused() && (self.spool_dirty || !self.unspooled.is_empty()) {
                self.sweep().await;
            }
            let retry_at = self.retry_at;
            let mut batch = Vec::new();
            tokio::select! {
                biased;
                _ = finish.cancelled() => break,
                item = self.rx.recv() => match item {
                    Some(r) => batch.push(r),
                    None => break,
                },
                _ = sleep_until_opt(retry_at) => {
                    self.retry_at = None;
                    continue;
                }
                _ = self.state.reachable_again(), if retry_at.is_some() => {
                    // Another exchange succeeded: retry soon, but never more often than
                    // the backoff floor (RESULTS may fail while the rest works).
                    let soon = Instant::now() + super::backoff::MIN_DELAY;
                    self.retry_at = retry_at.map(|at| at.min(soon));
                    continue;
                }
            }
            self.linger(&mut batch).await;
            self.submit_batch(batch).await;
        }
        self.flush().await;
    }

    /// Gathers more results for up to [`LINGER`], up to [`MAX_BATCH`].
    async fn linger(&mut self, batch: &mut Vec<SubmittedResult>) {
        let deadline = Instant::now() + LINGER;
        while batch.len() < MAX_BATCH {
            match tokio::time::timeout_at(deadline, self.rx.recv()).await {
                Ok(Some(r)) => batch.push(r),
                Ok(None) | Err(_) => break,
            }
        }
    }

    /// Delivers fresh results, or spools them while deliveries are paused.
    async fn submit_batch(&mut self, batch: Vec<SubmittedResult>) {
        let mut items: Vec<Item> = batch
            .into_iter()
            .map(|result| Item {
                result,
                spooled: false,
            })
            .collect();
        if !self.paused() {
            let pass = self.deliver(&mut items).await;
            self.after_pass(pass);
        }
        self.spool_items(items).await;
    }

    /// Delivers the results left in memory and then the spool, a batch at a time, until
    /// it is empty or a pass fails.
    async fn sweep(&mut self) {
        if !self.unspooled.is_empty() {
            let mut items = std::mem::take(&mut self.unspooled);
            let pass = self.deliver(&mut items).await;
            self.after_pass(pass);
            self.unspooled = items;
            if pass != Pass::Done {
                return;
            }
        }
        loop {
            let (listed, mut items) = match self.load_spool_batch().await {
                Ok(loaded) => loaded,
                Err(e) => {
                    self.events.internal_error(
                        names::SPOOL_WRITE,
                        &format!("cannot read the spool {}: {e}", self.spool.dir().display()),
                    );
                    self.pause();
                    return;
                }
            };
            if listed == 0 {
                self.spool_dirty = false;
                return;
            }
            if items.is_empty() {
                continue; // all quarantined: look at the next files
            }
            tracing::info!(count = items.len(), "delivering spooled results");
            let pass = self.deliver(&mut items).await;
            self.after_pass(pass);
            if pass != Pass::Done || !items.is_empty() {
                return;
            }
        }
    }

    /// Reads up to [`MAX_BATCH`] spooled results; quarantines unreadable files. Returns
    /// how many files were looked at, and the results read.
    async fn load_spool_batch(&mut self) -> std::io::Result<(usize, Vec<Item>)> {
        let spool = self.spool.clone();
        let loaded = tokio::task::spawn_blocking(move || -> std::io::Result<Vec<Loaded>> {
            let leases = spool.list()?;
            let mut loaded = Vec::new();
            for lease in leases.into_iter().take(MAX_BATCH) {
                match spool.load(lease) {
                    Ok(l) => loaded.push(l),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => return Err(e),
                }
            }
            Ok(loaded)
        })
        .await
        .map_err(std::io::Error::other)??;
        let listed = loaded.len();
        let mut items = Vec::with_capacity(loaded.len());
        for l in loaded {
            match l {
                Loaded::Result(result) => items.push(Item {
                    result: *result,
                    spooled: true,
                }),
                Loaded::Quarantined { lease, reason } => self.events.internal_error(
                    names::SPOOL_CORRUPT,
                    &format!(
                        "spooled result of job {} moved to quarantine: {reason}",
                        lease.job_id
                    ),
                ),
            }
        }
        Ok((listed, items))
    }

    /// Sends `items` in batches. On return `items` holds what got no final outcome.
    async fn deliver(&mut self, items: &mut Vec<Item>) -> Pass {
        let mut queue: VecDeque<Vec<Item>> = VecDeque::new();
        let mut rest = std::mem::take(items);
        while !rest.is_empty() {
            let tail = rest.split_off(rest.len().min(MAX_BATCH));
            queue.push_back(rest);
            rest = tail;
        }
        let mut pass = Pass::Done;
        while let Some(chunk) = queue.pop_front() {
            if pass != Pass::Done {
                items.extend(chunk);
                continue;
            }
            let refs: Vec<&SubmittedResult> = chunk.iter().map(|i| &i.result).collect();
            match self.client.submit(&refs).await {
                Ok(response) => {
                    let outcomes: HashMap<LeaseRef, (SubmitStatus, Option<String>)> = response
                        .outcomes
                        .into_iter()
                        .map(|o| {
                            (
                                LeaseRef {
                                    job_id: o.job_id,
                                    lease_id: o.lease_id,
                                },
                                (o.status, o.reason),
                            )
                        })
                        .collect();
                    let mut settled = Vec::new();
                    for item in chunk {
                        let lease = item.result.lease();
                        match outcomes.get(&lease) {
                            Some((status, reason)) => {
                                log_outcome(lease, *status, reason.as_deref());
                                self.leases.settle(lease);
                                if item.spooled {
                                    settled.push(lease);
                                }
                            }
                            None => {
                                items.push(item);
                                pass = Pass::Transient;
                            }
                        }
                    }
                    if pass == Pass::Transient {
                        tracing::warn!("the service answered without an outcome for some results");
                    }
                    self.remove_spooled(settled).await;
                }
                Err(ClientError::Unauthorized { .. }) => {
                    self.fatal.raise(AgentError::Unauthorized);
                    items.extend(chunk);
                    pass = Pass::Refused;
                }
                Err(ClientError::Rejected { status, message }) if chunk.len() > 1 => {
                    // Find the culprit: retry each half on its own.
                    tracing::warn!(
                        status,
                        count = chunk.len(),
                        "results rejected ({message}); splitting the batch"
                    );
                    let mut first = chunk;
                    let second = first.split_off(first.len() / 2);
                    queue.push_front(second);
                    queue.push_front(first);
                }
                Err(ClientError::Rejected { status, message }) => {
                    for item in chunk {
                        self.reject(item, status, &message).await;
                    }
                }
                Err(e @ ClientError::Transient(_)) => {
                    tracing::warn!(count = chunk.len(), "cannot deliver results: {e}");
                    items.extend(chunk);
                    pass = Pass::Transient;
                }
            }
        }
        pass
    }

    /// The service rejected one result for good: keep it in quarantine, never resend.
    async fn reject(&mut self, item: Item, status: u16, message: &str) {
        let lease = item.result.lease();
        self.leases.settle(lease);
        let spool = self.spool.clone();
        let stored = tokio::task::spawn_blocking(move || {
            if item.spooled {
                spool.quarantine(lease)
            } else {
                spool.write_quarantined(&item.result)
            }
        })
        .await
        .map_err(std::io::Error::other)
        .and_then(|r| r);
        let kept = match stored {
            Ok(()) => "kept in the spool's quarantine".to_owned(),
            Err(e) => format!("and could not be quarantined: {e}"),
        };
        self.events.internal_error(
            names::RESULT_REJECTED,
            &format!(
                "the service rejected the result of job {} (HTTP {status}: {message}); {kept}",
                lease.job_id
            ),
        );
    }

    async fn remove_spooled(&mut self, leases: Vec<LeaseRef>) {
        if leases.is_empty() {
            return;
        }
        let spool = self.spool.clone();
        let removed = tokio::task::spawn_blocking(move || {
            for lease in leases {
                spool.remove(lease)?;
            }
            Ok::<_, std::io::Error>(())
        })
        .await
        .map_err(std::io::Error::other)
        .and_then(|r| r);
        if let Err(e) = removed {
            // A file left behind is resent later and then answered DUPLICATE.
            tracing::warn!("cannot remove a delivered result from the spool: {e}");
        }
    }

    /// Writes results that are not in the spool yet to it; if that fails they stay in
    /// memory (bounded) and are retried with the next sweep.
    async fn spool_items(&mut self, items: Vec<Item>) {
        let fresh: Vec<SubmittedResult> = items
            .into_iter()
            .filter(|i| !i.spooled)
            .map(|i| i.result)
            .collect();
        if fresh.is_empty() {
            return;
        }
        let count = fresh.len();
        let spool = self.spool.clone();
        let failed = tokio::task::spawn_blocking(move || {
            let mut failed = Vec::new();
            let mut last_error = None;
            for r in fresh {
                if let Err(e) = spool.write(&r) {
                    last_error = Some(e);
                    failed.push(r);
                }
            }
            (failed, last_error)
        })
        .await;
        self.spool_dirty = true;
        let (failed, last_error) = match failed {
            Ok(f) => f,
            Err(e) => {
                self.events.internal_error(
                    names::SPOOL_WRITE,
                    &format!("the spool writer failed: {e}; {count} results are lost"),
                );
                return;
            }
        };
        tracing::info!(
            count = count - failed.len(),
            dir = %self.spool.dir().display(),
            "results spooled until the service can take them"
        );
        if let Some(e) = last_error {
            self.events.internal_error(
                names::SPOOL_WRITE,
                &format!(
                    "cannot write {} results to the spool {}: {e}; keeping them in memory",
                    failed.len(),
                    self.spool.dir().display()
                ),
            );
            for result in failed {
                if self.unspooled.len() >= MAX_UNSPOOLED {
                    self.events.internal_error(
                        names::SPOOL_WRITE,
                        &format!(
                            "dropping the result of job {}: too many unspooled results",
                            result.job_id
                        ),
                    );
                    continue;
                }
                self.unspooled.push(Item {
                    result,
                    spooled: false,
                });
            }
        }
    }

    fn after_pass(&mut self, pass: Pass) {
        match pass {
            Pass::Done => self.backoff.reset(),
            Pass::Transient => self.pause(),
            Pass::Refused => self.refused = true,
        }
    }

    /// Pauses deliveries for the next backoff delay.
    fn pause(&mut self) {
        let delay = self.backoff.next_delay();
        tracing::info!(
            retry_in_ms = delay.as_millis() as u64,
            "result delivery paused"
        );
        self.retry_at = Some(Instant::now() + delay);
    }

    /// Shutdown: everything left is spooled first (durable), then delivered from the
    /// spool within the deadline; whatever is not delivered waits for the next start.
    async fn flush(&mut self) {
        self.rx.close();
        let mut items = std::mem::take(&mut self.unspooled);
        while let Ok(result) = self.rx.try_recv() {
            items.push(Item {
                result,
                spooled: false,
            });
        }
        self.spool_items(items).await;
        if self.refused || !self.spool_dirty {
            return;
        }
        self.retry_at = None;
        if tokio::time::timeout(FLUSH_DEADLINE, self.sweep())
            .await
            .is_err()
        {
            tracing::warn!("results not delivered before shutdown stay in the spool");
        }
    }
}

async fn sleep_until_opt(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

fn log_outcome(lease: LeaseRef, status: SubmitStatus, reason: Option<&str>) {
    match status {
        SubmitStatus::Accepted => tracing::debug!(job_id = %lease.job_id, "result accepted"),
        SubmitStatus::Duplicate => {
            tracing::debug!(job_id = %lease.job_id, "result already delivered")
        }
        SubmitStatus::Refused => tracing::info!(
            job_id = %lease.job_id,
            reason = reason.unwrap_or(""),
            "result refused by the service (lease expired); the job runs again"
        ),
    }
}
