//! The private-location agent: poller -> dispatcher -> executors -> reporter (+ spool),
//! with lease renewal and the health server.
//!
//! Code map:
//! - [`config`]: environment -> [`AgentConfig`], one-line errors naming the variable.
//! - [`client`]: HTTP client of the agent API, error classes fatal / permanent / transient.
//! - [`poller`]: LEASE long-poll sized by free slots per pool.
//! - [`dispatcher`]: the two worker pools, job parsing, runs.
//! - [`inflight`]: the table of held leases and their phases.
//! - [`leases`]: RENEW loop and RELEASE.
//! - [`reporter`], [`spool`]: result delivery, batched, durable across restarts.
//! - [`artifacts`]: uploads of a result's files (network diagnostics) before delivery.
//! - [`error_reports`]: internal errors and panics reported to the service
//!   (EXTERNAL_OBSERVABILITY), batched, bounded, de-duplicated, rate-limited, scrubbed.
//! - [`health`]: readiness, liveness, /health.
//! - [`state`], [`backoff`], [`events`], [`scrub`]: shared state, retry delays, internal
//!   error events, secret removal.
//!
//! Lifecycle of [`run`]: error reporter (unless EXTERNAL_OBSERVABILITY=off) -> bind
//! health -> HELLO (retried) -> ready -> loops run -> on drain: readiness 503, stop
//! leasing, RELEASE queued jobs, let running jobs finish within the grace period (then
//! abort and RELEASE them), flush results, flush error reports, stop health, return.

pub mod artifacts;
pub mod backoff;
pub mod client;
pub mod config;
pub mod dispatcher;
pub mod error_reports;
pub mod events;
pub mod health;
pub mod inflight;
pub mod leases;
pub mod poller;
pub mod reporter;
pub mod scrub;
pub mod spool;
pub mod state;

pub use config::{AgentArgs, AgentConfig, ConfigError};

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::executors::ExecEnv;
use crate::protocol::{HelloRequest, HelloResponse, PROTOCOL_VERSION};
use crate::shutdown::Shutdown;

use self::backoff::Backoff;
use self::client::{ClientError, ServiceClient};
use self::dispatcher::Dispatcher;
use self::error_reports::{ErrorReporter, ReportSink};
use self::events::{Events, names};
use self::health::HealthServer;
use self::inflight::LeaseTable;
use self::leases::Renewer;
use self::poller::Poller;
use self::reporter::Reporter;
use self::spool::Spool;
use self::state::{AgentState, Fatal};

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
    /// The service answered HELLO with a 4xx other than 401/403 (e.g. an incompatible
    /// protocol version).
    #[error("the service rejected this agent (HTTP {status}): {message}")]
    Rejected { status: u16, message: String },
    #[error("cannot set up the HTTP client: {0}")]
    HttpClient(String),
    #[error("internal error: {0}")]
    Internal(String),
}

/// Shortest and longest lease time-to-live the agent accepts from HELLO.
const MIN_LEASE_TTL: Duration = Duration::from_secs(3);
const MAX_LEASE_TTL: Duration = Duration::from_secs(3600);
/// How long aborted jobs get to unwind after the grace period.
const ABORT_SETTLE: Duration = Duration::from_secs(5);

/// Runs the agent until `shutdown` drains it. Returns `Ok` after a graceful drain.
pub async fn run(config: AgentConfig, shutdown: Shutdown) -> Result<(), AgentError> {
    let agent_id = Uuid::new_v4();
    let env = ExecEnv::from_system()?;
    let scrubber = scrub::for_agent(&config.api_key, env.secret_scrubber());
    let spool = open_spool(&config).await?;
    let state = Arc::new(AgentState::new(agent_id));
    let client = ServiceClient::new(&config, state.clone())
        .map(Arc::new)
        .map_err(AgentError::HttpClient)?;
    let (events, error_reporter) = if config.external_observability {
        let sink = ReportSink::new(scrubber.clone());
        error_reports::panic_hook::install(&sink);
        let reporter = ErrorReporter::new(&sink, client.clone());
        (
            Events::new(scrubber.clone()).with_reports(sink),
            Some(reporter),
        )
    } else {
        tracing::info!("error reports to the service are off (EXTERNAL_OBSERVABILITY=off)");
        (Events::new(scrubber.clone()), None)
    };

    let fatal = Arc::new(Fatal::default());
    let watch = Watch {
        state: state.clone(),
        events: events.clone(),
        fatal: fatal.clone(),
    };
    let reports_stop = CancellationToken::new();
    let reports_task = error_reporter.map(|reporter| {
        spawn_loop(
            "error reports",
            &reports_stop,
            &watch,
            reporter.run(reports_stop.clone()),
        )
    });
    let health = match HealthServer::bind(config.health_addr, state.clone()).await {
        Ok(h) => h,
        Err(e) => {
            stop_optional(reports_stop, reports_task).await;
            return Err(e);
        }
    };
    if let Ok(addr) = health.local_addr() {
        tracing::info!(addr = %addr, "health server listening");
    }
    let health_stop = CancellationToken::new();
    let health_task = spawn_loop("health", &health_stop, &watch, {
        let stop = health_stop.clone();
        async move {
            if let Err(e) = health.serve(stop).await {
                tracing::error!("health server: {e}");
            }
        }
    });

    tracing::info!("Starting Consumer {agent_id}");
    let hello = match say_hello(&client, agent_id, &shutdown).await {
        Ok(Some(h)) => h,
        Ok(None) => {
            tracing::info!("shutdown before the service was reached");
            stop_optional(reports_stop, reports_task).await;
            stop_task(health_stop, health_task).await;
            return Ok(());
        }
        Err(e) => {
            stop_optional(reports_stop, reports_task).await;
            stop_task(health_stop, health_task).await;
            return Err(e);
        }
    };
    let ttl = Duration::from_secs(hello.lease_ttl_secs).clamp(MIN_LEASE_TTL, MAX_LEASE_TTL);
    tracing::info!(
        location = %hello.location_name,
        server_version = %hello.server_version,
        lease_ttl_secs = ttl.as_secs(),
        uptime_slots = config.uptime_concurrency,
        heavy_slots = config.job_concurrency,
        "connected to the service"
    );
    state.set_connected(hello.location_name.clone());

    let leases = Arc::new(LeaseTable::new());
    let (results_tx, results_rx) = tokio::sync::mpsc::channel(reporter::CHANNEL_CAPACITY);
    let dispatcher = Arc::new(
        Dispatcher::new(
            config.uptime_concurrency,
            config.job_concurrency,
            leases.clone(),
            env,
            results_tx,
            state.clone(),
            scrubber,
        )
        .with_artifact_uploads(client.clone()),
    );

    let reporter_finish = CancellationToken::new();
    let reporter_task = spawn_loop(
        "reporter",
        &reporter_finish,
        &watch,
        Reporter::new(
            results_rx,
            client.clone(),
            spool,
            leases.clone(),
            state.clone(),
            events.clone(),
            fatal.clone(),
        )
        .run(reporter_finish.clone()),
    );
    let renew_stop = CancellationToken::new();
    let renew_task = spawn_loop(
        "renewer",
        &renew_stop,
        &watch,
        Renewer {
            client: client.clone(),
            leases: leases.clone(),
            interval: leases::renew_interval(ttl),
            fatal: fatal.clone(),
        }
        .run(renew_stop.clone()),
    );
    let poll_stop = CancellationToken::new();
    let poll_task = spawn_loop(
        "poller",
        &poll_stop,
        &watch,
        Poller {
            agent_id,
            client: client.clone(),
            dispatcher: dispatcher.clone(),
            events: events.clone(),
            fatal: fatal.clone(),
        }
        .run(poll_stop.clone()),
    );

    let outcome = tokio::select! {
        _ = shutdown.draining() => Ok(()),
        e = fatal.wait() => Err(e),
    };
    state.set_draining();
    stop_task(poll_stop, poll_task).await;
    match &outcome {
        Ok(()) => {
            tracing::info!(
                running = state.running_jobs(),
                grace_secs = config.shutdown_grace.as_secs(),
                "draining: no new jobs; running jobs may finish"
            );
            drain_jobs(&client, &leases, &state, &events, config.shutdown_grace).await;
        }
        Err(e) => {
            tracing::error!("stopping: {e}");
            leases.abort_all();
        }
    }
    stop_task(reporter_finish, reporter_task).await;
    stop_task(renew_stop, renew_task).await;
    stop_optional(reports_stop, reports_task).await;
    stop_task(health_stop, health_task).await;
    if outcome.is_ok() {
        tracing::info!("agent stopped");
    }
    outcome
}

/// Opens the spool off the runtime threads.
async fn open_spool(config: &AgentConfig) -> Result<Arc<Spool>, AgentError> {
    let dir = config.spool_dir.clone();
    let opened = tokio::task::spawn_blocking(move || Spool::open(&dir))
        .await
        .map_err(|e| AgentError::Internal(format!("opening the spool: {e}")))?;
    opened.map(Arc::new).map_err(|source| AgentError::Spool {
        path: config.spool_dir.clone(),
        source,
    })
}

/// HELLO, retried with backoff on transient errors. `None` if the drain started first.
async fn say_hello(
    client: &ServiceClient,
    agent_id: Uuid,
    shutdown: &Shutdown,
) -> Result<Option<HelloResponse>, AgentError> {
    let request = HelloRequest {
        agent_id,
        agent_version: crate::VERSION.to_owned(),
        protocol_version: PROTOCOL_VERSION,
    };
    let mut backoff = Backoff::default();
    loop {
        let answer = tokio::select! {
            _ = shutdown.draining() => return Ok(None),
            a = client.hello(&request) => a,
        };
        match answer {
            Ok(hello) => return Ok(Some(hello)),
            Err(ClientError::Unauthorized { .. }) => return Err(AgentError::Unauthorized),
            Err(ClientError::Rejected { status, message }) => {
                return Err(AgentError::Rejected { status, message });
            }
            Err(e @ ClientError::Transient(_)) => {
                let delay = backoff.next_delay();
                tracing::warn!(
                    retry_in_ms = delay.as_millis() as u64,
                    "cannot reach the service: {e}"
                );
                tokio::select! {
                    _ = shutdown.draining() => return Ok(None),
                    _ = tokio::time::sleep(delay) => {}
                }
            }
        }
    }
}

/// The graceful part of the drain: release queued jobs, wait for running ones up to
/// `grace`, then abort and release the rest.
async fn drain_jobs(
    client: &ServiceClient,
    leases: &LeaseTable,
    state: &AgentState,
    events: &Events,
    grace: Duration,
) {
    let queued = leases.drain_queued();
    if !queued.is_empty() {
        leases::release(client, &queued, events).await;
    }
    if tokio::time::timeout(grace, jobs_done(leases, state))
        .await
        .is_ok()
    {
        return;
    }
    let aborted = leases.abort_running();
    tracing::warn!(
        aborted = aborted.len(),
        "grace period over: running jobs aborted and released to run elsewhere"
    );
    if !aborted.is_empty() {
        leases::release(client, &aborted, events).await;
    }
    let _ = tokio::time::timeout(ABORT_SETTLE, jobs_done(leases, state)).await;
}

/// Resolves once no job is queued or running and every finished job handed its result on.
async fn jobs_done(leases: &LeaseTable, state: &AgentState) {
    loop {
        let changed = leases.changed();
        tokio::pin!(changed);
        changed.as_mut().enable();
        if leases.active() == 0 && state.running_jobs() == 0 {
            return;
        }
        changed.await;
    }
}

/// Spawns a long-running loop that should run until `stop` fires (or a fatal error).
/// If it panics or ends on its own, liveness turns 503 and an internal error event is
/// logged.
fn spawn_loop<F>(
    name: &'static str,
    stop: &CancellationToken,
    watch: &Watch,
    fut: F,
) -> JoinHandle<()>
where
    F: Future<Output = ()> + Send + 'static,
{
    let inner = tokio::spawn(fut);
    let stop = stop.clone();
    let Watch {
        state,
        events,
        fatal,
    } = watch.clone();
    tokio::spawn(async move {
        let why = match inner.await {
            Ok(()) if stop.is_cancelled() || fatal.is_raised() => return,
            Ok(()) => "ended".to_owned(),
            Err(e) => e.to_string(),
        };
        state.set_loop_dead(name);
        events.internal_error(names::LOOP_DIED, &format!("the {name} loop died: {why}"));
    })
}

/// What [`spawn_loop`] needs to report a dead loop.
#[derive(Clone)]
struct Watch {
    state: Arc<AgentState>,
    events: Events,
    fatal: Arc<Fatal>,
}

/// [`stop_task`] for a loop that may not run.
async fn stop_optional<T>(stop: CancellationToken, task: Option<JoinHandle<T>>) {
    stop.cancel();
    if let Some(task) = task {
        let _ = task.await;
    }
}

/// Signals a loop to stop and waits for it.
async fn stop_task<T>(stop: CancellationToken, task: JoinHandle<T>) {
    stop.cancel();
    let _ = task.await;
}
