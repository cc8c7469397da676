//! Heartbeat check documents (`POST /v1/checks/heartbeat`, `PUT
//! /v1/checks/heartbeat/{id}`): validation and normalization, so that what is stored is
//! what the API echoes. Heartbeat checks run nowhere: no locations, no schedule.

use serde_json::{Map, Value, json};

use crate::model::CheckType;
use crate::model::heartbeat::{HeartbeatConfig, MAX_DESCRIPTION_LEN};
use crate::service::check_doc::{MAX_NAME_LEN, MAX_TAGS, SERVER_FIELDS, bool_field, string_list};
use crate::service::errors::ApiError;
use crate::service::store::{CheckSubscription, CheckWrite};

/// Most `alertChannelSubscriptions` of a check.
pub const MAX_SUBSCRIPTIONS: usize = 100;

/// A validated heartbeat check.
#[derive(Debug, Clone)]
pub struct HeartbeatDoc {
    pub check: CheckWrite,
    pub config: HeartbeatConfig,
    /// `alertChannelSubscriptions` when the body set them (they are stored apart from
    /// the document and shown from there).
    pub subscriptions: Option<Vec<CheckSubscription>>,
}

/// The reference's default `alertSettings`.
fn default_alert_settings() -> Value {
    json!({
        "escalationType": "RUN_BASED",
        "runBasedEscalation": {"failedRunThreshold": 1},
        "reminders": {"amount": 0, "interval": 5},
        "parallelRunFailureThreshold": {"enabled": false, "percentage": 10}
    })
}

/// Builds the stored form of a heartbeat check from a create body (`existing` = None)
/// or an update body merged over the stored document (top-level fields replace).
/// `token` is the monitor's ping token, stored as `heartbeat.pingToken` (a token in the
/// body is ignored: the server assigns it). Every error is a 400 naming the field.
pub fn normalize_heartbeat(
    body: Value,
    existing: Option<&Value>,
    token: &str,
) -> Result<HeartbeatDoc, ApiError> {
    let Value::Object(body) = body else {
        return Err(ApiError::invalid("body", "must be a JSON object"));
    };
    let mut doc = match existing {
        Some(Value::Object(old)) => old.clone(),
        _ => Map::new(),
    };
    for (k, v) in body {
        if !SERVER_FIELDS.contains(&k.as_str()) {
            doc.insert(k, v);
        }
    }
    match doc.get("checkType") {
        None | Some(Value::Null) => {}
        Some(Value::String(s)) if s == CheckType::Heartbeat.as_str() => {}
        Some(_) => {
            return Err(ApiError::invalid(
                "checkType",
                "must be HEARTBEAT (the type of this check or route)",
            ));
        }
    }
    doc.insert("checkType".into(), json!(CheckType::Heartbeat.as_str()));

    let name = match doc.get("name") {
        Some(Value::String(s)) if !s.trim().is_empty() => {
            if s.chars().count() > MAX_NAME_LEN {
                return Err(ApiError::invalid(
                    "name",
                    format!("must be at most {MAX_NAME_LEN} characters"),
                ));
            }
            s.clone()
        }
        Some(Value::String(_)) => return Err(ApiError::invalid("name", "must not be empty")),
        None | Some(Value::Null) => return Err(ApiError::invalid("name", "is required")),
        Some(_) => return Err(ApiError::invalid("name", "must be a string")),
    };

    for (field, default) in [
        ("activated", true),
        ("muted", false),
        ("useGlobalAlertSettings", true),
        ("runParallel", false),
    ] {
        bool_field(&mut doc, field, default)?;
    }
    for field in ["doubleCheck", "shouldFail"] {
        match doc.get(field) {
            None | Some(Value::Null) | Some(Value::Bool(_)) => {}
            Some(_) => return Err(ApiError::invalid(field, "must be a boolean")),
        }
    }
    let activated = doc
        .get("activated")
        .and_then(Value::as_bool)
        .unwrap_or(true);
    let tags = string_list(&mut doc, "tags", MAX_TAGS)?;

    match doc.get("description") {
        None => {
            doc.insert("description".into(), Value::Null);
        }
        Some(Value::Null) => {}
        Some(Value::String(s)) if s.chars().count() <= MAX_DESCRIPTION_LEN => {}
        Some(Value::String(s)) => {
            return Err(ApiError::invalid(
                "description",
                format!(
                    "must be at most {MAX_DESCRIPTION_LEN} characters (got {})",
                    s.chars().count()
                ),
            ));
        }
        Some(_) => {
            return Err(ApiError::invalid(
                "description",
                "must be a string (markdown) or null",
            ));
        }
    }

    for field in ["locations", "privateLocations"] {
        match doc.get(field) {
            None | Some(Value::Null) => {}
            Some(Value::Array(a)) if a.is_empty() => {}
            Some(_) => {
                return Err(ApiError::invalid(
                    field,
                    "heartbeat monitors run nowhere: they wait for pings at their ping address",
                ));
            }
        }
        doc.remove(field);
    }

    let config = HeartbeatConfig::from_value(doc.get("heartbeat"))
        .map_err(|e| ApiError::invalid(&e.field, &e.message))?;
    doc.insert(
        "heartbeat".into(),
        json!({
            "period": doc["heartbeat"]["period"],
            "periodUnit": config.period_unit.as_str(),
            "grace": doc["heartbeat"]["grace"],
            "graceUnit": config.grace_unit.as_str(),
            "pingToken": token,
        }),
    );

    let subscriptions = match doc.remove("alertChannelSubscriptions") {
        None | Some(Value::Null) => None,
        Some(v) => Some(subscriptions(&v)?),
    };
    match doc.get("alertChannels") {
        None => {
            doc.insert("alertChannels".into(), Value::Null);
        }
        Some(Value::Null) | Some(Value::Object(_)) => {}
        Some(_) => {
            return Err(ApiError::invalid(
                "alertChannels",
                "must be an object or null (prefer alertChannelSubscriptions)",
            ));
        }
    }
    match doc.get("alertSettings") {
        None | Some(Value::Null) => {
            doc.insert("alertSettings".into(), default_alert_settings());
        }
        Some(Value::Object(_)) => {}
        Some(_) => return Err(ApiError::invalid("alertSettings", "must be an object")),
    }
    for field in [
        "groupId",
        "triggerIncident",
        "intent",
        "aiAutoRepairEnabled",
    ] {
        doc.entry(field).or_insert(Value::Null);
    }

    Ok(HeartbeatDoc {
        check: CheckWrite {
            check_type: CheckType::Heartbeat,
            name,
            activated,
            frequency: 0,
            frequency_offset: None,
            tags,
            private_locations: Vec::new(),
            document: Value::Object(doc),
        },
        config,
        subscriptions,
    })
}

/// Parses `alertChannelSubscriptions`: `[{alertChannelId, activated}]`.
fn subscriptions(value: &Value) -> Result<Vec<CheckSubscription>, ApiError> {
    const FIELD: &str = "alertChannelSubscriptions";
    let Value::Array(items) = value else {
        return Err(ApiError::invalid(FIELD, "must be an array"));
    };
    if items.len() > MAX_SUBSCRIPTIONS {
        return Err(ApiError::invalid(
            FIELD,
            format!("must have at most {MAX_SUBSCRIPTIONS} items"),
        ));
    }
    let mut out: Vec<CheckSubscription> = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let Value::Object(o) = item else {
            return Err(ApiError::invalid(
                &format!("{FIELD}[{i}]"),
                "must be an object {alertChannelId, activated}",
            ));
        };
        let channel_id = match o.get("alertChannelId").and_then(Value::as_i64) {
            Some(id) if id > 0 => id,
            _ => {
                return Err(ApiError::invalid(
                    &format!("{FIELD}[{i}].alertChannelId"),
                    "must be a positive integer",
                ));
            }
        };
        let activated = match o.get("activated") {
            None | Some(Value::Null) => true,
            Some(Value::Bool(b)) => *b,
            Some(_) => {
                return Err(ApiError::invalid(
                    &format!("{FIELD}[{i}].activated"),
                    "must be a boolean",
                ));
            }
        };
        match out.iter_mut().find(|s| s.channel_id == channel_id) {
            Some(s) => s.activated = activated,
            None => out.push(CheckSubscription {
                channel_id,
                activated,
            }),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body() -> Value {
        json!({"name": "backup", "heartbeat": {"period": 1, "periodUnit": "hours",
            "grace": 30, "graceUnit": "minutes"}})
    }

    fn field_of(e: ApiError) -> String {
        e.message.split(':').next().unwrap_or("").to_owned()
    }

    #[test]
    fn fills_defaults_and_keeps_the_token() {
        let d = normalize_heartbeat(body(), None, "tok").unwrap();
        let doc = &d.check.document;
        assert_eq!(doc["checkType"], "HEARTBEAT");
        assert_eq!(doc["activated"], true);
        assert_eq!(doc["muted"], false);
        assert_eq!(doc["tags"], json!([]));
        assert_eq!(doc["description"], Value::Null);
        assert_eq!(doc["heartbeat"]["pingToken"], "tok");
        assert_eq!(doc["alertSettings"]["escalationType"], "RUN_BASED");
        assert_eq!(d.config.period_ms(), 3_600_000);
        assert_eq!(d.check.private_locations, Vec::<String>::new());
        assert!(d.subscriptions.is_none());

        let mut sneaky = body();
        sneaky["heartbeat"]["pingToken"] = json!("mine");
        sneaky["heartbeat"]["pingUrl"] = json!("http://evil/");
        let d = normalize_heartbeat(sneaky, None, "tok").unwrap();
        assert_eq!(d.check.document["heartbeat"]["pingToken"], "tok");
        assert!(d.check.document["heartbeat"].get("pingUrl").is_none());
    }

    #[test]
    fn errors_name_fields() {
        let with = |k: &str, v: Value| {
            let mut b = body();
            b[k] = v;
            field_of(normalize_heartbeat(b, None, "t").unwrap_err())
        };
        assert_eq!(with("name", json!("")), "name");
        assert_eq!(with("description", json!("x".repeat(501))), "description");
        assert_eq!(with("heartbeat", json!(null)), "heartbeat");
        assert_eq!(
            with(
                "heartbeat",
                json!({"period": 5, "periodUnit": "seconds", "grace": 0, "graceUnit": "seconds"})
            ),
            "heartbeat.period"
        );
        assert_eq!(
            with("privateLocations", json!(["local"])),
            "privateLocations"
        );
        assert_eq!(
            with(
                "alertChannelSubscriptions",
                json!([{"alertChannelId": "x"}])
            ),
            "alertChannelSubscriptions[0].alertChannelId"
        );
        assert_eq!(with("checkType", json!("URL")), "checkType");
        let mut ok = body();
        ok["description"] = json!("é".repeat(500));
        normalize_heartbeat(ok, None, "t").unwrap();
    }

    #[test]
    fn update_merges_and_keeps_the_stored_heartbeat() {
        let stored = normalize_heartbeat(body(), None, "tok")
            .unwrap()
            .check
            .document;
        let d = normalize_heartbeat(json!({"muted": true}), Some(&stored), "tok").unwrap();
        assert_eq!(d.check.document["muted"], true);
        assert_eq!(d.check.document["heartbeat"]["periodUnit"], "hours");
        let d = normalize_heartbeat(
            json!({"alertChannelSubscriptions": [{"alertChannelId": 3, "activated": true}]}),
            Some(&stored),
            "tok",
        )
        .unwrap();
        assert_eq!(
            d.subscriptions,
            Some(vec![CheckSubscription {
                channel_id: 3,
                activated: true
            }])
        );
        assert!(d.check.document.get("alertChannelSubscriptions").is_none());
    }
}
