//! Environment variables of check documents: their shape, the masking of hidden values
//! (`secret` or `locked`) in every API answer, and keeping a hidden value when an update
//! sends the mask back. The stored document keeps the real values: agents need them.

use serde_json::{Map, Value};

use super::errors::ApiError;
use crate::model::check::MAX_ENVIRONMENT_VARIABLES;

/// What API answers show instead of a hidden value.
pub const SECRET_MASK: &str = "*****";
/// Field of the check document holding the variables.
pub const FIELD: &str = "environmentVariables";
/// Longest variable name.
pub const MAX_KEY_LEN: usize = 255;

/// Whether a variable's value is hidden from API answers.
fn is_hidden(var: &Map<String, Value>) -> bool {
    ["secret", "locked"]
        .iter()
        .any(|f| var.get(*f).and_then(Value::as_bool).unwrap_or(false))
}

fn key_of(var: &Map<String, Value>) -> Option<&str> {
    var.get("key").and_then(Value::as_str)
}

/// Checks the shape of `environmentVariables` (absent, null, or at most 200 objects with
/// a non-empty string `key`, a string or null `value`, boolean `locked` and `secret`),
/// whatever the check type; errors name the field.
pub fn validate(doc: &Map<String, Value>) -> Result<(), ApiError> {
    let items = match doc.get(FIELD) {
        None | Some(Value::Null) => return Ok(()),
        Some(Value::Array(items)) => items,
        Some(_) => return Err(ApiError::invalid(FIELD, "must be an array or null")),
    };
    if items.len() > MAX_ENVIRONMENT_VARIABLES {
        return Err(ApiError::invalid(
            FIELD,
            format!("must have at most {MAX_ENVIRONMENT_VARIABLES} items"),
        ));
    }
    for (i, item) in items.iter().enumerate() {
        let at = format!("{FIELD}[{i}]");
        let Value::Object(var) = item else {
            return Err(ApiError::invalid(&at, "must be an object"));
        };
        match var.get("key") {
            Some(Value::String(k)) if !k.is_empty() && k.len() <= MAX_KEY_LEN => {}
            _ => {
                return Err(ApiError::invalid(
                    &format!("{at}.key"),
                    format!("must be a non-empty string of at most {MAX_KEY_LEN} bytes"),
                ));
            }
        }
        if !matches!(
            var.get("value"),
            None | Some(Value::Null | Value::String(_))
        ) {
            return Err(ApiError::invalid(
                &format!("{at}.value"),
                "must be a string or null",
            ));
        }
        for flag in ["locked", "secret"] {
            if !matches!(var.get(flag), None | Some(Value::Null | Value::Bool(_))) {
                return Err(ApiError::invalid(
                    &format!("{at}.{flag}"),
                    "must be a boolean",
                ));
            }
        }
    }
    Ok(())
}

/// Replaces the value of every hidden variable by [`SECRET_MASK`] (for API answers).
pub fn mask(doc: &mut Map<String, Value>) {
    let Some(Value::Array(items)) = doc.get_mut(FIELD) else {
        return;
    };
    for item in items.iter_mut() {
        if let Value::Object(var) = item
            && is_hidden(var)
            && matches!(var.get("value"), Some(Value::String(_)))
        {
            var.insert("value".into(), Value::String(SECRET_MASK.into()));
        }
    }
}

/// For an update: a variable sent with the mask (or no value) whose stored namesake is
/// hidden keeps the stored value, so that a document read from the API can be sent
/// back unchanged. A variable stored as `secret` stays secret ("once set, its value
/// cannot be unlocked").
pub fn keep_hidden_values(doc: &mut Map<String, Value>, stored: &Map<String, Value>) {
    let Some(Value::Array(old)) = stored.get(FIELD) else {
        return;
    };
    let Some(Value::Array(items)) = doc.get_mut(FIELD) else {
        return;
    };
    for item in items.iter_mut() {
        let Value::Object(var) = item else {
            continue;
        };
        let Some(key) = key_of(var) else {
            continue;
        };
        let Some(prev) = old
            .iter()
            .filter_map(Value::as_object)
            .find(|v| key_of(v) == Some(key) && is_hidden(v))
        else {
            continue;
        };
        let sent_mask = match var.get("value") {
            None | Some(Value::Null) => true,
            Some(Value::String(s)) => s == SECRET_MASK,
            Some(_) => false,
        };
        if sent_mask && let Some(value) = prev.get("value") {
            var.insert("value".into(), value.clone());
        }
        if prev.get("secret").and_then(Value::as_bool) == Some(true) {
            var.insert("secret".into(), Value::Bool(true));
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn obj(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            _ => panic!("not an object"),
        }
    }

    #[test]
    fn masks_secret_and_locked_values_only() {
        let mut doc = obj(json!({FIELD: [
            {"key": "A", "value": "plain"},
            {"key": "B", "value": "s3cr3t", "secret": true},
            {"key": "C", "value": "l0cked", "locked": true},
            {"key": "D", "value": null, "secret": true},
            "junk"
        ]}));
        mask(&mut doc);
        let vars = &doc[FIELD];
        assert_eq!(vars[0]["value"], "plain");
        assert_eq!(vars[1]["value"], SECRET_MASK);
        assert_eq!(vars[2]["value"], SECRET_MASK);
        assert_eq!(vars[3]["value"], Value::Null);
        assert_eq!(vars[4], "junk");
    }

    #[test]
    fn masked_values_sent_back_keep_the_stored_value() {
        let stored = obj(json!({FIELD: [
            {"key": "B", "value": "s3cr3t", "secret": true},
            {"key": "C", "value": "l0cked", "locked": true},
            {"key": "P", "value": "plain"}
        ]}));
        let mut doc = obj(json!({FIELD: [
            {"key": "B", "value": SECRET_MASK, "secret": false},
            {"key": "C", "value": "new", "locked": false},
            {"key": "P", "value": SECRET_MASK}
        ]}));
        keep_hidden_values(&mut doc, &stored);
        let vars = &doc[FIELD];
        assert_eq!(vars[0]["value"], "s3cr3t");
        assert_eq!(vars[0]["secret"], true, "a secret cannot be unlocked");
        assert_eq!(vars[1]["value"], "new");
        assert_eq!(vars[1]["locked"], false);
        assert_eq!(
            vars[2]["value"], SECRET_MASK,
            "not hidden before: taken as sent"
        );
    }

    #[test]
    fn validation_names_the_field() {
        let field = |v: Value| {
            validate(&obj(json!({FIELD: v})))
                .err()
                .map(|e| e.message.split(':').next().unwrap_or("").to_owned())
        };
        assert_eq!(field(json!(null)), None);
        assert_eq!(field(json!([{"key": "K", "value": null}])), None);
        assert_eq!(field(json!({})), Some(FIELD.to_owned()));
        assert_eq!(field(json!([1])), Some(format!("{FIELD}[0]")));
        assert_eq!(
            field(json!([{"key": "K"}, {"key": ""}])),
            Some(format!("{FIELD}[1].key"))
        );
        assert_eq!(
            field(json!([{"key": "K", "value": 5}])),
            Some(format!("{FIELD}[0].value"))
        );
        assert_eq!(
            field(json!([{"key": "K", "secret": "yes"}])),
            Some(format!("{FIELD}[0].secret"))
        );
    }
}
