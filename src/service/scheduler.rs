//! The scheduler: every activated check runs once per interval on each of its
//! locations. A check's runs sit at a stable phase inside its interval (a hash of its
//! id), so checks of the same frequency are spread out instead of firing together.
//! `next_run_at` is persisted, so a restart neither repeats nor doubles a run.

use std::sync::Arc;
use std::time::Duration;

use sha2::{Digest, Sha256};
use uuid::Uuid;

use super::context::Ctx;
use super::store::{StoreError, now_ms};

/// How often the loop looks for due checks.
pub const TICK: Duration = Duration::from_millis(250);
/// Most checks started per pass (the rest follow on the next pass).
pub const BATCH: i64 = 5000;

/// Where in its interval a check runs: a stable value in `0..interval_ms`.
pub fn phase_ms(check_id: Uuid, interval_ms: i64) -> i64 {
    if interval_ms <= 1 {
        return 0;
    }
    let digest = Sha256::digest(check_id.as_bytes());
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    let h = u64::from_be_bytes(first);
    // interval_ms > 1 here, so the cast and the remainder are in range.
    i64::try_from(h % interval_ms.unsigned_abs()).unwrap_or(0)
}

/// The first run time of the check strictly after `after_ms`.
pub fn next_slot(check_id: Uuid, interval_ms: i64, after_ms: i64) -> i64 {
    let interval = interval_ms.max(1);
    let phase = phase_ms(check_id, interval);
    let slot = after_ms - after_ms.rem_euclid(interval) + phase;
    if slot > after_ms {
        slot
    } else {
        slot + interval
    }
}

/// One pass at `now`: starts a session for every due check; returns how many.
pub async fn tick(ctx: &Ctx, now: i64) -> Result<usize, StoreError> {
    if ctx.store.earliest_schedule().await?.is_none_or(|t| t > now) {
        return Ok(0);
    }
    let mut started = 0;
    loop {
        let runs = ctx.store.run_due_schedules(now, BATCH).await?;
        ctx.hub.wake_locations(&runs.locations);
        started += runs.sessions;
        if runs.sessions < usize::try_from(BATCH).unwrap_or(usize::MAX) {
            return Ok(started);
        }
    }
}

/// Runs passes until the service drains.
pub async fn run(ctx: Arc<Ctx>) {
    let mut interval = tokio::time::interval(TICK);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = ctx.stop.draining() => return,
            _ = interval.tick() => {}
        }
        match tick(&ctx, now_ms()).await {
            Ok(0) => {}
            Ok(n) => tracing::debug!(sessions = n, "scheduler started check sessions"),
            Err(e) => tracing::error!(error = %e, "scheduler pass failed"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_stable_and_spread() {
        let id = Uuid::new_v4();
        let interval = 60_000;
        let a = next_slot(id, interval, 1_000_000);
        assert!(a > 1_000_000 && a <= 1_000_000 + interval);
        assert_eq!(a.rem_euclid(interval), phase_ms(id, interval));
        assert_eq!(next_slot(id, interval, a), a + interval);
        assert_eq!(next_slot(id, interval, a - 1), a);
        let phases: std::collections::HashSet<i64> = (0..50)
            .map(|_| phase_ms(Uuid::new_v4(), interval) / 1000)
            .collect();
        assert!(phases.len() > 20, "phases cluster: {phases:?}");
    }
}
