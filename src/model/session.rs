//! Check sessions: one execution of a check across its run locations, and how the
//! results of those locations add up to the session's status.

use serde::{Deserialize, Serialize};

use super::result::RunStatus;

/// Session status as the reference API names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum SessionStatus {
    Started,
    Progress,
    ProgressFailed,
    ProgressDegraded,
    Passed,
    Failed,
    Degraded,
    TimedOut,
    Cancelled,
}

impl SessionStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            SessionStatus::Started => "STARTED",
            SessionStatus::Progress => "PROGRESS",
            SessionStatus::ProgressFailed => "PROGRESS_FAILED",
            SessionStatus::ProgressDegraded => "PROGRESS_DEGRADED",
            SessionStatus::Passed => "PASSED",
            SessionStatus::Failed => "FAILED",
            SessionStatus::Degraded => "DEGRADED",
            SessionStatus::TimedOut => "TIMED_OUT",
            SessionStatus::Cancelled => "CANCELLED",
        }
    }

    pub fn parse(s: &str) -> Option<SessionStatus> {
        serde_json::from_value(serde_json::Value::String(s.to_owned())).ok()
    }

    /// PASSED, FAILED, DEGRADED, TIMED_OUT and CANCELLED never change again.
    pub fn is_final(self) -> bool {
        matches!(
            self,
            SessionStatus::Passed
                | SessionStatus::Failed
                | SessionStatus::Degraded
                | SessionStatus::TimedOut
                | SessionStatus::Cancelled
        )
    }

    /// The status of a session that expects `locations` FINAL results and has these so far.
    /// `None` in `finals` is a location whose run was dropped without a result (timed out).
    ///
    /// STARTED -> PROGRESS / PROGRESS_FAILED / PROGRESS_DEGRADED -> PASSED / FAILED /
    /// DEGRADED / TIMED_OUT. CANCELLED is set by a cancel, never derived.
    pub fn aggregate(locations: usize, finals: &[Option<RunStatus>]) -> SessionStatus {
        let failed = finals.contains(&Some(RunStatus::Failed));
        let degraded = finals.contains(&Some(RunStatus::Degraded));
        let timed_out = finals.iter().any(Option::is_none);
        if finals.len() >= locations && locations > 0 {
            if failed {
                SessionStatus::Failed
            } else if timed_out {
                SessionStatus::TimedOut
            } else if degraded {
                SessionStatus::Degraded
            } else {
                SessionStatus::Passed
            }
        } else if finals.is_empty() {
            SessionStatus::Started
        } else if failed || timed_out {
            SessionStatus::ProgressFailed
        } else if degraded {
            SessionStatus::ProgressDegraded
        } else {
            SessionStatus::Progress
        }
    }
}

/// Why a session exists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum RunSource {
    CliDeploy,
    Deployment,
    DeploymentCacheWarmer,
    Editor,
    GroupRunAll,
    LegacyTrigger,
    Scheduler,
    ScheduleNow,
    TestNoRecord,
    TestRecord,
    TriggerNoRecord,
    TriggerRecord,
    TriggerApi,
}

/// FINAL for the one result per location that counts, ATTEMPT for retried failures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ResultType {
    Final,
    Attempt,
}

#[cfg(test)]
mod tests {
    use super::*;
    use RunStatus::*;

    #[test]
    fn aggregation_follows_the_state_machine() {
        assert_eq!(SessionStatus::aggregate(2, &[]), SessionStatus::Started);
        assert_eq!(
            SessionStatus::aggregate(2, &[Some(Passed)]),
            SessionStatus::Progress
        );
        assert_eq!(
            SessionStatus::aggregate(2, &[Some(Failed)]),
            SessionStatus::ProgressFailed
        );
        assert_eq!(
            SessionStatus::aggregate(2, &[Some(Degraded)]),
            SessionStatus::ProgressDegraded
        );
        assert_eq!(
            SessionStatus::aggregate(2, &[Some(Passed), Some(Passed)]),
            SessionStatus::Passed
        );
        assert_eq!(
            SessionStatus::aggregate(2, &[Some(Degraded), Some(Passed)]),
            SessionStatus::Degraded
        );
        assert_eq!(
            SessionStatus::aggregate(2, &[Some(Degraded), Some(Failed)]),
            SessionStatus::Failed
        );
        assert_eq!(
            SessionStatus::aggregate(1, &[None]),
            SessionStatus::TimedOut
        );
        assert!(SessionStatus::Cancelled.is_final());
        assert!(!SessionStatus::ProgressFailed.is_final());
    }
}
