//! The write generation: lets caches of views derived from the database (the HTML
//! status pages) know whether a view read earlier is still current, without a query.
//!
//! One value, kept by the single write connection (`conn.rs`, `Writer` and its guard):
//! - the connection is handed to a user (`acquired`): the low bit is set ("a write may
//!   be in progress"), so no view read from now on counts as current;
//! - it comes back (`released`, when the guard is dropped): the value moves to the next
//!   even number, a new generation.
//!
//! The bit matters because a view read while a write is in progress may predate its
//! commit, and the writer may answer its client before the view's reader stores it, so
//! a view read while the bit is set is never treated as current. A view read at an even value `g` is current while the
//! value is still `g`: no write connection was handed out since, so nothing was
//! committed that its queries could miss.
//!
//! A holder that writes only rows no cached view reads (plain heartbeat pings: rows of
//! `heartbeat_events`) calls `quiet` right after getting the connection: the bit is
//! cleared again and its release does not start a new generation, so pings do not
//! invalidate status pages.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// See the module documentation.
#[derive(Debug, Default)]
pub(super) struct Generation {
    value: AtomicU64,
    /// Set by a quiet holder; its release consumes it.
    quiet: AtomicBool,
}

const BUSY: u64 = 1;

impl Generation {
    /// The write connection is handed to a user (or was just opened).
    pub(super) fn acquired(&self) {
        self.value.fetch_or(BUSY, Ordering::AcqRel);
    }

    /// The write connection was given back.
    pub(super) fn released(&self) {
        if self.quiet.swap(false, Ordering::AcqRel) {
            return;
        }
        // From odd (busy) to the next even value; from even (a hook that ran without
        // its `acquired`) to the even value after next: always a new generation.
        let _ = self
            .value
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |v| {
                Some((v | BUSY).wrapping_add(1))
            });
    }

    /// Called by the current holder of the write connection that will write nothing any
    /// cached view reads: back to the generation before it got the connection, and its
    /// release keeps it.
    pub(super) fn quiet(&self) {
        self.quiet.store(true, Ordering::Release);
        self.value.fetch_and(!BUSY, Ordering::AcqRel);
    }

    /// `Some(g)` when no write may be in progress; `None` otherwise.
    pub(super) fn current(&self) -> Option<u64> {
        let v = self.value.load(Ordering::Acquire);
        (v & BUSY == 0).then_some(v)
    }
}

#[cfg(test)]
mod tests {
    use super::Generation;

    #[test]
    fn writes_start_generations_and_hide_them_while_in_progress() {
        let g = Generation::default();
        let start = g.current().unwrap();
        g.acquired();
        assert_eq!(g.current(), None, "a write may be in progress");
        g.released();
        let after = g.current().unwrap();
        assert_ne!(after, start);
        // A quiet holder keeps the generation.
        g.acquired();
        g.quiet();
        assert_eq!(g.current(), Some(after));
        g.released();
        assert_eq!(g.current(), Some(after));
        // The next ordinary write starts a new one again.
        g.acquired();
        g.released();
        assert_ne!(g.current(), Some(after));
        // A release without its acquire (a connection opened by the pool on its own)
        // still moves on.
        let before = g.current().unwrap();
        g.released();
        assert_ne!(g.current(), Some(before));
        assert!(g.current().is_some());
    }
}
