//! Incident updates e-mailed to status page subscribers, end to end: a real `outpost
//! serve` process with `--smtp-url` pointing at a real SMTP server (aiosmtpd from PyPI,
//! see `smtp_support`). An update with notifySubscribers reaches every VERIFIED
//! subscriber of the pages showing the incident's services once (an address on two
//! pages once), with the page, incident, status, text and page link; updates without
//! it, PENDING subscribers and pages not showing the services get nothing; a recipient
//! refused with 550 does not stop the others; a restart resends nothing; without SMTP
//! notifications wait and go out after a restart with SMTP (a 451 on the way retried).

mod serve_support;
mod smtp_support;

use std::path::Path;
use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use serve_support::Serve;
use smtp_support::{Mail, SinkOptions, SmtpSink};

const FROM: &str = "Status <status@outpost.test>";
/// Bound of every wait for an event.
const DEADLINE: Duration = Duration::from_secs(90);

struct Api {
    http: reqwest::Client,
    base: String,
    key: String,
    account: String,
}

impl Api {
    fn new(serve: &Serve, dir: &Path) -> Api {
        let text = std::fs::read_to_string(dir.join("credentials.json")).unwrap();
        let c: Value = serde_json::from_str(&text).unwrap();
        Api {
            http: reqwest::Client::builder().no_proxy().build().unwrap(),
            base: serve.base.clone(),
            key: c["apiKey"].as_str().unwrap().to_owned(),
            account: c["accountId"].as_str().unwrap().to_owned(),
        }
    }

    async fn send(&self, method: Method, path: &str, body: Value) -> (StatusCode, Value) {
        let resp = self
            .http
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(&self.key)
            .header("x-service-account", &self.account)
            .json(&body)
            .send()
            .await
            .unwrap();
        let status = resp.status();
        (status, resp.json().await.unwrap_or(Value::Null))
    }

    async fn created(&self, path: &str, body: Value) -> Value {
        let (status, answer) = self.send(Method::POST, path, body).await;
        assert!(status.is_success(), "{status} {answer}");
        answer
    }

    async fn service(&self, name: &str) -> Value {
        self.created("/v1/status-pages/services", json!({"name": name}))
            .await
    }

    async fn page(&self, name: &str, url: &str, service: &Value) -> String {
        let page = self
            .created(
                "/v1/status-pages",
                json!({"name": name, "url": url,
                       "cards": [{"name": "Services", "services": [{"id": service["id"]}]}]}),
            )
            .await;
        page["id"].as_str().unwrap().to_owned()
    }

    async fn subscribe(&self, page: &str, addresses: &[&str], verified: bool) {
        let subs: Vec<Value> = addresses
            .iter()
            .map(|a| json!({"type": "EMAIL", "config": a}))
            .collect();
        let answer = self
            .created(
                &format!("/v1/status-pages/{page}/subscriptions/bulk"),
                json!({"subscriptions": subs, "autoVerify": verified}),
            )
            .await;
        assert_eq!(answer["created"], addresses.len(), "{answer}");
    }

    /// Creates an incident on `service` with its first update; returns its id.
    async fn incident(&self, name: &str, service: &Value, update: Value) -> String {
        let incident = self
            .created(
                "/v1/status-pages/incidents",
                json!({"name": name, "severity": "MAJOR",
                       "services": [{"id": service["id"], "name": service["name"],
                                     "accountId": self.account}],
                       "incidentUpdates": [update]}),
            )
            .await;
        incident["id"].as_str().unwrap().to_owned()
    }

    async fn update(&self, incident: &str, update: Value) -> Value {
        self.created(
            &format!("/v1/status-pages/incidents/{incident}/incident-updates"),
            update,
        )
        .await
    }
}

fn smtp_env(sink: &SmtpSink) -> Vec<(&'static str, String)> {
    vec![
        ("OUTPOST_SMTP_URL", sink.url(None)),
        ("OUTPOST_SMTP_FROM", FROM.to_owned()),
    ]
}

fn start(dir: &Path, env: &[(&'static str, String)]) -> Serve {
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    Serve::start_with_env(dir, &env)
}

/// Waits for the first log line from index `from` on with `message` that satisfies
/// `pred`; returns the index after it and the line.
async fn log_line(
    serve: &Serve,
    from: usize,
    message: &str,
    pred: impl Fn(&Value) -> bool,
) -> (usize, Value) {
    let deadline = tokio::time::Instant::now() + DEADLINE;
    let mut next = from;
    loop {
        {
            let logs = serve.logs.lock().unwrap();
            while next < logs.len() {
                let line = &logs[next];
                next += 1;
                if let Ok(v) = serde_json::from_str::<Value>(line)
                    && v["message"] == message
                    && pred(&v)
                {
                    return (next, v);
                }
            }
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no log line {message:?} within {DEADLINE:?}; logs:\n{}",
            serve.logs.lock().unwrap().join("\n")
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The next SMTP event (message or refusal), within the deadline.
async fn next_event(sink: &mut SmtpSink) -> Value {
    tokio::time::timeout(DEADLINE, sink.next_event())
        .await
        .expect("an SMTP event within the deadline")
}

/// Collects `messages` accepted mails and `refusals` refused recipients (in any order).
async fn collect(
    sink: &mut SmtpSink,
    messages: usize,
    refusals: usize,
) -> (Vec<Mail>, Vec<String>) {
    let mut mails = Vec::new();
    let mut refused = Vec::new();
    while mails.len() < messages || refused.len() < refusals {
        let event = next_event(sink).await;
        match event["event"].as_str() {
            Some("message") => mails.push(Mail(event)),
            Some("rcpt_refused") => refused.push(event["address"].as_str().unwrap().to_owned()),
            _ => panic!("unexpected SMTP event {event}"),
        }
        assert!(
            mails.len() <= messages && refused.len() <= refusals,
            "more SMTP traffic than expected: {mails:?} {refused:?}"
        );
    }
    mails.sort_by_key(|m| m.rcpt_tos());
    (mails, refused)
}

fn recipient(mail: &Mail) -> String {
    let to = mail.rcpt_tos();
    assert_eq!(to.len(), 1, "one message per subscriber: {to:?}");
    to[0].clone()
}

/// The plain-text body with `\n` line ends (SMTP carries `\r\n`).
fn text(mail: &Mail) -> String {
    mail.body().replace("\r\n", "\n")
}

fn has_line(mail: &Mail, line: &str) -> bool {
    mail.body().lines().any(|l| l == line)
}

#[tokio::test]
async fn verified_subscribers_get_each_notified_update_once() {
    let Some(mut sink) = SmtpSink::start(SinkOptions::default()).await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let serve = start(dir.path(), &smtp_env(&sink));
    let api = Api::new(&serve, dir.path());
    let (mut at, _) = log_line(&serve, 0, "status notification delivery started", |v| {
        v["pending"] == 0
    })
    .await;

    let checkout = api.service("Checkout").await;
    let search = api.service("Search").await;
    let acme = api.page("Acme Status", "acme", &checkout).await;
    let shop = api.page("Shop Status", "shop", &checkout).await;
    let other = api.page("Search Status", "search", &search).await;
    api.subscribe(
        &acme,
        &[
            "alice@example.com",
            "bob@example.com",
            "refused-carol@example.com",
        ],
        true,
    )
    .await;
    api.subscribe(&acme, &["pending@example.com"], false).await;
    // Alice again (another case) on a second page showing the service: one mail.
    api.subscribe(&shop, &["ALICE@example.com", "dave@example.com"], true)
        .await;
    api.subscribe(&other, &["eve@example.com"], true).await;

    // No notifySubscribers: nothing queued, nothing sent.
    let quiet = api
        .incident(
            "Search is down",
            &search,
            json!({"description": "quiet one"}),
        )
        .await;
    let incident = api
        .incident(
            "Checkout is slow",
            &checkout,
            json!({"description": "We are looking into it.", "notifySubscribers": true}),
        )
        .await;

    let (mails, refused) = collect(&mut sink, 3, 1).await;
    assert_eq!(refused, ["refused-carol@example.com"]);
    let to: Vec<String> = mails.iter().map(recipient).collect();
    assert_eq!(
        to,
        ["alice@example.com", "bob@example.com", "dave@example.com"]
    );
    for mail in &mails {
        let page = if recipient(mail) == "dave@example.com" {
            ("Shop Status", "shop")
        } else {
            ("Acme Status", "acme")
        };
        assert_eq!(
            mail.subject(),
            format!("[{}] Checkout is slow: INVESTIGATING", page.0)
        );
        assert_eq!(mail.0["from"], FROM);
        assert_eq!(mail.0["content_type"], "text/plain");
        let body = text(mail);
        assert!(
            body.starts_with(
                "Checkout is slow is INVESTIGATING (MAJOR incident).\n\nWe are looking into it.\n"
            ),
            "{body}"
        );
        assert!(has_line(mail, "Services: Checkout"), "{body}");
        assert!(
            has_line(mail, &format!("Page:     {}/status/{}", serve.base, page.1)),
            "{body}"
        );
        assert!(body.contains(&format!("subscribed to the status page \"{}\"", page.0)));
    }
    let (next, done) = log_line(&serve, at, "status notification delivered", |_| true).await;
    at = next;
    assert_eq!(done["incident"], incident.as_str());
    assert_eq!(
        (done["sent"].as_u64(), done["failed"].as_u64()),
        (Some(3), Some(1))
    );
    sink.assert_quiet();

    // An update without notifySubscribers, then one with: only the second is sent.
    api.update(
        &incident,
        json!({"description": "still slow", "notifySubscribers": false}),
    )
    .await;
    api.update(
        &quiet,
        json!({"description": "quiet two", "status": "RESOLVED"}),
    )
    .await;
    let resolved = api
        .update(
            &incident,
            json!({"description": "Fixed: a cache was cold.", "status": "RESOLVED",
                   "notifySubscribers": true}),
        )
        .await;
    let (mails, _) = collect(&mut sink, 3, 1).await;
    for mail in &mails {
        assert!(
            mail.subject().ends_with("Checkout is slow: RESOLVED"),
            "{:?}",
            mail.0
        );
        assert!(
            text(mail).contains("\n\nFixed: a cache was cold.\n"),
            "{}",
            mail.body()
        );
    }
    let (_, done) = log_line(&serve, at, "status notification delivered", |_| true).await;
    assert_eq!(done["incident_update"], resolved["id"]);
    sink.assert_quiet();

    // A restart finds nothing pending and sends nothing again.
    serve.kill9();
    let serve = start(dir.path(), &smtp_env(&sink));
    let (at, _) = log_line(&serve, 0, "status notification delivery started", |v| {
        v["pending"] == 0
    })
    .await;
    let api = Api::new(&serve, dir.path());
    api.update(
        &incident,
        json!({"description": "Post-mortem published.", "notifySubscribers": true}),
    )
    .await;
    let (mails, _) = collect(&mut sink, 3, 1).await;
    for mail in &mails {
        assert!(
            mail.body().contains("Post-mortem published."),
            "{:?}",
            mail.0
        );
    }
    log_line(&serve, at, "status notification delivered", |v| {
        v["sent"] == 3 && v["failed"] == 1
    })
    .await;
    sink.assert_quiet();
}

#[tokio::test]
async fn without_smtp_notifications_wait_for_a_start_with_smtp() {
    // The first message is answered 451: it is retried, not lost or given up.
    let Some(mut sink) = SmtpSink::start(SinkOptions {
        auth: None,
        fail_first: 1,
    })
    .await
    else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let serve = start(dir.path(), &[]);
    let api = Api::new(&serve, dir.path());
    let service = api.service("API").await;
    let page = api.page("API Status", "api", &service).await;
    api.subscribe(&page, &["ops@example.com"], true).await;
    api.incident(
        "API errors",
        &service,
        json!({"description": "Elevated error rates.", "status": "IDENTIFIED",
               "notifySubscribers": true}),
    )
    .await;
    // The worker was woken and left it queued.
    log_line(
        &serve,
        0,
        "status notifications wait for an SMTP server",
        |v| v["pending"] == 1,
    )
    .await;
    sink.assert_quiet();
    serve.kill9();

    let serve = start(dir.path(), &smtp_env(&sink));
    assert_eq!(next_event(&mut sink).await["event"], "refused");
    let (mails, _) = collect(&mut sink, 1, 0).await;
    assert_eq!(recipient(&mails[0]), "ops@example.com");
    assert_eq!(mails[0].subject(), "[API Status] API errors: IDENTIFIED");
    assert!(
        text(&mails[0]).contains("\n\nElevated error rates.\n"),
        "{}",
        mails[0].body()
    );
    log_line(&serve, 0, "status notification delivered", |v| {
        v["sent"] == 1
    })
    .await;
    sink.assert_quiet();
}
