//! Error reports (`EXTERNAL_OBSERVABILITY`, on unless `off`): error-level internal
//! events of the agent and panics of its threads, sent to the control plane with
//! `POST /agent/v1/error-reports` over the agent's own client (outbound, through the
//! configured proxy).
//!
//! - [`ReportSink`]: where [`crate::agent::events::Events`] and the panic hook put an
//!   occurrence. It never blocks the caller and never awaits: strings are cleaned
//!   ([`sanitize`]), then the bounded queue ([`queue`]) takes them under a short lock.
//! - [`ErrorReporter`]: the task that sends batches of at most
//!   [`MAX_ERROR_REPORTS_PER_REQUEST`], after a short linger, at most one request per
//!   [`MIN_SEND_INTERVAL`] (the rate limit), retrying transient failures with backoff.
//!   Its own failures are logged at debug only and never become reports (no loops).
//! - [`panic_hook`]: panics with their backtrace.
//!
//! A report carries the event name, the message, a backtrace for panics, first and last
//! time, count, and per request the agent version, platform and runtime: nothing else.

pub mod panic_hook;
pub mod queue;
pub mod sanitize;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::Utc;
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::backoff::Backoff;
use super::client::{ClientError, ServiceClient};
use super::scrub::Scrubber;
use super::state::lock;
use crate::protocol::{
    ErrorReport, ErrorReportsRequest, MAX_ERROR_BACKTRACE_BYTES, MAX_ERROR_EVENT_LEN,
    MAX_ERROR_MESSAGE_BYTES, MAX_ERROR_REPORTS_PER_REQUEST,
};

use self::queue::{Occurrence, ReportQueue};

/// Reports kept while they wait to be sent.
pub const QUEUE_CAPACITY: usize = 100;
/// A repeated error (same event and message) is reported at most once per window.
pub const DEDUP_WINDOW: Duration = Duration::from_secs(60);
/// How long the first report waits for others to travel with it.
pub const LINGER: Duration = Duration::from_millis(500);
/// Shortest time between two requests.
pub const MIN_SEND_INTERVAL: Duration = Duration::from_secs(10);
/// How long the last send at shutdown may take.
pub const FLUSH_DEADLINE: Duration = Duration::from_secs(5);

/// What the sink and the sender share.
struct Shared {
    queue: Mutex<ReportQueue>,
    wake: Notify,
    /// Occurrences lost before reaching the queue (its lock was busy in a panic hook).
    lost: AtomicU64,
}

/// Takes error occurrences for reporting; cheap to clone.
#[derive(Clone)]
pub struct ReportSink {
    shared: Arc<Shared>,
    scrubber: Scrubber,
}

impl ReportSink {
    /// An empty sink whose strings pass `scrubber` (the agent's: its key and the
    /// `SERVICE_SECRET_*` values). Nothing leaves it without an [`ErrorReporter`].
    pub fn new(scrubber: Scrubber) -> ReportSink {
        ReportSink {
            shared: Arc::new(Shared {
                queue: Mutex::new(ReportQueue::new(QUEUE_CAPACITY, DEDUP_WINDOW)),
                wake: Notify::new(),
                lost: AtomicU64::new(0),
            }),
            scrubber,
        }
    }

    /// Takes every waiting report (tests).
    #[cfg(test)]
    pub(crate) fn take_all(&self) -> Vec<ErrorReport> {
        lock(&self.shared.queue).take(usize::MAX, std::time::Instant::now())
    }

    /// Queues one occurrence of `event`. Strings are scrubbed with the agent's scrubber
    /// and cut to the protocol's limits here.
    pub fn record(&self, event: &str, message: &str, backtrace: Option<&str>) {
        let occurrence = self.occurrence(event, message, backtrace);
        lock(&self.shared.queue).record(occurrence, Instant::now().into_std());
        self.shared.wake.notify_one();
    }

    /// [`ReportSink::record`] that gives up (counting a dropped report) instead of
    /// waiting for the queue's lock: for the panic hook, which may run while this
    /// thread holds it.
    fn try_record(&self, event: &str, message: &str, backtrace: Option<&str>) {
        let occurrence = self.occurrence(event, message, backtrace);
        match self.shared.queue.try_lock() {
            Ok(mut queue) => queue.record(occurrence, std::time::Instant::now()),
            Err(std::sync::TryLockError::Poisoned(poisoned)) => poisoned
                .into_inner()
                .record(occurrence, std::time::Instant::now()),
            Err(std::sync::TryLockError::WouldBlock) => {
                self.shared.lost.fetch_add(1, Ordering::Relaxed);
            }
        }
        self.shared.wake.notify_one();
    }

    fn occurrence(&self, event: &str, message: &str, backtrace: Option<&str>) -> Occurrence {
        Occurrence {
            event: sanitize::clean(&self.scrubber, event, MAX_ERROR_EVENT_LEN),
            message: sanitize::clean(&self.scrubber, message, MAX_ERROR_MESSAGE_BYTES),
            backtrace: backtrace
                .map(|b| sanitize::clean(&self.scrubber, b, MAX_ERROR_BACKTRACE_BYTES)),
            at: Utc::now(),
        }
    }
}

/// The sending task's parts.
pub struct ErrorReporter {
    shared: Arc<Shared>,
    client: Arc<ServiceClient>,
}

/// `<os>-<arch>` of this build, e.g. `linux-x86_64`.
pub fn platform() -> String {
    format!("{}-{}", std::env::consts::OS, std::env::consts::ARCH)
}

/// The compiler and async runtime this build was made with.
pub fn runtime() -> String {
    format!(
        "{}; tokio {}",
        env!("OUTPOST_RUSTC_VERSION"),
        env!("OUTPOST_TOKIO_VERSION")
    )
}

impl ErrorReporter {
    /// The task that sends what `sink` collects through `client`; run
    /// [`ErrorReporter::run`] in its own task.
    pub fn new(sink: &ReportSink, client: Arc<ServiceClient>) -> ErrorReporter {
        ErrorReporter {
            shared: sink.shared.clone(),
            client,
        }
    }

    /// Sends reports until `stop` fires, then makes one last attempt (bounded by
    /// [`FLUSH_DEADLINE`]) for what is still waiting.
    pub async fn run(self, stop: CancellationToken) {
        let mut backoff = Backoff::default();
        let mut last_send: Option<Instant> = None;
        let mut retry_at: Option<Instant> = None;
        loop {
            let notified = self.shared.wake.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let (ready, due) = {
                let queue = lock(&self.shared.queue);
                (
                    queue.ready(Instant::now().into_std()) || self.lost() > 0,
                    queue.next_due(),
                )
            };
            if !ready {
                tokio::select! {
                    _ = stop.cancelled() => break,
                    _ = &mut notified => {}
                    _ = sleep_until_std(due) => {}
                }
                continue;
            }
            let now = Instant::now();
            let mut send_at = now + LINGER;
            if let Some(last) = last_send {
                send_at = send_at.max(last + MIN_SEND_INTERVAL);
            }
            if let Some(retry) = retry_at {
                send_at = send_at.max(retry);
            }
            tokio::select! {
                _ = stop.cancelled() => break,
                _ = tokio::time::sleep_until(send_at) => {}
            }
            let batch = self.take_batch();
            if batch.is_empty() {
                continue;
            }
            last_send = Some(Instant::now());
            match self.send(&batch).await {
                Ok(()) => {
                    backoff.reset();
                    retry_at = None;
                }
                Err(e) if e.is_transient() => {
                    let delay = backoff.next_delay();
                    tracing::debug!(
                        count = batch.len(),
                        retry_in_ms = delay.as_millis() as u64,
                        "error reports not sent: {e}"
                    );
                    lock(&self.shared.queue).requeue(batch);
                    retry_at = Some(Instant::now() + delay);
                }
                Err(e) => {
                    tracing::debug!(count = batch.len(), "error reports refused, dropped: {e}");
                    retry_at = None;
                }
            }
        }
        self.flush().await;
    }

    /// The last attempts at shutdown: the repeats counted in open windows are added,
    /// then batches are sent until none is left, one fails, or [`FLUSH_DEADLINE`].
    async fn flush(&self) {
        lock(&self.shared.queue).close_windows();
        let sending = async {
            loop {
                let batch = self.take_batch();
                if batch.is_empty() {
                    return;
                }
                if let Err(e) = self.send(&batch).await {
                    tracing::debug!(count = batch.len(), "error reports not sent: {e}");
                    return;
                }
            }
        };
        if tokio::time::timeout(FLUSH_DEADLINE, sending).await.is_err() {
            tracing::debug!("error reports not sent before shutdown");
        }
    }

    fn lost(&self) -> u64 {
        self.shared.lost.load(Ordering::Relaxed)
    }

    fn take_batch(&self) -> Vec<ErrorReport> {
        let lost = self.shared.lost.swap(0, Ordering::Relaxed);
        let mut queue = lock(&self.shared.queue);
        queue.add_dropped(lost, Utc::now());
        queue.take(MAX_ERROR_REPORTS_PER_REQUEST, Instant::now().into_std())
    }

    async fn send(&self, reports: &[ErrorReport]) -> Result<(), ClientError> {
        let request = ErrorReportsRequest {
            agent_version: crate::VERSION.to_owned(),
            platform: platform(),
            runtime: runtime(),
            reports: reports.to_vec(),
        };
        let answer = self.client.send_error_reports(&request).await?;
        tracing::debug!(stored = answer.stored, "error reports sent");
        Ok(())
    }
}

async fn sleep_until_std(at: Option<std::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(Instant::from_std(at)).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sink_cleans_what_it_queues() {
        let sink = ReportSink::new(Scrubber::new(["agent-key", "s3cr3t"]));
        sink.record(
            "agent.spool.write_failed",
            "cannot write /var/spool/s3cr3t for http://example.com/?k=agent-key",
            None,
        );
        sink.record(
            "agent.panic",
            &"x".repeat(10_000),
            Some("frames with agent-key"),
        );
        let reports = sink.take_all();
        assert_eq!(reports.len(), 2);
        assert_eq!(
            reports[0].message,
            format!("cannot write /var/spool/{} for <url>", crate::scrub::MASK)
        );
        assert!(reports[1].message.len() <= MAX_ERROR_MESSAGE_BYTES);
        assert_eq!(
            reports[1].backtrace.as_deref(),
            Some(format!("frames with {}", crate::scrub::MASK).as_str())
        );
    }

    #[test]
    fn platform_and_runtime_name_this_build() {
        assert_eq!(
            platform(),
            format!("{}-{}", std::env::consts::OS, std::env::consts::ARCH)
        );
        let runtime = runtime();
        assert!(runtime.starts_with("rustc "), "{runtime}");
        assert!(runtime.contains("; tokio 1."), "{runtime}");
    }
}
