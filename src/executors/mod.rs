//! Executors: one module per check type behind one trait. They know nothing of the
//! service; they take a [`CheckSpec`] and give back a [`RunResult`].

pub mod api;
pub mod assert;
mod connect;
pub mod dns;
mod http_error;
pub mod icmp;
pub mod netdiag;
mod proxy;
mod resolve;
pub mod tcp;
pub mod template;
pub mod timed_http;
mod tls;
pub mod url;

use std::future::Future;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;

use crate::model::{CheckSpec, CheckType, ErrorKind, ProxyUrl, RunResult};
use crate::scrub::Scrubber;

/// Prefix of the agent's environment variables that checks may use as `{{NAME}}`
/// placeholders and whose values never appear in results.
pub const SECRET_ENV_PREFIX: &str = "SERVICE_SECRET_";

/// Resources shared by every run: the DNS resolver and TLS configurations are built once
/// per process, never per check, and so are the `SERVICE_SECRET_*` variables.
pub struct ExecEnv {
    pub(crate) http: timed_http::HttpEnv,
    /// The system's name server, the default of DNS monitors.
    pub(crate) dns: dns::DnsEnv,
    /// The ICMP sockets of ICMP monitors, opened on first use.
    pub(crate) icmp: icmp::IcmpEnv,
    /// Replaces the per-type run-time limit when set (tests use a short one).
    pub(crate) run_timeout: Option<Duration>,
    /// TCP monitors resolve host names with the operating system's resolver
    /// (`getaddrinfo`) instead of hickory (`USE_OS_DNS_RESOLVER=true`).
    pub(crate) os_dns_resolver: bool,
    /// `SERVICE_SECRET_*` variables by full name, read once.
    pub(crate) secret_vars: Vec<(String, String)>,
    /// Masks the values of `secret_vars` in every result.
    pub(crate) scrubber: Scrubber,
    /// URL and API checks that fail on the network are diagnosed (packet capture and
    /// traceroute) by [`run_check_with_artifacts`].
    pub(crate) network_diagnostics: bool,
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
    /// named by `NODE_EXTRA_CA_CERTS` if set, and the process's `SERVICE_SECRET_*`
    /// variables (read now, once). `USE_OS_DNS_RESOLVER=true` (read here, once) makes
    /// TCP monitors resolve with the operating system's resolver.
    pub fn from_system() -> Result<Arc<ExecEnv>, ExecEnvError> {
        let extra_ca = std::env::var_os("NODE_EXTRA_CA_CERTS")
            .filter(|v| !v.is_empty())
            .map(std::path::PathBuf::from);
        let secrets = std::env::vars_os().filter_map(|(name, value)| {
            let name = name.into_string().ok()?;
            if !name.starts_with(SECRET_ENV_PREFIX) {
                return None;
            }
            let Ok(value) = value.into_string() else {
                tracing::warn!(variable = %name, "ignoring a secret variable that is not UTF-8");
                return None;
            };
            Some((name, value))
        });
        let os_dns = std::env::var("USE_OS_DNS_RESOLVER")
            .is_ok_and(|v| v.trim().eq_ignore_ascii_case("true") || v.trim() == "1");
        let diagnostics = std::env::var("NETWORK_DIAGNOSTICS").map_or(true, |v| {
            !(v.trim().eq_ignore_ascii_case("false") || v.trim() == "0")
        });
        Ok(Arc::new(
            ExecEnv::new(extra_ca.as_deref())?
                .with_secret_variables(secrets)
                .with_os_dns_resolver(os_dns)
                .with_network_diagnostics(diagnostics),
        ))
    }

    /// Uses the system's resolver configuration and trust store, plus the PEM bundle at
    /// `extra_ca` (instead of reading `NODE_EXTRA_CA_CERTS`). No secret variables: see
    /// [`ExecEnv::with_secret_variables`].
    pub fn new(extra_ca: Option<&Path>) -> Result<ExecEnv, ExecEnvError> {
        Ok(ExecEnv {
            http: timed_http::HttpEnv::new(extra_ca)?,
            dns: dns::DnsEnv::from_system(),
            icmp: icmp::IcmpEnv::new(),
            run_timeout: None,
            os_dns_resolver: false,
            secret_vars: Vec::new(),
            scrubber: Scrubber::default(),
            network_diagnostics: true,
        })
    }

    /// Turns network diagnostics of failed URL and API checks on or off (on by default;
    /// `NETWORK_DIAGNOSTICS=false` turns them off in [`ExecEnv::from_system`]).
    pub fn with_network_diagnostics(mut self, enabled: bool) -> ExecEnv {
        self.network_diagnostics = enabled;
        self
    }

    /// Makes TCP monitors resolve host names with the operating system's resolver
    /// (`getaddrinfo`) when `enabled`, instead of hickory with the system configuration.
    pub fn with_os_dns_resolver(mut self, enabled: bool) -> ExecEnv {
        self.os_dns_resolver = enabled;
        self
    }

    /// Adds `SERVICE_SECRET_*` variables (name, value) as if they were in the process
    /// environment; names without that prefix are ignored. Tests use this instead of
    /// touching the real environment.
    pub fn with_secret_variables<I, K, V>(mut self, vars: I) -> ExecEnv
    where
        I: IntoIterator<Item = (K, V)>,
        K: Into<String>,
        V: Into<String>,
    {
        for (name, value) in vars {
            let (name, value) = (name.into(), value.into());
            if !name.starts_with(SECRET_ENV_PREFIX) {
                continue;
            }
            self.scrubber.add_secret(&value);
            self.secret_vars.retain(|(n, _)| *n != name);
            self.secret_vars.push((name, value));
        }
        self
    }

    /// The scrubber of the `SERVICE_SECRET_*` values.
    pub fn secret_scrubber(&self) -> &Scrubber {
        &self.scrubber
    }

    /// The names of the `SERVICE_SECRET_*` variables known (never their values).
    pub fn secret_variable_names(&self) -> impl Iterator<Item = &str> {
        self.secret_vars.iter().map(|(name, _)| name.as_str())
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

/// A result and the files that belong to it (see [`netdiag`]).
#[derive(Debug)]
pub struct RunOutput {
    /// Lists the artifacts in `result.artifacts`.
    pub result: RunResult,
    pub artifacts: Vec<netdiag::Artifact>,
}

/// Like [`run_check`], and when a URL or API check fails on the network path (DNS,
/// connect, TLS, reset, timeout) and the environment allows it, runs network
/// diagnostics: the failed attempt once more under a packet capture, then a traceroute
/// (see [`netdiag`]). Their files come back as artifacts, listed in `result.artifacts`;
/// `result.diagnostics` says whether they ran and, if not, why.
pub async fn run_check_with_artifacts(spec: &CheckSpec, env: &ExecEnv) -> RunOutput {
    run_check_with_proxy(spec, env, None).await
}

/// [`run_check_with_artifacts`] on a location with a proxy: API checks send their
/// requests through `proxy` (see `proxy.rs`); other types ignore it.
pub async fn run_check_with_proxy(
    spec: &CheckSpec,
    env: &ExecEnv,
    proxy: Option<&ProxyUrl>,
) -> RunOutput {
    let check_type = spec.check_type();
    let limit = env.run_timeout(check_type);
    let started = Utc::now();
    let start = std::time::Instant::now();
    // Boxed: the executors' futures are large, and the future of a job is moved whole
    // when it is spawned (a memmove of kilobytes per check otherwise).
    let run = Box::pin(async {
        match spec {
            CheckSpec::Url(u) => url::run_url_monitor(u, env).await,
            CheckSpec::Api(a) => api::run_api_check(a, env, proxy).await,
            CheckSpec::Tcp(t) => (t.run(env).await, None),
            CheckSpec::Dns(d) => (d.run(env).await, None),
            CheckSpec::Icmp(i) => (i.run(env).await, None),
        }
    });
    let (mut result, failed) = match tokio::time::timeout(limit + Duration::from_secs(1), run).await
    {
        Ok(outcome) => outcome,
        Err(_) => (timed_out(check_type, started, limit), None),
    };
    let mut artifacts = Vec::new();
    if let Some(hop) = failed.filter(|_| env.network_diagnostics) {
        let left = limit.saturating_sub(start.elapsed());
        let diagnosis = Box::pin(netdiag::diagnose_hop(env, &hop, left)).await;
        result.diagnostics = Some(diagnosis.diagnostics);
        result.artifacts = diagnosis.artifacts.iter().map(|a| a.reference()).collect();
        artifacts = diagnosis.artifacts;
        hop.scrubber.scrub_result(&mut result);
    }
    env.scrubber.scrub_result(&mut result);
    RunOutput { result, artifacts }
}

/// The result of a run that went past its time limit.
fn timed_out(check_type: CheckType, started: chrono::DateTime<Utc>, limit: Duration) -> RunResult {
    RunResult::errored(
        check_type,
        started,
        ErrorKind::Timeout,
        format!(
            "the run exceeded the {}s limit of {check_type} checks",
            limit.as_secs()
        ),
    )
}

/// Runs `spec` with the time limit of its type; a run past it is an aborted TIMEOUT result.
/// The values of the `SERVICE_SECRET_*` variables are masked in every result. No network
/// diagnostics: see [`run_check_with_artifacts`].
pub async fn run_check(spec: &CheckSpec, env: &ExecEnv) -> RunResult {
    let check_type = spec.check_type();
    let limit = env.run_timeout(check_type);
    let started = Utc::now();
    let run = async {
        match spec {
            CheckSpec::Url(u) => u.run(env).await,
            CheckSpec::Tcp(t) => t.run(env).await,
            CheckSpec::Dns(d) => d.run(env).await,
            CheckSpec::Api(a) => a.run(env).await,
            CheckSpec::Icmp(i) => i.run(env).await,
        }
    };
    let mut result = match tokio::time::timeout(limit + Duration::from_secs(1), run).await {
        Ok(result) => result,
        Err(_) => timed_out(check_type, started, limit),
    };
    env.scrubber.scrub_result(&mut result);
    result
}
