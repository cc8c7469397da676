//! What every handler and background loop shares.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use super::alerts::Alerts;
use super::clock::Clock;
use super::final_sessions::FinalSessions;
use super::heartbeats::Heartbeats;
use super::hub::Hub;
use super::status_html::PageCache;
use super::status_notify::StatusNotifier;
use super::store::Store;
use crate::shutdown::Shutdown;

/// Shared state of a running service.
pub struct Ctx {
    pub store: Store,
    pub hub: Arc<Hub>,
    /// How long a lease lives without renewal.
    pub lease_ttl: Duration,
    /// Base URL of links, without a trailing slash.
    pub public_url: String,
    pub data_dir: PathBuf,
    /// Largest artifact upload accepted.
    pub max_artifact_bytes: u64,
    /// Fires when the service starts draining: long-polls and waits return at once.
    pub stop: Shutdown,
    /// The time of heartbeat pings, timers and event queries.
    pub clock: Arc<dyn Clock>,
    /// Base of ping addresses (`<ping_url>/<token>`), without a trailing slash.
    pub ping_url: String,
    /// The heartbeat engine.
    pub heartbeats: Heartbeats,
    /// The alert queue.
    pub alerts: Alerts,
    /// Wakes the delivery of status notifications (incident updates to subscribers).
    pub status_notify: StatusNotifier,
    /// Status pages as last rendered, while the database is unchanged.
    pub status_pages: PageCache,
    /// JSON answers of settled check sessions (they never change).
    pub final_sessions: FinalSessions,
}

/// The axum state.
pub type AppState = Arc<Ctx>;

impl Ctx {
    /// Lease TTL in store milliseconds.
    pub fn lease_ttl_ms(&self) -> i64 {
        i64::try_from(self.lease_ttl.as_millis()).unwrap_or(i64::MAX / 4)
    }
}
