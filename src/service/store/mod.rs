//! The store: SQLite through sqlx with runtime-checked queries.
//!
//! One writer connection serialises every write (no SQLITE_BUSY storms between our own
//! writers); a few read-only connections serve the API (`conn`: our own hand-out, not
//! sqlx's pool, which costs a round trip per use). WAL mode lets readers
//! run while the writer commits. Batches go through `json_each(?)` so that a lease, a
//! result batch or a trigger is a handful of statements however many rows it touches.

mod accounts;
mod alerts;
mod artifacts;
mod auth_cache;
mod checkpointer;
mod checks;
mod conn;
mod error_reports;
mod generation;
mod heartbeats;
mod jobs;
mod location_usage;
mod locations;
mod migrations;
mod projects;
mod results;
mod rows;
mod sessions;
mod status_pages;

pub use accounts::{Account, ApiKeyInfo};
pub use alerts::{
    ChannelRecord, ChannelWrite, CheckSubscription, OutboxRecord, SubscriptionRecord,
    SubscriptionWrite,
};
pub use artifacts::{ArtifactRecord, ArtifactTarget};
pub use checks::{CheckFilter, CheckRecord, CheckStatus, CheckWrite, ScheduleWrite};
pub use error_reports::{ErrorReportFilter, ErrorReportRecord, MAX_ERROR_REPORTS_PER_LOCATION};
pub use heartbeats::{
    EventCounts, EventRecord, HeartbeatPeriods, HeartbeatRow, HeartbeatWrite, NewEvent,
    NoticeWrite, TimerWrite,
};
pub use jobs::{LeaseGrant, MAX_LEASE_BATCH, MAX_SUBMIT_BATCH, ReapReport, SubmitReport};
pub use location_usage::{AgentRecord, LocationDeletion, LocationRecord, QueueStats};
pub use locations::{
    LocationAuth, LocationKeyInfo, MAX_ACTIVE_LOCATION_KEYS, PrivateLocation, valid_slug,
};
pub use projects::{DeploymentRecord, ResourceRecord};
pub use results::{ResultFilter, ResultRecord};
pub use sessions::{CreatedSessions, NewSession, ScheduledRuns, SessionRecord, TriggerCandidate};
pub use status_pages::{
    BulkOutcome, CardWrite, ConfirmationWrite, DeliveryOutcome, DeliveryWrite,
    INCIDENT_UPDATES_SHOWN, Incident, IncidentSeverity, IncidentStatus, IncidentUpdate,
    IncidentUpdateWrite, IncidentWrite, Listing, MAX_CARDS_PER_PAGE, MAX_KEYS_PER_PAGE,
    MAX_SERVICES_PER_CARD, MAX_SERVICES_PER_INCIDENT, MAX_SUBSCRIPTIONS_PER_PAGE,
    MAX_UPDATES_PER_INCIDENT, NewSubscription, NewToken, PageSubscription, PendingConfirmation,
    ServiceCheck, ServiceDeletion, StatusCard, StatusNotification, StatusPage, StatusPageKey,
    StatusPageWrite, StatusService, SubscriberRef, SubscriptionKind, SubscriptionStatus,
    TokenPurpose, TokenUse,
};

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use auth_cache::AuthCache;
use generation::Generation;

use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqliteSynchronous};

use checkpointer::Checkpointer;
use conn::{ReadGuard, Readers, WriteGuard, Writer};

/// Page size of a new database, in bytes.
const PAGE_SIZE: u32 = 2048;

/// Name of the database file inside the data directory.
pub const DB_FILE: &str = "outpost.db";

/// How long a statement waits for a lock held by another process before failing.
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);
/// Read connections; WAL readers never block the writer.
const READ_CONNECTIONS: usize = 4;

/// Why a store operation failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("database: {0}")]
    Database(#[from] sqlx::Error),
    #[error("database migration: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    /// A row holds something this version cannot read (a bug or a hand-edited database).
    #[error("corrupt row in {table}: {message}")]
    Corrupt {
        table: &'static str,
        message: String,
    },
    #[error("location {location_id} already has {max} active keys; revoke one first")]
    TooManyLocationKeys { location_id: uuid::Uuid, max: i64 },
    #[error("the account already has a private location with slug name {0:?}")]
    SlugTaken(String),
    #[error("{0} not found")]
    NotFound(&'static str),
    /// The store was closed (the service is stopping).
    #[error("the store is closed")]
    Closed,
    #[error("invalid {field}: {message}")]
    Invalid {
        field: &'static str,
        message: String,
    },
    /// The write contradicts what is stored (a name taken, an object still in use).
    #[error("conflict on {field}: {message}")]
    Conflict {
        field: &'static str,
        message: String,
    },
}

/// Handle on the database; cheap to clone.
#[derive(Clone)]
pub struct Store {
    inner: Arc<Inner>,
}

struct Inner {
    /// Keeps the write generation (see `generation.rs`).
    writer: Arc<Writer>,
    readers: Readers,
    /// Checkpoints the WAL beside the writer; stopped by [`Store::close`] or on drop.
    checkpointer: Checkpointer,
    /// Key hash -> account or location, kept current by the key revision watcher
    /// (see `auth_cache.rs`).
    auth: AuthCache,
    /// Bumped after every commit that deleted check sessions (with their checks), so
    /// caches of session answers drop what they hold.
    session_deletions: AtomicU64,
}

impl Store {
    /// Opens (creating if needed) `DIR/outpost.db` and applies the embedded migrations.
    /// The directory must exist.
    pub async fn open(data_dir: &Path) -> Result<Store, StoreError> {
        let options = SqliteConnectOptions::new()
            .filename(data_dir.join(DB_FILE))
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .busy_timeout(BUSY_TIMEOUT)
            .foreign_keys(true)
            .pragma("temp_store", "memory");
        // A new database gets 2 KiB pages: a ping's commit rewrites a leaf page of each
        // table and index it touches, and halving the page halves what goes to the WAL
        // (measured: 24k -> 28k durable pings/s, while the whole path of URL checks
        // loses about 6%). Existing databases keep theirs.
        let options = options.page_size(PAGE_SIZE);
        // The writer never checkpoints (see `checkpointer`).
        let writer_options = options.clone().pragma("wal_autocheckpoint", "0");
        let writer = Arc::new(Writer::open(&writer_options, Generation::default()).await?);
        migrations::run(&mut *writer.acquire().await?).await?;
        let readers = Readers::open(&options, READ_CONNECTIONS).await?;
        let checkpointer = Checkpointer::spawn(&options, writer.clone()).await?;
        Ok(Store {
            inner: Arc::new(Inner {
                writer,
                readers,
                checkpointer,
                auth: AuthCache::new(),
                session_deletions: AtomicU64::new(0),
            }),
        })
    }

    /// The write generation, `None` while a write may be in progress. A view read after
    /// this returned `Some(g)` is current as long as it still returns `Some(g)`: nothing
    /// it reads was written since. Plain heartbeat pings (rows no cached view reads) do
    /// not change it. See `generation.rs`.
    pub fn write_generation(&self) -> Option<u64> {
        self.inner.writer.generation().current()
    }

    /// Changes after every commit that deleted check sessions; read it before a read of
    /// a session whose answer is kept, and keep the answer only if it is unchanged.
    pub fn session_deletions(&self) -> u64 {
        self.inner.session_deletions.load(Ordering::Acquire)
    }

    /// After a commit that deleted check sessions.
    fn sessions_deleted(&self) {
        self.inner.session_deletions.fetch_add(1, Ordering::AcqRel);
    }

    /// The single write connection; every write goes through it. Callers wait their
    /// turn.
    pub(crate) async fn write(&self) -> Result<WriteGuard<'_>, StoreError> {
        self.inner.writer.acquire().await
    }

    /// A read connection (read-only), for one caller at a time.
    pub(crate) async fn read(&self) -> Result<ReadGuard<'_>, StoreError> {
        self.inner.readers.acquire().await
    }

    /// Closes every connection once its current caller is done.
    pub async fn close(&self) {
        self.inner.checkpointer.stop().await;
        self.inner.writer.close().await;
        self.inner.readers.close(READ_CONNECTIONS).await;
    }
}

/// Milliseconds since the Unix epoch, the store's time unit.
pub fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

/// Converts store milliseconds to a timestamp.
pub fn to_time(ms: i64) -> chrono::DateTime<chrono::Utc> {
    rows::time(ms)
}
