//! Alert delivery: notices raised by the heartbeat engine go through a bounded queue to
//! a background dispatcher that sends them to the channels subscribed to the check.
//! Failures are logged and never block the engine. Every notice is also in the store's
//! outbox (written with the event that raised it) until every channel was tried, so a
//! notice that a crash or a full queue kept from being sent goes out after the restart.
//!
//! - `notice`: the notice and its JSON (the webhook body);
//! - `channels`: alert channel documents of the API (validation, JSON);
//! - `webhook`: webhook targets, signatures, delivery with retries;
//! - `email`: the SMTP settings and the mailer (plain-text mail with retries) that
//!   e-mail channels are delivered through. Without SMTP settings, e-mail notices are
//!   logged as undeliverable and the other channels go on.

pub mod channels;
pub mod email;
pub mod notice;
pub mod webhook;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::{Notify, Semaphore, mpsc};
use tokio::task::JoinSet;

pub use notice::{AlertNotice, NoticeKind};

use crate::service::store::{ChannelRecord, Store, StoreError};
use crate::shutdown::Shutdown;

/// Notices waiting for the dispatcher before new ones are left to the outbox.
pub const QUEUE_CAPACITY: usize = 10_000;
/// Notices read back from the outbox at start.
pub const MAX_REPLAY: i64 = 100_000;

/// How deliveries are attempted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeliveryPolicy {
    /// First wait before a retry; it doubles up to `max_delay` (with jitter).
    pub min_delay: Duration,
    pub max_delay: Duration,
    /// Retries after the first attempt.
    pub max_retries: usize,
    /// Time limit of one attempt.
    pub timeout: Duration,
    /// Notices delivered at once.
    pub concurrency: usize,
}

impl Default for DeliveryPolicy {
    fn default() -> Self {
        DeliveryPolicy {
            min_delay: Duration::from_secs(1),
            max_delay: Duration::from_secs(5 * 60),
            max_retries: 6,
            timeout: Duration::from_secs(10),
            concurrency: 16,
        }
    }
}

/// A notice in the queue, with its outbox row.
#[derive(Debug)]
struct Queued {
    outbox_id: Option<i64>,
    notice: AlertNotice,
}

/// Notices queued or being delivered, and a wake-up when that reaches zero.
#[derive(Default)]
struct Pending {
    count: AtomicUsize,
    idle: Notify,
}

impl Pending {
    fn done(&self) {
        if self.count.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.idle.notify_waiters();
        }
    }
}

/// Counts a notice as pending until dropped (also when its task is aborted).
struct PendingGuard(Arc<Pending>);

impl Drop for PendingGuard {
    fn drop(&mut self) {
        self.0.done();
    }
}

/// The handle that enqueues notices; cheap to clone.
#[derive(Clone)]
pub struct Alerts {
    tx: mpsc::Sender<Queued>,
    pending: Arc<Pending>,
    mailer: Option<email::Mailer>,
    client: reqwest::Client,
}

/// The background dispatcher; [`Dispatcher::run`] consumes it.
pub struct Dispatcher {
    rx: mpsc::Receiver<Queued>,
    store: Store,
    senders: Arc<Senders>,
    policy: DeliveryPolicy,
    pending: Arc<Pending>,
}

/// What deliveries go through.
struct Senders {
    client: reqwest::Client,
    policy: DeliveryPolicy,
    /// None: no SMTP server configured.
    mailer: Option<email::Mailer>,
    /// Base URL of links in e-mails (the service's public URL), without a trailing slash.
    links_base: Option<String>,
}

/// Why the dispatcher could not be built.
#[derive(Debug, thiserror::Error)]
#[error("cannot build the alert HTTP client: {0}")]
pub struct AlertsError(#[from] reqwest::Error);

impl Alerts {
    /// A handle and its dispatcher (e-mail channels undeliverable: no SMTP).
    pub fn new(store: Store, policy: DeliveryPolicy) -> Result<(Alerts, Dispatcher), AlertsError> {
        Alerts::with_email(store, policy, None, None)
    }

    /// A handle and its dispatcher that sends e-mail channels' notices through `mailer`
    /// (None: they are logged as undeliverable); `links_base` (the public URL) goes
    /// before the links in e-mails.
    pub fn with_email(
        store: Store,
        policy: DeliveryPolicy,
        mailer: Option<email::Mailer>,
        links_base: Option<String>,
    ) -> Result<(Alerts, Dispatcher), AlertsError> {
        let client = webhook::client(&policy)?;
        let (tx, rx) = mpsc::channel(QUEUE_CAPACITY);
        let pending = Arc::new(Pending::default());
        Ok((
            Alerts {
                tx,
                pending: pending.clone(),
                mailer: mailer.clone(),
                client: client.clone(),
            },
            Dispatcher {
                rx,
                store,
                senders: Arc::new(Senders {
                    client,
                    policy,
                    mailer,
                    links_base: links_base.map(|b| b.trim_end_matches('/').to_owned()),
                }),
                policy,
                pending,
            },
        ))
    }

    /// The SMTP mailer, when the service has one (for other mail than alerts).
    pub fn mailer(&self) -> Option<&email::Mailer> {
        self.mailer.as_ref()
    }

    /// The webhook HTTP client (shared with other webhook deliveries of the service).
    pub fn webhook_client(&self) -> &reqwest::Client {
        &self.client
    }

    /// Queues a notice without waiting. When the queue is full the notice stays in the
    /// outbox (if it has a row there) and goes out after the next start.
    pub fn enqueue(&self, outbox_id: Option<i64>, notice: AlertNotice) {
        self.pending.count.fetch_add(1, Ordering::AcqRel);
        if let Err(e) = self.tx.try_send(Queued { outbox_id, notice }) {
            self.pending.done();
            let q = match e {
                mpsc::error::TrySendError::Full(q) | mpsc::error::TrySendError::Closed(q) => q,
            };
            tracing::warn!(
                check = %q.notice.check_id,
                alert = q.notice.alert_type.as_str(),
                "alert queue full or closed; the notice stays in the outbox until the next start"
            );
        }
    }

    /// Queues a notice, waiting for room in the queue.
    async fn enqueue_waiting(&self, outbox_id: Option<i64>, notice: AlertNotice) -> bool {
        self.pending.count.fetch_add(1, Ordering::AcqRel);
        if self.tx.send(Queued { outbox_id, notice }).await.is_err() {
            self.pending.done();
            return false;
        }
        true
    }

    /// Queues the notices left in the outbox (at start, waiting for room in the queue
    /// as they are delivered); returns how many.
    pub async fn replay_outbox(&self, store: &Store) -> Result<usize, StoreError> {
        let pending = store.pending_notices(MAX_REPLAY).await?;
        let mut queued = 0;
        for record in pending {
            match serde_json::from_value::<AlertNotice>(record.notice) {
                Ok(notice) => {
                    if !self.enqueue_waiting(Some(record.id), notice).await {
                        break;
                    }
                    queued += 1;
                }
                Err(e) => {
                    tracing::warn!(outbox = record.id, error = %e, "dropping an unreadable alert notice");
                    store.remove_notice(record.id).await?;
                }
            }
        }
        Ok(queued)
    }

    /// Resolves once no notice is queued or being delivered.
    pub async fn idle(&self) {
        loop {
            let notified = self.pending.idle.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.pending.count.load(Ordering::Acquire) == 0 {
                return;
            }
            notified.await;
        }
    }
}

impl Dispatcher {
    /// Delivers notices until `stop` drains; deliveries still running then are dropped
    /// (their notices stay in the outbox).
    pub async fn run(mut self, stop: Shutdown) {
        let limit = Arc::new(Semaphore::new(self.policy.concurrency.max(1)));
        let mut tasks = JoinSet::new();
        loop {
            tokio::select! {
                _ = stop.draining() => break,
                Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
                queued = self.rx.recv() => {
                    let Some(queued) = queued else { break };
                    let guard = PendingGuard(self.pending.clone());
                    let permit = tokio::select! {
                        p = limit.clone().acquire_owned() => p,
                        _ = stop.draining() => break,
                    };
                    let Ok(permit) = permit else { break };
                    let store = self.store.clone();
                    let senders = self.senders.clone();
                    tasks.spawn(async move {
                        deliver(&store, &senders, queued).await;
                        drop(permit);
                        drop(guard);
                    });
                }
            }
        }
        tasks.abort_all();
        while tasks.join_next().await.is_some() {}
    }
}

/// Whether a channel wants this kind of notice.
fn wants(channel: &ChannelRecord, kind: NoticeKind) -> bool {
    match kind {
        NoticeKind::AlertFailure => channel.send_failure,
        NoticeKind::AlertRecovery => channel.send_recovery,
    }
}

/// Sends one notice to every channel subscribed to its check, then removes it from the
/// outbox.
async fn deliver(store: &Store, senders: &Senders, q: Queued) {
    let notice = &q.notice;
    let targets = match store
        .alert_targets(notice.account_id, notice.check_id)
        .await
    {
        Ok(t) => t,
        Err(e) => {
            tracing::error!(check = %notice.check_id, error = %e, "cannot read the alert channels of a check; the notice stays in the outbox");
            return;
        }
    };
    let sends = targets
        .iter()
        .filter(|c| wants(c, notice.alert_type))
        .map(|c| deliver_to(senders, c, notice));
    futures_util::future::join_all(sends).await;
    if let Some(id) = q.outbox_id
        && let Err(e) = store.remove_notice(id).await
    {
        tracing::error!(outbox = id, error = %e, "cannot remove a delivered notice from the outbox");
    }
}

async fn deliver_to(senders: &Senders, channel: &ChannelRecord, notice: &AlertNotice) {
    match channel.channel_type.as_str() {
        "WEBHOOK" => match webhook::WebhookTarget::from_config(&channel.config) {
            Ok(target) => post_alert(senders, channel, notice, "webhook", &target, notice).await,
            Err((field, message)) => tracing::error!(
                channel = channel.id,
                field,
                message,
                "unusable webhook configuration"
            ),
        },
        "SLACK" => match slack_message(channel, notice) {
            Some((target, message)) => {
                post_alert(senders, channel, notice, "Slack", &target, &message).await
            }
            None => tracing::error!(
                channel = channel.id,
                field = "url",
                "unusable Slack configuration"
            ),
        },
        "EMAIL" => deliver_email(senders, channel, notice).await,
        other => tracing::warn!(
            channel = channel.id,
            channel_type = other,
            check = %notice.check_id,
            alert = notice.alert_type.as_str(),
            delivered_types = channels::DELIVERED_TYPES.join(", "),
            "alert not delivered: this version does not deliver to this channel type"
        ),
    }
}

/// A Slack channel's incoming-webhook URL and the message posted there; None when the
/// stored URL does not parse.
fn slack_message(
    channel: &ChannelRecord,
    notice: &AlertNotice,
) -> Option<(webhook::WebhookTarget, serde_json::Value)> {
    let config = &channel.config;
    let url = url::Url::parse(config.get("url")?.as_str()?).ok()?;
    let mut message = serde_json::json!({"text": notice.alert_title});
    if let Some(name) = config.get("channel").and_then(serde_json::Value::as_str) {
        message["channel"] = serde_json::json!(name);
    }
    Some((webhook::WebhookTarget::post(url, Vec::new()), message))
}

/// Posts `payload` for `notice` to an HTTP channel (`via`: webhook, Slack) with the
/// webhook retries; the outcome is logged, never raised: the other channels go on
/// whatever happens here.
async fn post_alert<T: serde::Serialize + ?Sized>(
    senders: &Senders,
    channel: &ChannelRecord,
    notice: &AlertNotice,
    via: &str,
    target: &webhook::WebhookTarget,
    payload: &T,
) {
    let outcome = webhook::send(&senders.client, &senders.policy, target, payload).await;
    log_delivery(channel, notice, &format!("to {via}"), outcome);
}

/// Logs how a delivery ended (`how`: "to webhook", "by e-mail (smtp.example:587)").
fn log_delivery<E: std::fmt::Display>(
    channel: &ChannelRecord,
    notice: &AlertNotice,
    how: &str,
    outcome: Result<usize, E>,
) {
    let alert = notice.alert_type.as_str();
    match outcome {
        Ok(attempts) => tracing::info!(
            channel = channel.id,
            check = %notice.check_id,
            alert,
            attempts,
            "alert delivered {how}"
        ),
        Err(e) => tracing::warn!(
            channel = channel.id,
            check = %notice.check_id,
            alert,
            error = %e,
            "alert delivery {how} failed; giving up"
        ),
    }
}

/// Sends a notice to an e-mail channel's address (logged, never raised: the other
/// channels go on whatever happens here).
async fn deliver_email(senders: &Senders, channel: &ChannelRecord, notice: &AlertNotice) {
    let alert = notice.alert_type.as_str();
    let Some(mailer) = &senders.mailer else {
        tracing::warn!(
            channel = channel.id,
            check = %notice.check_id,
            alert,
            reason = "no SMTP server configured (--smtp-url / OUTPOST_SMTP_URL)",
            "e-mail alert not delivered"
        );
        return;
    };
    let Some(address) = channel
        .config
        .get("address")
        .and_then(serde_json::Value::as_str)
    else {
        tracing::error!(
            channel = channel.id,
            "e-mail channel without an address; alert not delivered"
        );
        return;
    };
    let link = senders
        .links_base
        .as_ref()
        .map(|base| format!("{base}/v1/checks/heartbeats/{}/events", notice.check_id));
    let body = notice.email_body(link.as_deref());
    let outcome = mailer
        .send(&[address], &notice.email_subject(), &body)
        .await;
    log_delivery(
        channel,
        notice,
        &format!("by e-mail ({})", mailer.server()),
        outcome,
    );
}
