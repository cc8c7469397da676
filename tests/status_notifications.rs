//! Incident updates e-mailed to status page subscribers, end to end: a real `outpost
//! serve` process with `--smtp-url` pointing at a real SMTP server (aiosmtpd from PyPI,
//! see `smtp_support`). An update with notifySubscribers reaches every VERIFIED
//! subscriber of the pages showing the incident's services once (an address on two
//! pages once), with the page, incident, status, text and page link; updates without
//! it, PENDING subscribers and pages not showing the services get nothing; a recipient
//! refused with 550 does not stop the others; a restart resends nothing; without SMTP
//! notifications and confirmation mails wait and go out after a restart with SMTP (a
//! 451 on the way retried).
//!
//! PENDING subscribers (`autoVerify: false`) get one confirmation mail; opening its link
//! (a real HTTP client) makes them VERIFIED, bad links are 4xx HTML pages; every mail's
//! unsubscribe link (also `List-Unsubscribe`, one-click POST) removes the subscriber.
//! WEBHOOK subscribers get a JSON POST at a loopback receiver (axum), retried after a
//! 500, given up after a 410, without any SMTP server and never resent after a restart.

mod require_support;
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
    // The PENDING subscriber is asked to confirm (and then gets no notification).
    let confirmation = next_event(&mut sink).await;
    assert_eq!(confirmation["rcpt_tos"], json!(["pending@example.com"]));
    assert_eq!(
        confirmation["subject"],
        "[Acme Status] Confirm your subscription"
    );
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
    api.subscribe(&page, &["erin@example.com"], false).await;
    log_line(
        &serve,
        0,
        "subscription confirmation mails wait for an SMTP server",
        |v| v["pending"] == 1,
    )
    .await;
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
    // The notification and the confirmation mail queued before the restart.
    let (mails, _) = collect(&mut sink, 2, 0).await;
    assert_eq!(recipient(&mails[0]), "erin@example.com");
    assert_eq!(mails[0].subject(), "[API Status] Confirm your subscription");
    assert_eq!(recipient(&mails[1]), "ops@example.com");
    assert_eq!(mails[1].subject(), "[API Status] API errors: IDENTIFIED");
    assert!(
        text(&mails[1]).contains("\n\nElevated error rates.\n"),
        "{}",
        mails[1].body()
    );
    log_line(&serve, 0, "subscription confirmation mail sent", |_| true).await;
    log_line(&serve, 0, "status notification delivered", |v| {
        v["sent"] == 1
    })
    .await;
    sink.assert_quiet();
}

// ------------------------------------------------------------ links and webhooks

/// The link on the body line that starts with `label`.
fn link_after(mail: &Mail, label: &str) -> String {
    let body = text(mail);
    body.lines()
        .find_map(|l| l.strip_prefix(label))
        .unwrap_or_else(|| panic!("no {label:?} line in {body}"))
        .to_owned()
}

/// The (address, status) of every subscription of a page.
async fn subscriptions(api: &Api, page: &str) -> Vec<(String, String)> {
    let (status, list) = api
        .send(
            Method::GET,
            &format!("/v1/status-pages/{page}/subscriptions"),
            Value::Null,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{list}");
    list.as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["address"].as_str().unwrap().to_owned(),
                s["status"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// A browser-like request to a link: (status, content type, CSP, body).
async fn open_link(method: Method, url: &str) -> (StatusCode, String, String, String) {
    let http = reqwest::Client::builder()
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let mut request = http.request(method.clone(), url);
    if method == Method::POST {
        request = request
            .header("content-type", "application/x-www-form-urlencoded")
            .body("List-Unsubscribe=One-Click");
    }
    let resp = request.send().await.unwrap();
    let header = |name: &str| {
        resp.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned()
    };
    let (content_type, csp) = (header("content-type"), header("content-security-policy"));
    (resp.status(), content_type, csp, resp.text().await.unwrap())
}

/// Opens `url` and checks that the answer is an HTML notice with `status` saying
/// `says`; returns the body.
async fn expect_notice(method: Method, url: &str, status: u16, says: &str) -> String {
    let (got, content_type, csp, body) = open_link(method.clone(), url).await;
    assert_eq!(got.as_u16(), status, "{method} {url}: {body}");
    assert_eq!(content_type, "text/html; charset=utf-8", "{method} {url}");
    assert!(
        csp.starts_with("default-src 'none'"),
        "{method} {url}: CSP {csp:?}"
    );
    assert!(
        body.contains(says),
        "{method} {url}: {says:?} not in {body}"
    );
    body
}

#[tokio::test]
async fn pending_subscribers_confirm_by_link_and_leave_by_unsubscribe_links() {
    let Some(mut sink) = SmtpSink::start(SinkOptions::default()).await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let serve = start(dir.path(), &smtp_env(&sink));
    let api = Api::new(&serve, dir.path());
    let (at, _) = log_line(&serve, 0, "status notification delivery started", |_| true).await;

    let service = api.service("Checkout").await;
    let page = api.page("Acme <Status>", "acme", &service).await;
    let bulk = format!("/v1/status-pages/{page}/subscriptions/bulk");
    let answer = api
        .created(
            &bulk,
            json!({"subscriptions": [{"type": "EMAIL", "config": "carol@example.com"}]}),
        )
        .await;
    assert_eq!(
        answer,
        json!({"created": 1, "skipped": 0, "status": "PENDING"})
    );
    api.subscribe(&page, &["dave@example.com"], true).await;

    // One confirmation mail, to the PENDING subscriber only.
    let (mails, _) = collect(&mut sink, 1, 0).await;
    let mail = &mails[0];
    assert_eq!(recipient(mail), "carol@example.com");
    assert_eq!(mail.subject(), "[Acme <Status>] Confirm your subscription");
    let confirm = link_after(mail, "Confirm: ");
    let confirm_route = format!("{}/status/acme/subscriptions/confirm", serve.base);
    assert!(
        confirm.starts_with(&format!("{confirm_route}?token=osv_")),
        "{confirm}"
    );
    let early_unsubscribe = link_after(mail, "Unsubscribe: ");
    let unsubscribe_route = format!("{}/status/acme/subscriptions/unsubscribe", serve.base);
    assert!(
        early_unsubscribe.starts_with(&format!("{unsubscribe_route}?token=osu_")),
        "{early_unsubscribe}"
    );
    assert_eq!(
        mail.header("list_unsubscribe"),
        Some(format!("<{early_unsubscribe}>").as_str())
    );
    assert_eq!(
        mail.header("list_unsubscribe_post"),
        Some("List-Unsubscribe=One-Click")
    );
    log_line(&serve, at, "subscription confirmation mail sent", |v| {
        v["attempts"] == 1
    })
    .await;

    // Until confirmed, carol hears nothing of incidents.
    let incident = api
        .incident(
            "Checkout is slow",
            &service,
            json!({"description": "Looking into it.", "notifySubscribers": true}),
        )
        .await;
    let (mails, _) = collect(&mut sink, 1, 0).await;
    assert_eq!(recipient(&mails[0]), "dave@example.com");
    let (at, _) = log_line(&serve, at, "status notification delivered", |v| {
        v["incident"] == incident.as_str() && v["sent"] == 1
    })
    .await;
    sink.assert_quiet();

    // Bad links are 4xx pages and change nothing.
    let zeros = "0".repeat(64);
    for (url, status) in [
        (confirm_route.clone(), 400),
        (format!("{confirm_route}?token=nonsense"), 400),
        (format!("{confirm_route}?token=osv_{}", &zeros[..63]), 400),
        // An unsubscribe token confirms nothing.
        (
            format!(
                "{confirm_route}?token={}",
                early_unsubscribe.rsplit_once("token=").unwrap().1
            ),
            400,
        ),
        (format!("{confirm_route}?token=osv_{zeros}"), 404),
        (format!("{unsubscribe_route}?token=osu_{zeros}"), 404),
        (format!("{unsubscribe_route}?token=osv_{zeros}"), 400),
    ] {
        expect_notice(Method::GET, &url, status, "This link is not valid").await;
    }
    assert_eq!(
        subscriptions(&api, &page).await,
        [
            ("carol@example.com".to_owned(), "PENDING".to_owned()),
            ("dave@example.com".to_owned(), "VERIFIED".to_owned())
        ]
    );

    // A HEAD (link checkers, previews) uses no token.
    let (status, _, _, _) = open_link(Method::HEAD, &confirm).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(subscriptions(&api, &page).await[0].1, "PENDING");

    // The link confirms, once; the page is escaped.
    let body = expect_notice(Method::GET, &confirm, 200, "Subscription confirmed").await;
    assert!(body.contains("carol@example.com"), "{body}");
    assert!(body.contains("Acme &lt;Status&gt;"), "{body}");
    assert!(!body.contains("<Status>"), "{body}");
    assert_eq!(
        subscriptions(&api, &page).await[0],
        ("carol@example.com".to_owned(), "VERIFIED".to_owned())
    );
    expect_notice(Method::GET, &confirm, 410, "already used").await;

    // Now both hear of the next update, each mail with its own unsubscribe link.
    let update = api
        .update(
            &incident,
            json!({"description": "Found it.", "status": "IDENTIFIED", "notifySubscribers": true}),
        )
        .await;
    let (mails, _) = collect(&mut sink, 2, 0).await;
    assert_eq!(
        mails.iter().map(recipient).collect::<Vec<_>>(),
        ["carol@example.com", "dave@example.com"]
    );
    let mut unsubscribe = Vec::new();
    for mail in &mails {
        assert_eq!(
            mail.subject(),
            "[Acme <Status>] Checkout is slow: IDENTIFIED"
        );
        let link = link_after(mail, "Unsubscribe: ");
        assert!(
            link.starts_with(&format!("{unsubscribe_route}?token=osu_")),
            "{link}"
        );
        assert_eq!(
            mail.header("list_unsubscribe"),
            Some(format!("<{link}>").as_str())
        );
        assert_eq!(
            mail.header("list_unsubscribe_post"),
            Some("List-Unsubscribe=One-Click")
        );
        unsubscribe.push(link);
    }
    assert_ne!(unsubscribe[0], unsubscribe[1]);
    let (at, _) = log_line(&serve, at, "status notification delivered", |v| {
        v["incident_update"] == update["id"] && v["sent"] == 2
    })
    .await;

    // carol leaves by opening her link, dave by a mail client's one-click POST.
    let (status, _, _, _) = open_link(Method::HEAD, &unsubscribe[0]).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(subscriptions(&api, &page).await.len(), 2);
    let body = expect_notice(Method::GET, &unsubscribe[0], 200, "You are unsubscribed").await;
    assert!(body.contains("carol@example.com"), "{body}");
    expect_notice(Method::POST, &unsubscribe[1], 200, "You are unsubscribed").await;
    assert_eq!(subscriptions(&api, &page).await, []);
    // Their links went with the subscriptions.
    expect_notice(Method::GET, &unsubscribe[0], 404, "This link is not valid").await;
    expect_notice(
        Method::GET,
        &early_unsubscribe,
        404,
        "This link is not valid",
    )
    .await;

    // Nothing more is sent.
    let update = api
        .update(
            &incident,
            json!({"description": "Fixed.", "status": "RESOLVED", "notifySubscribers": true}),
        )
        .await;
    log_line(&serve, at, "status notification delivered", |v| {
        v["incident_update"] == update["id"] && v["sent"] == 0 && v["failed"] == 0
    })
    .await;
    sink.assert_quiet();
}

/// One request a webhook receiver got.
#[derive(Debug)]
struct Hook {
    path: String,
    content_type: String,
    event: String,
    body: Value,
}

#[derive(Clone)]
struct HookState {
    tx: tokio::sync::mpsc::UnboundedSender<Hook>,
    /// Statuses to answer per path, in order; 200 once empty.
    scripts: std::sync::Arc<std::sync::Mutex<std::collections::HashMap<String, Vec<u16>>>>,
}

/// An HTTP receiver on 127.0.0.1 that takes any request and answers per script.
struct HookReceiver {
    base: String,
    rx: tokio::sync::mpsc::UnboundedReceiver<Hook>,
}

impl HookReceiver {
    async fn start(scripts: &[(&str, &[u16])]) -> HookReceiver {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let state = HookState {
            tx,
            scripts: std::sync::Arc::new(std::sync::Mutex::new(
                scripts
                    .iter()
                    .map(|(path, statuses)| ((*path).to_owned(), statuses.to_vec()))
                    .collect(),
            )),
        };
        let app = axum::Router::new().fallback(receive).with_state(state);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        HookReceiver { base, rx }
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    async fn next(&mut self) -> Hook {
        tokio::time::timeout(DEADLINE, self.rx.recv())
            .await
            .expect("a webhook request within the deadline")
            .unwrap()
    }

    fn assert_quiet(&mut self) {
        if let Ok(hook) = self.rx.try_recv() {
            panic!("unexpected webhook request: {hook:?}");
        }
    }
}

async fn receive(
    axum::extract::State(state): axum::extract::State<HookState>,
    uri: axum::http::Uri,
    headers: axum::http::HeaderMap,
    body: axum::body::Bytes,
) -> axum::http::StatusCode {
    let path = uri.path().to_owned();
    let status = {
        let mut scripts = state.scripts.lock().unwrap();
        match scripts.get_mut(&path) {
            Some(script) if !script.is_empty() => script.remove(0),
            _ => 200,
        }
    };
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned()
    };
    let _ = state.tx.send(Hook {
        path,
        content_type: header("content-type"),
        event: header("x-outpost-event"),
        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
    });
    axum::http::StatusCode::from_u16(status).unwrap()
}

#[tokio::test]
async fn webhook_subscribers_are_posted_without_waiting_for_smtp() {
    let Some(mut sink) = SmtpSink::start(SinkOptions::default()).await else {
        return;
    };
    // /flaky answers 500 once (retried), /gone 410 (given up at once).
    let mut hooks = HookReceiver::start(&[("/flaky", &[500]), ("/gone", &[410])]).await;
    let dir = tempfile::tempdir().unwrap();
    let serve = start(dir.path(), &[]);
    let api = Api::new(&serve, dir.path());
    let service = api.service("API").await;
    let page = api.page("Ops Status", "ops", &service).await;
    let bulk = format!("/v1/status-pages/{page}/subscriptions/bulk");

    // Refused configurations name the field.
    for (item, field) in [
        (
            json!({"type": "WEBHOOK", "config": "ftp://hooks.example.com/x"}),
            "subscriptions[0].config",
        ),
        (
            json!({"type": "WEBHOOK", "config": "not a url"}),
            "subscriptions[0].config",
        ),
        (
            json!({"type": "WEBHOOK", "config": "https://"}),
            "subscriptions[0].config",
        ),
        (json!({"type": "WEBHOOK"}), "subscriptions[0].config"),
        (
            json!({"type": "SMS", "config": "+15550100"}),
            "subscriptions[0].type",
        ),
    ] {
        let (status, answer) = api
            .send(Method::POST, &bulk, json!({"subscriptions": [item]}))
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{item}: {answer}");
        assert_eq!(answer["statusCode"], 400, "{answer}");
        assert!(
            answer["message"]
                .as_str()
                .is_some_and(|m| m.starts_with(&format!("{field}: "))),
            "{item}: {answer}"
        );
    }

    let (flaky, gone) = (hooks.url("/flaky"), hooks.url("/gone"));
    let answer = api
        .created(
            &bulk,
            json!({"subscriptions": [
                {"type": "WEBHOOK", "config": flaky},
                {"type": "WEBHOOK", "config": gone},
                {"type": "EMAIL", "config": "ops@example.com"}],
                "autoVerify": true}),
        )
        .await;
    assert_eq!(
        answer,
        json!({"created": 3, "skipped": 0, "status": "VERIFIED"})
    );
    // Webhooks need no confirmation: VERIFIED without autoVerify; repeats are skipped.
    let answer = api
        .created(
            &bulk,
            json!({"subscriptions": [{"type": "WEBHOOK", "config": flaky}]}),
        )
        .await;
    assert_eq!(
        answer,
        json!({"created": 0, "skipped": 1, "status": "VERIFIED"})
    );
    let (_, list) = api
        .send(
            Method::GET,
            &format!("/v1/status-pages/{page}/subscriptions"),
            Value::Null,
        )
        .await;
    let listed: Vec<(&str, &str, &str)> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["type"].as_str().unwrap(),
                s["address"].as_str().unwrap(),
                s["status"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        listed,
        [
            ("WEBHOOK", flaky.as_str(), "VERIFIED"),
            ("WEBHOOK", gone.as_str(), "VERIFIED"),
            ("EMAIL", "ops@example.com", "VERIFIED"),
        ]
    );

    let incident = api
        .incident(
            "API errors",
            &service,
            json!({"description": "Elevated <error> rates.", "status": "IDENTIFIED",
                   "notifySubscribers": true}),
        )
        .await;
    // Three requests: /flaky twice (500, then 200), /gone once (410).
    let mut got = vec![hooks.next().await, hooks.next().await, hooks.next().await];
    got.sort_by(|a, b| a.path.cmp(&b.path));
    let paths: Vec<&str> = got.iter().map(|h| h.path.as_str()).collect();
    assert_eq!(paths, ["/flaky", "/flaky", "/gone"]);
    assert_eq!(got[0].body, got[1].body, "a retry sends the same payload");
    let update_id = incident_update_id(&api, &incident).await;
    for hook in &got {
        assert_eq!(hook.content_type, "application/json");
        assert_eq!(hook.event, "status-page.incident-update");
        let p = &hook.body;
        assert_eq!(p["type"], "INCIDENT_UPDATE", "{p}");
        assert!(
            p["id"].is_string() && p["subscriptionId"].is_string(),
            "{p}"
        );
        assert_eq!(p["page"]["id"], page.as_str());
        assert_eq!(p["page"]["name"], "Ops Status");
        assert_eq!(p["page"]["url"], "ops");
        assert_eq!(p["page"]["link"], format!("{}/status/ops", serve.base));
        assert_eq!(p["incident"]["id"], incident.as_str());
        assert_eq!(p["incident"]["name"], "API errors");
        assert_eq!(p["incident"]["severity"], "MAJOR");
        assert_eq!(p["update"]["id"], update_id.as_str());
        assert_eq!(p["update"]["status"], "IDENTIFIED");
        assert_eq!(p["update"]["description"], "Elevated <error> rates.");
        assert!(
            p["update"]["date"]
                .as_str()
                .is_some_and(|d| chrono::DateTime::parse_from_rfc3339(d).is_ok()),
            "{p}"
        );
        assert_eq!(
            p["update"]["services"],
            json!([{"id": service["id"], "name": "API"}])
        );
    }
    assert_ne!(got[0].body["subscriptionId"], got[2].body["subscriptionId"]);
    log_line(&serve, 0, "status notification sent to webhook", |v| {
        v["attempts"] == 2
    })
    .await;
    log_line(&serve, 0, "status notification refused; not retried", |v| {
        v["kind"] == "WEBHOOK"
    })
    .await;
    // The e-mail waits for SMTP; the webhooks did not.
    log_line(
        &serve,
        0,
        "status notifications wait for an SMTP server",
        |v| v["pending"] == 1 && v["sent"] == 1 && v["failed"] == 1,
    )
    .await;
    hooks.assert_quiet();
    sink.assert_quiet();
    serve.kill9();

    // With SMTP the e-mail goes out; the webhooks' outcomes were kept: no resend.
    let serve = start(dir.path(), &smtp_env(&sink));
    let (mails, _) = collect(&mut sink, 1, 0).await;
    assert_eq!(recipient(&mails[0]), "ops@example.com");
    log_line(&serve, 0, "status notification delivered", |v| {
        v["sent"] == 1 && v["failed"] == 0 && v["earlier"] == 2
    })
    .await;
    hooks.assert_quiet();
    sink.assert_quiet();
}

/// The id of the (only) update of an incident.
async fn incident_update_id(api: &Api, incident: &str) -> String {
    let (status, answer) = api
        .send(
            Method::GET,
            &format!("/v1/status-pages/incidents/{incident}"),
            Value::Null,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    answer["incidentUpdates"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned()
}
