//! Starts real `outpost` processes and in-process loopback peers for the end-to-end tests.

use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::sync::{Mutex, mpsc};

/// How long any awaited event may take before a test gives up.
pub const EVENT_TIMEOUT: Duration = Duration::from_secs(60);

pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_outpost")
}

/// A port that was free a moment ago (bind 0, read, release).
pub fn free_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind 0");
    l.local_addr().expect("addr").port()
}

/// Polls `f` until it returns Some, up to EVENT_TIMEOUT.
pub async fn eventually<T, F, Fut>(what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let start = Instant::now();
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(
            start.elapsed() < EVENT_TIMEOUT,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A child process killed on drop, its stderr kept in a file for failure messages.
pub struct Proc {
    pub child: Child,
    pub log: PathBuf,
}

impl Proc {
    pub fn spawn(mut cmd: Command, log: PathBuf) -> Proc {
        let file = std::fs::File::create(&log).expect("log file");
        let out = file.try_clone().expect("clone log");
        cmd.stdout(Stdio::from(out))
            .stderr(Stdio::from(file))
            .stdin(Stdio::null());
        let child = cmd.spawn().expect("spawn outpost");
        Proc { child, log }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn signal(&self, sig: &str) {
        let status = Command::new("kill")
            .args([&format!("-{sig}"), &self.pid().to_string()])
            .status()
            .expect("kill");
        assert!(status.success(), "kill -{sig} failed");
    }

    /// Waits for the process to exit (bounded) and returns its exit code.
    pub async fn wait_exit(&mut self) -> Option<i32> {
        let start = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return status.code();
            }
            assert!(
                start.elapsed() < EVENT_TIMEOUT,
                "process did not exit; log:\n{}",
                self.output()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    pub fn output(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Credentials written by the control plane on first start.
#[derive(Clone, Debug)]
pub struct Creds {
    pub account_id: String,
    pub api_key: String,
    pub private_location: String,
    pub agent_key: String,
}

/// A running `outpost serve`.
pub struct ControlPlane {
    pub proc: Proc,
    pub port: u16,
    pub creds: Creds,
    pub http: reqwest::Client,
}

impl ControlPlane {
    pub async fn start(data_dir: &Path, port: u16, lease_ttl_secs: u64) -> ControlPlane {
        let mut cmd = Command::new(bin());
        cmd.arg("serve")
            .arg("--listen")
            .arg(format!("127.0.0.1:{port}"))
            .arg("--data-dir")
            .arg(data_dir)
            .arg("--lease-ttl-secs")
            .arg(lease_ttl_secs.to_string())
            .env("LOG_LEVEL", "DEBUG");
        let log = data_dir.with_extension(format!("serve-{}.log", now_ms()));
        let proc = Proc::spawn(cmd, log);
        let creds_path = data_dir.join("credentials.json");
        let http = reqwest::Client::new();
        let url = format!("http://127.0.0.1:{port}/v1/checks");
        let creds = eventually("control plane to answer", || {
            let http = http.clone();
            let url = url.clone();
            let creds_path = creds_path.clone();
            async move {
                let text = std::fs::read_to_string(&creds_path).ok()?;
                let v: Value = serde_json::from_str(&text).ok()?;
                let creds = Creds {
                    account_id: v["accountId"].as_str()?.to_owned(),
                    api_key: v["apiKey"].as_str()?.to_owned(),
                    private_location: v["privateLocation"].as_str()?.to_owned(),
                    agent_key: v["agentKey"].as_str()?.to_owned(),
                };
                let resp = http
                    .get(&url)
                    .bearer_auth(&creds.api_key)
                    .header("x-service-account", &creds.account_id)
                    .send()
                    .await
                    .ok()?;
                (resp.status() == 200).then_some(creds)
            }
        })
        .await;
        ControlPlane {
            proc,
            port,
            creds,
            http,
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    pub fn api(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        self.http
            .request(method, self.url(path))
            .bearer_auth(&self.creds.api_key)
            .header("x-service-account", &self.creds.account_id)
    }

    /// The JSON body of a bodiless public API request (whatever the status).
    pub async fn json(&self, method: reqwest::Method, path: &str) -> Value {
        let resp = self.api(method, path).send().await.unwrap();
        resp.json().await.unwrap()
    }

    /// Creates an activated URL monitor on the default location; returns its id.
    pub async fn create_url_check(&self, name: &str, url: &str, extra: Value) -> String {
        let mut body = json!({
            "name": name,
            "activated": true,
            "frequency": 1440,
            "privateLocations": [self.creds.private_location],
            "request": {"url": url, "assertions": [
                {"source": "STATUS_CODE", "comparison": "EQUALS", "target": "200"}
            ]},
        });
        merge(&mut body, extra);
        let resp = self
            .api(reqwest::Method::POST, "/v1/checks/url")
            .json(&body)
            .send()
            .await
            .expect("create check");
        let status = resp.status();
        let v: Value = resp.json().await.expect("check json");
        assert_eq!(status, 201, "create check answered {v}");
        v["id"].as_str().expect("check id").to_owned()
    }

    /// Triggers the given checks; returns the session ids in order.
    pub async fn trigger(&self, check_ids: &[&str]) -> Vec<String> {
        let resp = self
            .api(reqwest::Method::POST, "/v2/check-sessions/trigger")
            .json(&json!({"target": {"checkId": check_ids}}))
            .send()
            .await
            .expect("trigger");
        let status = resp.status();
        let v: Value = resp.json().await.expect("trigger json");
        assert_eq!(status, 201, "trigger answered {v}");
        v["sessions"]
            .as_array()
            .expect("sessions")
            .iter()
            .map(|s| s["checkSessionId"].as_str().expect("session id").to_owned())
            .collect()
    }

    /// Waits (via the completion endpoint) until the session is final and returns it.
    pub async fn await_session(&self, id: &str) -> Value {
        let start = Instant::now();
        loop {
            let resp = self
                .api(
                    reqwest::Method::GET,
                    &format!("/v2/check-sessions/{id}/completion?maxWaitSeconds=5"),
                )
                .send()
                .await;
            if let Ok(resp) = resp {
                match resp.status().as_u16() {
                    200 => return resp.json().await.expect("session json"),
                    408 => {}
                    other => panic!("completion answered {other}: {:?}", resp.text().await),
                }
            }
            assert!(
                start.elapsed() < EVENT_TIMEOUT * 2,
                "session {id} never completed"
            );
        }
    }
}

fn merge(base: &mut Value, extra: Value) {
    if let (Value::Object(b), Value::Object(e)) = (base, extra) {
        for (k, v) in e {
            match b.get_mut(&k) {
                Some(existing) if existing.is_object() && v.is_object() => merge(existing, v),
                _ => {
                    b.insert(k, v);
                }
            }
        }
    }
}

fn now_ms() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0)
}

/// A running `outpost agent`.
pub struct Agent {
    pub proc: Proc,
    pub health_port: u16,
}

impl Agent {
    pub fn start(cp: &ControlPlane, spool: &Path, extra_env: &[(&str, &str)]) -> Agent {
        Agent::start_with_key(cp.port, &cp.creds.agent_key, spool, extra_env)
    }

    pub fn start_with_key(port: u16, key: &str, spool: &Path, extra_env: &[(&str, &str)]) -> Agent {
        let health_port = free_port();
        let mut cmd = Command::new(bin());
        cmd.arg("agent")
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("API_KEY", key)
            .env("API_URL", format!("http://127.0.0.1:{port}"))
            .env("AGENT_HEALTH_PORT", health_port.to_string())
            .env("SPOOL_DIR", spool)
            .env("LOG_LEVEL", "DEBUG");
        for (k, v) in extra_env {
            cmd.env(k, v);
        }
        let log = spool.with_extension(format!("agent-{}.log", now_ms()));
        Agent {
            proc: Proc::spawn(cmd, log),
            health_port,
        }
    }

    pub fn health_url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.health_port)
    }

    /// Status code of a health endpoint, None if it does not answer.
    pub async fn probe(&self, path: &str) -> Option<u16> {
        let resp = reqwest::Client::new()
            .get(self.health_url(path))
            .timeout(Duration::from_secs(2))
            .send()
            .await
            .ok()?;
        Some(resp.status().as_u16())
    }

    pub async fn await_ready(&self) {
        eventually("agent readiness", || async {
            (self.probe("/-/readiness").await == Some(200)).then_some(())
        })
        .await;
    }

    /// Jobs running now, from /health.
    pub async fn running_jobs(&self) -> Option<u64> {
        let v: Value = reqwest::get(self.health_url("/health"))
            .await
            .ok()?
            .json()
            .await
            .ok()?;
        v["runningJobs"].as_u64()
    }
}

/// An in-process HTTP target on loopback. `/ok` answers 200, `/status/{code}` that code,
/// `/gate` holds each request until the test opens the gate, announcing its arrival.
pub struct Target {
    pub addr: SocketAddr,
    pub arrivals: Mutex<mpsc::UnboundedReceiver<()>>,
    gate: Arc<tokio::sync::Semaphore>,
}

impl Target {
    pub async fn start() -> Target {
        use axum::extract::{Path as AxPath, State};
        use axum::routing::get;
        #[derive(Clone)]
        struct St {
            tx: mpsc::UnboundedSender<()>,
            gate: Arc<tokio::sync::Semaphore>,
        }
        let (tx, rx) = mpsc::unbounded_channel();
        let gate = Arc::new(tokio::sync::Semaphore::new(0));
        let app = axum::Router::new()
            .route("/ok", get(|| async { "ok" }))
            .route(
                "/status/{code}",
                get(|AxPath(code): AxPath<u16>| async move {
                    (
                        axum::http::StatusCode::from_u16(code)
                            .unwrap_or(axum::http::StatusCode::BAD_REQUEST),
                        "status",
                    )
                }),
            )
            .route(
                "/gate",
                get(|State(st): State<St>| async move {
                    let _ = st.tx.send(());
                    let permit = st.gate.acquire().await;
                    if let Ok(p) = permit {
                        p.forget();
                    }
                    "through the gate"
                }),
            )
            .with_state(St {
                tx,
                gate: gate.clone(),
            });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind target");
        let addr = listener.local_addr().expect("target addr");
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Target {
            addr,
            arrivals: Mutex::new(rx),
            gate,
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Waits until a request has reached `/gate`.
    pub async fn arrival(&self) {
        tokio::time::timeout(EVENT_TIMEOUT, self.arrivals.lock().await.recv())
            .await
            .expect("no request reached the target")
            .expect("target stopped");
    }

    /// Lets `n` held (or future) requests through.
    pub fn open(&self, n: usize) {
        self.gate.add_permits(n);
    }
}
