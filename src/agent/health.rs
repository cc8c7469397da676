//! The agent's only inbound surface: `GET /-/readiness`, `GET /-/liveness` and
//! `GET /health` on AGENT_HEALTH_PORT. Small plain bodies; anything else is 404.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Json, Response};
use axum::routing::get;
use serde::Serialize;
use tokio_util::sync::CancellationToken;

use super::AgentError;
use super::state::AgentState;

/// A bound, not yet serving, health server.
pub struct HealthServer {
    listener: tokio::net::TcpListener,
    state: Arc<AgentState>,
}

impl HealthServer {
    pub async fn bind(
        addr: SocketAddr,
        state: Arc<AgentState>,
    ) -> Result<HealthServer, AgentError> {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|source| AgentError::HealthBind { addr, source })?;
        Ok(HealthServer { listener, state })
    }

    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves until `stop` fires.
    pub async fn serve(self, stop: CancellationToken) -> std::io::Result<()> {
        axum::serve(self.listener, router(self.state))
            .with_graceful_shutdown(stop.cancelled_owned())
            .await
    }
}

/// The health routes over `state`.
pub fn router(state: Arc<AgentState>) -> Router {
    Router::new()
        .route("/-/readiness", get(readiness))
        .route("/-/liveness", get(liveness))
        .route("/health", get(health))
        .fallback(not_found)
        .method_not_allowed_fallback(not_found)
        .with_state(state)
}

async fn readiness(State(state): State<Arc<AgentState>>) -> Response {
    if state.is_ready() {
        (StatusCode::OK, "ready\n").into_response()
    } else if state.is_draining() {
        (StatusCode::SERVICE_UNAVAILABLE, "draining\n").into_response()
    } else if !state.is_alive() {
        (StatusCode::SERVICE_UNAVAILABLE, "not alive\n").into_response()
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            "not connected to the service yet\n",
        )
            .into_response()
    }
}

async fn liveness(State(state): State<Arc<AgentState>>) -> Response {
    match state.dead_loop() {
        None => (StatusCode::OK, "alive\n").into_response(),
        Some(name) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("the {name} loop stopped\n"),
        )
            .into_response(),
    }
}

/// The body of `GET /health`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HealthReport {
    pub status: &'static str,
    pub version: &'static str,
    pub agent_id: uuid::Uuid,
    pub location: Option<String>,
    pub uptime_seconds: u64,
    pub running_jobs: usize,
    pub last_contact_at: Option<chrono::DateTime<chrono::Utc>>,
}

async fn health(State(state): State<Arc<AgentState>>) -> Json<HealthReport> {
    let status = if !state.is_alive() {
        "degraded"
    } else if state.is_draining() {
        "draining"
    } else if state.is_ready() {
        "ok"
    } else {
        "starting"
    };
    Json(HealthReport {
        status,
        version: crate::VERSION,
        agent_id: state.agent_id,
        location: state.location().map(str::to_owned),
        uptime_seconds: state.uptime_secs(),
        running_jobs: state.running_jobs(),
        last_contact_at: state.last_contact(),
    })
}

async fn not_found() -> impl IntoResponse {
    (StatusCode::NOT_FOUND, "not found\n")
}
