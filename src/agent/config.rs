//! Agent configuration from the reference agent's environment variables (flags too).
//! Every value is taken as a string and validated here, so that a bad value is one line
//! naming the variable.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// Raw agent settings; every flag falls back to its environment variable.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct AgentArgs {
    /// The private location's agent key (required).
    #[arg(long, env = "API_KEY", hide_env_values = true)]
    pub api_key: Option<String>,
    /// Base URL of the control plane, e.g. https://outpost.example.com (required).
    #[arg(long, env = "API_URL")]
    pub api_url: Option<String>,
    /// Heavy checks (browser, multistep, suites) run at once: 1 to 10, default 1.
    #[arg(long, env = "JOB_CONCURRENCY")]
    pub job_concurrency: Option<String>,
    /// Uptime checks (URL, API, TCP, DNS, ICMP) run at once: 1 to 1000, default 100.
    #[arg(long, env = "UPTIME_CONCURRENCY")]
    pub uptime_concurrency: Option<String>,
    /// Port of the health server (0.0.0.0), default 8081.
    #[arg(long, env = "AGENT_HEALTH_PORT")]
    pub health_port: Option<String>,
    /// `off` disables error reports to the service.
    #[arg(long, env = "EXTERNAL_OBSERVABILITY")]
    pub external_observability: Option<String>,
    /// Seconds running jobs get to finish after SIGTERM, default 300.
    #[arg(long, env = "SHUTDOWN_GRACE_SECONDS")]
    pub shutdown_grace_seconds: Option<String>,
    /// Where undelivered results wait for the service (survives restarts).
    #[arg(long, env = "SPOOL_DIR")]
    pub spool_dir: Option<PathBuf>,
}

/// Validated agent configuration.
#[derive(Debug, Clone)]
pub struct AgentConfig {
    pub api_key: String,
    pub api_url: url::Url,
    pub job_concurrency: u32,
    pub uptime_concurrency: u32,
    pub health_addr: SocketAddr,
    pub external_observability: bool,
    pub shutdown_grace: Duration,
    pub spool_dir: PathBuf,
}

/// A missing or invalid setting; the message names the variable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{variable} {message}")]
pub struct ConfigError {
    pub variable: &'static str,
    pub message: String,
}

impl AgentConfig {
    pub fn from_args(_args: &AgentArgs) -> Result<AgentConfig, ConfigError> {
        unimplemented!("agent config")
    }
}
