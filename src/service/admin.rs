//! Administration of tenants: accounts, API keys, private locations and agent keys.
//! For the admin CLI, `outpost up` and tests. Plaintext keys are returned only here,
//! at creation; the store keeps their hashes.

use std::path::Path;

use uuid::Uuid;

use super::ServiceError;
pub use super::store::{
    Account, ApiKeyInfo, ErrorReportFilter, ErrorReportRecord, LocationKeyInfo,
    MAX_ACTIVE_LOCATION_KEYS, PrivateLocation, Store, StoreError,
};

/// Opens the store of a data directory (creating the directory and the database if
/// needed), without starting a service.
pub async fn open_store(data_dir: &Path) -> Result<Store, ServiceError> {
    tokio::fs::create_dir_all(data_dir)
        .await
        .map_err(|source| ServiceError::DataDir {
            path: data_dir.to_owned(),
            source,
        })?;
    Ok(Store::open(data_dir).await?)
}

/// Creates an account.
pub async fn create_account(store: &Store, name: &str) -> Result<Account, StoreError> {
    store.create_account(name).await
}

/// Creates an API key; returns its description and the plaintext (shown once).
pub async fn create_api_key(
    store: &Store,
    account_id: Uuid,
    name: &str,
) -> Result<(ApiKeyInfo, String), StoreError> {
    store.create_api_key(account_id, name).await
}

/// Revokes an API key.
pub async fn revoke_api_key(
    store: &Store,
    account_id: Uuid,
    key_id: Uuid,
) -> Result<bool, StoreError> {
    store.revoke_api_key(account_id, key_id).await
}

/// Creates a private location (`slug_name` unique within the account).
pub async fn create_private_location(
    store: &Store,
    account_id: Uuid,
    name: &str,
    slug_name: &str,
) -> Result<PrivateLocation, StoreError> {
    store
        .create_private_location(account_id, name, slug_name)
        .await
}

/// Creates an agent key for a location; at most [`MAX_ACTIVE_LOCATION_KEYS`] may be
/// active ([`StoreError::TooManyLocationKeys`] otherwise).
pub async fn create_location_key(
    store: &Store,
    location_id: Uuid,
) -> Result<(LocationKeyInfo, String), StoreError> {
    store.create_location_key(location_id).await
}

/// Revokes an agent key.
pub async fn revoke_location_key(
    store: &Store,
    location_id: Uuid,
    key_id: Uuid,
) -> Result<bool, StoreError> {
    store.revoke_location_key(location_id, key_id).await
}

/// A complete tenant: an account with one API key and one private location with one
/// agent key.
#[derive(Debug, Clone)]
pub struct Tenant {
    pub account: Account,
    pub api_key: String,
    pub location: PrivateLocation,
    pub agent_key: String,
}

/// Creates a complete tenant in one call.
pub async fn create_tenant(
    store: &Store,
    account_name: &str,
    location_name: &str,
    location_slug: &str,
) -> Result<Tenant, StoreError> {
    let account = store.create_account(account_name).await?;
    let (_, api_key) = store.create_api_key(account.id, "default").await?;
    let location = store
        .create_private_location(account.id, location_name, location_slug)
        .await?;
    let (_, agent_key) = store.create_location_key(location.id).await?;
    Ok(Tenant {
        account,
        api_key,
        location,
        agent_key,
    })
}
