//! The state of a service shown on a status page, derived from the latest outcome of
//! each active check linked to it (`triggerIncident.serviceId`).
//!
//! A check's outcome is its heartbeat state for heartbeat monitors (failing or not),
//! otherwise the status of its latest finished session: PASSED passes, DEGRADED is
//! degraded, FAILED and TIMED_OUT fail; CANCELLED, no session yet, and deactivated
//! checks say nothing. Then:
//! - **Operational**: every check that says something passed.
//! - **Degraded**: some fail or are degraded, but not all of them fail.
//! - **Down**: every check that says something fails.
//! - **Unknown**: no check says anything (none linked, none active, none ran yet).

use crate::service::store::ServiceCheck;

/// What a visitor is told about one service.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ServiceState {
    Operational,
    Unknown,
    Degraded,
    Down,
}

/// One check's latest outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Pass,
    Degraded,
    Fail,
}

impl ServiceState {
    /// CSS class and machine-readable name.
    pub fn as_str(self) -> &'static str {
        match self {
            ServiceState::Operational => "operational",
            ServiceState::Degraded => "degraded",
            ServiceState::Down => "down",
            ServiceState::Unknown => "unknown",
        }
    }

    /// What the visitor reads.
    pub fn label(self) -> &'static str {
        match self {
            ServiceState::Operational => "Operational",
            ServiceState::Degraded => "Degraded",
            ServiceState::Down => "Down",
            ServiceState::Unknown => "Unknown",
        }
    }

    /// The legend shown under the cards.
    pub fn meaning(self) -> &'static str {
        match self {
            ServiceState::Operational => "every active check of the service passed its latest run",
            ServiceState::Degraded => {
                "some checks of the service failed or were degraded in their latest run, not all failed"
            }
            ServiceState::Down => "every active check of the service failed its latest run",
            ServiceState::Unknown => "no active check of the service has reported a result yet",
        }
    }

    pub const ALL: [ServiceState; 4] = [
        ServiceState::Operational,
        ServiceState::Degraded,
        ServiceState::Down,
        ServiceState::Unknown,
    ];
}

fn outcome(c: &ServiceCheck) -> Option<Outcome> {
    if !c.activated {
        return None;
    }
    if let Some(failing) = c.heartbeat_failing {
        return Some(if failing {
            Outcome::Fail
        } else {
            Outcome::Pass
        });
    }
    match c.last_status.as_deref()? {
        "PASSED" => Some(Outcome::Pass),
        "DEGRADED" => Some(Outcome::Degraded),
        "FAILED" | "TIMED_OUT" => Some(Outcome::Fail),
        _ => None,
    }
}

/// The state of a service from its linked checks.
pub fn service_state<'a>(checks: impl IntoIterator<Item = &'a ServiceCheck>) -> ServiceState {
    let outcomes: Vec<Outcome> = checks.into_iter().filter_map(outcome).collect();
    if outcomes.is_empty() {
        ServiceState::Unknown
    } else if outcomes.iter().all(|o| *o == Outcome::Fail) {
        ServiceState::Down
    } else if outcomes.iter().all(|o| *o == Outcome::Pass) {
        ServiceState::Operational
    } else {
        ServiceState::Degraded
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use uuid::Uuid;

    fn check(status: Option<&str>, activated: bool, heartbeat: Option<bool>) -> ServiceCheck {
        ServiceCheck {
            service_id: Uuid::nil(),
            check_id: Uuid::new_v4(),
            check_name: "c".into(),
            check_type: "URL".into(),
            activated,
            last_status: status.map(str::to_owned),
            last_finished_at: None,
            heartbeat_failing: heartbeat,
        }
    }

    #[test]
    fn states_follow_the_latest_outcomes() {
        assert_eq!(service_state(&[]), ServiceState::Unknown);
        assert_eq!(
            service_state(&[check(None, true, None)]),
            ServiceState::Unknown
        );
        assert_eq!(
            service_state(&[check(Some("FAILED"), false, None)]),
            ServiceState::Unknown
        );
        assert_eq!(
            service_state(&[check(Some("PASSED"), true, None), check(None, true, None)]),
            ServiceState::Operational
        );
        assert_eq!(
            service_state(&[
                check(Some("PASSED"), true, None),
                check(Some("FAILED"), true, None)
            ]),
            ServiceState::Degraded
        );
        assert_eq!(
            service_state(&[check(Some("DEGRADED"), true, None)]),
            ServiceState::Degraded
        );
        assert_eq!(
            service_state(&[
                check(Some("TIMED_OUT"), true, None),
                check(None, true, Some(true))
            ]),
            ServiceState::Down
        );
        assert_eq!(
            service_state(&[check(None, true, Some(false))]),
            ServiceState::Operational
        );
    }
}
