//! E-mail over SMTP: the service's SMTP settings (`--smtp-url`, `--smtp-from`) and a
//! [`Mailer`] that sends one plain-text message to one or more recipients, retrying
//! transient failures with exponential backoff (like webhooks). Used by e-mail alert
//! channels and by the mail to status page subscribers (notifications and
//! confirmations, with `List-Unsubscribe` headers: [`Mailer::send_with`]).
//!
//! The SMTP URL is lettre's form: `smtp://host:port` (plain), `smtp://host:port?tls=required`
//! (STARTTLS), `smtps://user:pass@host:port` (TLS from the start; user and password
//! percent-encoded). TLS is rustls with the system's roots (`SSL_CERT_FILE` honoured).
//! The password is never shown: [`SmtpConfig`]'s `Debug` and [`SmtpConfig::redacted`]
//! leave it out, and errors never carry the URL.

use std::time::Duration;

use backon::{ExponentialBuilder, Retryable};
use lettre::message::header::{ContentType, HeaderName, HeaderValue};
use lettre::message::{Mailbox, Message};
use lettre::transport::smtp::PoolConfig;
use lettre::{AsyncSmtpTransport, AsyncTransport, Tokio1Executor};

use super::DeliveryPolicy;

/// Most recipients of one message.
pub const MAX_RECIPIENTS: usize = 100;
/// Longest subject, in characters (longer ones are cut).
pub const MAX_SUBJECT_CHARS: usize = 200;
/// Largest body, in bytes.
pub const MAX_BODY_BYTES: usize = 256 * 1024;
/// SMTP connections kept open at most.
const POOL_SIZE: u32 = 8;

/// Where mail goes: the SMTP server and the sender address, as configured.
#[derive(Clone, PartialEq, Eq)]
pub struct SmtpConfig {
    /// lettre's connection URL (may hold a password).
    pub url: String,
    /// The `From` mailbox: `alerts@example.com` or `Outpost <alerts@example.com>`.
    pub from: String,
}

impl SmtpConfig {
    /// The URL without its password (and without a query), for logs.
    pub fn redacted(&self) -> String {
        match url::Url::parse(&self.url) {
            Ok(u) => {
                let user = if u.username().is_empty() {
                    String::new()
                } else if u.password().is_some() {
                    format!("{}:*****@", u.username())
                } else {
                    format!("{}@", u.username())
                };
                let port = u.port().map(|p| format!(":{p}")).unwrap_or_default();
                format!(
                    "{}://{user}{}{port}",
                    u.scheme(),
                    u.host_str().unwrap_or("")
                )
            }
            Err(_) => "(unparsable URL)".to_owned(),
        }
    }
}

impl std::fmt::Debug for SmtpConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SmtpConfig")
            .field("url", &self.redacted())
            .field("from", &self.from)
            .finish()
    }
}

/// Why mail could not be configured or sent. Never carries the SMTP URL or password.
#[derive(Debug, thiserror::Error)]
pub enum EmailError {
    #[error("SMTP URL: {0}")]
    Url(String),
    #[error("SMTP sender address {0:?}: {1}")]
    From(String, String),
    #[error("recipient {0:?} is not an e-mail address")]
    Recipient(String),
    #[error("a message needs 1 to {MAX_RECIPIENTS} recipients")]
    Recipients,
    #[error("message bodies are limited to {MAX_BODY_BYTES} bytes")]
    BodyTooLarge,
    #[error("cannot build the message: {0}")]
    Build(#[from] lettre::error::Error),
    #[error("SMTP: {0}")]
    Smtp(#[source] lettre::transport::smtp::Error),
}

impl EmailError {
    /// Worth another try: network and TLS failures, timeouts, 4xx replies. Permanent
    /// (5xx) replies and errors of the message itself are not.
    pub fn is_transient(&self) -> bool {
        match self {
            EmailError::Smtp(e) => !e.is_permanent() && !e.is_client(),
            _ => false,
        }
    }
}

/// An SMTP client with the service's sender address and retry policy; cheap to clone
/// (connections are pooled and shared).
#[derive(Clone)]
pub struct Mailer {
    transport: AsyncSmtpTransport<Tokio1Executor>,
    from: Mailbox,
    policy: DeliveryPolicy,
    /// For logs.
    server: String,
}

impl std::fmt::Debug for Mailer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mailer")
            .field("server", &self.server)
            .field("from", &self.from.to_string())
            .finish()
    }
}

/// Replaces control characters (line breaks included) by spaces and cuts to `max`
/// characters.
fn one_line(s: &str, max: usize) -> String {
    s.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(max)
        .collect()
}

impl Mailer {
    /// Builds the client (no connection yet). `policy` gives the retries and the time
    /// limit of each SMTP exchange. Must run inside the Tokio runtime (the connection
    /// pool starts a task).
    pub fn new(config: &SmtpConfig, policy: DeliveryPolicy) -> Result<Mailer, EmailError> {
        let from: Mailbox = config
            .from
            .parse()
            .map_err(|e| EmailError::From(config.from.clone(), format!("{e}")))?;
        // lettre's own parse errors can quote the URL; say what is wrong without it.
        let parsed = url::Url::parse(&config.url)
            .map_err(|e| EmailError::Url(format!("not a valid URL ({e})")))?;
        if !matches!(parsed.scheme(), "smtp" | "smtps") {
            return Err(EmailError::Url(
                "the scheme must be smtp or smtps (smtp://host:port, smtps://user:pass@host)"
                    .to_owned(),
            ));
        }
        if parsed.host_str().is_none_or(str::is_empty) {
            return Err(EmailError::Url("a host is required".to_owned()));
        }
        let builder = AsyncSmtpTransport::<Tokio1Executor>::from_url(&config.url).map_err(|e| {
            EmailError::Url(format!(
                "unusable ({}); use smtp://host:port, smtp://host:port?tls=required or smtps://user:pass@host:port",
                if e.is_tls() { "TLS setup failed" } else { "bad scheme or tls parameter" }
            ))
        })?;
        let transport = builder
            .timeout(Some(policy.timeout))
            .pool_config(PoolConfig::new().max_size(POOL_SIZE))
            .build();
        Ok(Mailer {
            transport,
            from,
            policy,
            server: config.redacted(),
        })
    }

    /// The SMTP server, password left out (for logs).
    pub fn server(&self) -> &str {
        &self.server
    }

    /// Sends one plain-text (UTF-8) message to `to` (all recipients in its `To` header:
    /// send one message per person where recipients must not see each other), retrying
    /// transient failures per the policy; the retries send the same message (same
    /// Message-ID). Returns the number of attempts on success.
    pub async fn send(&self, to: &[&str], subject: &str, body: &str) -> Result<usize, EmailError> {
        self.send_with(to, subject, body, None).await
    }

    /// [`Mailer::send`] with an unsubscribe link: `List-Unsubscribe: <link>` and
    /// `List-Unsubscribe-Post: List-Unsubscribe=One-Click` (RFC 2369, RFC 8058: mail
    /// clients POST to the link to unsubscribe in one click).
    pub async fn send_with(
        &self,
        to: &[&str],
        subject: &str,
        body: &str,
        unsubscribe: Option<&str>,
    ) -> Result<usize, EmailError> {
        if to.is_empty() || to.len() > MAX_RECIPIENTS {
            return Err(EmailError::Recipients);
        }
        if body.len() > MAX_BODY_BYTES {
            return Err(EmailError::BodyTooLarge);
        }
        let domain = self.from.email.domain().to_owned();
        let mut builder = Message::builder()
            .from(self.from.clone())
            .subject(one_line(subject, MAX_SUBJECT_CHARS))
            .message_id(Some(format!(
                "<{}@{domain}>",
                uuid::Uuid::new_v4().simple()
            )))
            .user_agent(concat!("outpost/", env!("CARGO_PKG_VERSION")).to_owned())
            .header(ContentType::TEXT_PLAIN);
        if let Some(link) = unsubscribe {
            // The value is encoded (and folded) by lettre: no header injection.
            builder = builder
                .raw_header(HeaderValue::new(
                    HeaderName::new_from_ascii_str("List-Unsubscribe"),
                    format!("<{}>", one_line(link, 2000)),
                ))
                .raw_header(HeaderValue::new(
                    HeaderName::new_from_ascii_str("List-Unsubscribe-Post"),
                    "List-Unsubscribe=One-Click".to_owned(),
                ));
        }
        for address in to {
            let mailbox: Mailbox = address
                .parse()
                .map_err(|_| EmailError::Recipient(one_line(address, 254)))?;
            builder = builder.to(mailbox);
        }
        let message = builder.body(body.to_owned())?;
        let envelope = message.envelope().clone();
        let raw = message.formatted();
        let attempts = std::sync::atomic::AtomicUsize::new(0);
        let attempt = || {
            attempts.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            async {
                self.transport
                    .send_raw(&envelope, &raw)
                    .await
                    .map(|_| ())
                    .map_err(EmailError::Smtp)
            }
        };
        let backoff = ExponentialBuilder::default()
            .with_min_delay(self.policy.min_delay)
            .with_max_delay(self.policy.max_delay)
            .with_max_times(self.policy.max_retries)
            .with_jitter();
        attempt
            .retry(backoff)
            .when(EmailError::is_transient)
            .notify(|e, wait: Duration| {
                tracing::debug!(error = %e, retry_in_ms = wait.as_millis() as u64, "e-mail delivery failed; retrying");
            })
            .await?;
        Ok(attempts.load(std::sync::atomic::Ordering::Relaxed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(url: &str, from: &str) -> SmtpConfig {
        SmtpConfig {
            url: url.to_owned(),
            from: from.to_owned(),
        }
    }

    #[test]
    fn the_password_is_never_shown() {
        let c = config(
            "smtps://alerts:hunter2@mail.example.com:465/ehlo?x=1",
            "a@b.c",
        );
        assert_eq!(c.redacted(), "smtps://alerts:*****@mail.example.com:465");
        assert!(!format!("{c:?}").contains("hunter2"));
        assert_eq!(
            config("smtp://127.0.0.1:2525", "a@b.c").redacted(),
            "smtp://127.0.0.1:2525"
        );
    }

    #[tokio::test]
    async fn bad_settings_are_refused_without_the_url() {
        let policy = DeliveryPolicy::default();
        let err = |c: SmtpConfig| Mailer::new(&c, policy).unwrap_err().to_string();
        let e = err(config("http://u:hunter2@host/", "a@b.c"));
        assert!(e.contains("scheme") && !e.contains("hunter2"), "{e}");
        let e = err(config("smtp://u:hunter2@host:25?tls=sometimes", "a@b.c"));
        assert!(e.contains("unusable") && !e.contains("hunter2"), "{e}");
        assert!(err(config("not a url", "a@b.c")).starts_with("SMTP URL"));
        assert!(err(config("smtp://host:25", "not an address")).contains("sender"));
        let ok = Mailer::new(
            &config("smtp://u:hunter2@127.0.0.1:2525", "Outpost <a@b.c>"),
            policy,
        )
        .unwrap();
        assert!(!format!("{ok:?}").contains("hunter2"));
    }

    #[tokio::test]
    async fn bad_messages_are_refused_before_sending() {
        let mailer = Mailer::new(
            &config("smtp://127.0.0.1:9", "a@b.c"),
            DeliveryPolicy::default(),
        )
        .unwrap();
        assert!(matches!(
            mailer.send(&[], "s", "b").await,
            Err(EmailError::Recipients)
        ));
        let e = mailer.send(&["no address"], "s", "b").await.unwrap_err();
        assert!(matches!(e, EmailError::Recipient(_)) && !e.is_transient());
        let big = "x".repeat(MAX_BODY_BYTES + 1);
        assert!(matches!(
            mailer.send(&["a@b.c"], "s", &big).await,
            Err(EmailError::BodyTooLarge)
        ));
        assert_eq!(one_line("a\r\nb\tc", 4), "a  b");
    }
}
