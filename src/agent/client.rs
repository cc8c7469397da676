//! HTTP client of the agent API: one reqwest client (rustls, proxy from HTTPS_PROXY /
//! HTTP_PROXY / NO_PROXY), Bearer auth, bounded response bodies, and the three error
//! classes the loops act on: fatal (401/403), permanent (other 4xx), transient (the rest).

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use reqwest::header::{AUTHORIZATION, CONTENT_LENGTH, CONTENT_TYPE, HeaderValue};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::config::AgentConfig;
use super::scrub::Scrubber;
use super::state::AgentState;
use crate::protocol::{
    ErrorReportsRequest, ErrorReportsResponse, HelloRequest, HelloResponse, LeaseRef, LeaseRequest,
    LeaseResponse, MAX_AGENT_BODY_BYTES, ReleaseRequest, ReleaseResponse, RenewRequest,
    RenewResponse, SubmitResultsResponse, SubmittedResult, paths,
};

/// Time to establish a connection to the service.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Time for a whole exchange other than a lease long-poll.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// Added to a lease's `waitSecs` for the whole long-poll exchange.
const LEASE_TIMEOUT_MARGIN: Duration = Duration::from_secs(15);
/// Bytes of an artifact per chunk of the streamed upload body.
const UPLOAD_CHUNK_BYTES: usize = 64 * 1024;
/// Largest answer read to an artifact upload.
const MAX_ERROR_BODY_BYTES: usize = 64 * 1024;
/// Longest excerpt of an error body kept in a message.
const MAX_ERROR_EXCERPT: usize = 300;

/// Why an exchange with the service failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ClientError {
    /// 401 or 403: the key is refused. Fatal for the agent.
    #[error("the service refused API_KEY (HTTP {status})")]
    Unauthorized { status: u16 },
    /// Another 4xx: this request will not succeed if repeated.
    #[error("the service rejected the request (HTTP {status}): {message}")]
    Rejected { status: u16, message: String },
    /// Transport error, timeout, 5xx, 429, or an unreadable answer: retry later.
    #[error("{0}")]
    Transient(String),
}

impl ClientError {
    pub fn is_transient(&self) -> bool {
        matches!(self, ClientError::Transient(_))
    }
}

/// The agent's connection to the service.
pub struct ServiceClient {
    http: reqwest::Client,
    base: url::Url,
    auth: HeaderValue,
    state: Arc<AgentState>,
    scrubber: Scrubber,
}

impl ServiceClient {
    pub fn new(config: &AgentConfig, state: Arc<AgentState>) -> Result<ServiceClient, String> {
        let mut auth = HeaderValue::from_str(&format!("Bearer {}", config.api_key))
            .map_err(|_| "API_KEY cannot be sent in a header".to_owned())?;
        auth.set_sensitive(true);
        let mut builder = reqwest::Client::builder();
        for cert in extra_roots()? {
            builder = builder.add_root_certificate(cert);
        }
        let http = builder
            .user_agent(format!("outpost-agent/{}", crate::VERSION))
            .connect_timeout(CONNECT_TIMEOUT)
            .timeout(REQUEST_TIMEOUT)
            .pool_max_idle_per_host(4)
            .pool_idle_timeout(Duration::from_secs(60))
            .build()
            .map_err(|e| error_chain(&e))?;
        Ok(ServiceClient {
            http,
            base: config.api_url.clone(),
            auth,
            state,
            scrubber: super::scrub::for_api_key(&config.api_key),
        })
    }

    pub async fn hello(&self, req: &HelloRequest) -> Result<HelloResponse, ClientError> {
        self.post(paths::HELLO, req, REQUEST_TIMEOUT).await
    }

    /// Long-polls for jobs; the exchange may take `waitSecs` plus a margin.
    pub async fn lease(&self, req: &LeaseRequest) -> Result<LeaseResponse, ClientError> {
        let timeout = Duration::from_secs(u64::from(req.wait_secs)) + LEASE_TIMEOUT_MARGIN;
        self.post(paths::LEASE, req, timeout).await
    }

    pub async fn renew(&self, req: &RenewRequest) -> Result<RenewResponse, ClientError> {
        self.post(paths::RENEW, req, REQUEST_TIMEOUT).await
    }

    pub async fn release(&self, req: &ReleaseRequest) -> Result<ReleaseResponse, ClientError> {
        self.post(paths::RELEASE, req, REQUEST_TIMEOUT).await
    }

    /// Sends error reports (`POST /agent/v1/error-reports`).
    pub async fn send_error_reports(
        &self,
        req: &ErrorReportsRequest,
    ) -> Result<ErrorReportsResponse, ClientError> {
        self.post(paths::ERROR_REPORTS, req, REQUEST_TIMEOUT).await
    }

    /// Submits results; the body is a `SubmitResultsRequest`, built without copying them.
    pub async fn submit(
        &self,
        results: &[&SubmittedResult],
    ) -> Result<SubmitResultsResponse, ClientError> {
        #[derive(Serialize)]
        struct Body<'a> {
            results: &'a [&'a SubmittedResult],
        }
        self.post(paths::RESULTS, &Body { results }, REQUEST_TIMEOUT)
            .await
    }

    /// Uploads one artifact of a job's result, streamed:
    /// `PUT /agent/v1/jobs/{jobId}/artifacts/{name}?leaseId=...`. Call it before the
    /// result is submitted, while the lease is held.
    pub async fn upload_artifact(
        &self,
        lease: LeaseRef,
        name: &str,
        content_type: &str,
        bytes: Bytes,
    ) -> Result<(), ClientError> {
        let path = format!(
            "{}/{}/artifacts/{name}",
            paths::ARTIFACTS_PREFIX,
            lease.job_id
        );
        let mut url = self.endpoint(&path);
        url.query_pairs_mut()
            .append_pair("leaseId", &lease.lease_id.to_string());
        let size = bytes.len();
        let chunks: Vec<Result<Bytes, std::io::Error>> = (0..size)
            .step_by(UPLOAD_CHUNK_BYTES)
            .map(|at| Ok(bytes.slice(at..size.min(at + UPLOAD_CHUNK_BYTES))))
            .collect();
        let body = reqwest::Body::wrap_stream(futures_util::stream::iter(chunks));
        let sent = self
            .http
            .put(url)
            .header(AUTHORIZATION, self.auth.clone())
            .header(CONTENT_TYPE, content_type)
            .header(CONTENT_LENGTH, size)
            .timeout(REQUEST_TIMEOUT)
            .body(body)
            .send()
            .await;
        let result = match sent {
            Err(e) => Err(self.transport(&path, &e)),
            Ok(response) => {
                let status = response.status();
                let bytes = read_bounded(response, MAX_ERROR_BODY_BYTES).await;
                let code = status.as_u16();
                if status.is_success() {
                    Ok(())
                } else {
                    let message = match &bytes {
                        Ok(b) => self.excerpt(b),
                        Err(_) => "(no details)".to_owned(),
                    };
                    Err(classify(&path, code, message))
                }
            }
        };
        match &result {
            Ok(()) | Err(ClientError::Unauthorized { .. } | ClientError::Rejected { .. }) => {
                self.state.record_contact()
            }
            Err(ClientError::Transient(_)) => self.state.record_unreachable(),
        }
        result
    }

    /// The URL of an agent API path under the configured base URL (which may have a path).
    pub fn endpoint(&self, path: &str) -> url::Url {
        let mut url = self.base.clone();
        let joined = format!("{}{}", self.base.path().trim_end_matches('/'), path);
        url.set_path(&joined);
        url
    }

    async fn post<Req: Serialize, Resp: DeserializeOwned>(
        &self,
        path: &str,
        body: &Req,
        timeout: Duration,
    ) -> Result<Resp, ClientError> {
        let result = self.exchange(path, body, timeout).await;
        match &result {
            Ok(_) | Err(ClientError::Unauthorized { .. } | ClientError::Rejected { .. }) => {
                self.state.record_contact()
            }
            Err(ClientError::Transient(_)) => self.state.record_unreachable(),
        }
        result
    }

    async fn exchange<Req: Serialize, Resp: DeserializeOwned>(
        &self,
        path: &str,
        body: &Req,
        timeout: Duration,
    ) -> Result<Resp, ClientError> {
        let response = self
            .http
            .post(self.endpoint(path))
            .header(AUTHORIZATION, self.auth.clone())
            .timeout(timeout)
            .json(body)
            .send()
            .await
            .map_err(|e| self.transport(path, &e))?;
        let status = response.status();
        let bytes = read_bounded(response, MAX_AGENT_BODY_BYTES)
            .await
            .map_err(|e| match e {
                ReadError::TooLarge => ClientError::Transient(format!(
                    "{path}: the service's answer exceeds {MAX_AGENT_BODY_BYTES} bytes"
                )),
                ReadError::Transport(e) => self.transport(path, &e),
            })?;
        let code = status.as_u16();
        if status.is_success() {
            return serde_json::from_slice(&bytes).map_err(|e| {
                ClientError::Transient(format!("{path}: unreadable answer from the service: {e}"))
            });
        }
        let message = self.excerpt(&bytes);
        Err(classify(path, code, message))
    }

    fn transport(&self, path: &str, e: &reqwest::Error) -> ClientError {
        let what = if e.is_timeout() {
            "timed out"
        } else {
            "failed"
        };
        let chain = self.scrubber.scrub(&error_chain(e)).into_owned();
        ClientError::Transient(format!("{path}: request {what}: {chain}"))
    }

    /// One line of an error body, shortened and scrubbed.
    fn excerpt(&self, bytes: &[u8]) -> String {
        let text = String::from_utf8_lossy(bytes);
        let one_line: String = text
            .chars()
            .map(|c| if c.is_control() { ' ' } else { c })
            .take(MAX_ERROR_EXCERPT)
            .collect();
        let trimmed = one_line.trim();
        if trimmed.is_empty() {
            "(no details)".to_owned()
        } else {
            self.scrubber.scrub(trimmed).into_owned()
        }
    }
}

/// The error class of a non-success answer `code` to `path`.
fn classify(path: &str, code: u16, message: String) -> ClientError {
    match code {
        401 | 403 => ClientError::Unauthorized { status: code },
        408 | 429 => {
            ClientError::Transient(format!("{path}: the service answered {code}: {message}"))
        }
        400..=499 => ClientError::Rejected {
            status: code,
            message,
        },
        _ => ClientError::Transient(format!("{path}: the service answered {code}: {message}")),
    }
}

/// Largest NODE_EXTRA_CA_CERTS bundle read.
const MAX_CA_BUNDLE_BYTES: u64 = 4 * 1024 * 1024;

/// The CAs of the PEM bundle named by NODE_EXTRA_CA_CERTS, trusted in addition to the
/// system's for the agent's own traffic (TLS-inspecting enterprise proxies).
fn extra_roots() -> Result<Vec<reqwest::Certificate>, String> {
    use std::io::Read;
    let Some(path) = std::env::var_os("NODE_EXTRA_CA_CERTS").filter(|p| !p.is_empty()) else {
        return Ok(Vec::new());
    };
    let shown = std::path::Path::new(&path).display().to_string();
    let mut pem = Vec::new();
    std::fs::File::open(&path)
        .and_then(|f| f.take(MAX_CA_BUNDLE_BYTES + 1).read_to_end(&mut pem))
        .map_err(|e| format!("cannot read NODE_EXTRA_CA_CERTS {shown}: {e}"))?;
    if pem.len() as u64 > MAX_CA_BUNDLE_BYTES {
        return Err(format!(
            "NODE_EXTRA_CA_CERTS {shown} is larger than {MAX_CA_BUNDLE_BYTES} bytes"
        ));
    }
    reqwest::Certificate::from_pem_bundle(&pem)
        .map_err(|e| format!("NODE_EXTRA_CA_CERTS {shown}: {}", error_chain(&e)))
}

enum ReadError {
    TooLarge,
    Transport(reqwest::Error),
}

/// Reads a body, failing as soon as it grows past `limit`.
async fn read_bounded(mut response: reqwest::Response, limit: usize) -> Result<Vec<u8>, ReadError> {
    if response
        .content_length()
        .is_some_and(|len| len > limit as u64)
    {
        return Err(ReadError::TooLarge);
    }
    let mut buf = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(ReadError::Transport)? {
        if buf.len() + chunk.len() > limit {
            return Err(ReadError::TooLarge);
        }
        buf.extend_from_slice(&chunk);
    }
    Ok(buf)
}

/// An error and its sources on one line.
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = s.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::config::AgentArgs;

    fn client(url: &str) -> ServiceClient {
        let config = AgentConfig::from_args(&AgentArgs {
            api_key: Some("k".into()),
            api_url: Some(url.into()),
            ..AgentArgs::default()
        })
        .unwrap();
        ServiceClient::new(&config, Arc::new(AgentState::new(uuid::Uuid::new_v4()))).unwrap()
    }

    #[test]
    fn endpoints_keep_the_base_path() {
        assert_eq!(
            client("https://a.example.com")
                .endpoint(paths::HELLO)
                .as_str(),
            "https://a.example.com/agent/v1/hello"
        );
        assert_eq!(
            client("https://a.example.com/outpost/")
                .endpoint(paths::LEASE)
                .as_str(),
            "https://a.example.com/outpost/agent/v1/jobs/lease"
        );
    }
}
