//! The one heartbeat test in real time: a real `outpost serve` (system clock), a
//! monitor with a 30 s period and no grace, one ping. The alert must reach its channels
//! within one second after last ping + 30 s: at or after the deadline, before deadline +
//! 1 s. The webhook is measured at an HTTP receiver; when aiosmtpd can be installed the
//! e-mail channel (configured by OUTPOST_SMTP_URL with a password) is measured at the
//! SMTP server too, and the password must appear in no log line. A second ping sends
//! the recovery through both.

mod heartbeat_support;
mod require_support;
mod serve_support;
mod service_support;
mod smtp_support;

use std::path::Path;

use heartbeat_support::Receiver;
use serde_json::{Value, json};
use serve_support::Serve;
use smtp_support::{SinkOptions, SmtpSink};

fn credentials(dir: &Path) -> (String, String) {
    let text = std::fs::read_to_string(dir.join("credentials.json")).unwrap();
    let c: Value = serde_json::from_str(&text).unwrap();
    (
        c["apiKey"].as_str().unwrap().to_owned(),
        c["accountId"].as_str().unwrap().to_owned(),
    )
}

fn millis(v: &Value) -> i64 {
    chrono::DateTime::parse_from_rfc3339(v.as_str().unwrap())
        .unwrap()
        .timestamp_millis()
}

const PASSWORD: &str = "pw-7f3a9c";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_30_second_heartbeat_alerts_within_one_second_of_its_deadline() {
    let dir = tempfile::tempdir().unwrap();
    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    let mut hooks = Receiver::start(&[]).await;
    let mut sink = SmtpSink::start(SinkOptions {
        auth: Some(("outpost".to_owned(), PASSWORD.to_owned())),
        fail_first: 0,
    })
    .await;
    let smtp_url = sink
        .as_ref()
        .map(|s| s.url(Some(("outpost", PASSWORD))))
        .unwrap_or_default();
    let env: Vec<(&str, &str)> = if sink.is_some() {
        vec![
            ("OUTPOST_SMTP_URL", smtp_url.as_str()),
            ("OUTPOST_SMTP_FROM", "alerts@outpost.test"),
        ]
    } else {
        vec![]
    };
    let serve = Serve::start_with_env(dir.path(), &env);
    let (key, account) = credentials(dir.path());
    let api = |method: reqwest::Method, path: &str| {
        http.request(method, format!("{}{path}", serve.base))
            .bearer_auth(&key)
            .header("x-service-account", &account)
    };
    let mut channels =
        vec![json!({"type": "WEBHOOK", "config": {"name": "hook", "url": hooks.url}})];
    if sink.is_some() {
        channels.push(json!({"type": "EMAIL", "config": {"address": "oncall@example.com"}}));
    }
    for channel in channels {
        let resp = api(reqwest::Method::POST, "/v1/alert-channels")
            .json(&channel)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), reqwest::StatusCode::CREATED);
    }
    let resp = api(reqwest::Method::POST, "/v1/checks/heartbeat")
        .json(&json!({"name": "every 30 s", "heartbeat": {"period": 30,
            "periodUnit": "seconds", "grace": 0, "graceUnit": "seconds"}}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), reqwest::StatusCode::CREATED);
    let created: Value = resp.json().await.unwrap();
    let id = created["id"].as_str().unwrap().to_owned();
    let ping_url = created["heartbeat"]["pingUrl"].as_str().unwrap().to_owned();

    let resp = http.get(&ping_url).send().await.unwrap();
    assert_eq!(resp.status(), reqwest::StatusCode::OK);
    // The ping's time as the service recorded it.
    let events: Value = api(
        reqwest::Method::GET,
        &format!("/v1/checks/heartbeats/{id}/events"),
    )
    .send()
    .await
    .unwrap()
    .json()
    .await
    .unwrap();
    let received = &events[0]["events"][0];
    assert_eq!(received["state"], "RECEIVED", "{events}");
    let pinged_at = millis(&received["timestamp"]);
    let deadline = pinged_at + 30_000;

    let failure = hooks.next().await;
    let notice = failure.json();
    assert_eq!(notice["alertType"], "ALERT_FAILURE");
    assert_eq!(millis(&notice["deadlineAt"]), deadline);
    let late = failure.at_ms - deadline;
    println!("webhook alert {late} ms after the deadline");
    assert!(
        (0..1000).contains(&late),
        "the webhook arrived {late} ms after the deadline"
    );
    if let Some(sink) = sink.as_mut() {
        let mail = sink.next().await;
        assert!(mail.subject().starts_with("[Outpost] FAILING"));
        assert_eq!(mail.rcpt_tos(), ["oncall@example.com"]);
        let late = mail.0["received_at_ms"].as_i64().unwrap() - deadline;
        println!("e-mail alert {late} ms after the deadline");
        assert!(
            (0..1000).contains(&late),
            "the e-mail arrived {late} ms after the deadline"
        );
    }

    // The next ping recovers, through both channels.
    let resp = http.post(&ping_url).send().await.unwrap();
    assert_eq!(resp.status(), reqwest::StatusCode::OK);
    assert_eq!(hooks.next().await.json()["alertType"], "ALERT_RECOVERY");
    if let Some(sink) = sink.as_mut() {
        assert!(
            sink.next()
                .await
                .subject()
                .starts_with("[Outpost] RECOVERED")
        );
        let logs = serve.logs.lock().unwrap();
        // Logged before "control plane listening", which `start` waited for.
        let smtp_line = logs
            .iter()
            .find(|l| l.contains("e-mail alerts go through SMTP"))
            .expect("the SMTP server is logged at start");
        assert!(
            smtp_line.contains("smtp://outpost:*****@127.0.0.1:"),
            "{smtp_line}"
        );
        assert!(
            !logs.iter().any(|l| l.contains(PASSWORD)),
            "password logged"
        );
    }
}
