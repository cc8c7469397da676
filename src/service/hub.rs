//! In-process notifications: "jobs are available at location L" (wakes lease
//! long-polls) and "session S is final" (wakes completion waits). Nothing is polled.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::Notify;
use uuid::Uuid;

/// Wake-ups keyed by location and by session.
#[derive(Default)]
pub struct Hub {
    locations: Mutex<HashMap<Uuid, Arc<Notify>>>,
    sessions: Mutex<HashMap<Uuid, Arc<Notify>>>,
    /// Lease long-polls currently waiting.
    waiting_polls: AtomicUsize,
}

/// Counts a waiting long-poll while it lives.
pub struct PollGuard<'a>(&'a Hub);

impl Drop for PollGuard<'_> {
    fn drop(&mut self) {
        self.0.waiting_polls.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Locks a map, recovering it if a holder panicked (the maps hold no invariants a
/// panic could break).
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Hub {
    pub fn new() -> Arc<Hub> {
        Arc::new(Hub::default())
    }

    /// The notifier of a location's queue. Long-polls create a `notified()` future
    /// (and `enable()` it) before they look at the queue, so no wake-up is missed.
    pub fn location(&self, id: Uuid) -> Arc<Notify> {
        lock(&self.locations).entry(id).or_default().clone()
    }

    /// Wakes every long-poll waiting on these locations.
    pub fn wake_locations(&self, ids: &[Uuid]) {
        if ids.is_empty() {
            return;
        }
        let map = lock(&self.locations);
        for id in ids {
            if let Some(n) = map.get(id) {
                n.notify_waiters();
            }
        }
    }

    /// Registers interest in a session's completion until the returned guard drops.
    pub fn watch_session(self: &Arc<Self>, id: Uuid) -> SessionWatch {
        let notify = lock(&self.sessions).entry(id).or_default().clone();
        SessionWatch {
            hub: self.clone(),
            id,
            notify,
        }
    }

    /// Wakes the completion waits of these sessions.
    pub fn sessions_finished(&self, ids: &[Uuid]) {
        if ids.is_empty() {
            return;
        }
        let map = lock(&self.sessions);
        for id in ids {
            if let Some(n) = map.get(id) {
                n.notify_waiters();
            }
        }
    }

    /// Marks a long-poll as waiting until the guard drops.
    pub fn poll_waiting(&self) -> PollGuard<'_> {
        self.waiting_polls.fetch_add(1, Ordering::Relaxed);
        PollGuard(self)
    }

    /// Lease long-polls waiting right now (for tests and metrics).
    pub fn waiting_polls(&self) -> usize {
        self.waiting_polls.load(Ordering::Relaxed)
    }

    /// Number of sessions someone waits on (for tests).
    pub fn watched_sessions(&self) -> usize {
        lock(&self.sessions).len()
    }
}

/// Interest in one session; removes its map entry when the last watcher goes.
pub struct SessionWatch {
    hub: Arc<Hub>,
    id: Uuid,
    notify: Arc<Notify>,
}

impl SessionWatch {
    pub fn notify(&self) -> &Notify {
        &self.notify
    }
}

impl Drop for SessionWatch {
    fn drop(&mut self) {
        let mut map = lock(&self.hub.sessions);
        // The map holds one reference and we hold one: we are the last watcher.
        // (Clones are only made under this lock, so the count is stable here.)
        if Arc::strong_count(&self.notify) == 2 {
            map.remove(&self.id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn session_watch_wakes_and_cleans_up() {
        let hub = Hub::new();
        let id = Uuid::new_v4();
        let a = hub.watch_session(id);
        let b = hub.watch_session(id);
        assert_eq!(hub.watched_sessions(), 1);
        {
            let notified = a.notify().notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            hub.sessions_finished(&[id]);
            notified.await;
        }
        drop(a);
        assert_eq!(hub.watched_sessions(), 1);
        drop(b);
        assert_eq!(hub.watched_sessions(), 0);
    }

    #[tokio::test]
    async fn location_wake_reaches_enabled_waiters() {
        let hub = Hub::new();
        let id = Uuid::new_v4();
        let n = hub.location(id);
        let notified = n.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        hub.wake_locations(&[id]);
        notified.await;
    }
}
