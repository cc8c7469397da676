//! Time as the heartbeat engine and the ping address see it: the system clock in
//! production, a hand-moved clock in tests (so that a 365-day period is tested in
//! microseconds). Times are store milliseconds since the Unix epoch.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

/// A source of the current time that can also wait for a moment to come.
pub trait Clock: Send + Sync + 'static {
    /// Milliseconds since the Unix epoch.
    fn now_ms(&self) -> i64;

    /// Resolves at `at_ms` or somewhat earlier (never much later); callers look at
    /// [`Clock::now_ms`] again when it resolves.
    fn sleep_until(&self, at_ms: i64) -> Pin<Box<dyn Future<Output = ()> + Send + '_>>;
}

/// The longest single sleep of [`SystemClock`]: wall-clock jumps are noticed within it.
const MAX_SLEEP: Duration = Duration::from_secs(5);

/// The system's wall clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> i64 {
        chrono::Utc::now().timestamp_millis()
    }

    fn sleep_until(&self, at_ms: i64) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        let wait = u64::try_from(at_ms.saturating_sub(self.now_ms())).unwrap_or(0);
        let wait = Duration::from_millis(wait).min(MAX_SLEEP);
        Box::pin(tokio::time::sleep(wait))
    }
}

/// A clock that moves only when told to; sleepers wake when it passes their time.
#[derive(Debug, Clone)]
pub struct ManualClock {
    now: Arc<watch::Sender<i64>>,
}

impl ManualClock {
    /// A clock showing `start_ms`.
    pub fn new(start_ms: i64) -> ManualClock {
        let (now, _) = watch::channel(start_ms);
        ManualClock { now: Arc::new(now) }
    }

    /// A clock showing the current system time.
    pub fn starting_now() -> ManualClock {
        ManualClock::new(SystemClock.now_ms())
    }

    /// Moves the clock forward by `by`.
    pub fn advance(&self, by: Duration) {
        let by = i64::try_from(by.as_millis()).unwrap_or(i64::MAX / 4);
        self.now.send_modify(|now| *now = now.saturating_add(by));
    }

    /// Sets the clock (forward or back).
    pub fn set(&self, at_ms: i64) {
        self.now.send_replace(at_ms);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> i64 {
        *self.now.borrow()
    }

    fn sleep_until(&self, at_ms: i64) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        let mut rx = self.now.subscribe();
        Box::pin(async move {
            // The sender lives as long as `self`, so `wait_for` only fails if it is
            // dropped, and then there is nothing left to wait for.
            let _ = rx.wait_for(|now| *now >= at_ms).await;
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn manual_clock_wakes_sleepers_when_moved() {
        let clock = ManualClock::new(1_000);
        let sleeper = clock.clone();
        let woke = tokio::spawn(async move {
            sleeper.sleep_until(5_000).await;
            sleeper.now_ms()
        });
        clock.advance(Duration::from_millis(1_000));
        assert_eq!(clock.now_ms(), 2_000);
        clock.advance(Duration::from_millis(3_500));
        assert_eq!(woke.await.unwrap(), 5_500);
        // A time already passed resolves at once.
        clock.sleep_until(10).await;
    }
}
