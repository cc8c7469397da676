//! One notification to every subscriber without an outcome yet: an e-mail (with its
//! own unsubscribe link) or a webhook POST ([`payload`](super::payload)) each, all at
//! once within the worker's limits; each outcome recorded as soon as it is known.

use std::collections::HashMap;

use reqwest::header::{HeaderName, HeaderValue};
use uuid::Uuid;

use super::{GIVE_UP_AFTER, SWEEP_INTERVAL, Worker, links, message, payload};
use crate::service::alerts::webhook::{self, WebhookTarget};
use crate::service::store::{
    DeliveryOutcome, DeliveryWrite, Incident, IncidentUpdate, NewToken, PageSubscription,
    StatusNotification, StatusPage, StoreError, SubscriptionKind, TokenPurpose, now_ms,
};

/// What one pass over a notification did.
#[derive(Debug, Default, Clone, Copy)]
struct Tally {
    sent: usize,
    failed: usize,
    /// Left for a later sweep (transient failures, or the outcome not recorded).
    pending: usize,
    /// E-mail subscribers left until a start with an SMTP server.
    waiting: usize,
    /// Subscribers that had an outcome before this pass.
    earlier: usize,
}

/// What became of one subscriber in this pass.
enum Step {
    Done(DeliveryOutcome),
    /// Tried again at the next sweep.
    Retry,
    /// An e-mail without an SMTP server.
    WaitsForSmtp,
}

/// An outcome to record: (outcome, attempts, error).
type Answer = (DeliveryOutcome, usize, Option<String>);

/// What a notification is about.
struct About<'a> {
    n: &'a StatusNotification,
    incident: &'a Incident,
    update: &'a IncidentUpdate,
}

impl Worker {
    /// Delivers one notification and marks it delivered once every subscriber has an
    /// outcome. Errors are logged; the notification stays queued. Answers whether it
    /// only waits for an SMTP server now.
    pub(super) async fn deliver(&self, notification: StatusNotification) -> bool {
        let id = notification.id;
        match self.try_deliver(&notification).await {
            Ok(t) if t.pending == 0 && t.waiting == 0 => {
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
                false
            }
            Ok(t) if t.pending == 0 => {
                tracing::info!(
                    notification = %id,
                    pending = t.waiting,
                    sent = t.sent,
                    failed = t.failed,
                    reason = "no SMTP server configured (--smtp-url / OUTPOST_SMTP_URL)",
                    "status notifications wait for an SMTP server"
                );
                true
            }
            Ok(t) => {
                tracing::warn!(
                    notification = %id,
                    sent = t.sent,
                    failed = t.failed,
                    pending = t.pending,
                    retry_in_secs = SWEEP_INTERVAL.as_secs(),
                    "status notification partly delivered; the rest is tried at the next sweep"
                );
                false
            }
            Err(e) => {
                tracing::error!(
                    notification = %id,
                    error = %e,
                    "cannot deliver a status notification; it stays queued"
                );
                false
            }
        }
    }

    async fn try_deliver(&self, n: &StatusNotification) -> Result<Tally, StoreError> {
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
            .partition(|s| done.contains(&s.address_key));
        let mut pages: HashMap<Uuid, StatusPage> = HashMap::new();
        for s in &todo {
            if !pages.contains_key(&s.page_id)
                && let Some(page) = self.store.status_page(n.account_id, s.page_id).await?
            {
                pages.insert(s.page_id, page);
            }
        }
        let expired = Worker::expired(n.created_at.timestamp_millis());
        // One unsubscribe token per e-mail about to be sent, stored in one statement
        // before any is sent (so that every link sent works).
        let mut unsubscribe: HashMap<Uuid, String> = HashMap::new();
        if self.mailer.is_some() && !expired {
            let issued: Vec<links::Issued> = todo
                .iter()
                .filter(|s| s.kind == SubscriptionKind::Email && pages.contains_key(&s.page_id))
                .map(|s| links::issue(s.id, TokenPurpose::Unsubscribe))
                .collect();
            let rows: Vec<NewToken> = issued.iter().map(|i| i.row.clone()).collect();
            self.store.add_subscription_tokens(&rows, now_ms()).await?;
            unsubscribe = issued
                .into_iter()
                .map(|i| (i.row.subscription_id, i.token))
                .collect();
        }
        let about = About {
            n,
            incident: &incident,
            update: &update,
        };
        let sends = todo.iter().map(|s| {
            self.deliver_one(
                &about,
                s,
                pages.get(&s.page_id),
                expired,
                unsubscribe.get(&s.id).map(String::as_str),
            )
        });
        let mut tally = Tally {
            earlier: earlier.len(),
            ..Tally::default()
        };
        for step in futures_util::future::join_all(sends).await {
            match step {
                Step::Done(DeliveryOutcome::Sent) => tally.sent += 1,
                Step::Done(DeliveryOutcome::Failed) => tally.failed += 1,
                Step::Retry => tally.pending += 1,
                Step::WaitsForSmtp => tally.waiting += 1,
            }
        }
        Ok(tally)
    }

    /// Delivers to one subscriber and records the outcome.
    async fn deliver_one(
        &self,
        about: &About<'_>,
        subscriber: &PageSubscription,
        page: Option<&StatusPage>,
        expired: bool,
        unsubscribe: Option<&str>,
    ) -> Step {
        let n = about.n;
        let email = subscriber.kind == SubscriptionKind::Email;
        let answer = match page {
            _ if email && self.mailer.is_none() => return Step::WaitsForSmtp,
            // The page went away since the subscribers were read.
            None => Some((
                DeliveryOutcome::Failed,
                0,
                Some("the status page was deleted".to_owned()),
            )),
            Some(_) if expired => Some((
                DeliveryOutcome::Failed,
                0,
                Some(format!(
                    "not delivered within {} h; given up",
                    GIVE_UP_AFTER.as_secs() / 3600
                )),
            )),
            Some(page) if email => self.mail(about, subscriber, page, unsubscribe).await,
            Some(page) => self.post(about, subscriber, page).await,
        };
        let Some((outcome, attempts, error)) = answer else {
            return Step::Retry;
        };
        if let Some(error) = &error {
            tracing::warn!(
                notification = %n.id,
                subscription = %subscriber.id,
                kind = subscriber.kind.as_str(),
                error = %error,
                "status notification refused; not retried"
            );
        }
        let write = DeliveryWrite {
            notification_id: n.id,
            address: &subscriber.address,
            key: &subscriber.address_key,
            outcome,
            attempts: i64::try_from(attempts).unwrap_or(i64::MAX),
            error: error.as_deref(),
            at_ms: now_ms(),
        };
        match self.store.record_status_delivery(&write).await {
            Ok(_) => Step::Done(outcome),
            Err(e) => {
                tracing::error!(
                    notification = %n.id,
                    subscription = %subscriber.id,
                    error = %e,
                    "cannot record a status notification delivery; it may be sent again"
                );
                Step::Retry
            }
        }
    }

    /// E-mails the update; None when it is to be tried again later.
    async fn mail(
        &self,
        about: &About<'_>,
        subscriber: &PageSubscription,
        page: &StatusPage,
        unsubscribe: Option<&str>,
    ) -> Option<Answer> {
        let mailer = self.mailer.as_ref()?;
        let unsubscribe = links::unsubscribe_link(&self.public_url, page, unsubscribe?);
        let link = links::page_link(&self.public_url, page);
        let subject = message::subject(page, about.incident, about.update);
        let body = message::body(page, &link, &unsubscribe, about.incident, about.update);
        let _permit = self.mail_limit.acquire().await.ok()?;
        match mailer
            .send_with(&[&subscriber.address], &subject, &body, Some(&unsubscribe))
            .await
        {
            Ok(attempts) => Some((DeliveryOutcome::Sent, attempts, None)),
            Err(e) if e.is_transient() => {
                tracing::warn!(
                    notification = %about.n.id,
                    subscription = %subscriber.id,
                    smtp = mailer.server(),
                    error = %e,
                    "status notification e-mail failed for now; tried again later"
                );
                None
            }
            Err(e) => Some((DeliveryOutcome::Failed, 1, Some(e.to_string()))),
        }
    }

    /// POSTs the update to a webhook subscriber; None when it is to be tried again
    /// later. The URL is never logged (it may hold a secret).
    async fn post(
        &self,
        about: &About<'_>,
        subscriber: &PageSubscription,
        page: &StatusPage,
    ) -> Option<Answer> {
        let Ok(url) = url::Url::parse(&subscriber.address) else {
            return Some((
                DeliveryOutcome::Failed,
                0,
                Some("the webhook URL is not valid".to_owned()),
            ));
        };
        let target = WebhookTarget::post(
            url,
            vec![(
                HeaderName::from_static("x-outpost-event"),
                HeaderValue::from_static(payload::EVENT),
            )],
        );
        let body = payload::incident_update(
            about.n.id,
            subscriber.id,
            page,
            links::page_link(&self.public_url, page),
            about.incident,
            about.update,
        );
        let _permit = self.hook_limit.acquire().await.ok()?;
        match webhook::send(&self.http, &self.policy, &target, &body).await {
            Ok(attempts) => {
                tracing::info!(
                    notification = %about.n.id,
                    subscription = %subscriber.id,
                    attempts,
                    "status notification sent to webhook"
                );
                Some((DeliveryOutcome::Sent, attempts, None))
            }
            Err(e) if e.is_transient() => {
                tracing::warn!(
                    notification = %about.n.id,
                    subscription = %subscriber.id,
                    error = %e,
                    "status notification webhook failed for now; tried again later"
                );
                None
            }
            Err(e) => Some((DeliveryOutcome::Failed, 1, Some(e.to_string()))),
        }
    }
}
