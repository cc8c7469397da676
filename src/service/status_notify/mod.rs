//! Delivery of status notifications: incident updates written with
//! `notifySubscribers` are e-mailed to the VERIFIED subscribers of the pages that show
//! the incident's services, one message per subscriber.
//!
//! The store queues a notification in the transaction that writes the update; the API
//! handler then wakes this worker ([`StatusNotifier::wake`]) and answers at once. The
//! worker also sweeps the queue at start and every [`SWEEP_INTERVAL`] (for retries).
//! Each subscriber's outcome is recorded ([`Store::record_status_delivery`]) right after
//! the SMTP server answered, and the notification leaves the queue once every
//! subscriber has one: a restart resends only what had no answer yet.
//!
//! - Transient failures (network, 4xx replies) are retried by the mailer with
//!   exponential backoff; when those retries run out the subscriber stays pending and
//!   the next sweep tries again, until [`GIVE_UP_AFTER`] has passed since the update was
//!   queued (then it is recorded FAILED).
//! - Permanent failures (5xx replies, unusable addresses) are recorded FAILED for that
//!   subscriber; the others go on.
//! - Without an SMTP server (`--smtp-url`) nothing is sent and the notifications wait
//!   in the queue for a start with one.
//! - PENDING (unverified) subscribers get nothing. The reference has only EMAIL
//!   subscriptions, so there are no webhook subscribers.

pub mod message;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{Notify, Semaphore};
use tokio::task::JoinSet;
use uuid::Uuid;

use crate::service::alerts::email::Mailer;
use crate::service::store::{
    DeliveryOutcome, DeliveryWrite, PageSubscription, StatusNotification, StatusPage, Store,
    StoreError, now_ms,
};
use crate::shutdown::Shutdown;

/// How often the queue is swept besides the wake-ups (retries of transient failures).
pub const SWEEP_INTERVAL: Duration = Duration::from_secs(5 * 60);
/// A subscriber not reached this long after the update was queued is given up.
pub const GIVE_UP_AFTER: Duration = Duration::from_secs(24 * 60 * 60);
/// Notifications read per sweep.
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

    /// Tells the worker that a notification was queued (never waits).
    pub fn wake(&self) {
        self.wake.notify_one();
    }
}

/// The background worker; [`Worker::run`] consumes it.
pub struct Worker {
    store: Store,
    /// None: no SMTP server configured, notifications wait.
    mailer: Option<Mailer>,
    /// Base of page links, without a trailing slash.
    public_url: String,
    wake: Arc<Notify>,
    /// Messages sent at once (over all notifications).
    limit: Semaphore,
}

/// What one pass over a notification did.
#[derive(Debug, Default, Clone, Copy)]
struct Tally {
    sent: usize,
    failed: usize,
    /// Left for a later sweep (transient failures, or the outcome not recorded).
    pending: usize,
    /// Subscribers that had an outcome before this pass.
    earlier: usize,
}

impl Worker {
    /// A worker woken by `notifier`.
    pub fn new(
        store: Store,
        mailer: Option<Mailer>,
        public_url: String,
        notifier: &StatusNotifier,
        concurrency: usize,
    ) -> Worker {
        Worker {
            store,
            mailer,
            public_url: public_url.trim_end_matches('/').to_owned(),
            wake: notifier.wake.clone(),
            limit: Semaphore::new(concurrency.max(1)),
        }
    }

    /// Delivers until `stop` drains; deliveries still running then are dropped (their
    /// subscribers without an outcome are tried after the next start).
    pub async fn run(self, stop: Shutdown) {
        let this = Arc::new(self);
        let mut tasks: JoinSet<()> = JoinSet::new();
        let mut in_flight: HashMap<tokio::task::Id, Uuid> = HashMap::new();
        let mut sweep = tokio::time::interval(SWEEP_INTERVAL);
        sweep.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut first = true;
        loop {
            tokio::select! {
                _ = stop.draining() => break,
                Some(done) = tasks.join_next_with_id(), if !tasks.is_empty() => {
                    let id = match done {
                        Ok((id, ())) => id,
                        Err(e) => {
                            tracing::error!(error = %e, "status notification delivery ended abnormally");
                            e.id()
                        }
                    };
                    in_flight.remove(&id);
                    continue;
                }
                _ = this.wake.notified() => {}
                _ = sweep.tick() => {}
            }
            let busy: HashSet<Uuid> = in_flight.values().copied().collect();
            match this.pending(first, &busy).await {
                Ok(todo) => {
                    for notification in todo {
                        let id = notification.id;
                        let worker = this.clone();
                        let handle = tasks.spawn(async move { worker.deliver(notification).await });
                        in_flight.insert(handle.id(), id);
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

    /// The queued notifications to deliver now (none without SMTP), logging what waits.
    async fn pending(
        &self,
        first: bool,
        busy: &HashSet<Uuid>,
    ) -> Result<Vec<StatusNotification>, StoreError> {
        let queued = self.store.pending_status_notifications(BATCH).await?;
        if self.mailer.is_none() {
            if !queued.is_empty() || first {
                tracing::info!(
                    pending = queued.len(),
                    reason = "no SMTP server configured (--smtp-url / OUTPOST_SMTP_URL)",
                    "status notifications wait for an SMTP server"
                );
            }
            return Ok(Vec::new());
        }
        if first {
            tracing::info!(
                pending = queued.len(),
                "status notification delivery started"
            );
        }
        Ok(queued
            .into_iter()
            .filter(|n| !busy.contains(&n.id))
            .collect())
    }

    /// Sends one notification to every subscriber without an outcome yet; marks it
    /// delivered once all have one. Errors are logged; the notification stays queued.
    async fn deliver(&self, notification: StatusNotification) {
        let id = notification.id;
        match self.try_deliver(&notification).await {
            Ok(t) if t.pending == 0 => {
                match self
                    .store
                    .mark_status_notification_delivered(id, now_ms())
                    .await
                {
                    Ok(_) => tracing::info!(
                        notification = %id,
                        incident = %notification.incident_id,
                        incident_update = %notification.incident_update_id,
                        sent = t.sent,
                        failed = t.failed,
                        earlier = t.earlier,
                        "status notification delivered"
                    ),
                    Err(e) => tracing::error!(
                        notification = %id,
                        error = %e,
                        "cannot mark a status notification delivered; it is swept again"
                    ),
                }
            }
            Ok(t) => tracing::warn!(
                notification = %id,
                sent = t.sent,
                failed = t.failed,
                pending = t.pending,
                retry_in_secs = SWEEP_INTERVAL.as_secs(),
                "status notification partly delivered; the rest is tried at the next sweep"
            ),
            Err(e) => tracing::error!(
                notification = %id,
                error = %e,
                "cannot deliver a status notification; it stays queued"
            ),
        }
    }

    async fn try_deliver(&self, n: &StatusNotification) -> Result<Tally, StoreError> {
        let Some(mailer) = &self.mailer else {
            return Ok(Tally {
                pending: 1,
                ..Tally::default()
            });
        };
        let update = self
            .store
            .incident_update(n.account_id, n.incident_id, n.incident_update_id)
            .await?;
        let incident = self.store.incident(n.account_id, n.incident_id).await?;
        let (Some(update), Some(incident)) = (update, incident) else {
            // Deleted meanwhile (its row goes with it): nothing to tell.
            return Ok(Tally::default());
        };
        let subscribers = self.store.incident_subscribers(n.incident_id).await?;
        let done = self.store.status_delivery_keys(n.id).await?;
        let (earlier, todo): (Vec<_>, Vec<_>) = subscribers
            .into_iter()
            .partition(|s| done.contains(&s.address.to_lowercase()));
        let mut pages: HashMap<Uuid, StatusPage> = HashMap::new();
        for s in &todo {
            if !pages.contains_key(&s.page_id)
                && let Some(page) = self.store.status_page(n.account_id, s.page_id).await?
            {
                pages.insert(s.page_id, page);
            }
        }
        let expired = (now_ms() - n.created_at.timestamp_millis())
            > i64::try_from(GIVE_UP_AFTER.as_millis()).unwrap_or(i64::MAX);
        let mut tally = Tally {
            earlier: earlier.len(),
            ..Tally::default()
        };
        // At most `limit` of these send at once, over all notifications.
        let mut sends = Vec::with_capacity(todo.len());
        for s in &todo {
            let page = pages.get(&s.page_id);
            sends.push(self.deliver_one(mailer, n, s, page, &incident, &update, expired));
        }
        let outcomes = futures_util::future::join_all(sends).await;
        for outcome in outcomes {
            match outcome {
                Some(DeliveryOutcome::Sent) => tally.sent += 1,
                Some(DeliveryOutcome::Failed) => tally.failed += 1,
                None => tally.pending += 1,
            }
        }
        Ok(tally)
    }

    /// Sends to one subscriber and records the outcome; None when it stays pending.
    #[allow(clippy::too_many_arguments)]
    async fn deliver_one(
        &self,
        mailer: &Mailer,
        n: &StatusNotification,
        subscriber: &PageSubscription,
        page: Option<&StatusPage>,
        incident: &crate::service::store::Incident,
        update: &crate::service::store::IncidentUpdate,
        expired: bool,
    ) -> Option<DeliveryOutcome> {
        let address = subscriber.address.as_str();
        let (outcome, attempts, error) = match page {
            // The page went away since the subscribers were read.
            None => (
                DeliveryOutcome::Failed,
                0,
                Some("the status page was deleted".to_owned()),
            ),
            Some(_) if expired => (
                DeliveryOutcome::Failed,
                0,
                Some(format!(
                    "not delivered within {} h; given up",
                    GIVE_UP_AFTER.as_secs() / 3600
                )),
            ),
            Some(page) => {
                let link = message::page_link(&self.public_url, page);
                let subject = message::subject(page, incident, update);
                let body = message::body(page, &link, incident, update);
                let Ok(_permit) = self.limit.acquire().await else {
                    return None;
                };
                match mailer.send(&[address], &subject, &body).await {
                    Ok(attempts) => (DeliveryOutcome::Sent, attempts, None),
                    Err(e) if e.is_transient() => {
                        tracing::warn!(
                            notification = %n.id,
                            subscription = %subscriber.id,
                            smtp = mailer.server(),
                            error = %e,
                            "status notification e-mail failed for now; tried again later"
                        );
                        return None;
                    }
                    Err(e) => (DeliveryOutcome::Failed, 1, Some(e.to_string())),
                }
            }
        };
        if let Some(error) = &error {
            tracing::warn!(
                notification = %n.id,
                subscription = %subscriber.id,
                error = %error,
                "status notification e-mail refused; not retried"
            );
        }
        let write = DeliveryWrite {
            notification_id: n.id,
            address,
            outcome,
            attempts: i64::try_from(attempts).unwrap_or(i64::MAX),
            error: error.as_deref(),
            at_ms: now_ms(),
        };
        match self.store.record_status_delivery(&write).await {
            Ok(_) => Some(outcome),
            Err(e) => {
                tracing::error!(
                    notification = %n.id,
                    subscription = %subscriber.id,
                    error = %e,
                    "cannot record a status notification delivery; it may be sent again"
                );
                None
            }
        }
    }
}
