//! Executors: one module per check type behind one trait. They know nothing of the
//! service; they take a [`CheckSpec`] and give back a [`RunResult`].

pub mod compare;
pub mod dns;
mod http_error;
mod resolve;
pub mod tcp;
pub mod timed_http;
mod tls;
pub mod url;

use std::future::Future;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;

use crate::model::{CheckSpec, CheckType, ErrorKind, RunResult};

/// Resources shared by every run: the DNS resolver and TLS configurations are built once
/// per process, never per check.
pub struct ExecEnv {
    pub(crate) http: timed_http::HttpEnv,
    /// The system's name server, the default of DNS monitors.
    pub(crate) dns: dns::DnsEnv,
    /// Replaces the per-type run-time limit when set (tests use a short one).
    pub(crate) run_timeout: Option<Duration>,
    /// TCP monitors resolve host names with the operating system's resolver
    /// (`getaddrinfo`) instead of hickory (`USE_OS_DNS_RESOLVER=true`).
    pub(crate) os_dns_resolver: bool,
}

/// Building the execution environment failed (unreadable resolver config, bad CA bundle).
#[derive(Debug, thiserror::Error)]
pub enum ExecEnvError {
    #[error("cannot read the system DNS configuration: {0}")]
    Resolver(String),
    #[error("cannot load CA certificates from {path}: {message}")]
    CaBundle { path: String, message: String },
}

impl ExecEnv {
    /// Uses the system's resolver configuration and trust store, plus the PEM bundle
    /// named by `NODE_EXTRA_CA_CERTS` if set. `USE_OS_DNS_RESOLVER=true` (read here,
    /// once) makes TCP monitors resolve with the operating system's resolver.
    pub fn from_system() -> Result<Arc<ExecEnv>, ExecEnvError> {
        let extra_ca = std::env::var_os("NODE_EXTRA_CA_CERTS")
            .filter(|v| !v.is_empty())
            .map(std::path::PathBuf::from);
        let os_dns = std::env::var("USE_OS_DNS_RESOLVER")
            .is_ok_and(|v| v.trim().eq_ignore_ascii_case("true") || v.trim() == "1");
        Ok(Arc::new(
            ExecEnv::new(extra_ca.as_deref())?.with_os_dns_resolver(os_dns),
        ))
    }

    /// Uses the system's resolver configuration and trust store, plus the PEM bundle at
    /// `extra_ca` (instead of reading `NODE_EXTRA_CA_CERTS`).
    pub fn new(extra_ca: Option<&Path>) -> Result<ExecEnv, ExecEnvError> {
        Ok(ExecEnv {
            http: timed_http::HttpEnv::new(extra_ca)?,
            dns: dns::DnsEnv::from_system(),
            run_timeout: None,
            os_dns_resolver: false,
        })
    }

    /// Makes TCP monitors resolve host names with the operating system's resolver
    /// (`getaddrinfo`) when `enabled`, instead of hickory with the system configuration.
    pub fn with_os_dns_resolver(mut self, enabled: bool) -> ExecEnv {
        self.os_dns_resolver = enabled;
        self
    }

    /// Caps every run at `limit` instead of its type's maximum run time.
    pub fn with_run_timeout(mut self, limit: Duration) -> ExecEnv {
        self.run_timeout = Some(limit);
        self
    }

    /// The time a run of `check_type` may take in this environment.
    pub fn run_timeout(&self, check_type: CheckType) -> Duration {
        self.run_timeout
            .unwrap_or_else(|| check_type.max_run_time())
    }
}

/// A check type that can be run.
pub trait Executor {
    /// Runs once. Never panics on input; every failure is a result with `error` set.
    fn run(&self, env: &ExecEnv) -> impl Future<Output = RunResult> + Send;
}

/// Runs `spec` with the time limit of its type; a run past it is an aborted TIMEOUT result.
pub async fn run_check(spec: &CheckSpec, env: &ExecEnv) -> RunResult {
    let check_type = spec.check_type();
    let limit = env.run_timeout(check_type);
    let started = Utc::now();
    let run = async {
        match spec {
            CheckSpec::Url(u) => u.run(env).await,
            CheckSpec::Tcp(t) => t.run(env).await,
            CheckSpec::Dns(d) => d.run(env).await,
        }
    };
    match tokio::time::timeout(limit + Duration::from_secs(1), run).await {
        Ok(result) => result,
        Err(_) => RunResult::errored(
            check_type,
            started,
            ErrorKind::Timeout,
            format!(
                "the run exceeded the {}s limit of {check_type} checks",
                limit.as_secs()
            ),
        ),
    }
}
