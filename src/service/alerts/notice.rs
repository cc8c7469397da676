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
