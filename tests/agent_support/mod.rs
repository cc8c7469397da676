//! Test support for the agent's black-box tests: a small scripted control plane (the
//! agent API of `outpost::protocol`, on 127.0.0.1) that reports every request through a
//! channel, and a wrapper around a real `outpost agent` process.

#![allow(dead_code)]

use std::collections::VecDeque;
use std::io::BufRead;
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use chrono::Utc;
use outpost::model::Pool;
use outpost::protocol::{
    ErrorReportsRequest, ErrorReportsResponse, HelloRequest, HelloResponse, LeaseRequest,
    LeaseResponse, LeasedJob, ReleaseRequest, ReleaseResponse, RenewRequest, RenewResponse,
    SubmitOutcome, SubmitResultsRequest, SubmitResultsResponse, SubmitStatus, paths,
};
use tokio::sync::{mpsc, oneshot};
use uuid::Uuid;

/// Upper bound of any single wait in these tests.
pub const WAIT: Duration = Duration::from_secs(20);

/// Awaits `fut` for at most [`WAIT`].
pub async fn bounded<F: std::future::Future>(what: &str, fut: F) -> F::Output {
    match tokio::time::timeout(WAIT, fut).await {
        Ok(v) => v,
        Err(_) => panic!("timed out waiting for {what}"),
    }
}

/// A request the fake control plane received.
#[derive(Debug)]
pub enum Event {
    Hello {
        auth: Option<String>,
        user_agent: Option<String>,
        body: HelloRequest,
    },
    Lease {
        n: usize,
        body: LeaseRequest,
    },
    Results(SubmitResultsRequest),
    Renew(RenewRequest),
    Release(ReleaseRequest),
}

/// How the fake answers one RESULTS request.
pub enum ResultsReply {
    /// ACCEPTED for every result.
    Accept,
    /// ACCEPTED for every result, once the sender fires (or is dropped).
    AcceptWhen(oneshot::Receiver<()>),
    /// This HTTP status with an empty JSON body.
    Status(u16),
}

/// The script of the fake control plane.
#[derive(Default)]
pub struct Script {
    /// HELLO answers 401.
    pub refuse_key: bool,
    /// Jobs of the first LEASE requests, one entry per request; later requests hang
    /// (like a long-poll with nothing to hand out).
    pub leases: VecDeque<Vec<LeasedJob>>,
    /// Answers of the first RESULTS requests; later ones are accepted.
    pub results: VecDeque<ResultsReply>,
    /// Every LEASE answers this status and JSON error message instead.
    pub reject_leases: Option<(u16, String)>,
    /// Uptime jobs handed out, as many as a LEASE asks uptime slots for, before
    /// `leases` is looked at; a LEASE that asks for no uptime slot gets none of them.
    pub uptime_jobs: VecDeque<LeasedJob>,
}

/// An error report request the fake control plane received.
#[derive(Debug)]
pub struct ReceivedReports {
    pub auth: Option<String>,
    pub body: ErrorReportsRequest,
}

struct Shared {
    script: Mutex<Script>,
    leases_seen: Mutex<usize>,
    events: mpsc::UnboundedSender<Event>,
    error_reports: mpsc::UnboundedSender<ReceivedReports>,
}

/// The fake control plane.
pub struct FakeService {
    pub addr: SocketAddr,
    pub events: mpsc::UnboundedReceiver<Event>,
    /// Error report requests, apart from [`FakeService::events`] (they arrive whenever
    /// the agent meets an internal error).
    pub error_reports: mpsc::UnboundedReceiver<ReceivedReports>,
}

pub const LOCATION: &str = "test-location";
pub const LEASE_TTL_SECS: u64 = 30;

impl FakeService {
    pub async fn start(script: Script) -> FakeService {
        let (tx, rx) = mpsc::unbounded_channel();
        let (reports_tx, reports_rx) = mpsc::unbounded_channel();
        let shared = Arc::new(Shared {
            script: Mutex::new(script),
            leases_seen: Mutex::new(0),
            events: tx,
            error_reports: reports_tx,
        });
        let app = Router::new()
            .route(paths::HELLO, post(hello))
            .route(paths::LEASE, post(lease))
            .route(paths::RENEW, post(renew))
            .route(paths::RELEASE, post(release))
            .route(paths::RESULTS, post(results))
            .route(paths::ERROR_REPORTS, post(error_reports))
            .with_state(shared);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        FakeService {
            addr,
            events: rx,
            error_reports: reports_rx,
        }
    }

    /// The next error report request.
    pub async fn next_error_reports(&mut self) -> ReceivedReports {
        bounded("an error report request", self.error_reports.recv())
            .await
            .expect("the fake service is gone")
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The next request the service saw.
    pub async fn next(&mut self) -> Event {
        bounded("a request to the control plane", self.events.recv())
            .await
            .expect("the fake service is gone")
    }

    /// Skips RENEW requests (timing-dependent) and returns the next other request.
    pub async fn next_significant(&mut self) -> Event {
        loop {
            match self.next().await {
                Event::Renew(_) => continue,
                e => return e,
            }
        }
    }
}

fn header(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

async fn hello(
    State(s): State<Arc<Shared>>,
    headers: HeaderMap,
    Json(body): Json<HelloRequest>,
) -> Response {
    let _ = s.events.send(Event::Hello {
        auth: header(&headers, "authorization"),
        user_agent: header(&headers, "user-agent"),
        body,
    });
    if s.script.lock().unwrap().refuse_key {
        return (StatusCode::UNAUTHORIZED, "unknown key").into_response();
    }
    Json(HelloResponse {
        location_id: Uuid::new_v4(),
        location_name: LOCATION.to_owned(),
        lease_ttl_secs: LEASE_TTL_SECS,
        server_version: "test".to_owned(),
    })
    .into_response()
}

async fn lease(State(s): State<Arc<Shared>>, Json(body): Json<LeaseRequest>) -> Response {
    let n = {
        let mut seen = s.leases_seen.lock().unwrap();
        *seen += 1;
        *seen
    };
    let wanted = body.capacity.uptime as usize;
    let _ = s.events.send(Event::Lease { n, body });
    let rejection = s.script.lock().unwrap().reject_leases.clone();
    if let Some((code, message)) = rejection {
        let code = StatusCode::from_u16(code).unwrap();
        let body = serde_json::json!({"statusCode": code.as_u16(), "error": "Rejected", "message": message});
        return (code, Json(body)).into_response();
    }
    let jobs = {
        let mut script = s.script.lock().unwrap();
        if wanted > 0 && !script.uptime_jobs.is_empty() {
            let n = wanted.min(script.uptime_jobs.len());
            Some(script.uptime_jobs.drain(..n).collect())
        } else {
            script.leases.pop_front()
        }
    };
    match jobs {
        Some(jobs) => Json(LeaseResponse { jobs }).into_response(),
        None => std::future::pending().await,
    }
}

async fn renew(State(s): State<Arc<Shared>>, Json(body): Json<RenewRequest>) -> Response {
    let renewed = body.leases.clone();
    let _ = s.events.send(Event::Renew(body));
    Json(RenewResponse {
        renewed,
        lost: Vec::new(),
        lease_expires_at: Utc::now() + chrono::Duration::seconds(LEASE_TTL_SECS as i64),
    })
    .into_response()
}

async fn release(State(s): State<Arc<Shared>>, Json(body): Json<ReleaseRequest>) -> Response {
    let released = body.leases.len() as u32;
    let _ = s.events.send(Event::Release(body));
    Json(ReleaseResponse { released }).into_response()
}

async fn results(State(s): State<Arc<Shared>>, Json(body): Json<SubmitResultsRequest>) -> Response {
    let outcomes: Vec<SubmitOutcome> = body
        .results
        .iter()
        .map(|r| SubmitOutcome {
            job_id: r.job_id,
            lease_id: r.lease_id,
            status: SubmitStatus::Accepted,
            reason: None,
        })
        .collect();
    let _ = s.events.send(Event::Results(body));
    let reply = s.script.lock().unwrap().results.pop_front();
    match reply.unwrap_or(ResultsReply::Accept) {
        ResultsReply::Accept => {}
        ResultsReply::AcceptWhen(gate) => {
            let _ = gate.await;
        }
        ResultsReply::Status(code) => {
            let code = StatusCode::from_u16(code).unwrap();
            return (code, Json(serde_json::json!({}))).into_response();
        }
    }
    Json(SubmitResultsResponse { outcomes }).into_response()
}

async fn error_reports(
    State(s): State<Arc<Shared>>,
    headers: HeaderMap,
    Json(body): Json<ErrorReportsRequest>,
) -> Response {
    let stored = body.reports.len() as u32;
    let _ = s.error_reports.send(ReceivedReports {
        auth: header(&headers, "authorization"),
        body,
    });
    Json(ErrorReportsResponse { stored }).into_response()
}

/// A leased uptime job whose check document is `check`.
pub fn job(check: serde_json::Value) -> LeasedJob {
    LeasedJob {
        job_id: Uuid::new_v4(),
        lease_id: Uuid::new_v4(),
        lease_expires_at: Utc::now() + chrono::Duration::seconds(LEASE_TTL_SECS as i64),
        pool: Pool::Uptime,
        check_id: Uuid::new_v4(),
        session_id: Uuid::new_v4(),
        run_location: LOCATION.to_owned(),
        check: serde_json::value::to_raw_value(&check).unwrap(),
        proxy_url: None,
    }
}

/// A running `outpost agent` process; its stderr lines arrive through a channel.
pub struct AgentProcess {
    child: Option<Child>,
    lines: mpsc::UnboundedReceiver<String>,
    /// Every stderr line seen so far.
    pub stderr: Vec<String>,
}

/// The environment of an agent talking to `service_url`, with its health server on an
/// ephemeral port of 127.0.0.1 and JSON logs.
pub fn agent_env<'a>(
    api_key: &'a str,
    service_url: &'a str,
    spool: &'a Path,
) -> Vec<(&'a str, String)> {
    vec![
        ("API_KEY", api_key.to_owned()),
        ("API_URL", service_url.to_owned()),
        ("AGENT_HEALTH_PORT", "0".to_owned()),
        ("AGENT_HEALTH_HOST", "127.0.0.1".to_owned()),
        ("SPOOL_DIR", spool.display().to_string()),
        ("LOG_FORMAT", "json".to_owned()),
    ]
}

impl AgentProcess {
    /// Starts `outpost agent` with exactly `env` (nothing inherited, so no proxy either).
    pub fn spawn(env: &[(&str, String)]) -> AgentProcess {
        let mut child = Command::new(env!("CARGO_BIN_EXE_outpost"))
            .arg("agent")
            .env_clear()
            .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start outpost agent");
        let stderr = child.stderr.take().unwrap();
        let (tx, rx) = mpsc::unbounded_channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        AgentProcess {
            child: Some(child),
            lines: rx,
            stderr: Vec::new(),
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().unwrap().id()
    }

    /// The next stderr line, `None` at the end of the stream.
    pub async fn next_line(&mut self) -> Option<String> {
        let line = bounded("a log line of the agent", self.lines.recv()).await;
        if let Some(l) = &line {
            self.stderr.push(l.clone());
        }
        line
    }

    /// Reads log lines until one (parsed as JSON) has this `message`; returns it.
    pub async fn wait_for_log(&mut self, message: &str) -> serde_json::Value {
        loop {
            let Some(line) = self.next_line().await else {
                panic!(
                    "the agent ended before logging {message:?}:\n{}",
                    self.stderr.join("\n")
                );
            };
            if let Ok(v) = serde_json::from_str::<serde_json::Value>(&line)
                && v["message"].as_str() == Some(message)
            {
                return v;
            }
        }
    }

    /// The address the health server logged.
    pub async fn health_addr(&mut self) -> SocketAddr {
        let line = self.wait_for_log("health server listening").await;
        line["addr"].as_str().unwrap().parse().unwrap()
    }

    /// Sends SIGTERM with the system's `kill`.
    pub fn terminate(&self) {
        let status = Command::new("kill")
            .args(["-TERM", &self.pid().to_string()])
            .status()
            .expect("run kill");
        assert!(status.success());
    }

    /// Waits for the process to end; returns its status and all its stderr lines.
    pub async fn wait(mut self) -> (ExitStatus, Vec<String>) {
        let mut child = self.child.take().unwrap();
        let status = bounded(
            "the agent to exit",
            tokio::task::spawn_blocking(move || child.wait()),
        )
        .await
        .unwrap()
        .unwrap();
        while let Some(line) = self.next_line().await {
            let _ = line;
        }
        (status, std::mem::take(&mut self.stderr))
    }
}

impl Drop for AgentProcess {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A plain HTTP client for the health endpoints (never through a proxy).
pub fn http() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap()
}

/// Polls `url` until it answers `status` (bounded by [`WAIT`]).
pub async fn until_status(client: &reqwest::Client, url: &str, status: u16) {
    bounded(&format!("{url} to answer {status}"), async {
        loop {
            if let Ok(r) = client.get(url).send().await
                && r.status().as_u16() == status
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
}

/// Result files (`*.json`) directly in the spool directory.
pub fn spool_files(dir: &Path) -> Vec<String> {
    match std::fs::read_dir(dir) {
        Ok(entries) => entries
            .filter_map(|e| e.ok())
            .filter(|e| e.path().is_file())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".json"))
            .collect(),
        Err(_) => Vec::new(),
    }
}
