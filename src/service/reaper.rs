//! The reaper: puts jobs of expired leases back in the queue (waking the location's
//! long-polls), gives up on jobs lost too often or queued too long (a synthetic
//! timed-out FINAL result), and drops expired leases of cancelled sessions.

use std::sync::Arc;
use std::time::Duration;

use super::context::Ctx;
use super::store::{ReapReport, StoreError, now_ms};

/// How often the reaper runs; a dead agent's job is leasable again at most this long
/// after its lease expired.
pub const TICK: Duration = Duration::from_millis(500);
/// A job whose lease expired this many times gets a timed-out result instead of a
/// fourth run.
pub const MAX_EXPIRIES: i64 = 3;
/// Queued jobs no agent took within this time are given up.
pub const QUEUED_MAX_AGE: Duration = Duration::from_secs(6 * 60);

/// One pass at `now`.
pub async fn tick(ctx: &Ctx, now: i64) -> Result<ReapReport, StoreError> {
    let max_age = i64::try_from(QUEUED_MAX_AGE.as_millis()).unwrap_or(i64::MAX / 4);
    if !ctx.store.reap_needed(now, max_age).await? {
        return Ok(ReapReport::default());
    }
    let report = ctx.store.reap(now, MAX_EXPIRIES, max_age).await?;
    ctx.hub.wake_locations(&report.locations);
    ctx.hub.sessions_finished(&report.finished_sessions);
    Ok(report)
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
            Ok(r) if r.requeued + r.timed_out + r.dropped > 0 => tracing::info!(
                requeued = r.requeued,
                timed_out = r.timed_out,
                dropped = r.dropped,
                "reaper: expired leases and stale jobs handled"
            ),
            Ok(_) => {}
            Err(e) => tracing::error!(error = %e, "reaper pass failed"),
        }
    }
}
