//! The JSON answers of settled check sessions, kept in memory: a session that is final
//! (PASSED, FAILED, DEGRADED, TIMED_OUT, CANCELLED) and has no job left never changes
//! again (results arrive only for existing jobs; a final status is never recomputed),
//! so `GET /v1|v2/check-sessions/{id}` and its completion endpoint answer it without a
//! query.
//!
//! - Only deleting its check removes a session: every such commit bumps
//!   `Store::session_deletions`; an answer is kept only if that counter did not move
//!   during the read that produced it, and a change of the counter empties the cache.
//! - An answer belongs to its account: another account's request misses and gets the
//!   store's 404.
//! - Bounded: at most [`MAX_ENTRIES`] answers and [`MAX_BYTES`] of them; the oldest
//!   kept goes first.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use axum::body::Bytes;
use uuid::Uuid;

/// Most answers kept.
pub const MAX_ENTRIES: usize = 10_000;
/// Most bytes of answers kept.
pub const MAX_BYTES: usize = 16 * 1024 * 1024;

struct Entry {
    account_id: Uuid,
    body: Bytes,
}

#[derive(Default)]
struct Inner {
    /// `Store::session_deletions` the entries were read under.
    deletions: u64,
    by_id: HashMap<Uuid, Entry>,
    /// Ids in the order they were kept (the oldest first).
    order: VecDeque<Uuid>,
    bytes: usize,
}

impl Inner {
    /// Empties the cache if sessions were deleted since its entries were read.
    fn sync(&mut self, deletions: u64) {
        if self.deletions != deletions {
            self.by_id.clear();
            self.order.clear();
            self.bytes = 0;
            self.deletions = deletions;
        }
    }
}

/// Settled sessions' answers by session id.
#[derive(Default)]
pub struct FinalSessions {
    inner: Mutex<Inner>,
}

impl FinalSessions {
    /// The kept answer of session `id` of `account_id`; `deletions` is the store's
    /// current `session_deletions`.
    pub fn get(&self, account_id: Uuid, id: Uuid, deletions: u64) -> Option<Bytes> {
        let mut inner = self.inner.lock().ok()?;
        inner.sync(deletions);
        let e = inner.by_id.get(&id)?;
        (e.account_id == account_id).then(|| e.body.clone())
    }

    /// Keeps the answer of a settled session read while `session_deletions` was
    /// `deletions` before the read and `now` after it (kept only if they are equal).
    pub fn put(&self, account_id: Uuid, id: Uuid, body: Bytes, deletions: u64, now: u64) {
        if deletions != now || body.len() > MAX_BYTES {
            return;
        }
        let Ok(mut inner) = self.inner.lock() else {
            return;
        };
        inner.sync(now);
        if inner.by_id.contains_key(&id) {
            return;
        }
        while inner.by_id.len() >= MAX_ENTRIES || inner.bytes + body.len() > MAX_BYTES {
            let Some(old) = inner.order.pop_front() else {
                break;
            };
            if let Some(e) = inner.by_id.remove(&old) {
                inner.bytes -= e.body.len();
            }
        }
        inner.bytes += body.len();
        inner.order.push_back(id);
        inner.by_id.insert(id, Entry { account_id, body });
    }

    /// How many answers are kept (for tests).
    pub fn len(&self) -> usize {
        self.inner.lock().map(|i| i.by_id.len()).unwrap_or(0)
    }

    /// Whether nothing is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_belong_to_their_account_and_go_with_deletions() {
        let c = FinalSessions::default();
        let (account, other, id) = (Uuid::new_v4(), Uuid::new_v4(), Uuid::new_v4());
        c.put(account, id, Bytes::from("{}"), 0, 0);
        assert_eq!(c.get(account, id, 0).as_deref(), Some(&b"{}"[..]));
        assert!(c.get(other, id, 0).is_none());
        // A check deleted since: gone, and a read that straddled a deletion keeps nothing.
        assert!(c.get(account, id, 1).is_none());
        c.put(account, id, Bytes::from("{}"), 1, 2);
        assert!(c.get(account, id, 2).is_none());
        assert!(c.is_empty());
    }

    #[test]
    fn bounded_by_count_and_bytes_oldest_first() {
        let c = FinalSessions::default();
        let account = Uuid::new_v4();
        let ids: Vec<Uuid> = (0..MAX_ENTRIES + 5).map(|_| Uuid::new_v4()).collect();
        for id in &ids {
            c.put(account, *id, Bytes::from_static(b"x"), 0, 0);
        }
        assert_eq!(c.len(), MAX_ENTRIES);
        assert!(c.get(account, ids[0], 0).is_none());
        assert!(c.get(account, ids[MAX_ENTRIES + 4], 0).is_some());
        let big = Bytes::from(vec![b'y'; MAX_BYTES / 2 + 1]);
        let (a, b) = (Uuid::new_v4(), Uuid::new_v4());
        c.put(account, a, big.clone(), 0, 0);
        c.put(account, b, big, 0, 0);
        assert!(c.get(account, a, 0).is_none(), "no room for both");
        assert!(c.get(account, b, 0).is_some());
    }
}
