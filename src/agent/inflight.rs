//! The table of leases this agent holds: queued (leased, waiting for a slot), running,
//! or reporting (result on its way to the service). Every lease in it is renewed; a
//! lease leaves it when its result got a final outcome, when it is lost, released or
//! aborted. All phase changes happen under one lock, so a job never starts after the
//! drain began or after its lease was lost.

use std::collections::HashMap;
use std::sync::Mutex;

use tokio::sync::Notify;
use tokio::task::AbortHandle;

use super::state::lock;
use crate::model::Pool;
use crate::protocol::LeaseRef;

/// Where a leased job is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Queued,
    Running,
    Reporting,
}

struct Entry {
    pool: Pool,
    phase: Phase,
    task: Option<AbortHandle>,
}

#[derive(Default)]
struct Inner {
    entries: HashMap<LeaseRef, Entry>,
    draining: bool,
}

/// In-flight leases plus a notification of freed worker slots.
#[derive(Default)]
pub struct LeaseTable {
    inner: Mutex<Inner>,
    changed: Notify,
}

impl LeaseTable {
    pub fn new() -> LeaseTable {
        LeaseTable::default()
    }

    /// Adds a lease in `phase` (Queued for a job to run, Reporting for an error result).
    pub fn insert(&self, lease: LeaseRef, pool: Pool, phase: Phase) {
        lock(&self.inner).entries.insert(
            lease,
            Entry {
                pool,
                phase,
                task: None,
            },
        );
    }

    /// Remembers the task running `lease`, so that losing the lease can stop it.
    pub fn set_task(&self, lease: LeaseRef, task: AbortHandle) {
        if let Some(e) = lock(&self.inner).entries.get_mut(&lease) {
            e.task = Some(task);
        }
    }

    /// Queued -> Running. False if the lease is gone (lost) or the agent is draining.
    pub fn try_start(&self, lease: LeaseRef) -> bool {
        let mut inner = lock(&self.inner);
        if inner.draining {
            return false;
        }
        match inner.entries.get_mut(&lease) {
            Some(e) if e.phase == Phase::Queued => {
                e.phase = Phase::Running;
                true
            }
            _ => false,
        }
    }

    /// Running -> Reporting. False if the lease was lost or aborted meanwhile: then the
    /// result must be dropped.
    pub fn finish(&self, lease: LeaseRef) -> bool {
        match lock(&self.inner).entries.get_mut(&lease) {
            Some(e) if e.phase == Phase::Running => {
                e.phase = Phase::Reporting;
                e.task = None;
                true
            }
            _ => false,
        }
    }

    /// The result of `lease` got a final outcome: stop renewing it.
    pub fn settle(&self, lease: LeaseRef) {
        lock(&self.inner).entries.remove(&lease);
    }

    /// The service says these leases are gone: forget them and abort their tasks.
    /// Returns the leases whose queued or running job was cancelled.
    pub fn lose(&self, leases: &[LeaseRef]) -> Vec<LeaseRef> {
        let mut cancelled = Vec::new();
        {
            let mut inner = lock(&self.inner);
            for lease in leases {
                if let Some(e) = inner.entries.remove(lease) {
                    if let Some(task) = e.task {
                        task.abort();
                    }
                    if e.phase != Phase::Reporting {
                        cancelled.push(*lease);
                    }
                }
            }
        }
        self.notify();
        cancelled
    }

    /// Starts the drain: no job starts any more; queued jobs are removed and their
    /// tasks aborted. Returns their leases, to be released.
    pub fn drain_queued(&self) -> Vec<LeaseRef> {
        let released = self.take_phase(Phase::Queued);
        self.notify();
        released
    }

    /// Aborts running jobs (grace period over). Returns their leases, to be released.
    pub fn abort_running(&self) -> Vec<LeaseRef> {
        let aborted = self.take_phase(Phase::Running);
        self.notify();
        aborted
    }

    /// Aborts every queued and running job (fatal stop).
    pub fn abort_all(&self) {
        self.take_phase(Phase::Queued);
        self.take_phase(Phase::Running);
        self.notify();
    }

    /// Removes every lease in `phase`, aborting its task, and marks the table draining.
    fn take_phase(&self, phase: Phase) -> Vec<LeaseRef> {
        let mut inner = lock(&self.inner);
        inner.draining = true;
        let leases: Vec<LeaseRef> = inner
            .entries
            .iter()
            .filter(|(_, e)| e.phase == phase)
            .map(|(l, _)| *l)
            .collect();
        for lease in &leases {
            if let Some(task) = inner.entries.remove(lease).and_then(|e| e.task) {
                task.abort();
            }
        }
        leases
    }

    /// Leases queued in `pool`: leased but holding no worker slot yet.
    pub fn queued(&self, pool: Pool) -> usize {
        lock(&self.inner)
            .entries
            .values()
            .filter(|e| e.pool == pool && e.phase == Phase::Queued)
            .count()
    }

    /// Jobs queued or running (not yet reporting).
    pub fn active(&self) -> usize {
        lock(&self.inner)
            .entries
            .values()
            .filter(|e| e.phase != Phase::Reporting)
            .count()
    }

    /// Every lease to renew.
    pub fn all(&self) -> Vec<LeaseRef> {
        lock(&self.inner).entries.keys().copied().collect()
    }

    pub fn len(&self) -> usize {
        lock(&self.inner).entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn phase(&self, lease: LeaseRef) -> Option<Phase> {
        lock(&self.inner).entries.get(&lease).map(|e| e.phase)
    }

    /// Wakes whoever waits for a slot or for jobs to end.
    pub fn notify(&self) {
        self.changed.notify_waiters();
    }

    /// A future that resolves at the next [`LeaseTable::notify`]; create it (and
    /// `enable` it) before checking the condition it waits for.
    pub fn changed(&self) -> tokio::sync::futures::Notified<'_> {
        self.changed.notified()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use uuid::Uuid;

    fn lease() -> LeaseRef {
        LeaseRef {
            job_id: Uuid::new_v4(),
            lease_id: Uuid::new_v4(),
        }
    }

    #[test]
    fn phases_and_drain() {
        let t = LeaseTable::new();
        let (a, b, c) = (lease(), lease(), lease());
        t.insert(a, Pool::Uptime, Phase::Queued);
        t.insert(b, Pool::Uptime, Phase::Queued);
        t.insert(c, Pool::Heavy, Phase::Reporting);
        assert_eq!(t.queued(Pool::Uptime), 2);
        assert_eq!(t.queued(Pool::Heavy), 0);
        assert!(t.try_start(a));
        assert!(!t.try_start(a), "already running");
        assert_eq!(t.drain_queued(), vec![b]);
        assert!(!t.try_start(b), "released jobs never start");
        assert_eq!(t.abort_running(), vec![a]);
        assert!(!t.finish(a), "an aborted job's result is dropped");
        assert_eq!(t.all(), vec![c]);
        t.settle(c);
        assert!(t.is_empty());
    }

    #[test]
    fn lost_leases_cancel_jobs() {
        let t = LeaseTable::new();
        let (a, b) = (lease(), lease());
        t.insert(a, Pool::Uptime, Phase::Queued);
        t.insert(b, Pool::Uptime, Phase::Queued);
        assert!(t.try_start(a));
        t.insert(lease(), Pool::Uptime, Phase::Reporting);
        let mut lost = t.lose(&[a, b]);
        lost.sort_by_key(|l| l.job_id);
        let mut expected = vec![a, b];
        expected.sort_by_key(|l| l.job_id);
        assert_eq!(lost, expected);
        assert!(!t.finish(a));
        assert!(!t.try_start(b));
        assert_eq!(t.len(), 1);
    }
}
