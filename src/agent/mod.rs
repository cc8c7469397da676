//! The private-location agent: poller -> dispatcher -> executors -> reporter (+ spool),
//! plus the health server. (Interface; filled in by the agent work.)

pub mod config;

pub use config::{AgentArgs, AgentConfig, ConfigError};

use crate::shutdown::Shutdown;

/// Why the agent stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    #[error(
        "the service refused API_KEY (401 Unauthorized): check that it is an active key of this private location"
    )]
    Unauthorized,
    #[error("cannot bind the health server on {addr}: {source}")]
    HealthBind {
        addr: std::net::SocketAddr,
        source: std::io::Error,
    },
    #[error(transparent)]
    Env(#[from] crate::executors::ExecEnvError),
    #[error("spool directory {path}: {source}")]
    Spool {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
}

/// Runs the agent until `shutdown` drains it. Returns `Ok` after a graceful drain.
pub async fn run(config: AgentConfig, shutdown: Shutdown) -> Result<(), AgentError> {
    let _ = (config, shutdown);
    unimplemented!("agent")
}
