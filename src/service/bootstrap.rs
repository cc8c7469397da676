//! First-start credentials of `outpost up`: DATA_DIR/credentials.json (mode 0600).

use std::path::{Path, PathBuf};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use uuid::Uuid;

use super::admin::create_tenant;
use super::store::Store;
use super::{Credentials, ServiceError};

/// Name of the credentials file inside the data directory.
pub const CREDENTIALS_FILE: &str = "credentials.json";
/// Largest credentials file read back.
const MAX_FILE_BYTES: u64 = 64 * 1024;

fn io_err(path: &Path, source: std::io::Error) -> ServiceError {
    ServiceError::Credentials {
        path: path.to_owned(),
        source,
    }
}

/// Reads the credentials file back; `None` if missing or unusable (logged).
async fn read_existing(path: &Path) -> Result<Option<Credentials>, ServiceError> {
    let file = match tokio::fs::File::open(path).await {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_err(path, e)),
    };
    let mut bytes = Vec::new();
    file.take(MAX_FILE_BYTES)
        .read_to_end(&mut bytes)
        .await
        .map_err(|e| io_err(path, e))?;
    match serde_json::from_slice(&bytes) {
        Ok(c) => Ok(Some(c)),
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, "credentials file is unreadable; creating new credentials");
            Ok(None)
        }
    }
}

/// Whether the stored credentials still work: the account exists and both keys are
/// active keys of it.
async fn still_valid(store: &Store, c: &Credentials) -> Result<bool, ServiceError> {
    let Ok(account_id) = Uuid::parse_str(&c.account_id) else {
        return Ok(false);
    };
    if store.account(account_id).await?.is_none() {
        return Ok(false);
    }
    let api_ok = store.authenticate_api_key(&c.api_key).await? == Some(account_id);
    let agent_ok = store
        .authenticate_location_key(&c.agent_key)
        .await?
        .is_some_and(|l| l.account_id == account_id);
    Ok(api_ok && agent_ok)
}

/// Writes the file atomically with mode 0600.
async fn write(path: &Path, c: &Credentials) -> Result<(), ServiceError> {
    let json = serde_json::to_vec_pretty(c).map_err(|e| io_err(path, std::io::Error::other(e)))?;
    let tmp: PathBuf = path.with_extension(format!("json.{}.tmp", Uuid::new_v4()));
    let mut options = tokio::fs::OpenOptions::new();
    options.write(true).create_new(true).mode(0o600);
    let mut file = options.open(&tmp).await.map_err(|e| io_err(&tmp, e))?;
    let written = async {
        file.write_all(&json).await?;
        file.write_all(b"\n").await?;
        file.sync_all().await
    }
    .await;
    if let Err(e) = written {
        let _ = tokio::fs::remove_file(&tmp).await;
        return Err(io_err(&tmp, e));
    }
    tokio::fs::rename(&tmp, path)
        .await
        .map_err(|e| io_err(path, e))
}

/// Returns working credentials for `outpost up`: those of the file if they still work
/// (with `apiUrl` brought up to date), else a new account "default" with an API key,
/// the private location "Local" (slug `local`) and an agent key, written to the file.
pub async fn ensure_credentials(
    store: &Store,
    data_dir: &Path,
    api_url: &str,
) -> Result<Credentials, ServiceError> {
    let path = data_dir.join(CREDENTIALS_FILE);
    if let Some(mut existing) = read_existing(&path).await? {
        if still_valid(store, &existing).await? {
            if existing.api_url != api_url {
                existing.api_url = api_url.to_owned();
                write(&path, &existing).await?;
            }
            return Ok(existing);
        }
        tracing::warn!(path = %path.display(), "the account or keys of the credentials file no longer exist; creating new ones");
    }
    let tenant = create_tenant(store, "default", "Local", "local").await?;
    let creds = Credentials {
        api_url: api_url.to_owned(),
        account_id: tenant.account.id.to_string(),
        api_key: tenant.api_key,
        private_location: tenant.location.slug_name,
        agent_key: tenant.agent_key,
    };
    write(&path, &creds).await?;
    tracing::info!(path = %path.display(), account = %creds.account_id, "created credentials");
    Ok(creds)
}
