//! Confirmation mails: one per new PENDING e-mail subscription, with a confirmation
//! link and an unsubscribe link (their tokens stored before the mail is sent). The
//! outcome is recorded like a notification's (SENT, FAILED for refusals and after
//! [`GIVE_UP_AFTER`](super::GIVE_UP_AFTER)); transient failures are tried again at the
//! next sweep.

use super::{Worker, links, message};
use crate::service::store::{
    ConfirmationWrite, DeliveryOutcome, PendingConfirmation, TokenPurpose, now_ms,
};

impl Worker {
    /// Sends one confirmation mail and records its outcome (errors are logged).
    pub(super) async fn confirm(&self, c: PendingConfirmation) {
        let Some(mailer) = &self.mailer else {
            return;
        };
        let page = match self.store.status_page(c.account_id, c.page_id).await {
            Ok(Some(page)) => page,
            // Gone with its subscriptions (and this row) meanwhile.
            Ok(None) => return,
            Err(e) => {
                tracing::error!(subscription = %c.subscription_id, error = %e, "cannot read the page of a confirmation mail; tried again later");
                return;
            }
        };
        let answer = if Worker::expired(c.created_at.timestamp_millis()) {
            Some((
                DeliveryOutcome::Failed,
                0,
                Some(format!(
                    "not delivered within {} h; given up",
                    super::GIVE_UP_AFTER.as_secs() / 3600
                )),
            ))
        } else {
            let verify = links::issue(c.subscription_id, TokenPurpose::Verify);
            let unsubscribe = links::issue(c.subscription_id, TokenPurpose::Unsubscribe);
            match self
                .store
                .add_subscription_tokens(&[verify.row.clone(), unsubscribe.row.clone()], now_ms())
                .await
            {
                Ok(2) => {}
                // The subscription was removed meanwhile.
                Ok(_) => return,
                Err(e) => {
                    tracing::error!(subscription = %c.subscription_id, error = %e, "cannot store the links of a confirmation mail; tried again later");
                    return;
                }
            }
            let confirm = links::confirm_link(&self.public_url, &page, &verify.token);
            let unsubscribe = links::unsubscribe_link(&self.public_url, &page, &unsubscribe.token);
            let link = links::page_link(&self.public_url, &page);
            let subject = message::confirmation_subject(&page);
            let body = message::confirmation_body(&page, &link, &confirm, &unsubscribe);
            let Ok(_permit) = self.mail_limit.acquire().await else {
                return;
            };
            match mailer
                .send_with(&[&c.address], &subject, &body, Some(&unsubscribe))
                .await
            {
                Ok(attempts) => Some((DeliveryOutcome::Sent, attempts, None)),
                Err(e) if e.is_transient() => {
                    tracing::warn!(
                        subscription = %c.subscription_id,
                        smtp = mailer.server(),
                        error = %e,
                        "subscription confirmation mail failed for now; tried again later"
                    );
                    None
                }
                Err(e) => Some((DeliveryOutcome::Failed, 1, Some(e.to_string()))),
            }
        };
        let Some((outcome, attempts, error)) = answer else {
            return;
        };
        let write = ConfirmationWrite {
            subscription_id: c.subscription_id,
            outcome,
            attempts: i64::try_from(attempts).unwrap_or(i64::MAX),
            error: error.as_deref(),
            at_ms: now_ms(),
        };
        if let Err(e) = self.store.record_confirmation(&write).await {
            tracing::error!(subscription = %c.subscription_id, error = %e, "cannot record a confirmation mail; it may be sent again");
            return;
        }
        match &error {
            None => tracing::info!(
                subscription = %c.subscription_id,
                page = %c.page_id,
                attempts,
                "subscription confirmation mail sent"
            ),
            Some(error) => tracing::warn!(
                subscription = %c.subscription_id,
                page = %c.page_id,
                error = %error,
                "subscription confirmation mail refused; not retried"
            ),
        }
    }
}
