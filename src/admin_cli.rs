//! `outpost admin`: tenant administration for operators, straight on the SQLite store of
//! a data directory (safe while `outpost serve` runs on it: WAL and a busy timeout).
//! Every command prints one JSON document on stdout; errors are one line on stderr,
//! exit 2 for bad input (unknown ids, invalid names, key limits), 1 otherwise.

use std::path::PathBuf;
use std::process::ExitCode;

use serde_json::{Value, json};
use uuid::Uuid;

use crate::service::admin::{
    self, ErrorReportFilter, ErrorReportRecord, PrivateLocation, Store, StoreError,
};
use crate::service::store::valid_slug;

/// Arguments of `outpost admin`.
#[derive(clap::Args, Debug, Clone)]
pub struct AdminArgs {
    /// Data directory of the control plane (its SQLite database).
    #[arg(
        long,
        global = true,
        env = "OUTPOST_DATA_DIR",
        default_value = "./outpost-data"
    )]
    pub data_dir: PathBuf,
    #[command(subcommand)]
    pub command: AdminCommand,
}

/// One administration task.
#[derive(clap::Subcommand, Debug, Clone)]
pub enum AdminCommand {
    /// Create an account and its first API key (printed once).
    CreateAccount {
        #[arg(long)]
        name: String,
    },
    /// Create another API key for an account (printed once).
    CreateApiKey {
        #[arg(long)]
        account: Uuid,
        /// A label for the key.
        #[arg(long, default_value = "default")]
        name: String,
    },
    /// Revoke an API key.
    RevokeApiKey {
        #[arg(long)]
        account: Uuid,
        #[arg(long)]
        key_id: Uuid,
    },
    /// List accounts with their (masked) API keys.
    ListAccounts,
    /// Create a private location and its first agent key (printed once).
    CreateLocation {
        #[arg(long)]
        account: Uuid,
        #[arg(long)]
        name: String,
        /// Slug name checks use in `privateLocations` (default: derived from the name).
        #[arg(long)]
        slug: Option<String>,
    },
    /// Create another agent key for a location (at most two active).
    CreateLocationKey {
        #[arg(long)]
        account: Uuid,
        /// The location's slug name or id.
        #[arg(long)]
        location: String,
    },
    /// Revoke an agent key.
    RevokeLocationKey {
        #[arg(long)]
        account: Uuid,
        /// The location's slug name or id.
        #[arg(long)]
        location: String,
        #[arg(long)]
        key_id: Uuid,
    },
    /// Error reports agents sent (EXTERNAL_OBSERVABILITY), newest first.
    ErrorReports {
        /// Only this account's locations.
        #[arg(long)]
        account: Option<Uuid>,
        /// Only this location (slug name or id; a slug used by several accounts needs
        /// --account).
        #[arg(long)]
        location: Option<String>,
        /// Most reports printed.
        #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(i64).range(1..=MAX_LISTED_REPORTS))]
        limit: i64,
    },
}

/// Most error reports one listing prints.
pub const MAX_LISTED_REPORTS: i64 = 10_000;

/// Why an admin command failed.
#[derive(Debug, thiserror::Error)]
pub enum AdminError {
    /// The operator asked for something impossible (exit 2).
    #[error("{0}")]
    Input(String),
    /// The store failed (exit 1).
    #[error("{0}")]
    Failed(String),
}

impl From<StoreError> for AdminError {
    fn from(e: StoreError) -> AdminError {
        match e {
            StoreError::Invalid { .. }
            | StoreError::NotFound(_)
            | StoreError::SlugTaken(_)
            | StoreError::TooManyLocationKeys { .. } => AdminError::Input(e.to_string()),
            e => AdminError::Failed(e.to_string()),
        }
    }
}

/// Runs an admin command; prints its JSON answer or one error line.
pub async fn run(args: AdminArgs) -> ExitCode {
    match execute(&args).await {
        Ok(out) => {
            match serde_json::to_string_pretty(&out) {
                Ok(text) => println!("{text}"),
                Err(e) => {
                    eprintln!("error: cannot print the answer: {e}");
                    return ExitCode::FAILURE;
                }
            }
            ExitCode::SUCCESS
        }
        Err(AdminError::Input(m)) => {
            eprintln!("error: {m}");
            ExitCode::from(2)
        }
        Err(AdminError::Failed(m)) => {
            eprintln!("error: {m}");
            ExitCode::FAILURE
        }
    }
}

/// Runs an admin command against the store of `args.data_dir`.
pub async fn execute(args: &AdminArgs) -> Result<Value, AdminError> {
    let store = admin::open_store(&args.data_dir)
        .await
        .map_err(|e| AdminError::Failed(e.to_string()))?;
    let out = dispatch(&store, &args.command).await;
    store.close().await;
    out
}

async fn account_exists(store: &Store, id: Uuid) -> Result<(), AdminError> {
    match store.account(id).await? {
        Some(_) => Ok(()),
        None => Err(AdminError::Input(format!("no account with id {id}"))),
    }
}

/// The account's location named by slug or id.
async fn find_location(
    store: &Store,
    account: Uuid,
    location: &str,
) -> Result<PrivateLocation, AdminError> {
    account_exists(store, account).await?;
    let found = store
        .list_private_locations(account)
        .await?
        .into_iter()
        .find(|l| l.slug_name == location || l.id.to_string() == location.to_ascii_lowercase());
    found.ok_or_else(|| {
        AdminError::Input(format!(
            "account {account} has no private location {location:?}"
        ))
    })
}

/// The location named by slug or id, in any account (exactly one must match).
async fn find_location_anywhere(
    store: &Store,
    location: &str,
) -> Result<PrivateLocation, AdminError> {
    let mut found = Vec::new();
    for account in store.list_accounts().await? {
        found.extend(
            store
                .list_private_locations(account.id)
                .await?
                .into_iter()
                .filter(|l| {
                    l.slug_name == location || l.id.to_string() == location.to_ascii_lowercase()
                }),
        );
    }
    match found.len() {
        1 => Ok(found.remove(0)),
        0 => Err(AdminError::Input(format!(
            "no private location {location:?}"
        ))),
        n => Err(AdminError::Input(format!(
            "{n} accounts have a private location {location:?}: add --account"
        ))),
    }
}

fn error_report_json(r: &ErrorReportRecord) -> Value {
    json!({
        "id": r.id,
        "accountId": r.account_id,
        "locationId": r.location_id,
        "location": r.location_slug,
        "event": r.event,
        "message": r.message,
        "backtrace": r.backtrace,
        "agentVersion": r.agent_version,
        "platform": r.platform,
        "runtime": r.runtime,
        "firstSeenAt": r.first_seen_at,
        "lastSeenAt": r.last_seen_at,
        "count": r.count,
        "receivedAt": r.received_at,
    })
}

/// A slug name derived from a location name: lowercase ASCII letters and digits, other
/// characters as single dashes.
pub fn slug_from_name(name: &str) -> String {
    let mut slug = String::new();
    for c in name.trim().chars() {
        if c.is_ascii_alphanumeric() {
            slug.push(c.to_ascii_lowercase());
        } else if !slug.is_empty() && !slug.ends_with('-') {
            slug.push('-');
        }
    }
    let mut slug: String = slug.trim_end_matches('-').chars().take(30).collect();
    while slug.ends_with('-') {
        slug.pop();
    }
    slug
}

async fn dispatch(store: &Store, command: &AdminCommand) -> Result<Value, AdminError> {
    match command {
        AdminCommand::CreateAccount { name } => {
            let account = admin::create_account(store, name).await?;
            let (key, plaintext) = admin::create_api_key(store, account.id, "default").await?;
            Ok(json!({
                "accountId": account.id,
                "name": account.name,
                "apiKeyId": key.id,
                "apiKey": plaintext,
            }))
        }
        AdminCommand::CreateApiKey { account, name } => {
            let (key, plaintext) = admin::create_api_key(store, *account, name).await?;
            Ok(json!({
                "accountId": account,
                "apiKeyId": key.id,
                "name": key.name,
                "apiKey": plaintext,
                "maskedKey": key.masked,
            }))
        }
        AdminCommand::RevokeApiKey { account, key_id } => {
            if admin::revoke_api_key(store, *account, *key_id).await? {
                Ok(json!({"accountId": account, "apiKeyId": key_id, "revoked": true}))
            } else {
                Err(AdminError::Input(format!(
                    "account {account} has no active API key {key_id}"
                )))
            }
        }
        AdminCommand::ListAccounts => {
            let mut out = Vec::new();
            for a in store.list_accounts().await? {
                let keys = store.list_api_keys(a.id).await?;
                let locations = store.list_private_locations(a.id).await?;
                out.push(json!({
                    "accountId": a.id,
                    "name": a.name,
                    "createdAt": a.created_at,
                    "apiKeys": keys.iter().map(|k| json!({
                        "id": k.id, "name": k.name, "maskedKey": k.masked, "createdAt": k.created_at,
                    })).collect::<Vec<_>>(),
                    "privateLocations": locations.iter().map(|l| json!({
                        "id": l.id, "name": l.name, "slugName": l.slug_name,
                    })).collect::<Vec<_>>(),
                }));
            }
            Ok(Value::Array(out))
        }
        AdminCommand::CreateLocation {
            account,
            name,
            slug,
        } => {
            account_exists(store, *account).await?;
            let slug = match slug {
                Some(s) => s.clone(),
                None => slug_from_name(name),
            };
            if !valid_slug(&slug) {
                return Err(AdminError::Input(format!(
                    "invalid slug {slug:?}: use lowercase letters, digits and dashes (--slug)"
                )));
            }
            let location = admin::create_private_location(store, *account, name, &slug).await?;
            let (key, plaintext) = admin::create_location_key(store, location.id).await?;
            Ok(json!({
                "accountId": account,
                "locationId": location.id,
                "name": location.name,
                "slugName": location.slug_name,
                "agentKeyId": key.id,
                "agentKey": plaintext,
            }))
        }
        AdminCommand::CreateLocationKey { account, location } => {
            let location = find_location(store, *account, location).await?;
            let (key, plaintext) = admin::create_location_key(store, location.id).await?;
            Ok(json!({
                "locationId": location.id,
                "slugName": location.slug_name,
                "agentKeyId": key.id,
                "agentKey": plaintext,
                "maskedKey": key.masked,
            }))
        }
        AdminCommand::RevokeLocationKey {
            account,
            location,
            key_id,
        } => {
            let location = find_location(store, *account, location).await?;
            if admin::revoke_location_key(store, location.id, *key_id).await? {
                Ok(json!({"locationId": location.id, "agentKeyId": key_id, "revoked": true}))
            } else {
                Err(AdminError::Input(format!(
                    "private location {} has no active key {key_id}",
                    location.slug_name
                )))
            }
        }
        AdminCommand::ErrorReports {
            account,
            location,
            limit,
        } => {
            let location_id = match (account, location) {
                (Some(account), Some(location)) => {
                    Some(find_location(store, *account, location).await?.id)
                }
                (None, Some(location)) => Some(find_location_anywhere(store, location).await?.id),
                (Some(account), None) => {
                    account_exists(store, *account).await?;
                    None
                }
                (None, None) => None,
            };
            let reports = store
                .list_error_reports(ErrorReportFilter {
                    account_id: *account,
                    location_id,
                    limit: *limit,
                })
                .await?;
            Ok(Value::Array(
                reports.iter().map(error_report_json).collect(),
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::slug_from_name;

    #[test]
    fn slugs_from_names() {
        assert_eq!(slug_from_name("EU Data Center #2"), "eu-data-center-2");
        assert_eq!(slug_from_name("  --Local--  "), "local");
        assert_eq!(slug_from_name("!!!"), "");
    }
}
