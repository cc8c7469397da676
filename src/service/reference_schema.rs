//! The reference document (`tests/conformance/public-api.openapi.json`, embedded) and a
//! validator of JSON values against its component schemas, for the check types whose
//! fields Outpost stores without running them (their executors come later): what the
//! reference says of a field is what the API enforces, and a stored document always
//! conforms to the type's read schema.
//!
//! The validator covers the OpenAPI 3.0 subset the reference uses: `$ref`, `type`,
//! `nullable`, `enum`, `allOf` (with the `[{$ref}, {nullable: true}]` idiom),
//! `anyOf`/`oneOf` (at least one branch), string `minLength`/`maxLength`/`pattern`/
//! `format: uuid`, number `minimum`/`maximum`/`exclusiveMinimum`, array `items`/
//! `minItems`/`maxItems`, object `required`/`properties`/`additionalProperties`.
//! [`fill_defaults`] inserts the `default` of every absent property, recursively.

use std::sync::OnceLock;

use regex::Regex;
use serde_json::{Map, Value};

/// The reference document as text.
pub const REFERENCE: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/conformance/public-api.openapi.json"
));

/// The reference document, parsed once.
pub fn reference() -> &'static Value {
    static DOC: OnceLock<Value> = OnceLock::new();
    DOC.get_or_init(|| serde_json::from_str(REFERENCE).unwrap_or(Value::Null))
}

/// One way a value breaks a schema: where (`request.sslConfig.port`) and how.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {message}")]
pub struct SchemaViolation {
    pub path: String,
    pub message: String,
}

/// The component schema `name` (`#/components/schemas/<name>`).
pub fn component(name: &str) -> Option<&'static Value> {
    reference()["components"]["schemas"]
        .get(name)
        .filter(|s| !s.is_null())
}

/// Follows `$ref`s (`#/components/schemas/<name>` of `root`) to the schema they name
/// (an unknown reference is the empty schema, which admits anything).
fn resolve<'a>(root: &'a Value, schema: &'a Value) -> &'a Value {
    let mut schema = schema;
    for _ in 0..16 {
        match schema.get("$ref").and_then(Value::as_str) {
            Some(r) => {
                let name = r.rsplit('/').next().unwrap_or_default();
                match root["components"]["schemas"].get(name) {
                    Some(s) => schema = s,
                    None => return &Value::Null,
                }
            }
            None => return schema,
        }
    }
    schema
}

/// Checks `value` (found at `path`) against `schema`, a schema of the reference.
pub fn validate(schema: &Value, value: &Value, path: &str) -> Result<(), SchemaViolation> {
    validate_in(reference(), schema, value, path)
}

/// Checks `value` (found at `path`) against `schema`, whose `$ref`s name components of
/// the OpenAPI document `root` (e.g. the service's own `/openapi.json`).
pub fn validate_in(
    root: &Value,
    schema: &Value,
    value: &Value,
    path: &str,
) -> Result<(), SchemaViolation> {
    let schema = resolve(root, schema);
    let Value::Object(s) = schema else {
        return Ok(());
    };
    let fail = |message: String| {
        Err(SchemaViolation {
            path: path.to_owned(),
            message,
        })
    };
    if value.is_null() && nullable(s) {
        return Ok(());
    }
    if s.len() == 1 && s.contains_key("nullable") {
        // `{nullable: true}` alone, as a branch of `anyOf`: "or null".
        return fail("must be null".to_owned());
    }
    if let Some(Value::Array(parts)) = s.get("allOf") {
        for part in parts {
            validate_in(root, part, value, path)?;
        }
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(Value::Array(branches)) = s.get(key) {
            let mut first_error = None;
            let mut matched = false;
            for branch in branches {
                match validate_in(root, branch, value, path) {
                    Ok(()) => {
                        matched = true;
                        break;
                    }
                    Err(e) => {
                        first_error.get_or_insert(e);
                    }
                }
            }
            if !matched && let Some(e) = first_error {
                return Err(e);
            }
        }
    }
    if let Some(Value::Array(allowed)) = s.get("enum")
        && !allowed.contains(value)
    {
        let names: Vec<String> = allowed
            .iter()
            .filter(|v| !v.is_null())
            .map(Value::to_string)
            .collect();
        return fail(format!("must be one of {}", names.join(", ")));
    }
    match s.get("type").and_then(Value::as_str) {
        None => {}
        Some("string") => {
            let Value::String(text) = value else {
                return fail(or_null("must be a string", s));
            };
            string(s, text).or_else(fail)?;
        }
        Some(t @ ("integer" | "number")) => {
            let Some(n) = value.as_f64() else {
                return fail(or_null(&format!("must be {}", article(t)), s));
            };
            if t == "integer" && n.fract() != 0.0 {
                return fail(or_null("must be an integer", s));
            }
            number(s, n).or_else(fail)?;
        }
        Some("boolean") if !value.is_boolean() => {
            return fail(or_null("must be a boolean", s));
        }
        Some("array") => {
            let Value::Array(items) = value else {
                return fail(or_null("must be an array", s));
            };
            array(root, s, items, path)?;
        }
        Some("object") => {
            let Value::Object(fields) = value else {
                return fail(or_null("must be an object", s));
            };
            object(root, s, fields, path)?;
        }
        Some(_) => {}
    }
    Ok(())
}

fn nullable(s: &Map<String, Value>) -> bool {
    s.get("nullable").and_then(Value::as_bool) == Some(true)
        || s.get("enum")
            .and_then(Value::as_array)
            .is_some_and(|e| e.contains(&Value::Null))
        || s.get("allOf")
            .and_then(Value::as_array)
            .is_some_and(|parts| {
                parts
                    .iter()
                    .any(|p| p.get("nullable").and_then(Value::as_bool) == Some(true))
            })
}

fn or_null(message: &str, s: &Map<String, Value>) -> String {
    if nullable(s) {
        format!("{message} or null")
    } else {
        message.to_owned()
    }
}

fn article(t: &str) -> &'static str {
    if t == "integer" {
        "an integer"
    } else {
        "a number"
    }
}

fn string(s: &Map<String, Value>, text: &str) -> Result<(), String> {
    let chars = text.chars().count();
    if let Some(min) = s.get("minLength").and_then(Value::as_u64)
        && (chars as u64) < min
    {
        return Err(if min == 1 {
            "must not be empty".to_owned()
        } else {
            format!("must be at least {min} characters")
        });
    }
    if let Some(max) = s.get("maxLength").and_then(Value::as_u64)
        && (chars as u64) > max
    {
        return Err(format!("must be at most {max} characters"));
    }
    if let Some(pattern) = s.get("pattern").and_then(Value::as_str)
        && let Ok(re) = Regex::new(pattern)
        && !re.is_match(text)
    {
        return Err(format!("must match {pattern}"));
    }
    if s.get("format").and_then(Value::as_str) == Some("uuid")
        && uuid::Uuid::parse_str(text).is_err()
    {
        return Err("must be a UUID".to_owned());
    }
    Ok(())
}

fn number(s: &Map<String, Value>, n: f64) -> Result<(), String> {
    let exclusive = s.get("exclusiveMinimum").and_then(Value::as_bool) == Some(true);
    if let Some(min) = s.get("minimum").and_then(Value::as_f64)
        && (n < min || (exclusive && n == min))
    {
        let relation = if exclusive { "more than" } else { "at least" };
        return Err(format!("must be {relation} {min}"));
    }
    if let Some(max) = s.get("maximum").and_then(Value::as_f64)
        && n > max
    {
        return Err(format!("must be at most {max}"));
    }
    Ok(())
}

fn array(
    root: &Value,
    s: &Map<String, Value>,
    items: &[Value],
    path: &str,
) -> Result<(), SchemaViolation> {
    let fail = |message: String| SchemaViolation {
        path: path.to_owned(),
        message,
    };
    if let Some(min) = s.get("minItems").and_then(Value::as_u64)
        && (items.len() as u64) < min
    {
        return Err(fail(format!("must have at least {min} items")));
    }
    if let Some(max) = s.get("maxItems").and_then(Value::as_u64)
        && (items.len() as u64) > max
    {
        return Err(fail(format!("must have at most {max} items")));
    }
    if let Some(item_schema) = s.get("items") {
        for (i, item) in items.iter().enumerate() {
            validate_in(root, item_schema, item, &format!("{path}[{i}]"))?;
        }
    }
    Ok(())
}

fn object(
    root: &Value,
    s: &Map<String, Value>,
    fields: &Map<String, Value>,
    path: &str,
) -> Result<(), SchemaViolation> {
    let field_path = |key: &str| {
        if path.is_empty() {
            key.to_owned()
        } else {
            format!("{path}.{key}")
        }
    };
    if let Some(Value::Array(required)) = s.get("required") {
        for key in required.iter().filter_map(Value::as_str) {
            if !fields.contains_key(key) {
                return Err(SchemaViolation {
                    path: field_path(key),
                    message: "is required".to_owned(),
                });
            }
        }
    }
    let properties = s.get("properties").and_then(Value::as_object);
    for (key, value) in fields {
        match properties.and_then(|p| p.get(key)) {
            Some(schema) => validate_in(root, schema, value, &field_path(key))?,
            None => match s.get("additionalProperties") {
                Some(Value::Bool(false)) => {
                    return Err(SchemaViolation {
                        path: field_path(key),
                        message: "is not a known field here".to_owned(),
                    });
                }
                Some(extra @ Value::Object(_)) => {
                    validate_in(root, extra, value, &field_path(key))?
                }
                _ => {}
            },
        }
    }
    Ok(())
}

/// Inserts the schema's `default` for every absent property of `value` (and of the
/// objects and arrays inside it), as a client of the reference would see them filled.
pub fn fill_defaults(schema: &Value, value: &mut Value) {
    let schema = resolve(reference(), schema);
    if let Some(Value::Array(parts)) = schema.get("allOf") {
        for part in parts {
            fill_defaults(part, value);
        }
    }
    match value {
        Value::Object(fields) => {
            let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
                return;
            };
            for (key, property) in properties {
                let property = resolve(reference(), property);
                if !fields.contains_key(key)
                    && let Some(default) = property.get("default")
                {
                    fields.insert(key.clone(), default.clone());
                }
                if let Some(inner) = fields.get_mut(key) {
                    fill_defaults(property, inner);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for item in items {
                    fill_defaults(item_schema, item);
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check(name: &str, value: Value) -> Result<(), SchemaViolation> {
        let Some(schema) = component(name) else {
            panic!("no schema {name}")
        };
        validate(schema, &value, "request")
    }

    #[test]
    fn the_reference_is_embedded_and_parsed() {
        assert!(component("ChecksV1SslRequest").is_some());
        assert!(component("NoSuchSchema").is_none());
    }

    #[test]
    fn violations_name_the_field_and_the_rule() {
        let ok = json!({"sslConfig": {"hostname": "example.test", "port": 443}});
        assert_eq!(check("ChecksV1SslRequest", ok), Ok(()));
        let cases = [
            (json!({}), "request.sslConfig", "is required"),
            (
                json!({"sslConfig": {"hostname": "h", "port": 70000}}),
                "request.sslConfig.port",
                "at most 65535",
            ),
            (
                json!({"sslConfig": {"hostname": ""}}),
                "request.sslConfig.hostname",
                "must not be empty",
            ),
            (
                json!({"sslConfig": {"hostname": "a\u{1}b"}}),
                "request.sslConfig.hostname",
                "must match",
            ),
            (
                json!({"sslConfig": {"hostname": "h", "ipFamily": "IPv5"}}),
                "request.sslConfig.ipFamily",
                "one of \"IPv4\", \"IPv6\"",
            ),
            (
                json!({"sslConfig": {"hostname": "h"}, "sslClientCertificateId": "nope"}),
                "request.sslClientCertificateId",
                "UUID",
            ),
            (
                json!({"sslConfig": {"hostname": "h", "securityBaseline": {"minTLSVersion": {"x": 1}}}}),
                "request.sslConfig.securityBaseline.minTLSVersion.x",
                "not a known field",
            ),
            (
                json!({"sslConfig": {"hostname": "h"}, "assertions": [{"source": "CERTIFICATE"}]}),
                "request.assertions[0].comparison",
                "is required",
            ),
            (json!([1]), "request", "must be an object"),
        ];
        for (value, path, message) in cases {
            let Err(e) = check("ChecksV1SslRequest", value.clone()) else {
                panic!("{value} was accepted")
            };
            assert_eq!(e.path, path, "{value}");
            assert!(e.message.contains(message), "{value}: {}", e.message);
        }
    }

    #[test]
    fn nullable_enums_and_integers() {
        let read = "ChecksV1TracerouteRequestRead";
        assert_eq!(check(read, json!({"url": "h", "maxHops": null})), Ok(()));
        assert_eq!(check(read, json!({"protocol": null})), Ok(()));
        let e = check(read, json!({"maxHops": 2.5})).unwrap_err();
        assert_eq!(e.message, "must be an integer or null");
        let e = check(read, json!({"maxHops": 0})).unwrap_err();
        assert_eq!(e.message, "must be at least 1");
    }

    #[test]
    fn defaults_are_filled_recursively_and_never_replace_values() {
        let Some(schema) = component("ChecksV1SslRequest") else {
            panic!("no schema")
        };
        let mut value = json!({"sslConfig": {"hostname": "h", "port": 8443,
            "securityBaseline": {"minTLSVersion": {"value": "TLS1.3"}}}});
        fill_defaults(schema, &mut value);
        assert_eq!(value["assertions"], json!([]));
        let config = &value["sslConfig"];
        assert_eq!(config["port"], 8443);
        assert_eq!(config["ipFamily"], "IPv4");
        assert_eq!(config["handshakeTimeoutMs"], 10000);
        assert_eq!(
            config["securityBaseline"]["minTLSVersion"],
            json!({"value": "TLS1.3", "severity": "fail"})
        );
        assert_eq!(validate(schema, &value, ""), Ok(()));
    }
}
