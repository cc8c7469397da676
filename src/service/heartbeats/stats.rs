//! Success ratios of heartbeat monitors (`HeartbeatStats`, `/availability`).
//!
//! The entities of a window are the monitor's events in it: every recorded ping and
//! every FAILING event (one per missed deadline). The success ratio is the percentage
//! (0 to 100) of those entities that are pings in time (EARLY, RECEIVED or GRACE); LATE
//! pings (the recovery after a failure) and FAILING events are not. A window without
//! entities has a ratio of 100 (nothing failed). Windows are `(end - length, end]`; the
//! previous period is the window of the same length just before.

use serde_json::{Value, json};
use uuid::Uuid;

use crate::model::heartbeat::DAY_MS;
use crate::service::store::{EventCounts, Store, StoreError};

/// The success ratio of counted events, in percent.
pub fn success_ratio(counts: EventCounts) -> f64 {
    if counts.total <= 0 {
        100.0
    } else {
        100.0 * counts.successes as f64 / counts.total as f64
    }
}

/// `{successRatio: {currentPeriod, previousPeriod}, totalEntitiesCurrentPeriod}` of the
/// window ending at `end` (exclusive start `end - length_ms`) and the one before it.
pub async fn availability(
    store: &Store,
    check_id: Uuid,
    end: i64,
    length_ms: i64,
) -> Result<Value, StoreError> {
    let start = end.saturating_sub(length_ms);
    let current = store.heartbeat_event_counts(check_id, start, end).await?;
    let previous = store
        .heartbeat_event_counts(check_id, start.saturating_sub(length_ms), start)
        .await?;
    Ok(json!({
        "successRatio": {
            "previousPeriod": success_ratio(previous),
            "currentPeriod": success_ratio(current),
        },
        "totalEntitiesCurrentPeriod": current.total,
    }))
}

/// `{last24Hours, last7Days}` at `now`.
pub async fn event_stats(store: &Store, check_id: Uuid, now: i64) -> Result<Value, StoreError> {
    Ok(json!({
        "last24Hours": availability(store, check_id, now, DAY_MS).await?,
        "last7Days": availability(store, check_id, now, 7 * DAY_MS).await?,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratios_are_percentages_of_entities() {
        assert_eq!(success_ratio(EventCounts::default()), 100.0);
        assert_eq!(
            success_ratio(EventCounts {
                total: 4,
                successes: 3
            }),
            75.0
        );
        assert_eq!(
            success_ratio(EventCounts {
                total: 3,
                successes: 0
            }),
            0.0
        );
    }
}
