//! Heartbeat monitors: the units of their period and grace, their limits, the states of
//! their events, and how a ping is classified against the monitor's timer.
//!
//! The timer (see the reference README): the first ping starts it; every ping or alert
//! restarts it; deactivating the monitor or changing its period restarts it too. While
//! it runs, a ping is expected by `expected_at = started_at + period` and the monitor
//! alerts when none arrived by `deadline = expected_at + grace` (a ping exactly at the
//! deadline is still in time).
//!
//! Event states ([`classify`]):
//! - `RECEIVED`: the ping that starts the timer, or a ping between half a period after
//!   the timer started and `expected_at` (both included);
//! - `EARLY`: a ping less than half a period after the timer started;
//! - `GRACE`: after `expected_at`, up to and including the deadline;
//! - `LATE`: after the deadline, or while the monitor is failing (the recovery ping);
//! - `FAILING`: not a ping: the event recorded when the deadline passed without one.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::check::ValidationError;

/// Milliseconds in a day.
pub const DAY_MS: i64 = 24 * 60 * 60 * 1000;
/// Shortest period: 30 seconds.
pub const MIN_PERIOD_MS: i64 = 30_000;
/// Longest period: 365 days.
pub const MAX_PERIOD_MS: i64 = 365 * DAY_MS;
/// Longest grace: 365 days (the shortest is 0).
pub const MAX_GRACE_MS: i64 = 365 * DAY_MS;
/// Longest description of a heartbeat monitor (characters).
pub const MAX_DESCRIPTION_LEN: usize = 500;

/// Unit of a period or a grace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TimeUnit {
    Seconds,
    Minutes,
    Hours,
    Days,
}

impl TimeUnit {
    pub const ALL: [TimeUnit; 4] = [
        TimeUnit::Seconds,
        TimeUnit::Minutes,
        TimeUnit::Hours,
        TimeUnit::Days,
    ];

    /// The name used on the wire, e.g. `minutes`.
    pub fn as_str(self) -> &'static str {
        match self {
            TimeUnit::Seconds => "seconds",
            TimeUnit::Minutes => "minutes",
            TimeUnit::Hours => "hours",
            TimeUnit::Days => "days",
        }
    }

    pub fn parse(s: &str) -> Option<TimeUnit> {
        TimeUnit::ALL.into_iter().find(|u| u.as_str() == s)
    }

    /// Milliseconds in one unit.
    pub fn millis(self) -> i64 {
        match self {
            TimeUnit::Seconds => 1000,
            TimeUnit::Minutes => 60_000,
            TimeUnit::Hours => 3_600_000,
            TimeUnit::Days => DAY_MS,
        }
    }
}

impl std::fmt::Display for TimeUnit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The `heartbeat` object of a heartbeat check: `{period, periodUnit, grace, graceUnit}`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HeartbeatConfig {
    pub period: f64,
    pub period_unit: TimeUnit,
    pub grace: f64,
    pub grace_unit: TimeUnit,
}

impl HeartbeatConfig {
    /// Parses and validates the `heartbeat` object of a check document. Errors name the
    /// option (`heartbeat.period`, ...) and, for a value out of range, the allowed range
    /// and the value given, e.g. `heartbeat.period: must be between 30 seconds and 365
    /// days (got 10 seconds)`.
    pub fn from_value(value: Option<&Value>) -> Result<HeartbeatConfig, ValidationError> {
        let obj = match value {
            None | Some(Value::Null) => {
                return Err(ValidationError::new("heartbeat", "is required"));
            }
            Some(Value::Object(o)) => o,
            Some(_) => return Err(ValidationError::new("heartbeat", "must be an object")),
        };
        let period_unit = unit(obj.get("periodUnit"), "heartbeat.periodUnit")?;
        let grace_unit = unit(obj.get("graceUnit"), "heartbeat.graceUnit")?;
        let period = amount(obj.get("period"), "heartbeat.period")?;
        let grace = amount(obj.get("grace"), "heartbeat.grace")?;
        let config = HeartbeatConfig {
            period,
            period_unit,
            grace,
            grace_unit,
        };
        in_range(
            "heartbeat.period",
            period,
            period_unit,
            MIN_PERIOD_MS,
            "30 seconds",
            MAX_PERIOD_MS,
        )?;
        in_range(
            "heartbeat.grace",
            grace,
            grace_unit,
            0,
            "0 seconds",
            MAX_GRACE_MS,
        )?;
        Ok(config)
    }

    /// The period in milliseconds (rounded to the millisecond).
    pub fn period_ms(&self) -> i64 {
        to_ms(self.period, self.period_unit)
    }

    /// The grace in milliseconds (rounded to the millisecond).
    pub fn grace_ms(&self) -> i64 {
        to_ms(self.grace, self.grace_unit)
    }
}

fn unit(value: Option<&Value>, field: &str) -> Result<TimeUnit, ValidationError> {
    let names = TimeUnit::ALL.map(TimeUnit::as_str).join(", ");
    match value {
        None | Some(Value::Null) => Err(ValidationError::new(
            field,
            format!("is required (one of {names})"),
        )),
        Some(Value::String(s)) => TimeUnit::parse(s).ok_or_else(|| {
            ValidationError::new(field, format!("must be one of {names} (got {s:?})"))
        }),
        Some(_) => Err(ValidationError::new(
            field,
            format!("must be a string, one of {names}"),
        )),
    }
}

fn amount(value: Option<&Value>, field: &str) -> Result<f64, ValidationError> {
    match value {
        None | Some(Value::Null) => Err(ValidationError::new(field, "is required")),
        Some(Value::Number(n)) => n
            .as_f64()
            .filter(|f| f.is_finite())
            .ok_or_else(|| ValidationError::new(field, "must be a finite number")),
        Some(_) => Err(ValidationError::new(field, "must be a number")),
    }
}

/// A number as people write it: `10`, `1.5`.
pub fn format_amount(value: f64) -> String {
    if value.fract() == 0.0 && value.abs() < 1e15 {
        format!("{}", value as i64)
    } else {
        format!("{value}")
    }
}

fn in_range(
    field: &str,
    value: f64,
    unit: TimeUnit,
    min_ms: i64,
    min_text: &str,
    max_ms: i64,
) -> Result<(), ValidationError> {
    let ms = value * unit.millis() as f64;
    if ms.is_finite() && ms >= min_ms as f64 && ms <= max_ms as f64 {
        return Ok(());
    }
    Err(ValidationError::new(
        field,
        format!(
            "must be between {min_text} and 365 days (got {} {unit})",
            format_amount(value)
        ),
    ))
}

fn to_ms(value: f64, unit: TimeUnit) -> i64 {
    // Validated values are at most 365 days, far inside i64.
    (value * unit.millis() as f64).round() as i64
}

/// State of a heartbeat event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum HeartbeatState {
    Failing,
    Early,
    Received,
    Grace,
    Late,
}

impl HeartbeatState {
    pub const ALL: [HeartbeatState; 5] = [
        HeartbeatState::Failing,
        HeartbeatState::Early,
        HeartbeatState::Received,
        HeartbeatState::Grace,
        HeartbeatState::Late,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            HeartbeatState::Failing => "FAILING",
            HeartbeatState::Early => "EARLY",
            HeartbeatState::Received => "RECEIVED",
            HeartbeatState::Grace => "GRACE",
            HeartbeatState::Late => "LATE",
        }
    }

    pub fn parse(s: &str) -> Option<HeartbeatState> {
        HeartbeatState::ALL.into_iter().find(|st| st.as_str() == s)
    }

    /// Whether the event is a ping in time (EARLY, RECEIVED, GRACE): the successes of
    /// the success ratio.
    pub fn is_success(self) -> bool {
        matches!(
            self,
            HeartbeatState::Early | HeartbeatState::Received | HeartbeatState::Grace
        )
    }
}

impl std::fmt::Display for HeartbeatState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A running timer: started at `started_at` (ms since the epoch) for a period and grace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timer {
    pub started_at: i64,
    pub period_ms: i64,
    pub grace_ms: i64,
}

impl Timer {
    /// When the next ping is expected.
    pub fn expected_at(&self) -> i64 {
        self.started_at.saturating_add(self.period_ms)
    }

    /// The last moment a ping is in time; the monitor alerts after it.
    pub fn deadline(&self) -> i64 {
        self.expected_at().saturating_add(self.grace_ms)
    }

    /// Pings before this moment are EARLY.
    pub fn early_before(&self) -> i64 {
        self.started_at.saturating_add(self.period_ms / 2)
    }
}

/// The state of a ping at `at`, given the monitor's timer (None: not started) and
/// whether it is failing. See the module documentation for the rules.
pub fn classify(timer: Option<Timer>, failing: bool, at: i64) -> HeartbeatState {
    if failing {
        return HeartbeatState::Late;
    }
    let Some(t) = timer else {
        return HeartbeatState::Received;
    };
    if at > t.deadline() {
        HeartbeatState::Late
    } else if at > t.expected_at() {
        HeartbeatState::Grace
    } else if at < t.early_before() {
        HeartbeatState::Early
    } else {
        HeartbeatState::Received
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(v: Value) -> Result<HeartbeatConfig, ValidationError> {
        HeartbeatConfig::from_value(Some(&v))
    }

    #[test]
    fn ranges_name_the_option_and_the_value() {
        let ok =
            parse(json!({"period": 1, "periodUnit": "hours", "grace": 30, "graceUnit": "minutes"}))
                .unwrap();
        assert_eq!(ok.period_ms(), 3_600_000);
        assert_eq!(ok.grace_ms(), 1_800_000);
        let e = parse(
            json!({"period": 10, "periodUnit": "seconds", "grace": 0, "graceUnit": "seconds"}),
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "heartbeat.period: must be between 30 seconds and 365 days (got 10 seconds)"
        );
        let e =
            parse(json!({"period": 366, "periodUnit": "days", "grace": 0, "graceUnit": "seconds"}))
                .unwrap_err();
        assert_eq!(e.field, "heartbeat.period");
        let e = parse(
            json!({"period": 30, "periodUnit": "seconds", "grace": -1, "graceUnit": "seconds"}),
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "heartbeat.grace: must be between 0 seconds and 365 days (got -1 seconds)"
        );
        let e =
            parse(json!({"period": 30, "periodUnit": "weeks", "grace": 0, "graceUnit": "seconds"}))
                .unwrap_err();
        assert_eq!(e.field, "heartbeat.periodUnit");
        let e = parse(
            json!({"period": "30", "periodUnit": "seconds", "grace": 0, "graceUnit": "seconds"}),
        )
        .unwrap_err();
        assert_eq!(e.field, "heartbeat.period");
        let e = parse(json!({"period": 30, "periodUnit": "seconds", "graceUnit": "seconds"}))
            .unwrap_err();
        assert_eq!(e.field, "heartbeat.grace");
        assert_eq!(
            HeartbeatConfig::from_value(None).unwrap_err().field,
            "heartbeat"
        );
        // Both ends are allowed.
        parse(json!({"period": 30, "periodUnit": "seconds", "grace": 365, "graceUnit": "days"}))
            .unwrap();
        parse(json!({"period": 0.5, "periodUnit": "minutes", "grace": 0, "graceUnit": "days"}))
            .unwrap();
    }

    #[test]
    fn classification_follows_the_timer() {
        let t = Timer {
            started_at: 1_000_000,
            period_ms: 60_000,
            grace_ms: 10_000,
        };
        assert_eq!(classify(None, false, 5), HeartbeatState::Received);
        assert_eq!(classify(Some(t), false, 1_000_001), HeartbeatState::Early);
        assert_eq!(classify(Some(t), false, 1_029_999), HeartbeatState::Early);
        assert_eq!(
            classify(Some(t), false, 1_030_000),
            HeartbeatState::Received
        );
        assert_eq!(
            classify(Some(t), false, 1_060_000),
            HeartbeatState::Received
        );
        assert_eq!(classify(Some(t), false, 1_060_001), HeartbeatState::Grace);
        assert_eq!(classify(Some(t), false, 1_070_000), HeartbeatState::Grace);
        assert_eq!(classify(Some(t), false, 1_070_001), HeartbeatState::Late);
        assert_eq!(classify(Some(t), true, 1_030_000), HeartbeatState::Late);
        assert!(HeartbeatState::Grace.is_success());
        assert!(!HeartbeatState::Late.is_success());
        assert_eq!(HeartbeatState::parse("GRACE"), Some(HeartbeatState::Grace));
    }
}
