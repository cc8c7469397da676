//! E-mail alert channels against a real SMTP server (aiosmtpd from PyPI, see
//! `smtp_support`), on a manual clock: a late heartbeat e-mails the channel's address
//! (with AUTH), its recovery e-mails again; refusals (451) are retried; without an SMTP
//! server e-mail channels are skipped and webhooks still go out.

mod heartbeat_support;
mod require_support;
mod service_support;
mod smtp_support;

use heartbeat_support::*;
use reqwest::{Method, StatusCode};
use smtp_support::{SinkOptions, SmtpSink};

use outpost::service::alerts::email::SmtpConfig;
use outpost::service::clock::{Clock, ManualClock};

fn iso(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .unwrap()
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

const FROM: &str = "Outpost Alerts <alerts@outpost.test>";

#[tokio::test]
async fn a_late_heartbeat_emails_the_channel_and_its_recovery_emails_again() {
    let auth = ("alerts", "s3cret pass");
    let Some(mut sink) = SmtpSink::start(SinkOptions {
        auth: Some((auth.0.to_owned(), auth.1.to_owned())),
        fail_first: 0,
    })
    .await
    else {
        return;
    };
    let clock = ManualClock::new(T0);
    // The password percent-encoded, as in any URL.
    let smtp = SmtpConfig {
        url: sink.url(Some(("alerts", "s3cret%20pass"))),
        from: FROM.to_owned(),
    };
    let svc = start_with_smtp(&clock, None, Some(smtp)).await;
    create_email_channel(&svc, "oncall@example.com").await;
    let mut body = heartbeat_body("nightly backup", 60, 30);
    body["tags"] = serde_json::json!(["prod", "db"]);
    let (id, url) = id_and_url(&create_heartbeat(&svc, body).await);

    let pinged_at = clock.now_ms();
    assert_eq!(ping(&svc, &url, Method::POST).await.0, StatusCode::OK);
    // At the deadline itself nothing is sent.
    advance(&svc, &clock, 90 * SEC).await;
    svc.handle.alerts_idle().await;
    sink.assert_quiet();
    advance(&svc, &clock, 1).await;

    let mail = sink.next().await;
    assert_eq!(mail.rcpt_tos(), ["oncall@example.com"]);
    assert_eq!(mail.0["mail_from"], "alerts@outpost.test");
    assert_eq!(mail.0["from"], FROM);
    assert_eq!(mail.0["to"], "oncall@example.com");
    assert_eq!(mail.0["login"], "alerts");
    assert_eq!(mail.0["content_type"], "text/plain");
    assert_eq!(
        mail.subject(),
        "[Outpost] FAILING: heartbeat \"nightly backup\" missed its deadline"
    );
    let text = mail.body();
    assert!(
        text.starts_with(
            "Heartbeat monitor \"nightly backup\" is FAILING: no ping arrived by its deadline."
        ),
        "{text}"
    );
    for expected in [
        "Monitor:   nightly backup".to_owned(),
        "State:     FAILING".to_owned(),
        format!("Deadline:  {}", iso(pinged_at + 90 * SEC)),
        format!("Last ping: {}", iso(pinged_at)),
        "Tags:      prod, db".to_owned(),
        format!("Check id:  {id}"),
        format!(
            "Events:    {}/v1/checks/heartbeats/{id}/events",
            svc.handle.public_url()
        ),
    ] {
        assert!(
            text.lines().any(|l| l == expected),
            "missing {expected:?} in:\n{text}"
        );
    }

    // Silence goes on: no second failure mail.
    advance(&svc, &clock, 2 * HOUR).await;
    svc.handle.alerts_idle().await;
    sink.assert_quiet();

    let recovered_at = clock.now_ms();
    assert_eq!(ping(&svc, &url, Method::GET).await.0, StatusCode::OK);
    let mail = sink.next().await;
    assert_eq!(mail.rcpt_tos(), ["oncall@example.com"]);
    assert_eq!(
        mail.subject(),
        "[Outpost] RECOVERED: heartbeat \"nightly backup\" pinged again"
    );
    let text = mail.body();
    assert!(
        text.starts_with(&format!(
            "Heartbeat monitor \"nightly backup\" has RECOVERED: a ping arrived at {}.",
            iso(recovered_at)
        )),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|l| l == "State:     RECOVERED (the ping was LATE)"),
        "{text}"
    );
    assert!(!text.contains("Deadline:"), "{text}");
    assert_ne!(mail.0["message_id"], serde_json::Value::Null);
    svc.handle.alerts_idle().await;
    sink.assert_quiet();
    svc.stop().await;
}

#[tokio::test]
async fn smtp_refusals_are_retried_until_the_message_is_accepted() {
    let Some(mut sink) = SmtpSink::start(SinkOptions {
        auth: None,
        fail_first: 2,
    })
    .await
    else {
        return;
    };
    let clock = ManualClock::new(T0);
    let smtp = SmtpConfig {
        url: sink.url(None),
        from: "alerts@outpost.test".to_owned(),
    };
    let svc = start_with_smtp(&clock, None, Some(smtp)).await;
    create_email_channel(&svc, "ops@example.com").await;
    let (_, url) = id_and_url(&create_heartbeat(&svc, heartbeat_body("retry", 60, 0)).await);
    ping(&svc, &url, Method::GET).await;
    advance(&svc, &clock, 61 * SEC).await;
    assert_eq!(sink.next_event().await["event"], "refused");
    assert_eq!(sink.next_event().await["event"], "refused");
    let accepted = sink.next_event().await;
    assert_eq!(accepted["event"], "message", "{accepted}");
    assert!(
        accepted["subject"]
            .as_str()
            .unwrap()
            .starts_with("[Outpost] FAILING")
    );
    // Delivered once: no more attempts after the acceptance.
    svc.handle.alerts_idle().await;
    sink.assert_quiet();
    svc.stop().await;
}

#[tokio::test]
async fn without_smtp_email_channels_do_not_block_webhooks() {
    let (svc, clock) = start_manual().await;
    let mut receiver = Receiver::start(&[]).await;
    create_email_channel(&svc, "nobody@example.com").await;
    create_webhook(&svc, &receiver.url, None).await;
    let (id, url) = id_and_url(&create_heartbeat(&svc, heartbeat_body("no smtp", 60, 0)).await);
    ping(&svc, &url, Method::GET).await;
    advance(&svc, &clock, 61 * SEC).await;
    assert_eq!(receiver.next().await.json()["checkId"], id.as_str());
    ping(&svc, &url, Method::GET).await;
    assert_eq!(receiver.next().await.json()["alertType"], "ALERT_RECOVERY");
    // Both notices were handled (the e-mail skipped) and left the outbox.
    svc.handle.alerts_idle().await;
    assert!(
        svc.handle
            .store()
            .pending_notices(10)
            .await
            .unwrap()
            .is_empty()
    );
    svc.stop().await;
}
