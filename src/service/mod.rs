//! The control plane: public API, agent API, scheduler, sessions, store.
//! (Interface; filled in by the service work.)

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use crate::shutdown::Shutdown;

/// Settings of `outpost serve`.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    pub listen: SocketAddr,
    pub data_dir: PathBuf,
    /// Base URL used in links (checkSessionLink, ...); defaults to http://<listen>.
    pub public_url: Option<url::Url>,
    /// How long a job lease lives without renewal.
    pub lease_ttl: Duration,
}

/// Why the service could not start or stopped.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    #[error("cannot bind {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("data directory {path}: {source}")]
    DataDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("database: {0}")]
    Database(#[from] sqlx::Error),
    #[error("database migration: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    #[error("server: {0}")]
    Io(#[from] std::io::Error),
}

/// What `outpost up` writes to `DIR/credentials.json`.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Credentials {
    pub api_url: String,
    pub account_id: String,
    pub api_key: String,
    pub private_location: String,
    pub agent_key: String,
}

/// A service whose store is open and whose listener is bound, not yet serving.
pub struct BoundService {
    _private: (),
}

impl BoundService {
    /// Opens (and migrates) the store and binds the listener.
    pub async fn bind(_config: ServeConfig) -> Result<BoundService, ServiceError> {
        unimplemented!("service")
    }

    pub fn local_addr(&self) -> SocketAddr {
        unimplemented!("service")
    }

    /// For `outpost up`: on first start creates an account, an API key, a private
    /// location and an agent key and writes them to `DIR/credentials.json`; later starts
    /// read that file back.
    pub async fn ensure_credentials(&self) -> Result<Credentials, ServiceError> {
        unimplemented!("service")
    }

    /// Serves until `shutdown` drains, then finishes in-flight requests.
    pub async fn serve(self, _shutdown: Shutdown) -> Result<(), ServiceError> {
        unimplemented!("service")
    }
}
