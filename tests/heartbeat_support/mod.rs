//! Helpers for the heartbeat tests: an in-process service driven by a manual clock
//! (fast alert retries), heartbeat and channel creation through the public API, pings,
//! and an in-test webhook receiver on 127.0.0.1 that hands every request to the test
//! through a channel.
#![allow(dead_code)]

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode as AxumStatus};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use outpost::service::alerts::DeliveryPolicy;
use outpost::service::alerts::email::SmtpConfig;
use outpost::service::clock::ManualClock;
use outpost::service::{BoundService, ServeExtras, ServeOptions};
use outpost::shutdown::Shutdown;

use crate::service_support::{TestService, config};

/// A fixed start time for manual clocks: 2030-01-01T00:00:00Z.
pub const T0: i64 = 1_893_456_000_000;
pub const SEC: i64 = 1000;
pub const MIN: i64 = 60 * SEC;
pub const HOUR: i64 = 60 * MIN;
pub const DAY: i64 = 24 * HOUR;

/// Alert retries that take milliseconds.
pub fn fast_delivery() -> DeliveryPolicy {
    DeliveryPolicy {
        min_delay: Duration::from_millis(5),
        max_delay: Duration::from_millis(20),
        max_retries: 4,
        timeout: Duration::from_secs(5),
        concurrency: 4,
    }
}

/// Starts a service (no scheduler, reaper on) whose heartbeat clock is `clock`, in
/// `dir` (a fresh temporary directory when None).
pub async fn start_with_clock(clock: &ManualClock, dir: Option<tempfile::TempDir>) -> TestService {
    start_with_smtp(clock, dir, None).await
}

/// [`start_with_clock`] with e-mail alerts sent through `smtp`.
pub async fn start_with_smtp(
    clock: &ManualClock,
    dir: Option<tempfile::TempDir>,
    smtp: Option<SmtpConfig>,
) -> TestService {
    let dir = match dir {
        Some(d) => d,
        None => tempfile::tempdir().unwrap(),
    };
    let mut serve_config = config(dir.path(), Duration::from_secs(15));
    serve_config.smtp = smtp;
    let service = BoundService::bind_with_extras(
        serve_config,
        ServeOptions {
            scheduler: false,
            reaper: true,
            max_artifact_bytes: outpost::protocol::MAX_ARTIFACT_BYTES,
        },
        ServeExtras {
            clock: Arc::new(clock.clone()),
            alert_delivery: fast_delivery(),
        },
    )
    .await
    .unwrap();
    let base = format!("http://{}", service.local_addr());
    let handle = service.handle();
    let tenant = outpost::service::admin::create_tenant(service.store(), "test", "Local", "local")
        .await
        .unwrap();
    let shutdown = Shutdown::new();
    let task = tokio::spawn(service.serve(shutdown.clone()));
    TestService {
        dir,
        base,
        handle,
        shutdown,
        task: Some(task),
        tenant,
        http: reqwest::Client::builder().no_proxy().build().unwrap(),
    }
}

/// A manual clock at [`T0`] and a service on it.
pub async fn start_manual() -> (TestService, ManualClock) {
    let clock = ManualClock::new(T0);
    let svc = start_with_clock(&clock, None).await;
    (svc, clock)
}

/// The body of a heartbeat check: period and grace in seconds.
pub fn heartbeat_body(name: &str, period_secs: i64, grace_secs: i64) -> Value {
    json!({
        "name": name,
        "heartbeat": {"period": period_secs, "periodUnit": "seconds",
                      "grace": grace_secs, "graceUnit": "seconds"},
    })
}

/// Creates a heartbeat check (`extra` fields override); asserts 201 and returns it.
pub async fn create_heartbeat(svc: &TestService, body: Value) -> Value {
    let resp = svc
        .api(Method::POST, "/v1/checks/heartbeat")
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = resp.status();
    let out: Value = resp.json().await.unwrap();
    assert_eq!(status, StatusCode::CREATED, "{out}");
    out
}

/// The check id and ping URL of a created heartbeat.
pub fn id_and_url(created: &Value) -> (String, String) {
    (
        created["id"].as_str().unwrap().to_owned(),
        created["heartbeat"]["pingUrl"].as_str().unwrap().to_owned(),
    )
}

/// Sends a ping; returns status and body text.
pub async fn ping(svc: &TestService, url: &str, method: Method) -> (StatusCode, String) {
    ping_with(svc, url, method, &[], None).await
}

pub async fn ping_with(
    svc: &TestService,
    url: &str,
    method: Method,
    headers: &[(&str, &str)],
    body: Option<Vec<u8>>,
) -> (StatusCode, String) {
    let mut req = svc.http.request(method, url);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    if let Some(b) = body {
        req = req.body(b);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status();
    (status, resp.text().await.unwrap())
}

/// `GET .../events?<query>` (asserts 200) -> the single `{events, stats}` item.
pub async fn events(svc: &TestService, check_id: &str, query: &str) -> Value {
    let resp = svc
        .api(
            Method::GET,
            &format!("/v1/checks/heartbeats/{check_id}/events?{query}"),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let body: Value = resp.json().await.unwrap();
    let items = body.as_array().unwrap();
    assert_eq!(items.len(), 1, "{body}");
    items[0].clone()
}

/// The states of the events (newest first) of a window, up to 10.
pub async fn states(svc: &TestService, check_id: &str, query: &str) -> Vec<String> {
    events(svc, check_id, query).await["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["state"].as_str().unwrap().to_owned())
        .collect()
}

/// Creates a webhook channel; returns its id.
pub async fn create_webhook(svc: &TestService, url: &str, secret: Option<&str>) -> i64 {
    let body = json!({"type": "WEBHOOK", "config": {"name": "test", "url": url,
        "webhookSecret": secret}});
    create_channel(svc, &body).await["id"].as_i64().unwrap()
}

/// Creates an e-mail channel; returns its id.
pub async fn create_email_channel(svc: &TestService, address: &str) -> i64 {
    let body = json!({"type": "EMAIL", "config": {"address": address}});
    create_channel(svc, &body).await["id"].as_i64().unwrap()
}

/// Creates an alert channel from `body` (201 expected); returns it as answered.
pub async fn create_channel(svc: &TestService, body: &Value) -> Value {
    let resp = svc
        .api(Method::POST, "/v1/alert-channels")
        .json(body)
        .send()
        .await
        .unwrap();
    let status = resp.status();
    let out: Value = resp.json().await.unwrap();
    assert_eq!(status, StatusCode::CREATED, "{out}");
    out
}

/// One request the receiver got.
#[derive(Debug, Clone)]
pub struct Received {
    pub headers: HeaderMap,
    pub body: Bytes,
    /// When the request arrived (system clock, Unix milliseconds).
    pub at_ms: i64,
}

impl Received {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap()
    }
}

#[derive(Clone)]
struct ReceiverState {
    tx: mpsc::UnboundedSender<Received>,
    /// Statuses to answer, in order; 200 once empty.
    script: Arc<Mutex<VecDeque<u16>>>,
}

/// An HTTP server on 127.0.0.1 that accepts any POST to `/hook`.
pub struct Receiver {
    pub url: String,
    pub rx: mpsc::UnboundedReceiver<Received>,
}

impl Receiver {
    /// Starts a receiver that answers `script` statuses first, then 200.
    pub async fn start(script: &[u16]) -> Receiver {
        let (tx, rx) = mpsc::unbounded_channel();
        let state = ReceiverState {
            tx,
            script: Arc::new(Mutex::new(script.iter().copied().collect())),
        };
        let app = axum::Router::new()
            .route("/hook", axum::routing::post(receive))
            .with_state(state);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/hook", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Receiver { url, rx }
    }

    /// The next request (waits for it).
    pub async fn next(&mut self) -> Received {
        self.rx.recv().await.unwrap()
    }

    /// Asserts that nothing more was received so far.
    pub fn assert_quiet(&mut self) {
        if let Ok(r) = self.rx.try_recv() {
            panic!("unexpected webhook: {}", String::from_utf8_lossy(&r.body));
        }
    }
}

async fn receive(
    State(state): State<ReceiverState>,
    headers: HeaderMap,
    body: Bytes,
) -> AxumStatus {
    let at_ms = chrono::Utc::now().timestamp_millis();
    let status = state.script.lock().unwrap().pop_front().unwrap_or(200);
    let _ = state.tx.send(Received {
        headers,
        body,
        at_ms,
    });
    AxumStatus::from_u16(status).unwrap()
}

/// Moves the clock and waits until the engine has processed the new time.
pub async fn advance(svc: &TestService, clock: &ManualClock, by_ms: i64) {
    clock.advance(Duration::from_millis(u64::try_from(by_ms).unwrap()));
    svc.handle.heartbeats_settled().await;
}
