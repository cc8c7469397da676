//! Retry delays for talking to the service: exponential with full jitter between a
//! floor and a ceiling, reset only after a healthy exchange.

use std::time::Duration;

/// Floor of every retry delay.
pub const MIN_DELAY: Duration = Duration::from_secs(1);
/// Ceiling of every retry delay.
pub const MAX_DELAY: Duration = Duration::from_secs(30);

/// Exponential backoff: after `n` consecutive failures the next delay is drawn uniformly
/// from `[min, min(max, min * 2^n)]`.
#[derive(Debug, Clone)]
pub struct Backoff {
    min: Duration,
    max: Duration,
    failures: u32,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff::new(MIN_DELAY, MAX_DELAY)
    }
}

impl Backoff {
    pub fn new(min: Duration, max: Duration) -> Backoff {
        Backoff {
            min,
            max: max.max(min),
            failures: 0,
        }
    }

    /// Records one more failure and returns how long to wait before the next attempt.
    pub fn next_delay(&mut self) -> Duration {
        let ceiling = self.ceiling();
        self.failures = self.failures.saturating_add(1);
        if ceiling <= self.min {
            return self.min;
        }
        let lo = self.min.as_millis() as u64;
        let hi = ceiling.as_millis() as u64;
        Duration::from_millis(rand::random_range(lo..=hi))
    }

    /// The upper bound of the next delay.
    pub fn ceiling(&self) -> Duration {
        let factor = 1u32.checked_shl(self.failures.min(31)).unwrap_or(u32::MAX);
        self.min.saturating_mul(factor).min(self.max)
    }

    /// Consecutive failures since the last reset.
    pub fn failures(&self) -> u32 {
        self.failures
    }

    /// A healthy exchange happened: start again from the floor.
    pub fn reset(&mut self) {
        self.failures = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_to_the_ceiling_and_stays_within_bounds() {
        let mut b = Backoff::default();
        assert_eq!(b.next_delay(), MIN_DELAY, "the first retry waits the floor");
        for _ in 0..100 {
            let d = b.next_delay();
            assert!(d >= MIN_DELAY && d <= MAX_DELAY, "{d:?}");
        }
        assert_eq!(b.ceiling(), MAX_DELAY);
        assert_eq!(b.failures(), 101);
    }

    #[test]
    fn resets_only_when_told() {
        let mut b = Backoff::default();
        for _ in 0..6 {
            b.next_delay();
        }
        assert_eq!(b.ceiling(), MAX_DELAY);
        // More failures do not reset it.
        b.next_delay();
        assert_eq!(b.ceiling(), MAX_DELAY);
        b.reset();
        assert_eq!(b.failures(), 0);
        assert_eq!(b.ceiling(), MIN_DELAY);
        assert_eq!(b.next_delay(), MIN_DELAY);
        assert_eq!(b.ceiling(), MIN_DELAY * 2);
    }

    #[test]
    fn jitter_spreads_delays() {
        let mut seen = std::collections::HashSet::new();
        for _ in 0..50 {
            let mut b = Backoff::default();
            for _ in 0..5 {
                b.next_delay();
            }
            seen.insert(b.next_delay());
        }
        assert!(seen.len() > 1, "delays should be jittered: {seen:?}");
    }
}
