//! The control plane: public API, agent API, scheduler, reaper, sessions, store.
//!
//! Code map:
//! - `store/`: SQLite (one writer connection + read pool), migrations, every query;
//! - `api/`: public routes, one file per resource, plus extractors with JSON errors;
//! - `agent_api`, `agent_artifacts`, `agent_error_reports`: the agent protocol of
//!   `crate::protocol`;
//! - `auth`, `keys`: API and agent keys (hashed at rest);
//! - `sessions`, `hub`: session views, trigger selection, completion waits, wake-ups;
//! - `final_sessions`: the JSON answers of settled sessions, kept in memory;
//! - `scheduler`, `reaper`: the background loops;
//! - `heartbeats/`, `ping`: heartbeat monitors (documents, the engine that owns their
//!   timers and records pings by group commit, success ratios) and their ping address;
//! - `alerts/`: alert channels, notices and their delivery (webhooks with retries and
//!   signatures), fed by a bounded queue and a durable outbox;
//! - `clock`: the time of heartbeats (the system clock, or a manual one in tests);
//! - `check_doc`, `check_kinds`, `check_secrets`: validation and normalization of check
//!   documents of every type, the per-type routes and defaults, hidden variable values;
//! - `stored_kinds`: the fields of check types stored before their executors exist;
//! - `reference_schema`: the embedded reference document and a validator of values
//!   against its schemas (check types stored before their executors exist);
//! - `bootstrap`, `admin`: credentials of `outpost up`, tenant administration;
//! - `projects`: monitoring as code (deploys of projects, their diffs);
//! - `status_html`: status pages served as HTML to browsers (public and private).
//! - `status_notify`: tells status page subscribers of incident updates (e-mail,
//!   webhooks) and sends the confirmation mails of new e-mail subscriptions.

pub mod admin;
pub mod agent_api;
pub mod agent_artifacts;
pub mod agent_error_reports;
pub mod alerts;
pub mod api;
pub mod auth;
pub mod bootstrap;
pub mod check_doc;
pub mod check_kinds;
pub mod check_secrets;
pub mod clock;
pub mod context;
pub mod errors;
pub mod final_sessions;
pub mod heartbeats;
pub mod hub;
pub mod keys;
pub mod ping;
pub mod projects;
pub mod reaper;
pub mod reference_schema;
pub mod scheduler;
pub mod sessions;
pub mod status_html;
pub mod status_notify;
pub mod store;
pub mod stored_kinds;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::net::TcpListener;

use crate::shutdown::Shutdown;
use alerts::{Alerts, AlertsError, DeliveryPolicy, Dispatcher};
use clock::{Clock, SystemClock};
use context::Ctx;
use heartbeats::Heartbeats;
use heartbeats::engine::Engine;
use hub::Hub;
use store::{ReapReport, Store, StoreError, now_ms};

/// Settings of `outpost serve`.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    pub listen: SocketAddr,
    pub data_dir: PathBuf,
    /// Base URL used in links (checkSessionLink, ...); defaults to http://<listen>.
    pub public_url: Option<url::Url>,
    /// How long a job lease lives without renewal.
    pub lease_ttl: Duration,
    /// Base URL of heartbeat ping addresses (`<ping_url>/<token>`); defaults to
    /// `<public url>/ping`, which this process serves.
    pub ping_url: Option<url::Url>,
    /// The SMTP server and sender of e-mail alerts; None: e-mail channels are logged as
    /// undeliverable.
    pub smtp: Option<alerts::email::SmtpConfig>,
}

/// Which background loops `serve` runs (tests switch them off to drive them by hand
/// through [`ServiceHandle`]).
#[derive(Debug, Clone, Copy)]
pub struct ServeOptions {
    pub scheduler: bool,
    pub reaper: bool,
    /// Largest artifact accepted (default: the protocol's MAX_ARTIFACT_BYTES).
    pub max_artifact_bytes: u64,
}

impl Default for ServeOptions {
    fn default() -> Self {
        ServeOptions {
            scheduler: true,
            reaper: true,
            max_artifact_bytes: crate::protocol::MAX_ARTIFACT_BYTES,
        }
    }
}

/// Parts of the service that tests (or embedders) replace.
#[derive(Clone)]
pub struct ServeExtras {
    /// The time of heartbeat pings, timers and event queries.
    pub clock: Arc<dyn Clock>,
    /// Retries and limits of alert deliveries.
    pub alert_delivery: DeliveryPolicy,
}

impl Default for ServeExtras {
    fn default() -> Self {
        ServeExtras {
            clock: Arc::new(SystemClock),
            alert_delivery: DeliveryPolicy::default(),
        }
    }
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
    #[error("store: {0}")]
    Store(#[from] StoreError),
    #[error("{0}")]
    Alerts(#[from] AlertsError),
    #[error("e-mail: {0}")]
    Email(#[from] alerts::email::EmailError),
    #[error("credentials file {path}: {source}")]
    Credentials {
        path: PathBuf,
        source: std::io::Error,
    },
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
    ctx: Arc<Ctx>,
    listener: TcpListener,
    addr: SocketAddr,
    options: ServeOptions,
    engine: Engine,
    dispatcher: Dispatcher,
    status_worker: status_notify::Worker,
}

/// A handle on a bound or running service, for tests and embedding: the store and
/// one-shot passes of the background loops at a chosen time.
#[derive(Clone)]
pub struct ServiceHandle {
    ctx: Arc<Ctx>,
}

impl ServiceHandle {
    pub fn store(&self) -> &Store {
        &self.ctx.store
    }

    /// Base URL used in links.
    pub fn public_url(&self) -> &str {
        &self.ctx.public_url
    }

    /// Lease long-polls waiting right now.
    pub fn waiting_long_polls(&self) -> usize {
        self.ctx.hub.waiting_polls()
    }

    /// Sessions some completion request waits on right now.
    pub fn watched_sessions(&self) -> usize {
        self.ctx.hub.watched_sessions()
    }

    /// One scheduler pass as if the time were `now`; returns the sessions started.
    pub async fn run_scheduler(&self, now: DateTime<Utc>) -> Result<usize, StoreError> {
        scheduler::tick(&self.ctx, now.timestamp_millis()).await
    }

    /// One reaper pass as if the time were `now`.
    pub async fn run_reaper(&self, now: DateTime<Utc>) -> Result<ReapReport, StoreError> {
        reaper::tick(&self.ctx, now.timestamp_millis()).await
    }

    /// Base URL of ping addresses (without a trailing slash).
    pub fn ping_url(&self) -> &str {
        &self.ctx.ping_url
    }

    /// Resolves once the heartbeat engine has processed everything sent to it before
    /// and every deadline due at its clock's current time.
    pub async fn heartbeats_settled(&self) {
        self.ctx.heartbeats.sync().await
    }

    /// How many settled check sessions' answers are kept in memory.
    pub fn final_sessions_kept(&self) -> usize {
        self.ctx.final_sessions.len()
    }

    /// Holds the render of the status page at `/status/{url}` until the guard is
    /// dropped: visitors meanwhile find a render in progress.
    pub async fn hold_status_page_render(&self, url: &str) -> tokio::sync::OwnedMutexGuard<()> {
        status_html::hold_render(&self.ctx, url).await
    }

    /// Resolves once no alert notice is queued or being delivered.
    pub async fn alerts_idle(&self) {
        self.ctx.alerts.idle().await
    }
}

/// The bound address as a client can reach it: a wildcard address (0.0.0.0, ::) is
/// replaced by loopback for the default public URL.
fn reachable(addr: SocketAddr) -> SocketAddr {
    use std::net::{Ipv4Addr, Ipv6Addr};
    match addr.ip() {
        std::net::IpAddr::V4(ip) if ip.is_unspecified() => {
            SocketAddr::from((Ipv4Addr::LOCALHOST, addr.port()))
        }
        std::net::IpAddr::V6(ip) if ip.is_unspecified() => {
            SocketAddr::from((Ipv6Addr::LOCALHOST, addr.port()))
        }
        _ => addr,
    }
}

impl BoundService {
    /// Opens (and migrates) the store and binds the listener.
    pub async fn bind(config: ServeConfig) -> Result<BoundService, ServiceError> {
        BoundService::bind_with(config, ServeOptions::default()).await
    }

    /// [`BoundService::bind`] with a choice of background loops.
    pub async fn bind_with(
        config: ServeConfig,
        options: ServeOptions,
    ) -> Result<BoundService, ServiceError> {
        BoundService::bind_with_extras(config, options, ServeExtras::default()).await
    }

    /// [`BoundService::bind_with`] with a chosen clock and alert delivery policy.
    pub async fn bind_with_extras(
        config: ServeConfig,
        options: ServeOptions,
        extras: ServeExtras,
    ) -> Result<BoundService, ServiceError> {
        tokio::fs::create_dir_all(&config.data_dir)
            .await
            .map_err(|source| ServiceError::DataDir {
                path: config.data_dir.clone(),
                source,
            })?;
        let store = Store::open(&config.data_dir).await?;
        let ttl_ms = i64::try_from(config.lease_ttl.as_millis()).unwrap_or(i64::MAX / 4);
        let extended = store.extend_all_leases(now_ms(), ttl_ms).await?;
        if extended > 0 {
            tracing::info!(leases = extended, "extended active leases after start");
        }
        let listener =
            TcpListener::bind(config.listen)
                .await
                .map_err(|source| ServiceError::Bind {
                    addr: config.listen,
                    source,
                })?;
        let addr = listener.local_addr()?;
        let public_url = match &config.public_url {
            Some(u) => u.as_str().trim_end_matches('/').to_owned(),
            None => format!("http://{}", reachable(addr)),
        };
        let ping_url = match &config.ping_url {
            Some(u) => u.as_str().trim_end_matches('/').to_owned(),
            None => format!("{public_url}{}", ping::PING_PATH),
        };
        let mailer = match &config.smtp {
            Some(smtp) => {
                let mailer = alerts::email::Mailer::new(smtp, extras.alert_delivery)?;
                tracing::info!(smtp = mailer.server(), from = %smtp.from, "e-mail alerts go through SMTP");
                Some(mailer)
            }
            None => {
                tracing::info!(
                    "no SMTP server configured (--smtp-url): e-mail alert channels are not delivered"
                );
                None
            }
        };
        let (alerts, dispatcher) = Alerts::with_email(
            store.clone(),
            extras.alert_delivery,
            mailer.clone(),
            Some(public_url.clone()),
        )?;
        let status_notify = status_notify::StatusNotifier::new();
        let status_worker = status_notify::Worker::new(
            store.clone(),
            mailer,
            alerts.webhook_client().clone(),
            extras.alert_delivery,
            public_url.clone(),
            &status_notify,
        );
        let (heartbeats, commands) = Heartbeats::channel();
        let engine = Engine::load(
            store.clone(),
            extras.clock.clone(),
            alerts.clone(),
            commands,
        )
        .await?;
        let ctx = Arc::new(Ctx {
            store,
            hub: Hub::new(),
            lease_ttl: config.lease_ttl,
            public_url,
            data_dir: config.data_dir,
            max_artifact_bytes: options
                .max_artifact_bytes
                .min(crate::protocol::MAX_ARTIFACT_BYTES),
            stop: Shutdown::new(),
            clock: extras.clock,
            ping_url,
            heartbeats,
            alerts,
            status_notify,
            status_pages: status_html::PageCache::default(),
            final_sessions: final_sessions::FinalSessions::default(),
        });
        Ok(BoundService {
            ctx,
            listener,
            addr,
            options,
            engine,
            dispatcher,
            status_worker,
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The store of this service.
    pub fn store(&self) -> &Store {
        &self.ctx.store
    }

    /// A handle that stays usable while the service runs.
    pub fn handle(&self) -> ServiceHandle {
        ServiceHandle {
            ctx: self.ctx.clone(),
        }
    }

    /// For `outpost up`: on first start creates an account, an API key, a private
    /// location and an agent key and writes them to `DIR/credentials.json`; later starts
    /// read that file back.
    pub async fn ensure_credentials(&self) -> Result<Credentials, ServiceError> {
        bootstrap::ensure_credentials(&self.ctx.store, &self.ctx.data_dir, &self.ctx.public_url)
            .await
    }

    /// Serves until `shutdown` drains, then finishes in-flight requests (pending
    /// long-polls and completion waits answer at once) and stops the background loops.
    pub async fn serve(self, shutdown: Shutdown) -> Result<(), ServiceError> {
        let BoundService {
            ctx,
            listener,
            options,
            engine,
            dispatcher,
            status_worker,
            ..
        } = self;
        let engine = engine.spawn_on_own_thread()?;
        let dispatcher = tokio::spawn(dispatcher.run(ctx.stop.clone()));
        let status_worker = tokio::spawn(status_worker.run(ctx.stop.clone()));
        let replay = {
            let ctx = ctx.clone();
            tokio::spawn(async move {
                match ctx.alerts.replay_outbox(&ctx.store).await {
                    Ok(0) => {}
                    Ok(n) => {
                        tracing::info!(notices = n, "re-sent alert notices left in the outbox")
                    }
                    Err(e) => tracing::error!(error = %e, "cannot read the alert outbox"),
                }
            })
        };
        let mut loops = Vec::new();
        // Key lookups are answered from memory only while this watcher confirms that
        // no other process changed keys (see store/auth_cache.rs).
        loops.push({
            let ctx = ctx.clone();
            tokio::spawn(async move { ctx.store.watch_key_revisions(ctx.stop.draining()).await })
        });
        if options.scheduler {
            loops.push(tokio::spawn(scheduler::run(ctx.clone())));
        }
        if options.reaper {
            loops.push(tokio::spawn(reaper::run(ctx.clone())));
        }
        let stop = ctx.stop.clone();
        let drained = async move {
            tokio::select! {
                _ = shutdown.draining() => {}
                _ = stop.draining() => {}
            }
            stop.trigger();
        };
        let served = axum::serve(listener, api::router(ctx.clone()))
            .with_graceful_shutdown(drained)
            .await;
        ctx.stop.trigger();
        // Every request is answered: the engine finishes what is queued and ends.
        ctx.heartbeats.stop().await;
        loops.push(engine);
        loops.push(dispatcher);
        loops.push(status_worker);
        replay.abort();
        for task in loops {
            if let Err(e) = task.await {
                tracing::error!(error = %e, "background loop ended abnormally");
            }
        }
        ctx.store.close().await;
        served?;
        Ok(())
    }
}
