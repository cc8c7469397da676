//! URL monitor executor: a GET on a fresh connection with measured timing phases.
//! (Stub: filled in by the executor work.)

use std::path::Path;

use super::{ExecEnv, ExecEnvError, Executor};
use crate::model::{ErrorKind, RunResult, UrlMonitorSpec};

/// Shared HTTP resources (resolver, TLS configs).
pub struct HttpEnv {}

impl HttpEnv {
    pub fn new(_extra_ca: Option<&Path>) -> Result<HttpEnv, ExecEnvError> {
        Ok(HttpEnv {})
    }
}

impl Executor for UrlMonitorSpec {
    async fn run(&self, _env: &ExecEnv) -> RunResult {
        RunResult::errored(
            crate::model::CheckType::Url,
            chrono::Utc::now(),
            ErrorKind::Internal,
            "not implemented",
        )
    }
}
