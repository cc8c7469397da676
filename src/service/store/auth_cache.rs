//! Answers of key lookups kept in memory: the SHA-256 of a presented API or agent key ->
//! its account or location, and the hashes of keys that were refused. Only hashes are
//! kept, never a key.
//!
//! Staying correct:
//! - **This process's changes** (a key created or revoked, a location deleted) clear
//!   the cache right after their commit (`AuthCache::invalidate`), before the change
//!   is answered.
//! - **Other processes' changes** (`outpost admin` on the same database): triggers
//!   (migration `0009_key_revision.sql`) bump `key_revision.revision` in the same
//!   transaction as any change to keys, locations or accounts. A watcher
//!   ([`Store::watch_key_revisions`]) reads it every [`POLL`] and clears the cache when
//!   it changed. The cache answers only while the last successful read *started* less
//!   than [`FRESH`] ago: a change committed by another process is seen within `POLL`
//!   plus one read, and never later than `FRESH`, even when the watcher stalls or fails
//!   (lookups then go to the database). Without a watcher (the admin CLI, tests on a
//!   bare store) nothing is answered from memory.
//! - **Lookups racing a change**: an answer is kept only if no clearing happened since
//!   the lookup began (the epoch), so a lookup that read a key just before its
//!   revocation cannot put it back.
//! - **Unknown keys stay cheap**: tokens that are not shaped like our keys never reach
//!   the database (`keys::well_formed`); refused hashes are remembered (a client
//!   retrying a revoked key costs no query); at most [`LOOKUPS`] lookups run at once,
//!   so a flood of random well-formed keys cannot take the read connections from the rest of
//!   the service. A refused hash only ever refuses: it never lets a request through,
//!   and every clearing forgets it (keys become valid only by creation, which clears).

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::{Notify, Semaphore, SemaphorePermit};
use uuid::Uuid;

use super::locations::LocationAuth;
use super::{Store, StoreError};

/// How often the watcher reads the key revision.
pub const POLL: Duration = Duration::from_millis(100);
/// The cache answers only while the last successful revision read started less than
/// this long ago: the longest a change made by another process can go unseen.
pub const FRESH: Duration = Duration::from_secs(1);
/// Most known keys kept (beyond it, an arbitrary one is forgotten).
pub const MAX_KNOWN: usize = 20_000;
/// Most refused key hashes kept.
pub const MAX_REFUSED: usize = 10_000;
/// Most key lookups in the database at once.
pub const LOOKUPS: usize = 2;

/// Who a key identifies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Principal {
    Account(Uuid),
    Location(LocationAuth),
}

/// What the cache says of a key hash.
enum Cached {
    Known(Principal),
    Refused,
    /// Not known: look it up and keep the answer with this epoch.
    Miss(u64),
}

#[derive(Default)]
struct State {
    /// Bumped by every clearing.
    epoch: u64,
    /// The key revision read last.
    revision: Option<i64>,
    known: HashMap<[u8; 32], Principal>,
    refused: HashSet<[u8; 32]>,
}

pub(super) struct AuthCache {
    origin: Instant,
    /// When the last successful revision read started, in milliseconds after
    /// `origin`, plus one; 0 before the first.
    confirmed: AtomicU64,
    state: Mutex<State>,
    lookups: Semaphore,
    /// Successful revision reads so far, and their wake-up.
    confirms: AtomicU64,
    confirmed_notify: Notify,
}

impl AuthCache {
    pub(super) fn new() -> AuthCache {
        AuthCache {
            origin: Instant::now(),
            confirmed: AtomicU64::new(0),
            state: Mutex::new(State::default()),
            lookups: Semaphore::new(LOOKUPS),
            confirms: AtomicU64::new(0),
            confirmed_notify: Notify::new(),
        }
    }

    fn millis(&self, at: Instant) -> u64 {
        u64::try_from(at.saturating_duration_since(self.origin).as_millis()).unwrap_or(u64::MAX)
    }

    /// Whether, at `now`, the last revision read is recent enough for the cache to
    /// answer.
    fn fresh_at(&self, now: Instant) -> bool {
        let confirmed = self.confirmed.load(Ordering::Acquire);
        let fresh_ms = u64::try_from(FRESH.as_millis()).unwrap_or(u64::MAX);
        confirmed != 0 && self.millis(now).saturating_add(1).saturating_sub(confirmed) < fresh_ms
    }

    fn get(&self, hash: &[u8; 32]) -> Cached {
        let fresh = self.fresh_at(Instant::now());
        let Ok(state) = self.state.lock() else {
            return Cached::Miss(u64::MAX);
        };
        if fresh {
            if let Some(p) = state.known.get(hash) {
                return Cached::Known(p.clone());
            }
            if state.refused.contains(hash) {
                return Cached::Refused;
            }
        }
        Cached::Miss(state.epoch)
    }

    /// Keeps the answer of a lookup that began at `epoch`, unless a clearing happened
    /// since.
    fn keep(&self, epoch: u64, hash: [u8; 32], found: Option<&Principal>) {
        let Ok(mut state) = self.state.lock() else {
            return;
        };
        if state.epoch != epoch {
            return;
        }
        match found {
            Some(p) => {
                evict_one(&mut state.known, MAX_KNOWN);
                state.known.insert(hash, p.clone());
            }
            None => {
                if state.refused.len() >= MAX_REFUSED
                    && let Some(old) = state.refused.iter().next().copied()
                {
                    state.refused.remove(&old);
                }
                state.refused.insert(hash);
            }
        }
    }

    /// Forgets everything; lookups in flight keep nothing.
    pub(super) fn invalidate(&self) {
        if let Ok(mut state) = self.state.lock() {
            clear(&mut state);
        }
    }

    /// The watcher read `revision` with a read that started at `started`.
    fn confirm(&self, revision: i64, started: Instant) {
        let Ok(mut state) = self.state.lock() else {
            return;
        };
        if state.revision != Some(revision) {
            if state.revision.is_some() {
                tracing::debug!("keys changed in the database: key cache cleared");
            }
            clear(&mut state);
            state.revision = Some(revision);
        }
        // Cleared (if needed) before the cache counts as fresh again.
        self.confirmed
            .fetch_max(self.millis(started).saturating_add(1), Ordering::AcqRel);
        drop(state);
        self.confirms.fetch_add(1, Ordering::AcqRel);
        self.confirmed_notify.notify_waiters();
    }

    /// Resolves after two more successful revision reads: the second began after this
    /// was called, so the cache has seen every key change committed before.
    async fn synced(&self) {
        let target = self.confirms.load(Ordering::Acquire) + 2;
        loop {
            let notified = self.confirmed_notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.confirms.load(Ordering::Acquire) >= target {
                return;
            }
            notified.await;
        }
    }

    async fn permit(&self) -> Option<SemaphorePermit<'_>> {
        self.lookups.acquire().await.ok()
    }

    /// The principal of a key hash: from memory, or from `lookup` (kept).
    pub(super) async fn resolve<F, Fut>(
        &self,
        hash: [u8; 32],
        lookup: F,
    ) -> Result<Option<Principal>, StoreError>
    where
        F: FnOnce([u8; 32]) -> Fut,
        Fut: Future<Output = Result<Option<Principal>, StoreError>>,
    {
        if let Some(answer) = self.answered(&hash) {
            return Ok(answer);
        }
        let _permit = self.permit().await;
        // Answered meanwhile by the lookup this one waited for?
        let epoch = match self.get(&hash) {
            Cached::Known(p) => return Ok(Some(p)),
            Cached::Refused => return Ok(None),
            Cached::Miss(epoch) => epoch,
        };
        let found = lookup(hash).await?;
        self.keep(epoch, hash, found.as_ref());
        Ok(found)
    }

    /// `Some(answer)` when memory answers.
    fn answered(&self, hash: &[u8; 32]) -> Option<Option<Principal>> {
        match self.get(hash) {
            Cached::Known(p) => Some(Some(p)),
            Cached::Refused => Some(None),
            Cached::Miss(_) => None,
        }
    }
}

fn clear(state: &mut State) {
    state.epoch = state.epoch.wrapping_add(1);
    state.known.clear();
    state.refused.clear();
}

/// Makes room for one more entry.
fn evict_one<V>(map: &mut HashMap<[u8; 32], V>, max: usize) {
    if map.len() >= max
        && let Some(old) = map.keys().next().copied()
    {
        map.remove(&old);
    }
}

impl Store {
    /// Resolves once the key revision watcher has seen every key change committed
    /// before the call (it never resolves without a watcher). For tests that need
    /// keys answered from memory.
    pub async fn key_cache_synced(&self) {
        self.inner.auth.synced().await
    }

    /// Reads the key revision every [`POLL`] until `stop` resolves, clearing the key
    /// cache when another process changed keys (see the module documentation). Runs
    /// in `outpost serve`; without it the cache answers nothing.
    pub async fn watch_key_revisions(&self, stop: impl Future<Output = ()>) {
        tokio::pin!(stop);
        let mut tick = tokio::time::interval(POLL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut failing = false;
        loop {
            tokio::select! {
                _ = &mut stop => return,
                _ = tick.tick() => {}
            }
            let started = Instant::now();
            let read: Result<i64, StoreError> = async {
                let mut conn = self.read().await?;
                Ok(
                    sqlx::query_scalar("SELECT revision FROM key_revision WHERE id = 1")
                        .fetch_one(&mut *conn)
                        .await?,
                )
            }
            .await;
            match read {
                Ok(revision) => {
                    self.inner.auth.confirm(revision, started);
                    if failing {
                        tracing::info!("key revision readable again: key cache in use");
                        failing = false;
                    }
                }
                Err(e) => {
                    if !failing {
                        tracing::warn!(error = %e, "cannot read the key revision: keys are looked up in the database until it works again");
                        failing = true;
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(n: u8) -> [u8; 32] {
        [n; 32]
    }

    #[test]
    fn nothing_is_answered_before_the_first_revision_read() {
        let c = AuthCache::new();
        let Cached::Miss(epoch) = c.get(&h(1)) else {
            panic!("answered without a revision read");
        };
        c.keep(epoch, h(1), Some(&Principal::Account(Uuid::nil())));
        assert!(c.answered(&h(1)).is_none());
        // The first read starts from nothing: what was kept before it is forgotten.
        c.confirm(7, Instant::now());
        assert!(c.answered(&h(1)).is_none());
        let Cached::Miss(epoch) = c.get(&h(1)) else {
            panic!()
        };
        c.keep(epoch, h(1), Some(&Principal::Account(Uuid::nil())));
        assert_eq!(
            c.answered(&h(1)),
            Some(Some(Principal::Account(Uuid::nil())))
        );
    }

    #[test]
    fn a_changed_revision_or_an_invalidation_clears_and_voids_lookups_in_flight() {
        let c = AuthCache::new();
        c.confirm(1, Instant::now());
        let Cached::Miss(epoch) = c.get(&h(1)) else {
            panic!()
        };
        c.keep(epoch, h(1), None);
        assert_eq!(c.answered(&h(1)), Some(None), "refused hashes are kept");
        // A lookup begins, then another process changes keys.
        let Cached::Miss(in_flight) = c.get(&h(2)) else {
            panic!()
        };
        c.confirm(2, Instant::now());
        assert!(c.answered(&h(1)).is_none(), "cleared");
        c.keep(in_flight, h(2), Some(&Principal::Account(Uuid::nil())));
        assert!(
            c.answered(&h(2)).is_none(),
            "the older lookup keeps nothing"
        );
        // The same for this process's own changes.
        let Cached::Miss(in_flight) = c.get(&h(3)) else {
            panic!()
        };
        c.invalidate();
        c.keep(in_flight, h(3), Some(&Principal::Account(Uuid::nil())));
        assert!(c.answered(&h(3)).is_none());
        // An unchanged revision keeps what is known.
        let Cached::Miss(epoch) = c.get(&h(4)) else {
            panic!()
        };
        c.keep(epoch, h(4), Some(&Principal::Account(Uuid::nil())));
        c.confirm(2, Instant::now());
        assert!(c.answered(&h(4)).is_some());
    }

    #[test]
    fn answers_stop_when_the_last_revision_read_is_too_old() {
        let c = AuthCache::new();
        assert!(!c.fresh_at(Instant::now()));
        let started = Instant::now();
        c.confirm(1, started);
        assert!(c.fresh_at(started));
        assert!(c.fresh_at(started + FRESH - Duration::from_millis(2)));
        assert!(!c.fresh_at(started + FRESH));
        // A later read moves it on; an older one (out of order) does not move it back.
        c.confirm(1, started + FRESH);
        assert!(c.fresh_at(started + FRESH));
        c.confirm(1, started);
        assert!(c.fresh_at(started + FRESH + Duration::from_millis(10)));
    }

    #[test]
    fn sizes_are_bounded() {
        let c = AuthCache::new();
        c.confirm(1, Instant::now());
        for i in 0..(MAX_REFUSED + 10) {
            let mut hash = [0u8; 32];
            hash[..8].copy_from_slice(&(i as u64).to_le_bytes());
            let Cached::Miss(epoch) = c.get(&hash) else {
                panic!()
            };
            c.keep(epoch, hash, None);
        }
        let state = c.state.lock().unwrap();
        assert_eq!(state.refused.len(), MAX_REFUSED);
    }
}
