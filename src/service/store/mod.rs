//! The store: SQLite through sqlx with runtime-checked queries.
//!
//! One writer connection serialises every write (no SQLITE_BUSY storms between our own
//! writers); a small pool of read connections serves the API. WAL mode lets readers
//! run while the writer commits. Batches go through `json_each(?)` so that a lease, a
//! result batch or a trigger is a handful of statements however many rows it touches.

mod accounts;
mod alerts;
mod artifacts;
mod auth_cache;
mod checks;
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
pub use checks::{CheckFilter, CheckRecord, CheckWrite, ScheduleWrite};
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

use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};

/// Name of the database file inside the data directory.
pub const DB_FILE: &str = "outpost.db";

/// How long a statement waits for a lock held by another process before failing.
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);
/// Read connections; WAL readers never block the writer.
const READ_CONNECTIONS: u32 = 4;

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
    writer: SqlitePool,
    reader: SqlitePool,
    /// Kept by the write pool's hooks: tells whether anything may have been written
    /// since a value was read (see `generation.rs`).
    generation: Arc<Generation>,
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
        let generation = Arc::new(Generation::default());
        let (on_connect, on_acquire, on_release) =
            (generation.clone(), generation.clone(), generation.clone());
        let writer = SqlitePoolOptions::new()
            .after_connect(move |_conn, _meta| {
                on_connect.acquired();
                Box::pin(async { Ok(()) })
            })
            .before_acquire(move |_conn, _meta| {
                on_acquire.acquired();
                Box::pin(async { Ok(true) })
            })
            .after_release(move |_conn, _meta| {
                on_release.released();
                Box::pin(async { Ok(true) })
            })
            .max_connections(1)
            .min_connections(1)
            // A local file cannot go stale the way a network connection can: no ping
            // round trip to the connection's thread before each use.
            .test_before_acquire(false)
            .acquire_timeout(Duration::from_secs(60))
            .idle_timeout(None)
            .max_lifetime(None)
            .connect_with(options.clone())
            .await?;
        migrations::run(&writer).await?;
        let reader = SqlitePoolOptions::new()
            .max_connections(READ_CONNECTIONS)
            .min_connections(1)
            .test_before_acquire(false)
            .acquire_timeout(Duration::from_secs(60))
            .connect_with(options.read_only(true))
            .await?;
        Ok(Store {
            inner: Arc::new(Inner {
                writer,
                reader,
                generation,
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
        self.inner.generation.current()
    }

    /// Tells the generation that the caller holds the write connection and will write
    /// nothing a cached view reads (see `generation.rs`). Call only while holding it.
    fn quiet_write(&self) {
        self.inner.generation.quiet();
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

    /// The single write connection; every write goes through it.
    pub(crate) fn writer(&self) -> &SqlitePool {
        &self.inner.writer
    }

    /// The read pool.
    pub(crate) fn reader(&self) -> &SqlitePool {
        &self.inner.reader
    }

    /// Closes both pools (waits for the connections to finish).
    pub async fn close(&self) {
        self.inner.writer.close().await;
        self.inner.reader.close().await;
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
