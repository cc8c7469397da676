//! A real `outpost agent` whose check traffic can only reach loopback, for tests that
//! let a generator (schemathesis) loose on the public API: whatever checks it manages
//! to create or change, the agent only ever runs documents the test allowed.
//!
//! The agent reaches the service only through an in-test HTTP proxy (its `HTTP_PROXY`;
//! `API_URL` names a host that does not resolve, so there is no way around it). The
//! proxy forwards every agent request to the service as it is, except that in LEASE
//! answers the check document of every job is replaced by one the test wrote: the
//! document given for the job's check, else the fallback. So a check the generator
//! created, or changed to name another host, still runs against loopback. The agent
//! runs each job for real and reports a real result, so sessions complete as they would
//! in production. The location's proxy (`proxyUrl`, which the generator may set to any
//! host) is taken out of every job: API checks go straight to loopback.

#![allow(dead_code)]

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use serde_json::Value;
use tokio::sync::oneshot;

use outpost::protocol::{LeaseResponse, paths};

/// What the proxy needs.
struct Jail {
    http: reqwest::Client,
    /// Base URL of the real service.
    service: String,
    /// What the jobs of these checks (by id) run.
    documents: HashMap<String, Value>,
    /// What every other job runs.
    fallback: Value,
}

/// The agent process and its proxy; both stop when dropped.
pub struct LoopbackAgent {
    child: Child,
    pub log: PathBuf,
    stop_proxy: Option<oneshot::Sender<()>>,
    proxy_thread: Option<std::thread::JoinHandle<()>>,
}

impl LoopbackAgent {
    /// Starts the agent for `agent_key` against the service at `service_base`. Jobs of
    /// the checks in `documents` (check id -> check document) run that document, all
    /// others run `fallback`; every one of them must target loopback only. Files
    /// (spool, log) go under `dir`.
    pub fn start(
        service_base: &str,
        agent_key: &str,
        documents: HashMap<String, Value>,
        fallback: Value,
        dir: &Path,
    ) -> LoopbackAgent {
        let jail = Arc::new(Jail {
            http: reqwest::Client::builder().no_proxy().build().unwrap(),
            service: service_base.trim_end_matches('/').to_owned(),
            documents,
            fallback,
        });
        let (addr_tx, addr_rx) = std::sync::mpsc::channel();
        let (stop_tx, stop_rx) = oneshot::channel::<()>();
        let proxy_thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
                addr_tx.send(listener.local_addr().unwrap()).unwrap();
                let app = Router::new()
                    .fallback(forward)
                    .layer(DefaultBodyLimit::disable())
                    .with_state(jail);
                let _ = axum::serve(listener, app)
                    .with_graceful_shutdown(async {
                        let _ = stop_rx.await;
                    })
                    .await;
            });
        });
        let proxy: SocketAddr = addr_rx.recv().expect("the proxy's address");
        let log = dir.join("loopback-agent.log");
        let file = std::fs::File::create(&log).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_outpost"))
            .arg("agent")
            .env_clear()
            .env("API_KEY", agent_key)
            // Only the proxy can reach a host name that does not resolve.
            .env("API_URL", "http://outpost-service.invalid")
            .env("HTTP_PROXY", format!("http://{proxy}"))
            .env("AGENT_HEALTH_PORT", "0")
            .env("AGENT_HEALTH_HOST", "127.0.0.1")
            .env("SPOOL_DIR", dir.join("agent-spool"))
            // No packet capture or traceroute of the refused loopback connections.
            .env("NETWORK_DIAGNOSTICS", "false")
            .env("LOG_LEVEL", "INFO")
            .stdin(Stdio::null())
            .stdout(Stdio::from(file.try_clone().unwrap()))
            .stderr(Stdio::from(file))
            .spawn()
            .expect("start outpost agent");
        LoopbackAgent {
            child,
            log,
            stop_proxy: Some(stop_tx),
            proxy_thread: Some(proxy_thread),
        }
    }

    /// Whether the agent process still runs.
    pub fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Everything the agent logged so far.
    pub fn output(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for LoopbackAgent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(stop) = self.stop_proxy.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.proxy_thread.take() {
            let _ = thread.join();
        }
    }
}

/// Forwards one agent request to the service; LEASE answers are rewritten.
async fn forward(
    State(jail): State<Arc<Jail>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path = uri.path_and_query().map_or("/", |p| p.as_str()).to_owned();
    let mut request = jail
        .http
        .request(method, format!("{}{path}", jail.service))
        .body(body);
    for name in [
        header::AUTHORIZATION,
        header::CONTENT_TYPE,
        header::USER_AGENT,
    ] {
        if let Some(value) = headers.get(&name) {
            request = request.header(name, value);
        }
    }
    let answer = match request.send().await {
        Ok(answer) => answer,
        Err(e) => return (StatusCode::BAD_GATEWAY, e.to_string()).into_response(),
    };
    let status = StatusCode::from_u16(answer.status().as_u16()).unwrap_or(StatusCode::BAD_GATEWAY);
    let content_type = answer.headers().get(header::CONTENT_TYPE).cloned();
    let Ok(bytes) = answer.bytes().await else {
        return StatusCode::BAD_GATEWAY.into_response();
    };
    let bytes = if uri.path() == paths::LEASE && status == StatusCode::OK {
        match serde_json::from_slice::<LeaseResponse>(&bytes) {
            Ok(mut lease) => {
                for job in &mut lease.jobs {
                    let document = jail
                        .documents
                        .get(&job.check_id.to_string())
                        .unwrap_or(&jail.fallback);
                    job.check = serde_json::value::to_raw_value(document).unwrap();
                    // A proxy the generator set on the location may be anywhere.
                    job.proxy_url = None;
                }
                Bytes::from(serde_json::to_vec(&lease).unwrap())
            }
            // An answer the agent cannot read either: hand it nothing to run.
            Err(_) => return StatusCode::BAD_GATEWAY.into_response(),
        }
    } else {
        bytes
    };
    let mut response = (status, bytes).into_response();
    if let Some(ct) = content_type {
        response.headers_mut().insert(header::CONTENT_TYPE, ct);
    }
    response
}
