//! Delivery to status page subscribers: incident updates written with
//! `notifySubscribers` go to the VERIFIED subscribers of the pages that show the
//! incident's services (one e-mail, or one webhook POST, per subscriber), and every new
//! PENDING e-mail subscription gets one confirmation mail.
//!
//! The store queues both in the transaction that writes the update or the
//! subscription; the API handler then wakes this worker ([`StatusNotifier::wake`]) and
//! answers at once. The worker also sweeps both queues at start and every
//! [`SWEEP_INTERVAL`] (for retries). Each outcome is recorded right after the SMTP
//! server or the webhook answered ([`Store::record_status_delivery`],
//! [`Store::record_confirmation`]), and a notification leaves the queue once every
//! subscriber has one: a restart resends only what had no answer yet.
//!
//! - Transient failures (network, SMTP 4xx, webhook 5xx/408/429, timeouts) are retried
//!   with exponential backoff (the mailer's and `alerts::webhook`'s, per the delivery
//!   policy); when those retries run out the subscriber stays pending and the next
//!   sweep tries again, until [`GIVE_UP_AFTER`] has passed since the update (or the
//!   subscription) was queued; then it is recorded FAILED.
//! - Permanent failures (SMTP 5xx, unusable addresses, other webhook answers) are
//!   recorded FAILED for that subscriber; the others go on.
//! - E-mail and webhooks have their own concurrency limits, so webhooks never wait for
//!   SMTP. Without an SMTP server (`--smtp-url`) webhooks are delivered, and the
//!   e-mails (notifications and confirmations) wait in the queue for a start with one.
//! - PENDING subscribers get no notifications. Every mail carries an unsubscribe link
//!   (and `List-Unsubscribe`); a confirmation mail also carries its confirmation link
//!   ([`links`]; the links are served by `status_html`).

pub mod links;
pub mod message;
pub mod payload;

mod confirm;
mod deliver;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{Notify, Semaphore};
use tokio::task::JoinSet;
use uuid::Uuid;

use crate::service::alerts::DeliveryPolicy;
use crate::service::alerts::email::Mailer;
use crate::service::store::{PendingConfirmation, StatusNotification, Store, StoreError};
use crate::shutdown::Shutdown;

/// How often the queues are swept besides the wake-ups (retries of transient failures).
pub const SWEEP_INTERVAL: Duration = Duration::from_secs(5 * 60);
/// A subscriber not reached this long after the update (or the subscription) was queued
/// is given up.
pub const GIVE_UP_AFTER: Duration = Duration::from_secs(24 * 60 * 60);
/// Entries of each queue read per sweep.
const BATCH: i64 = 1000;

/// Wakes the worker; cheap to clone. A wake-up while the worker is busy is kept.
#[derive(Clone, Default)]
pub struct StatusNotifier {
    wake: Arc<Notify>,
}

impl StatusNotifier {
    pub fn new() -> StatusNotifier {
        StatusNotifier::default()
    }

    /// Tells the worker that a notification or a confirmation was queued (never waits).
    pub fn wake(&self) {
        self.wake.notify_one();
    }
}

/// The background worker; [`Worker::run`] consumes it.
pub struct Worker {
    store: Store,
    /// None: no SMTP server configured, e-mails wait.
    mailer: Option<Mailer>,
    /// The webhook client (`alerts::webhook::client`) and its retry policy.
    http: reqwest::Client,
    policy: DeliveryPolicy,
    /// Base of links, without a trailing slash.
    public_url: String,
    wake: Arc<Notify>,
    /// E-mails sent at once (over all notifications and confirmations).
    mail_limit: Semaphore,
    /// Webhook requests at once (over all notifications).
    hook_limit: Semaphore,
}

/// A unit of work of the worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Job {
    Notification(Uuid),
    Confirmation(Uuid),
}

impl Worker {
    /// A worker woken by `notifier`; `http` is the webhook client, `policy` gives the
    /// concurrency (and the webhooks' retries; the mailer has its own).
    pub fn new(
        store: Store,
        mailer: Option<Mailer>,
        http: reqwest::Client,
        policy: DeliveryPolicy,
        public_url: String,
        notifier: &StatusNotifier,
    ) -> Worker {
        let concurrency = policy.concurrency.max(1);
        Worker {
            store,
            mailer,
            http,
            policy,
            public_url: public_url.trim_end_matches('/').to_owned(),
            wake: notifier.wake.clone(),
            mail_limit: Semaphore::new(concurrency),
            hook_limit: Semaphore::new(concurrency),
        }
    }

    /// Delivers until `stop` drains; deliveries still running then are dropped (what
    /// has no outcome is tried after the next start).
    pub async fn run(self, stop: Shutdown) {
        let this = Arc::new(self);
        // Each task answers whether its job only waits for an SMTP server.
        let mut tasks: JoinSet<bool> = JoinSet::new();
        let mut in_flight: HashMap<tokio::task::Id, Job> = HashMap::new();
        // Jobs left waiting for SMTP: not tried again by this process (the SMTP
        // settings only change with a restart).
        let mut parked: HashSet<Job> = HashSet::new();
        let mut sweep = tokio::time::interval(SWEEP_INTERVAL);
        sweep.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut first = true;
        loop {
            tokio::select! {
                _ = stop.draining() => break,
                Some(done) = tasks.join_next_with_id(), if !tasks.is_empty() => {
                    let (id, waits) = match done {
                        Ok((id, waits)) => (id, waits),
                        Err(e) => {
                            tracing::error!(error = %e, "status notification delivery ended abnormally");
                            (e.id(), false)
                        }
                    };
                    if let Some(job) = in_flight.remove(&id)
                        && waits
                    {
                        parked.insert(job);
                    }
                    continue;
                }
                _ = this.wake.notified() => {}
                _ = sweep.tick() => {}
            }
            let skip: HashSet<Job> = in_flight.values().chain(parked.iter()).copied().collect();
            match this.pending(first, &skip).await {
                Ok((notifications, confirmations)) => {
                    for n in notifications {
                        let job = Job::Notification(n.id);
                        let worker = this.clone();
                        let handle = tasks.spawn(async move { worker.deliver(n).await });
                        in_flight.insert(handle.id(), job);
                    }
                    for c in confirmations {
                        let job = Job::Confirmation(c.subscription_id);
                        let worker = this.clone();
                        let handle = tasks.spawn(async move {
                            worker.confirm(c).await;
                            false
                        });
                        in_flight.insert(handle.id(), job);
                    }
                }
                Err(e) => {
                    tracing::error!(error = %e, "cannot read the status notification queue")
                }
            }
            first = false;
        }
        tasks.abort_all();
        while tasks.join_next().await.is_some() {}
    }

    /// The queued notifications and confirmation mails to work on now (confirmations
    /// only with SMTP), logging what waits.
    async fn pending(
        &self,
        first: bool,
        skip: &HashSet<Job>,
    ) -> Result<(Vec<StatusNotification>, Vec<PendingConfirmation>), StoreError> {
        let notifications = self.store.pending_status_notifications(BATCH).await?;
        let confirmations = self.store.pending_confirmations(BATCH).await?;
        if first {
            tracing::info!(
                pending = notifications.len(),
                confirmations = confirmations.len(),
                smtp = self.mailer.is_some(),
                "status notification delivery started"
            );
        }
        let confirmations = if self.mailer.is_none() {
            if !confirmations.is_empty() {
                tracing::info!(
                    pending = confirmations.len(),
                    reason = "no SMTP server configured (--smtp-url / OUTPOST_SMTP_URL)",
                    "subscription confirmation mails wait for an SMTP server"
                );
            }
            Vec::new()
        } else {
            confirmations
                .into_iter()
                .filter(|c| !skip.contains(&Job::Confirmation(c.subscription_id)))
                .collect()
        };
        let notifications = notifications
            .into_iter()
            .filter(|n| !skip.contains(&Job::Notification(n.id)))
            .collect();
        Ok((notifications, confirmations))
    }

    /// Whether something queued at `queued_at_ms` is past [`GIVE_UP_AFTER`].
    fn expired(queued_at_ms: i64) -> bool {
        (crate::service::store::now_ms() - queued_at_ms)
            > i64::try_from(GIVE_UP_AFTER.as_millis()).unwrap_or(i64::MAX)
    }
}
