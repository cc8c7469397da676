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

use std::future::Future;
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
/// How long the last sends at shutdown may take.
pub const FLUSH_DEADLINE: Duration = Duration::from_secs(5);

/// The timing of an [`ErrorReporter`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pace {
    /// How long the first report waits for others to travel with it.
    pub linger: Duration,
    /// Shortest time between two requests (the rate limit).
    pub min_interval: Duration,
    /// Floor and ceiling of the retry delay after a transient failure.
    pub retry_min: Duration,
    pub retry_max: Duration,
    /// How long the last sends at shutdown may take.
    pub flush_deadline: Duration,
}

impl Default for Pace {
    fn default() -> Pace {
        Pace {
            linger: LINGER,
            min_interval: MIN_SEND_INTERVAL,
            retry_min: super::backoff::MIN_DELAY,
            retry_max: super::backoff::MAX_DELAY,
            flush_deadline: FLUSH_DEADLINE,
        }
    }
}

/// Where an [`ErrorReporter`] sends requests: the agent's [`ServiceClient`].
pub trait ReportTransport: Send + Sync + 'static {
    fn send_reports(
        &self,
        request: &ErrorReportsRequest,
    ) -> impl Future<Output = Result<(), ClientError>> + Send;
}

impl ReportTransport for ServiceClient {
    async fn send_reports(&self, request: &ErrorReportsRequest) -> Result<(), ClientError> {
        let answer = self.send_error_reports(request).await?;
        tracing::debug!(stored = answer.stored, "error reports sent");
        Ok(())
    }
}

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

    /// The cleaned occurrence; blank strings (which the service refuses) are replaced
    /// or left out.
    fn occurrence(&self, event: &str, message: &str, backtrace: Option<&str>) -> Occurrence {
        let message = sanitize::clean(&self.scrubber, message, MAX_ERROR_MESSAGE_BYTES);
        Occurrence {
            event: sanitize::clean(&self.scrubber, event, MAX_ERROR_EVENT_LEN),
            message: if message.trim().is_empty() {
                "(no message)".to_owned()
            } else {
                message
            },
            backtrace: backtrace
                .map(|b| sanitize::clean(&self.scrubber, b, MAX_ERROR_BACKTRACE_BYTES))
                .filter(|b| !b.trim().is_empty()),
            at: Utc::now(),
        }
    }
}

/// The sending task's parts.
pub struct ErrorReporter<T: ReportTransport = ServiceClient> {
    shared: Arc<Shared>,
    transport: Arc<T>,
    pace: Pace,
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

impl<T: ReportTransport> ErrorReporter<T> {
    /// The task that sends what `sink` collects through `transport` at the default
    /// [`Pace`]; run [`ErrorReporter::run`] in its own task.
    pub fn new(sink: &ReportSink, transport: Arc<T>) -> ErrorReporter<T> {
        ErrorReporter {
            shared: sink.shared.clone(),
            transport,
            pace: Pace::default(),
        }
    }

    /// The same at another pace (tests).
    pub fn with_pace(mut self, pace: Pace) -> ErrorReporter<T> {
        self.pace = pace;
        self
    }

    /// Sends reports until `stop` fires, then makes the last attempts (bounded by the
    /// pace's flush deadline) for what is still waiting.
    pub async fn run(self, stop: CancellationToken) {
        let mut backoff = Backoff::new(self.pace.retry_min, self.pace.retry_max);
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
            let mut send_at = now + self.pace.linger;
            if let Some(last) = last_send {
                send_at = send_at.max(last + self.pace.min_interval);
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
    /// then batches are sent until none is left, one fails, or the flush deadline.
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
        if tokio::time::timeout(self.pace.flush_deadline, sending)
            .await
            .is_err()
        {
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
        self.transport.send_reports(&request).await
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
    use std::sync::atomic::AtomicUsize;

    /// A transport that records every attempt and fails the first `failures` ones.
    struct Recorder {
        attempts: Mutex<Vec<(Instant, ErrorReportsRequest, bool)>>,
        failures: AtomicUsize,
        attempted: Notify,
    }

    impl Recorder {
        fn new(failures: usize) -> Arc<Recorder> {
            Arc::new(Recorder {
                attempts: Mutex::new(Vec::new()),
                failures: AtomicUsize::new(failures),
                attempted: Notify::new(),
            })
        }

        /// Waits until `n` requests were delivered; returns them with their times.
        async fn delivered(&self, n: usize) -> Vec<(Instant, ErrorReportsRequest)> {
            let wait = async {
                loop {
                    let notified = self.attempted.notified();
                    let ok: Vec<_> = lock(&self.attempts)
                        .iter()
                        .filter(|a| a.2)
                        .map(|a| (a.0, a.1.clone()))
                        .collect();
                    if ok.len() >= n {
                        return ok;
                    }
                    notified.await;
                }
            };
            match tokio::time::timeout(Duration::from_secs(10), wait).await {
                Ok(ok) => ok,
                Err(_) => panic!("{n} requests were not delivered"),
            }
        }
    }

    impl ReportTransport for Recorder {
        async fn send_reports(&self, request: &ErrorReportsRequest) -> Result<(), ClientError> {
            let fail = self
                .failures
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok();
            lock(&self.attempts).push((Instant::now(), request.clone(), !fail));
            self.attempted.notify_waiters();
            if fail {
                Err(ClientError::Transient("the service is down".into()))
            } else {
                Ok(())
            }
        }
    }

    const FAST: Pace = Pace {
        linger: Duration::from_millis(20),
        min_interval: Duration::from_millis(300),
        retry_min: Duration::from_millis(50),
        retry_max: Duration::from_millis(100),
        flush_deadline: Duration::from_secs(2),
    };

    fn start(
        sink: &ReportSink,
        transport: &Arc<Recorder>,
        pace: Pace,
    ) -> (CancellationToken, tokio::task::JoinHandle<()>) {
        let stop = CancellationToken::new();
        let reporter = ErrorReporter::new(sink, transport.clone()).with_pace(pace);
        let task = tokio::spawn(reporter.run(stop.clone()));
        (stop, task)
    }

    #[tokio::test]
    async fn batches_are_bounded_and_paced() {
        let sink = ReportSink::new(Scrubber::default());
        let transport = Recorder::new(0);
        let (stop, task) = start(&sink, &transport, FAST);
        for i in 0..25 {
            sink.record("agent.test", &format!("error {i}"), None);
        }
        let sent = transport.delivered(2).await;
        assert_eq!(sent[0].1.reports.len(), MAX_ERROR_REPORTS_PER_REQUEST);
        assert_eq!(sent[1].1.reports.len(), 25 - MAX_ERROR_REPORTS_PER_REQUEST);
        assert!(
            sent[1].0 - sent[0].0 >= FAST.min_interval,
            "requests {:?} apart",
            sent[1].0 - sent[0].0
        );
        assert_eq!(sent[0].1.agent_version, crate::VERSION);
        assert_eq!(sent[0].1.reports[0].message, "error 0");
        stop.cancel();
        let _ = task.await;
        assert_eq!(lock(&transport.attempts).len(), 2, "nothing else was sent");
    }

    #[tokio::test]
    async fn a_failed_send_is_retried_and_never_reported() {
        let sink = ReportSink::new(Scrubber::default());
        let transport = Recorder::new(1);
        let (stop, task) = start(&sink, &transport, FAST);
        sink.record("agent.test", "boom", None);
        let sent = transport.delivered(1).await;
        stop.cancel();
        let _ = task.await;
        let attempts = lock(&transport.attempts);
        assert_eq!(attempts.len(), 2, "one failure, one retry");
        assert!(attempts[1].0 - attempts[0].0 >= FAST.retry_min);
        let reports = &sent[0].1.reports;
        assert_eq!(reports.len(), 1, "{reports:?}");
        assert_eq!(
            (reports[0].event.as_str(), reports[0].count),
            ("agent.test", 1)
        );
    }

    #[tokio::test]
    async fn what_waits_is_sent_at_shutdown() {
        let sink = ReportSink::new(Scrubber::default());
        let transport = Recorder::new(0);
        let slow = Pace {
            linger: Duration::from_secs(3600),
            ..FAST
        };
        let (stop, task) = start(&sink, &transport, slow);
        for _ in 0..3 {
            sink.record("agent.test", "boom", None);
        }
        stop.cancel();
        let sent = transport.delivered(1).await;
        let _ = task.await;
        assert_eq!(sent[0].1.reports.len(), 1);
        assert_eq!(sent[0].1.reports[0].count, 3);
    }

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
