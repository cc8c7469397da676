//! The queue of error reports waiting to be sent: bounded (the oldest report gives way,
//! counted), and de-duplicated by event and message: an occurrence of a report still
//! waiting only raises its count, and one whose report left less than a window ago is
//! counted aside and reported once, with that count, when its window closes. Pure
//! logic on a caller-supplied clock, so the rules are tested without waiting.

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};

use crate::agent::events::names;
use crate::protocol::ErrorReport;

/// Most distinct (event, message) pairs whose window is remembered; beyond it new pairs
/// are queued without de-duplication until windows close.
const MAX_WINDOWS: usize = 1024;

/// (event, message).
type Key = (String, String);

/// One occurrence of an error event, already scrubbed and cut to size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Occurrence {
    pub event: String,
    pub message: String,
    pub backtrace: Option<String>,
    pub at: DateTime<Utc>,
}

/// Occurrences counted while their pair's window is open.
#[derive(Debug, Clone)]
struct Suppressed {
    backtrace: Option<String>,
    first_seen_at: DateTime<Utc>,
    last_seen_at: DateTime<Utc>,
    count: u32,
}

/// The window of a pair: opened when its report was queued.
#[derive(Debug, Clone)]
struct Window {
    opened: Instant,
    suppressed: Option<Suppressed>,
}

/// Reports dropped because the queue was full.
#[derive(Debug, Clone, Copy)]
struct Dropped {
    count: u64,
    first_at: DateTime<Utc>,
    last_at: DateTime<Utc>,
}

/// The waiting reports.
#[derive(Debug)]
pub struct ReportQueue {
    pending: VecDeque<ErrorReport>,
    windows: HashMap<Key, Window>,
    capacity: usize,
    window: Duration,
    dropped: Option<Dropped>,
}

impl ReportQueue {
    /// A queue of at most `capacity` reports (at least one) that reports a repeated
    /// error at most once per `window`.
    pub fn new(capacity: usize, window: Duration) -> ReportQueue {
        ReportQueue {
            pending: VecDeque::new(),
            windows: HashMap::new(),
            capacity: capacity.max(1),
            window,
            dropped: None,
        }
    }

    /// Reports waiting (the dropped-reports report aside).
    pub fn len(&self) -> usize {
        self.pending.len()
    }

    pub fn is_empty(&self) -> bool {
        self.pending.is_empty() && self.dropped.is_none()
    }

    /// Reports dropped so far and not yet reported.
    pub fn dropped(&self) -> u64 {
        self.dropped.map_or(0, |d| d.count)
    }

    /// Adds one occurrence at `now`.
    pub fn record(&mut self, occurrence: Occurrence, now: Instant) {
        let Occurrence {
            event,
            message,
            backtrace,
            at,
        } = occurrence;
        if let Some(waiting) = self
            .pending
            .iter_mut()
            .find(|r| r.event == event && r.message == message)
        {
            waiting.count = waiting.count.saturating_add(1);
            waiting.last_seen_at = waiting.last_seen_at.max(at);
            return;
        }
        let key = (event, message);
        if let Some(window) = self.windows.get_mut(&key)
            && now < window.opened + self.window
        {
            let aside = window.suppressed.get_or_insert(Suppressed {
                backtrace,
                first_seen_at: at,
                last_seen_at: at,
                count: 0,
            });
            aside.count = aside.count.saturating_add(1);
            aside.last_seen_at = aside.last_seen_at.max(at);
            return;
        }
        self.forget_closed_windows(now);
        if self.windows.len() < MAX_WINDOWS || self.windows.contains_key(&key) {
            self.windows.insert(
                key.clone(),
                Window {
                    opened: now,
                    suppressed: None,
                },
            );
        }
        let (event, message) = key;
        self.push(ErrorReport {
            event,
            message,
            backtrace,
            first_seen_at: at,
            last_seen_at: at,
            count: 1,
        });
    }

    /// Counts `n` reports lost before they reached the queue (at `at`).
    pub fn add_dropped(&mut self, n: u64, at: DateTime<Utc>) {
        self.merge_dropped(n, at, at);
    }

    fn merge_dropped(&mut self, n: u64, first_at: DateTime<Utc>, last_at: DateTime<Utc>) {
        if n == 0 {
            return;
        }
        let d = self.dropped.get_or_insert(Dropped {
            count: 0,
            first_at,
            last_at,
        });
        d.count = d.count.saturating_add(n);
        d.first_at = d.first_at.min(first_at);
        d.last_at = d.last_at.max(last_at);
    }

    /// The earliest instant a window with counted repeats closes.
    pub fn next_due(&self) -> Option<Instant> {
        self.windows
            .values()
            .filter(|w| w.suppressed.is_some())
            .map(|w| w.opened + self.window)
            .min()
    }

    /// Whether a report can be taken at `now`: one waits, or a window with repeats closed.
    pub fn ready(&self, now: Instant) -> bool {
        !self.is_empty() || self.next_due().is_some_and(|due| due <= now)
    }

    /// Takes up to `max` reports, oldest first: the repeats of closed windows become
    /// reports first, and a report of dropped reports leads the batch.
    pub fn take(&mut self, max: usize, now: Instant) -> Vec<ErrorReport> {
        self.promote_closed_windows(now);
        let mut batch = Vec::new();
        if max == 0 {
            return batch;
        }
        if let Some(d) = self.dropped.take() {
            batch.push(dropped_report(d, self.capacity));
        }
        while batch.len() < max {
            match self.pending.pop_front() {
                Some(r) => batch.push(r),
                None => break,
            }
        }
        batch
    }

    /// Closes every window now: their counted repeats become reports (at shutdown, so
    /// that no count is lost).
    pub fn close_windows(&mut self) {
        self.promote_windows(|_| true, None);
    }

    /// Puts back a batch that could not be sent, ahead of newer reports; what no longer
    /// fits is dropped (counted) from the oldest.
    pub fn requeue(&mut self, batch: Vec<ErrorReport>) {
        for report in batch.into_iter().rev() {
            if report.event == names::REPORTS_DROPPED {
                let n = u64::from(report.count);
                self.merge_dropped(n, report.first_seen_at, report.last_seen_at);
                continue;
            }
            if self.pending.len() >= self.capacity {
                self.add_dropped(u64::from(report.count.max(1)), report.last_seen_at);
                continue;
            }
            self.pending.push_front(report);
        }
    }

    /// Appends a report, dropping the oldest when full.
    fn push(&mut self, report: ErrorReport) {
        if self.pending.len() >= self.capacity
            && let Some(oldest) = self.pending.pop_front()
        {
            self.add_dropped(u64::from(oldest.count.max(1)), report.first_seen_at);
        }
        self.pending.push_back(report);
    }

    /// Windows that closed with repeats become reports (and open a new window).
    fn promote_closed_windows(&mut self, now: Instant) {
        let window = self.window;
        self.promote_windows(|w| now >= w.opened + window, Some(now));
    }

    /// The counted repeats of the windows `closed` picks become reports; their windows
    /// open again at `reopen` (if given).
    fn promote_windows(&mut self, closed: impl Fn(&Window) -> bool, reopen: Option<Instant>) {
        let mut due: Vec<(Key, Suppressed)> = Vec::new();
        for (key, w) in &mut self.windows {
            if closed(w)
                && let Some(aside) = w.suppressed.take()
            {
                if let Some(at) = reopen {
                    w.opened = at;
                }
                due.push((key.clone(), aside));
            }
        }
        due.sort_by_key(|(_, aside)| aside.first_seen_at);
        for ((event, message), aside) in due {
            self.push(ErrorReport {
                event,
                message,
                backtrace: aside.backtrace,
                first_seen_at: aside.first_seen_at,
                last_seen_at: aside.last_seen_at,
                count: aside.count,
            });
        }
    }

    /// Forgets windows that closed without repeats.
    fn forget_closed_windows(&mut self, now: Instant) {
        let window = self.window;
        self.windows
            .retain(|_, w| w.suppressed.is_some() || now < w.opened + window);
    }
}

fn dropped_report(d: Dropped, capacity: usize) -> ErrorReport {
    ErrorReport {
        event: names::REPORTS_DROPPED.to_owned(),
        message: format!(
            "{} error reports were dropped: more were waiting than the agent keeps ({capacity})",
            d.count
        ),
        backtrace: None,
        first_seen_at: d.first_at,
        last_seen_at: d.last_at,
        count: u32::try_from(d.count).unwrap_or(u32::MAX),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const WINDOW: Duration = Duration::from_secs(60);

    fn occ(event: &str, message: &str) -> Occurrence {
        Occurrence {
            event: event.to_owned(),
            message: message.to_owned(),
            backtrace: None,
            at: Utc::now(),
        }
    }

    #[test]
    fn repeats_of_a_waiting_report_raise_its_count() {
        let t0 = Instant::now();
        let mut q = ReportQueue::new(10, WINDOW);
        q.record(occ("a", "boom"), t0);
        q.record(occ("a", "boom"), t0);
        q.record(occ("a", "other"), t0);
        q.record(occ("b", "boom"), t0);
        let batch = q.take(10, t0);
        let seen: Vec<(&str, &str, u32)> = batch
            .iter()
            .map(|r| (r.event.as_str(), r.message.as_str(), r.count))
            .collect();
        assert_eq!(
            seen,
            [("a", "boom", 2), ("a", "other", 1), ("b", "boom", 1)]
        );
        assert!(q.is_empty());
    }

    #[test]
    fn repeats_after_sending_are_reported_once_when_the_window_closes() {
        let t0 = Instant::now();
        let mut q = ReportQueue::new(10, WINDOW);
        q.record(occ("a", "boom"), t0);
        assert_eq!(q.take(10, t0).len(), 1);
        for i in 1..=5 {
            q.record(occ("a", "boom"), t0 + Duration::from_secs(i));
        }
        assert!(q.is_empty(), "repeats inside the window wait");
        assert!(!q.ready(t0 + Duration::from_secs(59)));
        assert_eq!(q.next_due(), Some(t0 + WINDOW));
        assert!(q.take(10, t0 + Duration::from_secs(59)).is_empty());
        let t1 = t0 + WINDOW;
        assert!(q.ready(t1));
        let batch = q.take(10, t1);
        assert_eq!(batch.len(), 1);
        assert_eq!(batch[0].count, 5);
        // A new window opened when they were reported.
        q.record(occ("a", "boom"), t1 + Duration::from_secs(1));
        assert!(q.is_empty());
        // Once a window closes without repeats, the next occurrence is reported at once.
        let t2 = t1 + WINDOW + WINDOW;
        assert_eq!(q.take(10, t2).len(), 1, "the repeat of the second window");
        q.record(occ("a", "boom"), t2 + WINDOW + Duration::from_secs(1));
        assert_eq!(q.len(), 1);
    }

    #[test]
    fn closing_the_windows_at_shutdown_reports_every_count() {
        let t0 = Instant::now();
        let mut q = ReportQueue::new(10, WINDOW);
        q.record(occ("a", "boom"), t0);
        q.record(occ("b", "bang"), t0);
        assert_eq!(q.take(10, t0).len(), 2);
        q.record(occ("a", "boom"), t0 + Duration::from_secs(1));
        q.record(occ("a", "boom"), t0 + Duration::from_secs(2));
        assert!(q.take(10, t0 + Duration::from_secs(3)).is_empty());
        q.close_windows();
        let batch = q.take(10, t0 + Duration::from_secs(3));
        assert_eq!(batch.len(), 1, "b had no repeats");
        assert_eq!((batch[0].event.as_str(), batch[0].count), ("a", 2));
    }

    #[test]
    fn a_full_queue_drops_the_oldest_and_says_how_many() {
        let t0 = Instant::now();
        let mut q = ReportQueue::new(3, WINDOW);
        for i in 0..5 {
            q.record(occ("e", &format!("m{i}")), t0);
        }
        assert_eq!(q.len(), 3);
        assert_eq!(q.dropped(), 2);
        let batch = q.take(10, t0);
        assert_eq!(batch[0].event, names::REPORTS_DROPPED);
        assert_eq!(batch[0].count, 2);
        let kept: Vec<&str> = batch[1..].iter().map(|r| r.message.as_str()).collect();
        assert_eq!(kept, ["m2", "m3", "m4"]);
        assert_eq!(q.dropped(), 0);
    }

    #[test]
    fn batches_are_bounded_and_failed_batches_go_back_first() {
        let t0 = Instant::now();
        let mut q = ReportQueue::new(4, WINDOW);
        for i in 0..3 {
            q.record(occ("e", &format!("m{i}")), t0);
        }
        let first = q.take(2, t0);
        assert_eq!(first.len(), 2);
        q.record(occ("e", "m3"), t0);
        q.record(occ("e", "m4"), t0);
        q.requeue(first);
        // Capacity 4: m0 m1 back in front of m2 m3 m4 -> the oldest (m0) gives way.
        let all = q.take(10, t0);
        assert_eq!(all[0].event, names::REPORTS_DROPPED);
        assert_eq!(all[0].count, 1);
        let messages: Vec<&str> = all[1..].iter().map(|r| r.message.as_str()).collect();
        assert_eq!(messages, ["m1", "m2", "m3", "m4"]);
    }

    #[test]
    fn the_window_table_is_bounded() {
        let t0 = Instant::now();
        let mut q = ReportQueue::new(10, WINDOW);
        for i in 0..(MAX_WINDOWS + 50) {
            q.record(occ("e", &format!("m{i}")), t0);
            let _ = q.take(10, t0);
        }
        assert!(q.windows.len() <= MAX_WINDOWS);
        // Once windows close they are forgotten.
        q.record(occ("e", "late"), t0 + WINDOW);
        assert_eq!(q.windows.len(), 1);
    }
}
