//! What the agent's parts share about the agent as a whole: identity, readiness,
//! contact with the service, running jobs, dead loops, and the fatal-error slot.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::Instant;

use chrono::{DateTime, Utc};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use super::AgentError;

/// Locks a mutex, taking the data even if a panicking holder poisoned it.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Shared agent-wide state, read by the health server.
pub struct AgentState {
    pub agent_id: Uuid,
    started: Instant,
    /// HELLO succeeded: the service knows us and jobs are accepted.
    connected: AtomicBool,
    draining: AtomicBool,
    location: OnceLock<String>,
    last_contact: Mutex<Option<DateTime<Utc>>>,
    reachable: AtomicBool,
    reachable_again: Notify,
    running_jobs: AtomicUsize,
    dead_loop: Mutex<Option<&'static str>>,
}

impl AgentState {
    pub fn new(agent_id: Uuid) -> AgentState {
        AgentState {
            agent_id,
            started: Instant::now(),
            connected: AtomicBool::new(false),
            draining: AtomicBool::new(false),
            location: OnceLock::new(),
            last_contact: Mutex::new(None),
            reachable: AtomicBool::new(true),
            reachable_again: Notify::new(),
            running_jobs: AtomicUsize::new(0),
            dead_loop: Mutex::new(None),
        }
    }

    /// HELLO succeeded for `location`.
    pub fn set_connected(&self, location: String) {
        let _ = self.location.set(location);
        self.connected.store(true, Ordering::SeqCst);
    }

    pub fn set_draining(&self) {
        self.draining.store(true, Ordering::SeqCst);
    }

    pub fn is_draining(&self) -> bool {
        self.draining.load(Ordering::SeqCst)
    }

    /// Ready to take jobs: connected, alive and not draining.
    pub fn is_ready(&self) -> bool {
        self.connected.load(Ordering::SeqCst) && !self.is_draining() && self.is_alive()
    }

    /// No loop of the agent died.
    pub fn is_alive(&self) -> bool {
        lock(&self.dead_loop).is_none()
    }

    pub fn dead_loop(&self) -> Option<&'static str> {
        *lock(&self.dead_loop)
    }

    /// Records that the loop `name` stopped when it should not have.
    pub fn set_loop_dead(&self, name: &'static str) {
        lock(&self.dead_loop).get_or_insert(name);
    }

    pub fn location(&self) -> Option<&str> {
        self.location.get().map(String::as_str)
    }

    pub fn uptime_secs(&self) -> u64 {
        self.started.elapsed().as_secs()
    }

    pub fn last_contact(&self) -> Option<DateTime<Utc>> {
        *lock(&self.last_contact)
    }

    /// The service answered (any HTTP status below 500 counts).
    pub fn record_contact(&self) {
        *lock(&self.last_contact) = Some(Utc::now());
        if !self.reachable.swap(true, Ordering::SeqCst) {
            self.reachable_again.notify_waiters();
        }
    }

    /// The service could not be reached or failed (transport error, 5xx, 429).
    pub fn record_unreachable(&self) {
        self.reachable.store(false, Ordering::SeqCst);
    }

    /// Resolves at the next transition from unreachable to reachable.
    pub async fn reachable_again(&self) {
        self.reachable_again.notified().await
    }

    pub fn running_jobs(&self) -> usize {
        self.running_jobs.load(Ordering::SeqCst)
    }

    pub(crate) fn job_started(&self) {
        self.running_jobs.fetch_add(1, Ordering::SeqCst);
    }

    pub(crate) fn job_ended(&self) {
        let _ = self
            .running_jobs
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1));
    }
}

/// The first fatal error raised by any loop; raising it wakes the supervisor in `run`.
#[derive(Default)]
pub struct Fatal {
    raised: CancellationToken,
    error: Mutex<Option<AgentError>>,
}

impl Fatal {
    /// Keeps the first error; later ones are dropped.
    pub fn raise(&self, error: AgentError) {
        let mut slot = lock(&self.error);
        if slot.is_none() {
            *slot = Some(error);
        }
        drop(slot);
        self.raised.cancel();
    }

    pub fn is_raised(&self) -> bool {
        self.raised.is_cancelled()
    }

    /// Resolves with the error once one was raised.
    pub async fn wait(&self) -> AgentError {
        self.raised.cancelled().await;
        lock(&self.error)
            .take()
            .unwrap_or_else(|| AgentError::Internal("fatal error reported twice".into()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readiness_follows_connection_drain_and_loops() {
        let s = AgentState::new(Uuid::new_v4());
        assert!(!s.is_ready());
        s.set_connected("loc".into());
        assert!(s.is_ready());
        assert_eq!(s.location(), Some("loc"));
        s.set_loop_dead("poller");
        assert!(!s.is_ready() && !s.is_alive());
        assert_eq!(s.dead_loop(), Some("poller"));
        let s = AgentState::new(Uuid::new_v4());
        s.set_connected("loc".into());
        s.set_draining();
        assert!(!s.is_ready() && s.is_alive());
    }

    #[test]
    fn running_jobs_never_underflow() {
        let s = AgentState::new(Uuid::new_v4());
        s.job_ended();
        assert_eq!(s.running_jobs(), 0);
        s.job_started();
        s.job_started();
        s.job_ended();
        assert_eq!(s.running_jobs(), 1);
    }
}
