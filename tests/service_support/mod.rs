//! Helpers for the service tests: an in-process service on 127.0.0.1:0 with a temporary
//! data directory and one tenant, an HTTP client for the public API, and a hand-driven
//! agent speaking the agent protocol.
#![allow(dead_code)]

use std::time::Duration;

use chrono::Utc;
use reqwest::{Method, RequestBuilder, Response, StatusCode};
use serde_json::{Value, json};
use tokio::task::JoinHandle;
use uuid::Uuid;

use outpost::model::{CheckType, RunResult, RunStatus};
use outpost::protocol::{
    HelloRequest, HelloResponse, LeaseRef, LeaseRequest, LeaseResponse, LeasedJob,
    PROTOCOL_VERSION, PoolCapacity, ReleaseRequest, ReleaseResponse, RenewRequest, RenewResponse,
    SubmitResultsRequest, SubmitResultsResponse, SubmittedResult, paths,
};
use outpost::service::admin::{self, Tenant};
use outpost::service::{BoundService, ServeConfig, ServeOptions, ServiceError, ServiceHandle};
use outpost::shutdown::Shutdown;

/// A running service with one tenant (account, API key, location `local`, agent key).
pub struct TestService {
    pub dir: tempfile::TempDir,
    pub base: String,
    pub handle: ServiceHandle,
    pub shutdown: Shutdown,
    pub task: Option<JoinHandle<Result<(), ServiceError>>>,
    pub tenant: Tenant,
    pub http: reqwest::Client,
}

/// Options of [`TestService::start_with`].
#[derive(Clone, Copy)]
pub struct TestOptions {
    pub lease_ttl: Duration,
    /// Run the real background loops (the reaper is needed for lease expiry).
    pub scheduler: bool,
    pub reaper: bool,
    pub max_artifact_bytes: u64,
}

impl Default for TestOptions {
    fn default() -> Self {
        TestOptions {
            lease_ttl: Duration::from_secs(15),
            scheduler: false,
            reaper: true,
            max_artifact_bytes: outpost::protocol::MAX_ARTIFACT_BYTES,
        }
    }
}

pub fn config(dir: &std::path::Path, lease_ttl: Duration) -> ServeConfig {
    ServeConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        data_dir: dir.to_owned(),
        public_url: None,
        lease_ttl,
        ping_url: None,
        smtp: None,
    }
}

impl TestService {
    pub async fn start() -> TestService {
        TestService::start_with(TestOptions::default()).await
    }

    pub async fn start_with(o: TestOptions) -> TestService {
        let dir = tempfile::tempdir().unwrap();
        let service = BoundService::bind_with(
            config(dir.path(), o.lease_ttl),
            ServeOptions {
                scheduler: o.scheduler,
                reaper: o.reaper,
                max_artifact_bytes: o.max_artifact_bytes,
            },
        )
        .await
        .unwrap();
        let base = format!("http://{}", service.local_addr());
        let handle = service.handle();
        let tenant = admin::create_tenant(service.store(), "test", "Local", "local")
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

    /// A public API request with this tenant's key and account header.
    pub fn api(&self, method: Method, path: &str) -> RequestBuilder {
        self.http
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(&self.tenant.api_key)
            .header("x-service-account", self.tenant.account.id.to_string())
    }

    /// The JSON body of a public API `GET` with this tenant's key (whatever the status).
    #[allow(dead_code)]
    pub async fn get_json<T: serde::de::DeserializeOwned>(&self, path: &str) -> T {
        let resp = self.api(Method::GET, path).send().await.unwrap();
        resp.json().await.unwrap()
    }

    /// A public API request with another tenant's key and account header.
    pub fn api_as(&self, tenant: &Tenant, method: Method, path: &str) -> RequestBuilder {
        self.http
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(&tenant.api_key)
            .header("x-service-account", tenant.account.id.to_string())
    }

    /// Creates another tenant (its own account, key, location and agent key).
    pub async fn other_tenant(&self, slug: &str) -> Tenant {
        admin::create_tenant(self.handle.store(), "other", "Other", slug)
            .await
            .unwrap()
    }

    /// Adds a private location with an agent key to this tenant.
    pub async fn add_location(&self, slug: &str) -> (Uuid, String) {
        let store = self.handle.store();
        let loc = store
            .create_private_location(self.tenant.account.id, slug, slug)
            .await
            .unwrap();
        let (_, key) = store.create_location_key(loc.id).await.unwrap();
        (loc.id, key)
    }

    /// Creates a URL check; `extra` fields override the defaults. Returns the body.
    pub async fn create_check(&self, extra: Value) -> Value {
        let mut body = json!({
            "name": "check",
            "request": {"url": "http://127.0.0.1:9/"},
            "privateLocations": ["local"],
        });
        if let (Value::Object(b), Value::Object(e)) = (&mut body, extra) {
            for (k, v) in e {
                b.insert(k, v);
            }
        }
        let resp = self
            .api(Method::POST, "/v1/checks/url")
            .json(&body)
            .send()
            .await
            .unwrap();
        let status = resp.status();
        let out: Value = resp.json().await.unwrap();
        assert_eq!(status, StatusCode::CREATED, "{out}");
        out
    }

    /// Triggers one check; returns its session's id.
    pub async fn trigger_one(&self, check_id: &str) -> String {
        self.trigger_ids(&[check_id]).await[0]["checkSessionId"]
            .as_str()
            .unwrap()
            .to_owned()
    }

    /// Triggers the given checks; returns the sessions of the 201 answer.
    pub async fn trigger_ids(&self, ids: &[&str]) -> Vec<Value> {
        let resp = self
            .api(Method::POST, "/v2/check-sessions/trigger")
            .json(&json!({"target": {"checkId": ids}}))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::CREATED);
        let body: Value = resp.json().await.unwrap();
        body["sessions"].as_array().unwrap().clone()
    }

    pub async fn get_session(&self, id: &str) -> Value {
        let resp = self
            .api(Method::GET, &format!("/v1/check-sessions/{id}"))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::OK);
        resp.json().await.unwrap()
    }

    /// An agent of this tenant's `local` location.
    pub fn agent(&self) -> TestAgent {
        TestAgent::new(&self.http, &self.base, &self.tenant.agent_key)
    }

    /// Resolves once `n` lease long-polls are waiting in the service. Checks in-process
    /// state (no network), yielding between looks.
    pub async fn until_long_polls(&self, n: usize) {
        while self.handle.waiting_long_polls() < n {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }

    /// Resolves once a completion request waits on some session.
    pub async fn until_completion_waits(&self) {
        while self.handle.watched_sessions() == 0 {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }

    /// Drains the service and waits for `serve` to return.
    pub async fn stop(mut self) {
        self.shutdown.trigger();
        if let Some(task) = self.task.take() {
            task.await.unwrap().unwrap();
        }
    }
}

/// Reads an error answer, checking the reference error body shape.
pub async fn error_body(resp: Response, status: StatusCode) -> Value {
    assert_eq!(resp.status(), status);
    let ct = resp
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    assert!(ct.starts_with("application/json"), "content-type {ct:?}");
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["statusCode"], status.as_u16(), "{body}");
    assert!(body["error"].is_string(), "{body}");
    assert!(body["message"].is_string(), "{body}");
    body
}

/// An agent driven by hand through the agent API.
pub struct TestAgent {
    pub http: reqwest::Client,
    pub base: String,
    pub key: String,
    pub id: Uuid,
}

impl TestAgent {
    pub fn new(http: &reqwest::Client, base: &str, key: &str) -> TestAgent {
        TestAgent {
            http: http.clone(),
            base: base.to_owned(),
            key: key.to_owned(),
            id: Uuid::new_v4(),
        }
    }

    pub fn post(&self, path: &str) -> RequestBuilder {
        self.http
            .post(format!("{}{path}", self.base))
            .bearer_auth(&self.key)
    }

    pub async fn hello(&self) -> HelloResponse {
        let resp = self
            .post(paths::HELLO)
            .json(&HelloRequest {
                agent_id: self.id,
                agent_version: "test".into(),
                protocol_version: PROTOCOL_VERSION,
            })
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::OK);
        resp.json().await.unwrap()
    }

    pub async fn lease(&self, uptime: u32, wait_secs: u32) -> Vec<LeasedJob> {
        let resp = self
            .post(paths::LEASE)
            .json(&LeaseRequest {
                agent_id: self.id,
                capacity: PoolCapacity { uptime, heavy: 0 },
                wait_secs,
            })
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::OK);
        let body: LeaseResponse = resp.json().await.unwrap();
        body.jobs
    }

    pub async fn renew(&self, leases: Vec<LeaseRef>) -> RenewResponse {
        let resp = self
            .post(paths::RENEW)
            .json(&RenewRequest { leases })
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::OK);
        resp.json().await.unwrap()
    }

    pub async fn release(&self, leases: Vec<LeaseRef>) -> ReleaseResponse {
        let resp = self
            .post(paths::RELEASE)
            .json(&ReleaseRequest { leases })
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::OK);
        resp.json().await.unwrap()
    }

    pub async fn submit(&self, results: Vec<SubmittedResult>) -> SubmitResultsResponse {
        let resp = self
            .post(paths::RESULTS)
            .json(&SubmitResultsRequest { results })
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::OK);
        resp.json().await.unwrap()
    }
}

/// A result with the given verdict for a leased job.
pub fn result_for(job: &LeasedJob, status: RunStatus) -> SubmittedResult {
    let started = Utc::now();
    let mut result = RunResult::new(
        CheckType::Url,
        started,
        started + chrono::Duration::milliseconds(12),
        status == RunStatus::Failed,
        status == RunStatus::Degraded,
        Some(12.0),
        None,
    );
    result.refresh_status();
    assert_eq!(result.status, status);
    SubmittedResult {
        job_id: job.job_id,
        lease_id: job.lease_id,
        result,
    }
}

pub fn lease_ref(job: &LeasedJob) -> LeaseRef {
    LeaseRef {
        job_id: job.job_id,
        lease_id: job.lease_id,
    }
}
