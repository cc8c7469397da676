//! Field readers of the status-page bodies and queries: every error is a 400 whose
//! message starts with the path of the field (`cards[1].services[0].id: ...`).

use chrono::DateTime;
use serde_json::{Map, Value};
use uuid::Uuid;

use crate::service::errors::ApiError;

/// Longest name of a page, card, service or incident (characters).
pub const MAX_NAME_CHARS: usize = 255;
/// Longest page description (characters).
pub const MAX_PAGE_DESCRIPTION_CHARS: usize = 500;
/// Longest incident update description (characters).
pub const MAX_UPDATE_DESCRIPTION_CHARS: usize = 10_000;
/// Longest URL of a logo, favicon or redirect.
pub const MAX_LINK_LEN: usize = 2048;
/// Default and largest `limit` of the cursor listings.
pub const DEFAULT_LIMIT: i64 = 20;
pub const MAX_LIMIT: i64 = 100;

/// The body as a JSON object.
pub fn object(body: Value) -> Result<Map<String, Value>, ApiError> {
    match body {
        Value::Object(m) => Ok(m),
        _ => Err(ApiError::bad_request("the body must be a JSON object")),
    }
}

/// `base.field`, or `field` at the top level.
pub fn path(base: &str, field: &str) -> String {
    if base.is_empty() {
        field.to_owned()
    } else {
        format!("{base}.{field}")
    }
}

/// A required, non-blank string of at most `max` characters (trimmed).
pub fn name(
    map: &Map<String, Value>,
    base: &str,
    field: &str,
    max: usize,
) -> Result<String, ApiError> {
    let at = path(base, field);
    match map.get(field) {
        None | Some(Value::Null) => Err(ApiError::invalid(&at, "is required")),
        Some(Value::String(s)) if s.trim().is_empty() => {
            Err(ApiError::invalid(&at, "must not be empty"))
        }
        Some(Value::String(s)) if s.chars().count() > max => Err(ApiError::invalid(
            &at,
            format!("must be at most {max} characters"),
        )),
        Some(Value::String(s)) => Ok(s.trim().to_owned()),
        Some(_) => Err(ApiError::invalid(&at, "must be a string")),
    }
}

/// An optional (absent or null) string of at most `max` characters.
pub fn opt_string(
    map: &Map<String, Value>,
    field: &str,
    max: usize,
) -> Result<Option<String>, ApiError> {
    match map.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.chars().count() > max => Err(ApiError::invalid(
            field,
            format!("must be at most {max} characters"),
        )),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(ApiError::invalid(field, "must be a string or null")),
    }
}

/// An optional boolean with its default.
pub fn bool_or(map: &Map<String, Value>, field: &str, default: bool) -> Result<bool, ApiError> {
    match map.get(field) {
        None | Some(Value::Null) => Ok(default),
        Some(Value::Bool(b)) => Ok(*b),
        Some(_) => Err(ApiError::invalid(field, "must be true or false")),
    }
}

/// A UUID given as a string.
pub fn uuid(value: Option<&Value>, at: &str) -> Result<Uuid, ApiError> {
    match value {
        None | Some(Value::Null) => Err(ApiError::invalid(at, "is required")),
        Some(Value::String(s)) => {
            Uuid::parse_str(s.trim()).map_err(|_| ApiError::invalid(at, "must be a UUID"))
        }
        Some(_) => Err(ApiError::invalid(at, "must be a UUID string")),
    }
}

/// An optional enum value; `parse` knows the allowed spellings listed in `allowed`.
pub fn opt_enum<T>(
    map: &Map<String, Value>,
    field: &str,
    parse: fn(&str) -> Option<T>,
    allowed: &[&str],
) -> Result<Option<T>, ApiError> {
    match map.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => parse(s).map(Some).ok_or_else(|| {
            ApiError::invalid(field, format!("must be one of {}", allowed.join(", ")))
        }),
        Some(_) => Err(ApiError::invalid(
            field,
            format!("must be one of {}", allowed.join(", ")),
        )),
    }
}

/// An optional array of at most `max` items (absent or null = empty).
pub fn array<'a>(
    map: &'a Map<String, Value>,
    base: &str,
    field: &str,
    max: usize,
) -> Result<&'a [Value], ApiError> {
    let at = path(base, field);
    match map.get(field) {
        None | Some(Value::Null) => Ok(&[]),
        Some(Value::Array(a)) if a.len() > max => Err(ApiError::invalid(
            &at,
            format!("must have at most {max} items"),
        )),
        Some(Value::Array(a)) => Ok(a),
        Some(_) => Err(ApiError::invalid(&at, "must be an array")),
    }
}

/// An item of an array as an object.
pub fn item<'a>(value: &'a Value, at: &str) -> Result<&'a Map<String, Value>, ApiError> {
    value
        .as_object()
        .ok_or_else(|| ApiError::invalid(at, "must be an object"))
}

/// An optional RFC 3339 time in store milliseconds.
pub fn opt_time(map: &Map<String, Value>, field: &str) -> Result<Option<i64>, ApiError> {
    match map.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => DateTime::parse_from_rfc3339(s.trim())
            .map(|t| Some(t.timestamp_millis()))
            .map_err(|_| ApiError::invalid(field, "must be an ISO 8601 date-time")),
        Some(_) => Err(ApiError::invalid(
            field,
            "must be an ISO 8601 date-time string",
        )),
    }
}

/// A read-only time a client may send back (`created_at`, `updated_at`): ignored, but
/// when present it must be what the reference types it, a date (`YYYY-MM-DD`; an
/// RFC 3339 time is accepted too, as older answers showed).
pub fn ignored_date(map: &Map<String, Value>, field: &str) -> Result<(), ApiError> {
    match map.get(field) {
        None => Ok(()),
        Some(Value::String(s))
            if chrono::NaiveDate::parse_from_str(s.trim(), "%Y-%m-%d").is_ok()
                || DateTime::parse_from_rfc3339(s.trim()).is_ok() =>
        {
            Ok(())
        }
        Some(_) => Err(ApiError::invalid(field, "must be a date (YYYY-MM-DD)")),
    }
}

/// An optional http(s) URL (absent or null = none).
pub fn opt_link(map: &Map<String, Value>, field: &str) -> Result<Option<String>, ApiError> {
    let Some(s) = opt_string(map, field, MAX_LINK_LEN)? else {
        return Ok(None);
    };
    match url::Url::parse(s.trim()) {
        Ok(u) if matches!(u.scheme(), "http" | "https") && u.host().is_some() => {
            Ok(Some(s.trim().to_owned()))
        }
        _ => Err(ApiError::invalid(field, "must be an http or https URL")),
    }
}

/// Whether `s` is a plausible email address: one `@`, a non-empty local part, a domain
/// of dot-separated labels, no spaces or control characters, at most 254 bytes.
pub fn valid_email(s: &str) -> bool {
    if s.len() > 254 || s.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return false;
    }
    let Some((local, domain)) = s.split_once('@') else {
        return false;
    };
    !local.is_empty()
        && local.len() <= 64
        && !domain.contains('@')
        && domain.contains('.')
        && domain.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
}

/// `limit`, `nextId` and `paginated` of the cursor listings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cursor {
    pub limit: i64,
    pub next_id: Option<Uuid>,
    pub paginated: bool,
}

/// Reads the cursor parameters of a query string; others are ignored.
pub fn cursor(raw: Option<&str>) -> Result<Cursor, ApiError> {
    let mut out = Cursor {
        limit: DEFAULT_LIMIT,
        next_id: None,
        paginated: true,
    };
    for (key, value) in url::form_urlencoded::parse(raw.unwrap_or_default().as_bytes()) {
        match key.as_ref() {
            "limit" => {
                out.limit = value
                    .trim()
                    .parse::<i64>()
                    .ok()
                    .filter(|l| (1..=MAX_LIMIT).contains(l))
                    .ok_or_else(|| {
                        ApiError::invalid(
                            "limit",
                            format!("must be an integer between 1 and {MAX_LIMIT}"),
                        )
                    })?;
            }
            "nextId" if value.trim().is_empty() => out.next_id = None,
            "nextId" => {
                out.next_id = Some(Uuid::parse_str(value.trim()).map_err(|_| {
                    ApiError::invalid("nextId", "must be the nextId of a previous answer")
                })?);
            }
            "paginated" => {
                out.paginated = match value.as_ref() {
                    "true" => true,
                    "false" => false,
                    _ => return Err(ApiError::invalid("paginated", "must be true or false")),
                };
            }
            _ => {}
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn emails() {
        assert!(valid_email("ops@example.com"));
        assert!(valid_email("a.b+c@sub.example.org"));
        for bad in [
            "",
            "a",
            "a@b",
            "@b.c",
            "a@b..c",
            "a b@c.d",
            "a@-b.c",
            "a@b.c@d.e",
        ] {
            assert!(!valid_email(bad), "{bad}");
        }
    }

    #[test]
    fn cursors() {
        let c = cursor(None).unwrap();
        assert_eq!(
            (c.limit, c.next_id, c.paginated),
            (DEFAULT_LIMIT, None, true)
        );
        let id = Uuid::new_v4();
        let c = cursor(Some(&format!("limit=5&nextId={id}&paginated=false"))).unwrap();
        assert_eq!((c.limit, c.next_id, c.paginated), (5, Some(id), false));
        for bad in [
            "limit=0",
            "limit=101",
            "limit=x",
            "nextId=nope",
            "paginated=1",
        ] {
            let e = cursor(Some(bad)).unwrap_err();
            assert!(
                e.message.starts_with(bad.split('=').next().unwrap()),
                "{bad}: {e:?}"
            );
        }
    }
}
