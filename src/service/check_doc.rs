//! Check documents of the public API, for every check type: validation beyond
//! `CheckSpec` (name, frequency, locations, tags, environment variables) and
//! normalization (the reference defaults filled in), so that what is stored is what
//! the API echoes (hidden variable values masked) and what agents receive.

use std::collections::HashSet;

use serde_json::{Map, Value, json};

use super::api::runtimes::RUNTIMES;
use super::check_kinds::{KindBody, fill_defaults, kind_of};
use super::check_secrets;
use super::errors::ApiError;
use super::store::CheckWrite;
use super::stored_kinds;
use crate::model::{CheckSpec, CheckType};

/// Allowed `frequency` values (minutes; 0 = every `frequencyOffset` seconds).
pub const FREQUENCIES: [i64; 13] = [0, 1, 2, 5, 10, 15, 30, 60, 120, 180, 360, 720, 1440];
/// Allowed `frequencyOffset` values (seconds) when `frequency` is 0.
pub const SUB_MINUTE_OFFSETS: [i64; 3] = [10, 20, 30];
/// Default `frequency` of the reference API.
pub const DEFAULT_FREQUENCY: i64 = 10;
/// Longest check name.
pub const MAX_NAME_LEN: usize = 2048;
/// Longest `description` (reference create schema).
pub const MAX_DESCRIPTION_LEN: usize = 510;
/// Most tags per check, and the longest tag.
pub const MAX_TAGS: usize = 100;
pub const MAX_TAG_LEN: usize = 255;
/// Most private locations per check.
pub const MAX_LOCATIONS: usize = 50;

/// Fields the server sets; ignored when a client sends them.
pub(crate) const SERVER_FIELDS: [&str; 3] = ["id", "created_at", "updated_at"];

/// How often a check runs, in milliseconds.
pub fn interval_ms(frequency: i64, frequency_offset: Option<i64>) -> i64 {
    if frequency == 0 {
        frequency_offset.unwrap_or(10).max(1) * 1000
    } else {
        frequency * 60_000
    }
}

/// Builds the stored form of a URL monitor; see [`normalize_check`].
pub fn normalize_url_check(
    body: Value,
    existing: Option<&Value>,
    known_slugs: &HashSet<String>,
) -> Result<CheckWrite, ApiError> {
    normalize_check(CheckType::Url, body, existing, known_slugs)
}

/// Refuses a check type that `CheckSpec::from_document` does not accept (e.g. "ICMP
/// checks are not supported by this version"), before any other field is looked at.
/// Stored-only kinds (browser, multistep, Playwright suites, agentic, traceroute, SSL,
/// gRPC) are accepted: `check_doc` and `stored_kinds` validate them.
pub fn ensure_supported(check_type: CheckType) -> Result<(), ApiError> {
    if kind_of(check_type).is_some_and(|k| k.stored_only) {
        return Ok(());
    }
    match CheckSpec::from_document(&json!({"checkType": check_type.as_str()})) {
        Err(e) if e.field == "checkType" => Err(ApiError::invalid(&e.field, &e.message)),
        _ => Ok(()),
    }
}

/// Builds the stored form of a check of type `check_type` from a create body
/// (`existing` = None) or an update body merged over the stored document (top-level
/// fields replace). The body's `checkType`, when present, must be `check_type`.
/// Fills the reference defaults (those of [`crate::service::check_kinds`] for the
/// type), checks the fields common to every type, then validates through
/// `CheckSpec::from_document`; every error is a 400 naming the field.
/// `known_slugs` are the slug names of the account's private locations.
pub fn normalize_check(
    check_type: CheckType,
    body: Value,
    existing: Option<&Value>,
    known_slugs: &HashSet<String>,
) -> Result<CheckWrite, ApiError> {
    ensure_supported(check_type)?;
    let Value::Object(body) = body else {
        return Err(ApiError::invalid("body", "must be a JSON object"));
    };
    let stored = match existing {
        Some(Value::Object(old)) => Some(old),
        _ => None,
    };
    let mut doc = stored.cloned().unwrap_or_default();
    for (k, v) in body {
        if !SERVER_FIELDS.contains(&k.as_str()) {
            doc.insert(k, v);
        }
    }

    match doc.get("checkType") {
        None | Some(Value::Null) => {}
        Some(Value::String(s)) if s == check_type.as_str() => {}
        Some(_) => {
            return Err(ApiError::invalid(
                "checkType",
                format!("must be {check_type} (the type of this check or route)"),
            ));
        }
    }
    doc.insert("checkType".into(), json!(check_type.as_str()));

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
        ("doubleCheck", true),
        ("shouldFail", false),
        ("runParallel", false),
        ("useGlobalAlertSettings", true),
    ] {
        bool_field(&mut doc, field, default)?;
    }
    let activated = doc
        .get("activated")
        .and_then(Value::as_bool)
        .unwrap_or(true);

    let tags = string_list(&mut doc, "tags", MAX_TAGS)?;

    match doc.get("locations") {
        None | Some(Value::Null) => {
            doc.insert("locations".into(), json!([]));
        }
        Some(Value::Array(a)) if a.is_empty() => {}
        Some(_) => {
            return Err(ApiError::invalid(
                "locations",
                "Outpost has no public locations; list private location slug names in privateLocations",
            ));
        }
    }

    let private_locations = private_locations(&mut doc, known_slugs)?;
    let body_kind = kind_of(check_type).map_or(KindBody::Request, |k| k.body);
    let (frequency, frequency_offset) = frequency(&mut doc, body_kind)?;

    match doc.get("description") {
        None => {
            doc.insert("description".into(), Value::Null);
        }
        Some(Value::Null) => {}
        Some(Value::String(s)) if s.chars().count() <= MAX_DESCRIPTION_LEN => {}
        Some(_) => {
            return Err(ApiError::invalid(
                "description",
                format!("must be a string of at most {MAX_DESCRIPTION_LEN} characters, or null"),
            ));
        }
    }
    for field in ["groupId", "groupOrder", "runtimeId"] {
        doc.entry(field).or_insert(Value::Null);
    }

    intent(&doc)?;
    match doc.get("aiAutoRepairEnabled") {
        None | Some(Value::Null | Value::Bool(_)) => {}
        Some(_) => {
            return Err(ApiError::invalid(
                "aiAutoRepairEnabled",
                "must be a boolean or null",
            ));
        }
    }

    match body_kind {
        KindBody::Request => match doc.get("request") {
            Some(Value::Object(_)) => {}
            None | Some(Value::Null) => return Err(ApiError::invalid("request", "is required")),
            Some(_) => return Err(ApiError::invalid("request", "must be an object")),
        },
        KindBody::Script => script_fields(&doc)?,
        KindBody::PlaywrightSuite | KindBody::Agentic => {}
    }
    if let Some(kind) = kind_of(check_type) {
        fill_defaults(kind, &mut doc);
        if kind.stored_only {
            stored_kinds::type_fields(kind, &mut doc)?;
        }
    }

    check_secrets::validate(&doc)?;
    if let Some(old) = stored {
        check_secrets::keep_hidden_values(&mut doc, old);
    }

    let mut document = Value::Object(doc);
    match kind_of(check_type) {
        Some(kind) if kind.stored_only => stored_kinds::conform(kind, &mut document)?,
        _ => {
            CheckSpec::from_document(&document)
                .map_err(|e| ApiError::invalid(&e.field, &e.message))?;
        }
    }

    Ok(CheckWrite {
        check_type,
        name,
        activated,
        frequency,
        frequency_offset,
        tags,
        private_locations,
        document,
    })
}

pub(crate) fn bool_field(
    doc: &mut Map<String, Value>,
    field: &str,
    default: bool,
) -> Result<(), ApiError> {
    match doc.get(field) {
        None | Some(Value::Null) => {
            doc.insert(field.into(), Value::Bool(default));
            Ok(())
        }
        Some(Value::Bool(_)) => Ok(()),
        Some(_) => Err(ApiError::invalid(field, "must be a boolean")),
    }
}

/// A list of non-empty strings (default empty).
pub(crate) fn string_list(
    doc: &mut Map<String, Value>,
    field: &str,
    max: usize,
) -> Result<Vec<String>, ApiError> {
    let items = match doc.get(field) {
        None | Some(Value::Null) => {
            doc.insert(field.into(), json!([]));
            return Ok(Vec::new());
        }
        Some(Value::Array(items)) => items,
        Some(_) => return Err(ApiError::invalid(field, "must be an array of strings")),
    };
    if items.len() > max {
        return Err(ApiError::invalid(
            field,
            format!("must have at most {max} items"),
        ));
    }
    items
        .iter()
        .enumerate()
        .map(|(i, v)| match v {
            Value::String(s) if !s.is_empty() && s.len() <= MAX_TAG_LEN => Ok(s.clone()),
            _ => Err(ApiError::invalid(
                &format!("{field}[{i}]"),
                format!("must be a non-empty string of at most {MAX_TAG_LEN} bytes"),
            )),
        })
        .collect()
}

fn private_locations(
    doc: &mut Map<String, Value>,
    known: &HashSet<String>,
) -> Result<Vec<String>, ApiError> {
    const FIELD: &str = "privateLocations";
    let listed = match doc.get(FIELD) {
        None | Some(Value::Null) => {
            return Err(ApiError::invalid(
                FIELD,
                "is required: name at least one private location slug name (Outpost has no public locations)",
            ));
        }
        Some(_) => string_list(doc, FIELD, MAX_LOCATIONS)?,
    };
    if listed.is_empty() {
        return Err(ApiError::invalid(
            FIELD,
            "must name at least one private location slug name",
        ));
    }
    let mut seen = HashSet::new();
    let slugs: Vec<String> = listed
        .into_iter()
        .filter(|s| seen.insert(s.clone()))
        .collect();
    let unknown: Vec<&str> = slugs
        .iter()
        .filter(|s| !known.contains(*s))
        .map(String::as_str)
        .collect();
    if !unknown.is_empty() {
        return Err(ApiError::invalid(
            FIELD,
            format!("unknown private location(s): {}", unknown.join(", ")),
        ));
    }
    doc.insert(FIELD.into(), json!(slugs));
    Ok(slugs)
}

/// Longest `intent.goal`, and the longest item and most items of its lists.
pub const MAX_INTENT_GOAL_LEN: usize = 2000;
pub const MAX_INTENT_ITEM_LEN: usize = 1000;
pub const MAX_INTENT_ITEMS: usize = 20;

/// `intent`: null, or `{goal, requiredOutcomes?, mustPreserve?}` as the reference
/// schema has it (no other fields).
fn intent(doc: &Map<String, Value>) -> Result<(), ApiError> {
    let intent = match doc.get("intent") {
        None | Some(Value::Null) => return Ok(()),
        Some(Value::Object(m)) => m,
        Some(_) => return Err(ApiError::invalid("intent", "must be an object or null")),
    };
    for key in intent.keys() {
        if !["goal", "requiredOutcomes", "mustPreserve"].contains(&key.as_str()) {
            return Err(ApiError::invalid(
                &format!("intent.{key}"),
                "is not a field of intent",
            ));
        }
    }
    match intent.get("goal") {
        Some(Value::String(g)) if !g.is_empty() && g.chars().count() <= MAX_INTENT_GOAL_LEN => {}
        _ => {
            return Err(ApiError::invalid(
                "intent.goal",
                format!("is required: a string of 1 to {MAX_INTENT_GOAL_LEN} characters"),
            ));
        }
    }
    for list in ["requiredOutcomes", "mustPreserve"] {
        let ok = match intent.get(list) {
            None => true,
            Some(Value::Array(items)) => {
                items.len() <= MAX_INTENT_ITEMS
                    && items.iter().all(|i| {
                        i.as_str().is_some_and(|s| {
                            !s.is_empty() && s.chars().count() <= MAX_INTENT_ITEM_LEN
                        })
                    })
            }
            Some(_) => false,
        };
        if !ok {
            return Err(ApiError::invalid(
                &format!("intent.{list}"),
                format!(
                    "must be at most {MAX_INTENT_ITEMS} strings of 1 to {MAX_INTENT_ITEM_LEN} characters"
                ),
            ));
        }
    }
    Ok(())
}

/// The fields of a script check (browser, multistep): `script` required and non-empty;
/// `scriptPath` and `sslCheckDomain` strings or null (`scriptPath` non-empty);
/// `runtimeId` null or one of `/v1/runtimes`.
fn script_fields(doc: &Map<String, Value>) -> Result<(), ApiError> {
    match doc.get("script") {
        Some(Value::String(s)) if !s.is_empty() => {}
        Some(Value::String(_)) => return Err(ApiError::invalid("script", "must not be empty")),
        None | Some(Value::Null) => return Err(ApiError::invalid("script", "is required")),
        Some(_) => return Err(ApiError::invalid("script", "must be a string")),
    }
    match doc.get("scriptPath") {
        None | Some(Value::Null) => {}
        Some(Value::String(s)) if !s.is_empty() => {}
        Some(_) => {
            return Err(ApiError::invalid(
                "scriptPath",
                "must be a non-empty string or null",
            ));
        }
    }
    match doc.get("sslCheckDomain") {
        None | Some(Value::Null | Value::String(_)) => {}
        Some(_) => {
            return Err(ApiError::invalid(
                "sslCheckDomain",
                "must be a string or null",
            ));
        }
    }
    match doc.get("runtimeId") {
        None | Some(Value::Null) => Ok(()),
        Some(Value::String(id)) if RUNTIMES.iter().any(|r| r.0 == id) => Ok(()),
        Some(_) => {
            let names: Vec<&str> = RUNTIMES.iter().map(|r| r.0).collect();
            Err(ApiError::invalid(
                "runtimeId",
                format!(
                    "must be null or one of the runtimes of GET /v1/runtimes: {}",
                    names.join(", ")
                ),
            ))
        }
    }
}

fn frequency(doc: &mut Map<String, Value>, body: KindBody) -> Result<(i64, Option<i64>), ApiError> {
    // Script, suite and agentic checks have no sub-minute frequency (their reference
    // enums start at 1).
    let allowed: &[i64] = if body.sub_minute() {
        &FREQUENCIES
    } else {
        &FREQUENCIES[1..]
    };
    let frequency = match doc.get("frequency") {
        None | Some(Value::Null) => DEFAULT_FREQUENCY,
        Some(v) => match v.as_i64() {
            Some(f) if allowed.contains(&f) => f,
            _ => {
                return Err(ApiError::invalid(
                    "frequency",
                    format!("must be one of {allowed:?} (minutes)"),
                ));
            }
        },
    };
    doc.insert("frequency".into(), json!(frequency));
    let offset = match doc.get("frequencyOffset") {
        None | Some(Value::Null) => None,
        Some(v) => match v.as_i64() {
            Some(o) if o >= 1 => Some(o),
            _ => {
                return Err(ApiError::invalid(
                    "frequencyOffset",
                    "must be an integer of at least 1",
                ));
            }
        },
    };
    if frequency == 0 {
        match offset {
            Some(o) if SUB_MINUTE_OFFSETS.contains(&o) => {}
            _ => {
                return Err(ApiError::invalid(
                    "frequencyOffset",
                    "must be 10, 20 or 30 (seconds) when frequency is 0",
                ));
            }
        }
    }
    Ok((frequency, offset))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slugs() -> HashSet<String> {
        ["local".to_owned()].into_iter().collect()
    }

    fn field_of(e: ApiError) -> String {
        e.message.split(':').next().unwrap_or("").to_owned()
    }

    #[test]
    fn fills_defaults() {
        let body = json!({"name": "n", "request": {"url": "http://127.0.0.1/"}, "privateLocations": ["local"]});
        let c = normalize_url_check(body, None, &slugs()).unwrap();
        let d = &c.document;
        assert_eq!(d["checkType"], "URL");
        assert_eq!(d["activated"], true);
        assert_eq!(d["muted"], false);
        assert_eq!(d["tags"], json!([]));
        assert_eq!(d["frequency"], 10);
        assert_eq!(d["degradedResponseTime"], 3000);
        assert_eq!(d["maxResponseTime"], 5000);
        assert_eq!(d["request"]["followRedirects"], true);
        assert_eq!(d["request"]["skipSSL"], false);
        assert_eq!(d["request"]["ipFamily"], "IPv4");
        assert_eq!(d["request"]["assertions"], json!([]));
        assert_eq!(interval_ms(c.frequency, c.frequency_offset), 600_000);
    }

    #[test]
    fn errors_name_fields() {
        let base = json!({"name": "n", "request": {"url": "http://127.0.0.1/"}, "privateLocations": ["local"]});
        let with = |k: &str, v: Value| {
            let mut b = base.clone();
            b[k] = v;
            field_of(normalize_url_check(b, None, &slugs()).unwrap_err())
        };
        assert_eq!(with("name", json!("")), "name");
        assert_eq!(with("frequency", json!(3)), "frequency");
        assert_eq!(with("frequency", json!(0)), "frequencyOffset");
        assert_eq!(
            with("privateLocations", json!(["nope"])),
            "privateLocations"
        );
        assert_eq!(with("privateLocations", json!([])), "privateLocations");
        assert_eq!(with("locations", json!(["eu-west-1"])), "locations");
        assert_eq!(with("tags", json!([1])), "tags[0]");
        assert_eq!(with("request", json!({"url": "ftp://x/"})), "request.url");
        assert_eq!(with("checkType", json!("API")), "checkType");
        let ok = {
            let mut b = base.clone();
            b["frequency"] = json!(0);
            b["frequencyOffset"] = json!(10);
            normalize_url_check(b, None, &slugs()).unwrap()
        };
        assert_eq!(interval_ms(ok.frequency, ok.frequency_offset), 10_000);
    }

    #[test]
    fn update_merges_over_stored() {
        let body = json!({"name": "n", "tags": ["a"], "request": {"url": "http://127.0.0.1/"}, "privateLocations": ["local"]});
        let stored = normalize_url_check(body, None, &slugs()).unwrap().document;
        let updated =
            normalize_url_check(json!({"name": "m", "id": "x"}), Some(&stored), &slugs()).unwrap();
        assert_eq!(updated.name, "m");
        assert_eq!(updated.tags, vec!["a".to_owned()]);
        assert!(updated.document.get("id").is_none());
    }
    #[test]
    fn every_kind_gets_its_defaults() {
        let tcp = normalize_check(
            CheckType::Tcp,
            json!({"name": "db", "request": {"hostname": "127.0.0.1", "port": 5432},
                "privateLocations": ["local"]}),
            None,
            &slugs(),
        )
        .unwrap();
        assert_eq!(tcp.check_type, CheckType::Tcp);
        assert_eq!(tcp.document["checkType"], "TCP");
        assert_eq!(tcp.document["degradedResponseTime"], 3000);
        assert_eq!(tcp.document["request"]["ipFamily"], "IPv4");
        assert_eq!(tcp.document["request"]["data"], Value::Null);

        let dns = normalize_check(
            CheckType::Dns,
            json!({"name": "ns", "request": {"query": "a.test", "recordType": "A",
                "assertions": [{"source": "RESPONSE_CODE", "comparison": "EQUALS",
                "target": "NOERROR"}]}, "privateLocations": ["local"]}),
            None,
            &slugs(),
        )
        .unwrap();
        assert_eq!(dns.document["maxResponseTime"], 1000);
        assert_eq!(dns.document["request"]["protocol"], "UDP");
        assert_eq!(dns.document["request"]["assertions"][0]["property"], "");

        let api = normalize_check(
            CheckType::Api,
            json!({"name": "api", "request": {"method": "POST", "url": "http://127.0.0.1/"},
                "privateLocations": ["local"]}),
            None,
            &slugs(),
        )
        .unwrap();
        assert_eq!(api.document["degradedResponseTime"], 5000);
        assert_eq!(api.document["maxResponseTime"], 20000);
        assert_eq!(api.document["request"]["bodyType"], "NONE");
        assert_eq!(api.document["request"]["headers"], json!([]));
    }

    #[test]
    fn unsupported_types_are_refused_first() {
        let e = normalize_check(CheckType::Heartbeat, json!({}), None, &slugs()).unwrap_err();
        assert_eq!(field_of(e.clone()), "checkType");
        assert!(e.message.contains("not supported"), "{}", e.message);
    }

    #[test]
    fn script_checks_are_validated_and_stored() {
        let base = json!({"name": "login", "script": "await page.goto('http://127.0.0.1/')",
            "privateLocations": ["local"]});
        for t in [CheckType::Browser, CheckType::MultiStep] {
            let c = normalize_check(t, base.clone(), None, &slugs()).unwrap();
            assert_eq!(c.document["checkType"], t.as_str());
            assert_eq!(c.document["frequency"], 10);
            assert_eq!(c.document["runtimeId"], Value::Null);
            assert_eq!(c.document["intent"], Value::Null);
            assert!(c.document.get("request").is_none());
        }
        let with = |k: &str, v: Value| {
            let mut b = base.clone();
            b[k] = v;
            field_of(normalize_check(CheckType::Browser, b, None, &slugs()).unwrap_err())
        };
        assert_eq!(with("script", json!("")), "script");
        assert_eq!(with("script", Value::Null), "script");
        assert_eq!(with("script", json!(5)), "script");
        assert_eq!(with("runtimeId", json!("2019.01")), "runtimeId");
        assert_eq!(with("frequency", json!(0)), "frequency");
        assert_eq!(with("scriptPath", json!("")), "scriptPath");
        assert_eq!(with("intent", json!({"goal": ""})), "intent.goal");
        assert_eq!(with("intent", json!({"goal": "g", "x": 1})), "intent.x");
        let ok = {
            let mut b = base.clone();
            b["runtimeId"] = json!("2025.04");
            b["frequency"] = json!(1);
            b["intent"] = json!({"goal": "users log in", "mustPreserve": ["the 2FA step"]});
            normalize_check(CheckType::MultiStep, b, None, &slugs()).unwrap()
        };
        assert_eq!(ok.document["runtimeId"], "2025.04");
        assert_eq!(interval_ms(ok.frequency, ok.frequency_offset), 60_000);
        // An update merges over the stored document and keeps the script.
        let updated = normalize_check(
            CheckType::MultiStep,
            json!({"name": "renamed"}),
            Some(&ok.document),
            &slugs(),
        )
        .unwrap();
        assert_eq!(updated.document["script"], base["script"]);
    }

    #[test]
    fn body_type_must_match() {
        let e = normalize_check(
            CheckType::Tcp,
            json!({"checkType": "DNS", "name": "x", "request": {"hostname": "h", "port": 1},
                "privateLocations": ["local"]}),
            None,
            &slugs(),
        )
        .unwrap_err();
        assert_eq!(field_of(e), "checkType");
    }

    #[test]
    fn update_keeps_masked_secrets() {
        let body = json!({"name": "a", "request": {"method": "GET", "url": "{{BASE}}/"},
            "environmentVariables": [{"key": "BASE", "value": "http://127.0.0.1", "secret": true}],
            "privateLocations": ["local"]});
        let stored = normalize_check(CheckType::Api, body, None, &slugs())
            .unwrap()
            .document;
        let update = json!({"environmentVariables": [
            {"key": "BASE", "value": check_secrets::SECRET_MASK, "secret": true}]});
        let updated = normalize_check(CheckType::Api, update, Some(&stored), &slugs()).unwrap();
        assert_eq!(
            updated.document["environmentVariables"][0]["value"],
            "http://127.0.0.1"
        );
    }
}
