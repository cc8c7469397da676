//! Executors: one module per check type behind one trait. They know nothing of the
//! service; they take a [`CheckSpec`] and give back a [`RunResult`].

pub mod url;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;

use crate::model::{CheckSpec, ErrorKind, RunResult};

/// Resources shared by every run: the DNS resolver and TLS configurations are built once
/// per process, never per check.
pub struct ExecEnv {
    pub(crate) http: url::HttpEnv,
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
    /// named by `NODE_EXTRA_CA_CERTS` if set.
    pub fn from_system() -> Result<Arc<ExecEnv>, ExecEnvError> {
        let extra_ca = std::env::var_os("NODE_EXTRA_CA_CERTS").map(std::path::PathBuf::from);
        Ok(Arc::new(ExecEnv {
            http: url::HttpEnv::new(extra_ca.as_deref())?,
        }))
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
    let limit = check_type.max_run_time();
    let started = Utc::now();
    let run = async {
        match spec {
            CheckSpec::Url(u) => u.run(env).await,
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
