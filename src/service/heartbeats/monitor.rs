//! One heartbeat monitor as the engine holds it in memory, and its transitions: a ping,
//! a missed deadline, a configuration change. Pure: no I/O, times are arguments.

use uuid::Uuid;

use crate::model::heartbeat::{HeartbeatState, Timer, classify};
use crate::service::store::{HeartbeatRow, TimerWrite};

/// A heartbeat monitor.
#[derive(Debug, Clone, PartialEq)]
pub struct Monitor {
    pub check_id: Uuid,
    pub account_id: Uuid,
    pub name: String,
    pub tags: Vec<String>,
    pub token: String,
    pub activated: bool,
    pub muted: bool,
    pub period_ms: i64,
    pub grace_ms: i64,
    /// When the running timer started; `None`: waiting for the first ping.
    pub timer_started_at: Option<i64>,
    /// An alert was raised and no ping arrived since.
    pub failing: bool,
    pub last_ping_at: Option<i64>,
}

/// What a ping did to a monitor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PingEffects {
    /// The deadline had already passed unseen (the evaluator had not come round to
    /// it): the monitor failed at this time before the ping arrived.
    pub failed_at: Option<i64>,
    /// The state of the ping.
    pub state: HeartbeatState,
    /// The ping ended a failure.
    pub recovered: bool,
}

impl Monitor {
    /// The monitor of a stored row at `now`, and whether its timer had to change: a
    /// deactivated monitor has no timer, and a timer started with another period than
    /// the configured one restarts at `now` (a change not yet applied, e.g. across a
    /// crash).
    pub fn from_row(row: &HeartbeatRow, now: i64) -> (Monitor, bool) {
        let mut m = Monitor {
            check_id: row.check_id,
            account_id: row.account_id,
            name: row.name.clone(),
            tags: row.tags.clone(),
            token: row.token.clone(),
            activated: row.activated,
            muted: row.muted,
            period_ms: row.period_ms,
            grace_ms: row.grace_ms,
            timer_started_at: row.timer_started_at,
            failing: row.failing,
            last_ping_at: row.last_ping_at,
        };
        let before = m.timer_write();
        if !m.activated {
            m.disarm();
        } else if m.timer_started_at.is_some() && row.timer_period_ms != Some(row.period_ms) {
            m.timer_started_at = Some(now);
        }
        let changed = m.timer_write() != before || row.timer_period_ms != before.timer_period_ms;
        (m, changed)
    }

    /// The running timer, if any.
    pub fn timer(&self) -> Option<Timer> {
        self.timer_started_at.map(|started_at| Timer {
            started_at,
            period_ms: self.period_ms,
            grace_ms: self.grace_ms,
        })
    }

    /// When the monitor alerts next (it alerts once `now > deadline`): only while it is
    /// activated, its timer runs and it is not failing already.
    pub fn deadline(&self) -> Option<i64> {
        if !self.activated || self.failing {
            return None;
        }
        self.timer().map(|t| t.deadline())
    }

    fn fail(&mut self, deadline: i64) {
        self.failing = true;
        // Every alert restarts the timer.
        self.timer_started_at = Some(deadline);
    }

    fn disarm(&mut self) {
        self.timer_started_at = None;
        self.failing = false;
    }

    /// A ping at `at`. Pings of a deactivated monitor are RECEIVED and start nothing.
    pub fn on_ping(&mut self, at: i64) -> PingEffects {
        let mut failed_at = None;
        if let Some(deadline) = self.deadline()
            && at > deadline
        {
            self.fail(deadline);
            failed_at = Some(deadline);
        }
        if !self.activated {
            self.last_ping_at = Some(self.last_ping_at.map_or(at, |l| l.max(at)));
            return PingEffects {
                failed_at,
                state: HeartbeatState::Received,
                recovered: false,
            };
        }
        let state = classify(self.timer(), self.failing, at);
        let recovered = self.failing;
        self.failing = false;
        // Pings of one batch may arrive a millisecond out of order: the timer never
        // moves back.
        self.timer_started_at = Some(self.timer_started_at.map_or(at, |s| s.max(at)));
        self.last_ping_at = Some(self.last_ping_at.map_or(at, |l| l.max(at)));
        PingEffects {
            failed_at,
            state,
            recovered,
        }
    }

    /// The evaluator at `now`: if the deadline passed without a ping, the monitor fails
    /// (returns the deadline, the time of the FAILING event).
    pub fn on_time(&mut self, now: i64) -> Option<i64> {
        let deadline = self.deadline()?;
        if now > deadline {
            self.fail(deadline);
            Some(deadline)
        } else {
            None
        }
    }

    /// The configuration of `row` replaces this one at `now`. Deactivation stops the
    /// timer (and ends a failure: a deactivated monitor is not failing); a reactivated
    /// monitor waits for its first ping again; a new period restarts a running timer
    /// at `now`. Returns whether the timer columns changed.
    pub fn reconfigure(&mut self, row: &HeartbeatRow, now: i64) -> bool {
        let before = self.timer_write();
        self.name = row.name.clone();
        self.tags = row.tags.clone();
        self.token = row.token.clone();
        self.muted = row.muted;
        self.grace_ms = row.grace_ms;
        if !row.activated {
            self.disarm();
        }
        if row.period_ms != self.period_ms && self.timer_started_at.is_some() {
            self.timer_started_at = Some(now);
        }
        self.period_ms = row.period_ms;
        self.activated = row.activated;
        self.timer_write() != before
    }

    /// Whether this monitor differs from `before` only by pings: the same failing
    /// flag, period and armed-ness, and a timer that (if running) started at the last
    /// ping. Such a state is what the store derives from the stored timer columns of
    /// `before` and the newest ping event, so it needs no timer write.
    pub fn timer_follows_pings_since(&self, before: &Monitor) -> bool {
        let (now, then) = (self.timer_write(), before.timer_write());
        now.failing == then.failing
            && now.timer_period_ms == then.timer_period_ms
            && now.timer_started_at.is_some() == then.timer_started_at.is_some()
            && (now.timer_started_at.is_none() || now.timer_started_at == now.last_ping_at)
    }

    /// The timer columns to store.
    pub fn timer_write(&self) -> TimerWrite {
        TimerWrite {
            check_id: self.check_id,
            timer_started_at: self.timer_started_at,
            timer_period_ms: self.timer_started_at.map(|_| self.period_ms),
            failing: self.failing,
            last_ping_at: self.last_ping_at,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: i64 = 60_000;

    fn row() -> HeartbeatRow {
        HeartbeatRow {
            check_id: Uuid::new_v4(),
            account_id: Uuid::new_v4(),
            name: "job".into(),
            activated: true,
            muted: false,
            tags: vec![],
            token: "t".into(),
            period_ms: 10 * MIN,
            grace_ms: MIN,
            timer_started_at: None,
            timer_period_ms: None,
            failing: false,
            last_ping_at: None,
        }
    }

    #[test]
    fn first_ping_starts_the_timer_and_a_miss_fails_once() {
        let (mut m, changed) = Monitor::from_row(&row(), 0);
        assert!(!changed);
        assert_eq!(m.deadline(), None);
        assert_eq!(m.on_time(100 * MIN), None);
        let fx = m.on_ping(0);
        assert_eq!(fx.state, HeartbeatState::Received);
        assert_eq!(m.deadline(), Some(11 * MIN));
        assert_eq!(m.on_time(11 * MIN), None);
        assert_eq!(m.on_time(11 * MIN + 1), Some(11 * MIN));
        assert!(m.failing);
        assert_eq!(m.deadline(), None);
        assert_eq!(m.on_time(1000 * MIN), None);
        let fx = m.on_ping(12 * MIN);
        assert_eq!(fx.state, HeartbeatState::Late);
        assert!(fx.recovered);
        assert_eq!(m.deadline(), Some(23 * MIN));
    }

    #[test]
    fn a_late_ping_before_the_evaluator_fails_then_recovers() {
        let (mut m, _) = Monitor::from_row(&row(), 0);
        m.on_ping(0);
        let fx = m.on_ping(11 * MIN + 5);
        assert_eq!(fx.failed_at, Some(11 * MIN));
        assert_eq!(fx.state, HeartbeatState::Late);
        assert!(fx.recovered);
        assert!(!m.failing);
    }

    #[test]
    fn config_changes_restart_or_stop_the_timer() {
        let (mut m, _) = Monitor::from_row(&row(), 0);
        m.on_ping(0);
        let mut r = row();
        r.period_ms = 20 * MIN;
        assert!(m.reconfigure(&r, 5 * MIN));
        assert_eq!(m.deadline(), Some(26 * MIN));
        // Same period: the timer keeps running.
        assert!(!m.reconfigure(&r, 7 * MIN));
        r.activated = false;
        assert!(m.reconfigure(&r, 8 * MIN));
        assert_eq!(m.deadline(), None);
        assert_eq!(m.on_ping(9 * MIN).state, HeartbeatState::Received);
        assert_eq!(m.deadline(), None);
        r.activated = true;
        m.reconfigure(&r, 10 * MIN);
        assert_eq!(m.deadline(), None);
        m.on_ping(12 * MIN);
        assert_eq!(m.deadline(), Some(33 * MIN));
    }

    #[test]
    fn only_pings_of_a_running_timer_skip_the_timer_write() {
        let (fresh, _) = Monitor::from_row(&row(), 0);
        let mut m = fresh.clone();
        m.on_ping(MIN);
        // The first ping arms the timer: written.
        assert!(!m.timer_follows_pings_since(&fresh));
        let armed = m.clone();
        m.on_ping(2 * MIN);
        assert!(m.timer_follows_pings_since(&armed));
        // A miss, and the ping after it: failing changes, written.
        let before = m.clone();
        assert!(m.on_time(100 * MIN).is_some());
        assert!(!m.timer_follows_pings_since(&before));
        let failing = m.clone();
        m.on_ping(101 * MIN);
        assert!(!m.timer_follows_pings_since(&failing));
        // Pings of a deactivated monitor move no timer.
        let mut r = row();
        r.activated = false;
        let (off, _) = Monitor::from_row(&r, 0);
        let mut m = off.clone();
        m.on_ping(MIN);
        assert!(m.timer_follows_pings_since(&off));
    }

    #[test]
    fn stored_timer_of_another_period_restarts_at_load() {
        let mut r = row();
        r.timer_started_at = Some(0);
        r.timer_period_ms = Some(5 * MIN);
        let (m, changed) = Monitor::from_row(&r, 3 * MIN);
        assert!(changed);
        assert_eq!(m.timer_started_at, Some(3 * MIN));
        r.activated = false;
        r.failing = true;
        let (m, changed) = Monitor::from_row(&r, 3 * MIN);
        assert!(changed);
        assert_eq!((m.timer_started_at, m.failing), (None, false));
    }
}
