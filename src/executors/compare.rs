//! The comparisons of the assertion vocabulary, applied to one actual value and one
//! target string, plus a tiny JSON path for picking the actual value out of a document.
//!
//! Values are JSON values so text (a TCP response, a DNS text answer), numbers (a
//! response time) and structures (a DNS JSON answer) go through one function. A missing
//! value (`None`: the JSON path matched nothing) behaves like JSON `null`.
//!
//! Rules, written down so another assertion engine can adopt or replace them:
//! - EQUALS / NOT_EQUALS, LESS_THAN / GREATER_THAN: numeric when both the actual value
//!   (its text form, see [`text_form`]) and the target parse as finite numbers, else a
//!   string comparison (byte-wise lexicographic for LESS_THAN / GREATER_THAN). A missing
//!   value is never equal to, less than or greater than anything.
//! - CONTAINS: a substring of text; an element of an array (each element compared with
//!   EQUALS); a substring of the compact JSON of an object; a substring of a number's
//!   text form. Never for a missing value.
//! - IS_EMPTY: missing, null, `""`, `[]` or `{}`.
//! - IS_NULL: missing or null.
//! - HAS_KEY: an object with a member named `target`.
//! - HAS_VALUE: an object with a member value, or an array with an element, EQUALS to
//!   `target`; a scalar EQUALS to `target`.
//! - Every NOT_X is exactly the negation of X, also for a missing value.

use serde_json::Value;

use crate::model::Comparison;

/// Largest number of bytes of an actual value reported in an assertion result.
pub const MAX_ACTUAL_BYTES: usize = 1024;

/// Whether `actual` satisfies `comparison` against `target`.
pub fn compare(comparison: Comparison, actual: Option<&Value>, target: &str) -> bool {
    use Comparison::*;
    match comparison {
        Equals => equals(actual, target),
        NotEquals => !equals(actual, target),
        LessThan => order(actual, target) == Some(std::cmp::Ordering::Less),
        GreaterThan => order(actual, target) == Some(std::cmp::Ordering::Greater),
        Contains => contains(actual, target),
        NotContains => !contains(actual, target),
        IsEmpty => is_empty(actual),
        NotEmpty => !is_empty(actual),
        IsNull => is_null(actual),
        NotNull => !is_null(actual),
        HasKey => has_key(actual, target),
        NotHasKey => !has_key(actual, target),
        HasValue => has_value(actual, target),
        NotHasValue => !has_value(actual, target),
    }
}

/// The text a value is compared as: strings as they are, numbers and booleans in their
/// JSON form, null as `null`, arrays and objects as compact JSON.
pub fn text_form(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The actual value as an assertion result reports it: its text form cut at
/// [`MAX_ACTUAL_BYTES`] (on a character boundary); `None` for a missing value.
pub fn reported_actual(actual: Option<&Value>) -> Option<String> {
    let mut text = text_form(actual?);
    if text.len() > MAX_ACTUAL_BYTES {
        let mut cut = MAX_ACTUAL_BYTES;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
    }
    Some(text)
}

fn number(text: &str) -> Option<f64> {
    text.trim().parse::<f64>().ok().filter(|n| n.is_finite())
}

fn equals(actual: Option<&Value>, target: &str) -> bool {
    let Some(actual) = actual else {
        return false;
    };
    let text = text_form(actual);
    match (number(&text), number(target)) {
        (Some(a), Some(t)) => a == t,
        _ => text == target,
    }
}

fn order(actual: Option<&Value>, target: &str) -> Option<std::cmp::Ordering> {
    let text = text_form(actual?);
    match (number(&text), number(target)) {
        (Some(a), Some(t)) => a.partial_cmp(&t),
        _ => Some(text.as_str().cmp(target)),
    }
}

fn contains(actual: Option<&Value>, target: &str) -> bool {
    match actual {
        None | Some(Value::Null) => false,
        Some(Value::Array(items)) => items.iter().any(|item| equals(Some(item), target)),
        Some(other) => text_form(other).contains(target),
    }
}

fn is_empty(actual: Option<&Value>) -> bool {
    match actual {
        None | Some(Value::Null) => true,
        Some(Value::String(s)) => s.is_empty(),
        Some(Value::Array(items)) => items.is_empty(),
        Some(Value::Object(members)) => members.is_empty(),
        Some(Value::Bool(_) | Value::Number(_)) => false,
    }
}

fn is_null(actual: Option<&Value>) -> bool {
    matches!(actual, None | Some(Value::Null))
}

fn has_key(actual: Option<&Value>, target: &str) -> bool {
    matches!(actual, Some(Value::Object(members)) if members.contains_key(target))
}

fn has_value(actual: Option<&Value>, target: &str) -> bool {
    match actual {
        None => false,
        Some(Value::Object(members)) => members.values().any(|v| equals(Some(v), target)),
        Some(Value::Array(items)) => items.iter().any(|v| equals(Some(v), target)),
        Some(scalar) => equals(Some(scalar), target),
    }
}

/// Longest JSON path accepted.
pub const MAX_JSON_PATH_LEN: usize = 512;

/// One step of a [`JsonPath`].
#[derive(Debug, Clone, PartialEq, Eq)]
enum Step {
    /// A member of an object. On an array, `length` is the number of elements.
    Key(String),
    /// An element of an array.
    Index(usize),
}

/// A JSON path of the tiny subset DNS answers need: `$` (or nothing) for the whole
/// document, `.key` steps, `[n]` index steps and `['key']` / `["key"]` steps; a leading
/// key needs no dot (`Answer[0].data` is `$.Answer[0].data`). `.length` on an array is
/// its number of elements.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsonPath {
    steps: Vec<Step>,
}

/// A JSON path outside the supported subset.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid JSON path: {0}")]
pub struct JsonPathError(String);

impl JsonPath {
    /// Parses `path`.
    pub fn parse(path: &str) -> Result<JsonPath, JsonPathError> {
        if path.len() > MAX_JSON_PATH_LEN {
            return Err(JsonPathError(format!(
                "longer than {MAX_JSON_PATH_LEN} characters"
            )));
        }
        let path = path.trim();
        let mut rest = path.strip_prefix('$').unwrap_or(path);
        let mut steps = Vec::new();
        let mut first = true;
        while !rest.is_empty() {
            if let Some(after) = rest.strip_prefix('[') {
                let close = after
                    .find(']')
                    .ok_or_else(|| JsonPathError("a `[` is not closed".into()))?;
                let inside = after[..close].trim();
                steps.push(bracket_step(inside)?);
                rest = &after[close + 1..];
            } else {
                let body = match rest.strip_prefix('.') {
                    Some(body) => body,
                    None if first && !path.starts_with('$') => rest,
                    None => {
                        return Err(JsonPathError(format!(
                            "expected `.` or `[` before {rest:?}"
                        )));
                    }
                };
                let end = body.find(['.', '[']).unwrap_or(body.len());
                let key = &body[..end];
                if key.is_empty() {
                    return Err(JsonPathError("a key is empty".into()));
                }
                steps.push(Step::Key(key.to_owned()));
                rest = &body[end..];
            }
            first = false;
        }
        Ok(JsonPath { steps })
    }

    /// The value at this path in `doc`, or `None` if there is none.
    pub fn find<'a>(&self, doc: &'a Value) -> Option<std::borrow::Cow<'a, Value>> {
        use std::borrow::Cow;
        let mut at = doc;
        for (i, step) in self.steps.iter().enumerate() {
            match (step, at) {
                (Step::Key(key), Value::Object(members)) => at = members.get(key)?,
                (Step::Key(key), Value::Array(items)) if key == "length" => {
                    // A number is a leaf: it is the answer only if this is the last step.
                    return (i + 1 == self.steps.len())
                        .then(|| Cow::Owned(Value::from(items.len())));
                }
                (Step::Index(n), Value::Array(items)) => at = items.get(*n)?,
                _ => return None,
            }
        }
        Some(Cow::Borrowed(at))
    }
}

fn bracket_step(inside: &str) -> Result<Step, JsonPathError> {
    for quote in ['\'', '"'] {
        if let Some(key) = inside
            .strip_prefix(quote)
            .and_then(|s| s.strip_suffix(quote))
        {
            return Ok(Step::Key(key.to_owned()));
        }
    }
    inside
        .parse::<usize>()
        .map(Step::Index)
        .map_err(|_| JsonPathError(format!("[{inside}] is not an index or a quoted key")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use Comparison::*;
    use serde_json::json;

    fn s(text: &str) -> Value {
        Value::String(text.into())
    }

    #[test]
    fn equality_is_numeric_when_both_sides_are_numbers() {
        assert!(compare(Equals, Some(&json!(200)), "200.0"));
        assert!(compare(Equals, Some(&s("1e3")), "1000"));
        assert!(!compare(Equals, Some(&s("abc")), "ABC"));
        assert!(compare(Equals, Some(&s("abc")), "abc"));
        assert!(compare(NotEquals, Some(&s("abc")), "abd"));
        assert!(!compare(Equals, None, ""));
        assert!(compare(NotEquals, None, "x"));
        assert!(compare(Equals, Some(&json!(true)), "true"));
    }

    #[test]
    fn ordering_is_numeric_else_lexicographic() {
        assert!(compare(LessThan, Some(&json!(9.5)), "10"));
        assert!(!compare(LessThan, Some(&json!(10)), "10"));
        assert!(compare(GreaterThan, Some(&s("11")), "9"));
        assert!(compare(LessThan, Some(&s("abc")), "abd"));
        assert!(!compare(GreaterThan, None, "0"));
        assert!(!compare(LessThan, None, "0"));
    }

    #[test]
    fn containment() {
        assert!(compare(Contains, Some(&s("hello world")), "lo wo"));
        assert!(!compare(Contains, Some(&s("hello")), "x"));
        assert!(compare(NotContains, Some(&s("hello")), "x"));
        assert!(compare(Contains, Some(&json!(["a", 2])), "2"));
        assert!(!compare(Contains, Some(&json!(["ab"])), "a"));
        assert!(compare(Contains, Some(&json!({"k": "v"})), "\"k\""));
        assert!(!compare(Contains, None, ""));
        assert!(compare(NotContains, None, "x"));
    }

    #[test]
    fn emptiness_and_null() {
        for empty in [json!(null), s(""), json!([]), json!({})] {
            assert!(compare(IsEmpty, Some(&empty), ""), "{empty}");
            assert!(!compare(NotEmpty, Some(&empty), ""), "{empty}");
        }
        assert!(compare(IsEmpty, None, ""));
        assert!(compare(NotEmpty, Some(&json!(0)), ""));
        assert!(compare(NotEmpty, Some(&s(" ")), ""));
        assert!(compare(IsNull, None, ""));
        assert!(compare(IsNull, Some(&json!(null)), ""));
        assert!(!compare(IsNull, Some(&s("")), ""));
        assert!(compare(NotNull, Some(&s("")), ""));
    }

    #[test]
    fn keys_and_values() {
        let doc = json!({"a": 1, "b": "x"});
        assert!(compare(HasKey, Some(&doc), "a"));
        assert!(!compare(HasKey, Some(&doc), "c"));
        assert!(compare(NotHasKey, Some(&doc), "c"));
        assert!(!compare(HasKey, Some(&s("a")), "a"));
        assert!(compare(HasValue, Some(&doc), "1.0"));
        assert!(compare(HasValue, Some(&doc), "x"));
        assert!(!compare(HasValue, Some(&doc), "a"));
        assert!(compare(NotHasValue, Some(&doc), "a"));
        assert!(compare(HasValue, Some(&json!([1, 2])), "2"));
        assert!(compare(HasValue, Some(&s("x")), "x"));
        assert!(!compare(HasValue, None, "x"));
    }

    #[test]
    fn reported_actual_is_bounded() {
        let long = s(&"é".repeat(MAX_ACTUAL_BYTES));
        let reported = reported_actual(Some(&long)).unwrap();
        assert!(reported.len() <= MAX_ACTUAL_BYTES);
        assert!(reported.starts_with("éé"));
        assert_eq!(reported_actual(None), None);
        assert_eq!(reported_actual(Some(&json!(12.5))), Some("12.5".into()));
    }

    #[test]
    fn json_paths() {
        let doc = json!({"Status": "NOERROR", "Answer": [{"data": "1.2.3.4", "TTL": 60}],
                         "odd key": {"x": 1}});
        let find = |p: &str| {
            JsonPath::parse(p)
                .unwrap()
                .find(&doc)
                .map(|v| v.into_owned())
        };
        assert_eq!(find("$"), Some(doc.clone()));
        assert_eq!(find(""), Some(doc.clone()));
        assert_eq!(find("$.Status"), Some(s("NOERROR")));
        assert_eq!(find("Status"), Some(s("NOERROR")));
        assert_eq!(find("$.Answer[0].data"), Some(s("1.2.3.4")));
        assert_eq!(find("Answer[0].TTL"), Some(json!(60)));
        assert_eq!(find("$['odd key'].x"), Some(json!(1)));
        assert_eq!(find("$.Answer.length"), Some(json!(1)));
        assert_eq!(find("$.Answer[1]"), None);
        assert_eq!(find("$.Status.x"), None);
        assert_eq!(find("$.Missing"), None);
        for bad in ["$.", "$[", "$[x]", "$Status", "$..a", "$.a[0"] {
            assert!(JsonPath::parse(bad).is_err(), "{bad}");
        }
    }
}
