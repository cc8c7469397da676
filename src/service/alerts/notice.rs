//! An alert notice: what happened to which check, as stored in the outbox and as sent
//! (in this shape) to webhook channels.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::model::{CheckType, HeartbeatState};

/// Kind of a notice (the reference's alert types).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum NoticeKind {
    /// The check started failing (a heartbeat missed its deadline).
    AlertFailure,
    /// The check recovered (a heartbeat pinged again).
    AlertRecovery,
}

impl NoticeKind {
    pub fn as_str(self) -> &'static str {
        match self {
            NoticeKind::AlertFailure => "ALERT_FAILURE",
            NoticeKind::AlertRecovery => "ALERT_RECOVERY",
        }
    }
}

/// One alert notice. Serialized as the JSON body of webhook deliveries.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AlertNotice {
    pub alert_type: NoticeKind,
    /// A one-line human summary, e.g. `Heartbeat "backup" is failing: no ping by ...`.
    pub alert_title: String,
    pub account_id: Uuid,
    pub check_id: Uuid,
    pub check_name: String,
    pub check_type: CheckType,
    pub tags: Vec<String>,
    /// The heartbeat event behind the notice (FAILING, or the recovering ping); also a
    /// key receivers can deduplicate on.
    pub event_id: Uuid,
    pub event_state: HeartbeatState,
    #[serde(with = "millis")]
    pub event_at: DateTime<Utc>,
    #[serde(with = "opt_millis")]
    pub last_ping_at: Option<DateTime<Utc>>,
    /// Failures: the deadline that passed without a ping.
    #[serde(with = "opt_millis")]
    pub deadline_at: Option<DateTime<Utc>>,
}

/// Times as RFC 3339 with milliseconds, like the API's event timestamps.
mod millis {
    use chrono::{DateTime, SecondsFormat, Utc};
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(t: &DateTime<Utc>, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&t.to_rfc3339_opts(SecondsFormat::Millis, true))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<DateTime<Utc>, D::Error> {
        DateTime::<Utc>::deserialize(d)
    }
}

mod opt_millis {
    use chrono::{DateTime, Utc};
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(t: &Option<DateTime<Utc>>, s: S) -> Result<S::Ok, S::Error> {
        match t {
            Some(t) => super::millis::serialize(t, s),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<DateTime<Utc>>, D::Error> {
        Option::<DateTime<Utc>>::deserialize(d)
    }
}

impl AlertNotice {
    /// The outbox form.
    pub fn to_value(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or(serde_json::Value::Null)
    }
}

/// `2030-01-01T00:01:30.000Z`.
fn stamp(t: &DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

impl AlertNotice {
    /// The subject of the notice's e-mail, e.g.
    /// `[Outpost] FAILING: heartbeat "nightly backup" missed its deadline`.
    pub fn email_subject(&self) -> String {
        match self.alert_type {
            NoticeKind::AlertFailure => format!(
                "[Outpost] FAILING: heartbeat {:?} missed its deadline",
                self.check_name
            ),
            NoticeKind::AlertRecovery => format!(
                "[Outpost] RECOVERED: heartbeat {:?} pinged again",
                self.check_name
            ),
        }
    }

    /// The plain-text body of the notice's e-mail: what happened, the monitor, its
    /// state, the deadline and the last ping, and `link` (where the events are seen).
    pub fn email_body(&self, link: Option<&str>) -> String {
        let mut out = String::new();
        let mut line = |label: &str, value: &str| {
            out.push_str(&format!("{label:<11}{value}\n"));
        };
        let none = "none".to_owned();
        let (headline, state) = match self.alert_type {
            NoticeKind::AlertFailure => (
                format!(
                    "Heartbeat monitor {:?} is FAILING: no ping arrived by its deadline.",
                    self.check_name
                ),
                "FAILING".to_owned(),
            ),
            NoticeKind::AlertRecovery => (
                format!(
                    "Heartbeat monitor {:?} has RECOVERED: a ping arrived at {}.",
                    self.check_name,
                    stamp(&self.event_at)
                ),
                format!("RECOVERED (the ping was {})", self.event_state.as_str()),
            ),
        };
        line("Monitor:", &self.check_name);
        line("State:", &state);
        if let Some(d) = &self.deadline_at {
            line("Deadline:", &stamp(d));
        }
        line(
            "Last ping:",
            &self.last_ping_at.as_ref().map(stamp).unwrap_or(none),
        );
        if !self.tags.is_empty() {
            line("Tags:", &self.tags.join(", "));
        }
        line("Check id:", &self.check_id.to_string());
        if let Some(link) = link {
            line("Events:", link);
        }
        let footer = match self.alert_type {
            NoticeKind::AlertFailure => {
                "This monitor alerts once per failure; its next ping records the recovery \
                 and sends a recovery notice."
            }
            NoticeKind::AlertRecovery => "The monitor's timer runs again from this ping.",
        };
        format!(
            "{headline}\n\n{out}\n{footer}\n\n-- \nOutpost {}\n",
            env!("CARGO_PKG_VERSION")
        )
    }
}
