//! The assertion engine every executor shares: given the actual value an assertion's
//! source produced, apply its regex and comparison and report the outcome.
//!
//! An executor finds the actual value (a status code, a header, a JSON node, a DNS
//! answer...) and calls [`evaluate`]. The rules:
//!
//! - A regex, if set, is applied to the actual value's text first; the first capture
//!   group (or the whole match without groups) becomes the actual value; no match means
//!   there is no actual value.
//! - EQUALS, GREATER_THAN and LESS_THAN compare numbers when both sides parse as finite
//!   numbers, else strings (byte-wise order for the two orderings).
//! - CONTAINS is a substring test on the text; HAS_KEY tests an object's member;
//!   HAS_VALUE tests an array's elements or an object's values (a scalar: EQUALS).
//! - IS_EMPTY holds for no value, `null`, `""`, `[]` and `{}`; IS_NULL for no value and
//!   `null`.
//! - Every NOT_ comparison is the negation of its positive, so "no value" passes them.
//! - Without an actual value, EQUALS, HAS_*, GREATER_THAN, LESS_THAN and CONTAINS fail.

use std::borrow::Cow;

use serde_json::Value;

use crate::model::check::compile_regex;
use crate::model::{Assertion, AssertionResult, Comparison};

/// Bytes of an actual value kept in an [`AssertionResult`].
pub const MAX_ACTUAL_BYTES: usize = 1024;

/// The value an assertion's source produced.
#[derive(Debug, Clone, PartialEq)]
pub enum Actual<'a> {
    /// Nothing there: no such header, JSON path or capture.
    Missing,
    /// Text: a status code, a header value, a body, a time in milliseconds.
    Text(Cow<'a, str>),
    /// A JSON value (a node of a JSON body or answer).
    Json(Cow<'a, Value>),
}

impl Actual<'_> {
    /// The value as text: strings as they are, other JSON values serialized.
    pub fn text(&self) -> Option<Cow<'_, str>> {
        match self {
            Actual::Missing => None,
            Actual::Text(s) => Some(Cow::Borrowed(s.as_ref())),
            Actual::Json(v) => Some(json_text(v)),
        }
    }
}

fn json_text(v: &Value) -> Cow<'_, str> {
    match v {
        Value::String(s) => Cow::Borrowed(s.as_str()),
        other => Cow::Owned(other.to_string()),
    }
}

/// Evaluates `assertion` against what its JSON path (`property`) selects in `doc`; several
/// matches form an array. A path outside the supported subset fails the assertion.
pub fn evaluate_json_path(assertion: &Assertion, doc: &Value) -> AssertionResult {
    let Ok(path) = crate::model::jsonpath::JsonPath::parse(&assertion.property) else {
        return outcome(assertion, None, false);
    };
    use crate::model::jsonpath::Selection;
    let actual = match path.select(doc) {
        Selection::Nothing => Actual::Missing,
        Selection::One(v) => Actual::Json(v),
        Selection::Many(vs) => Actual::Json(Cow::Owned(Value::Array(
            vs.into_iter().map(Cow::into_owned).collect(),
        ))),
    };
    evaluate(assertion, actual)
}

/// Evaluates `assertion` against `actual`, applying the assertion's own regex.
pub fn evaluate(assertion: &Assertion, actual: Actual<'_>) -> AssertionResult {
    evaluate_with_regex(assertion, actual, assertion.regex())
}

/// Evaluates `assertion` against `actual`, applying `regex` (an executor may take it from
/// elsewhere than the `regex` field, e.g. a text body's `property`). A regex that does
/// not compile fails the assertion.
pub fn evaluate_with_regex(
    assertion: &Assertion,
    actual: Actual<'_>,
    regex: Option<&str>,
) -> AssertionResult {
    let actual = match regex {
        Some(pattern) => match compile_regex(pattern) {
            Ok(re) => match actual.text() {
                Some(text) => extract(&re, &text)
                    .map_or(Actual::Missing, |s| Actual::Text(Cow::Owned(s.to_owned()))),
                None => Actual::Missing,
            },
            Err(_) => return outcome(assertion, None, false),
        },
        None => actual,
    };
    let passed = compare(assertion.comparison, &actual, &assertion.target);
    outcome(assertion, actual.text().as_deref(), passed)
}

/// The first capture group of the first match, or the whole match if the regex has no
/// group (or the group did not take part).
pub fn extract<'t>(regex: &regex::Regex, text: &'t str) -> Option<&'t str> {
    let captures = regex.captures(text)?;
    captures
        .get(1)
        .or_else(|| captures.get(0))
        .map(|m| m.as_str())
}

/// An [`AssertionResult`] for `assertion` with `actual` cut to [`MAX_ACTUAL_BYTES`].
pub fn outcome(assertion: &Assertion, actual: Option<&str>, passed: bool) -> AssertionResult {
    AssertionResult {
        source: assertion.source,
        comparison: assertion.comparison,
        property: assertion.property.clone(),
        target: assertion.target.clone(),
        actual: actual.map(|a| truncate(a, MAX_ACTUAL_BYTES).to_owned()),
        passed,
    }
}

fn truncate(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// Whether `actual` stands in relation `comparison` to `target`.
pub fn compare(comparison: Comparison, actual: &Actual<'_>, target: &str) -> bool {
    use Comparison as C;
    match comparison {
        C::Equals => equals(actual, target),
        C::NotEquals => !equals(actual, target),
        C::HasKey => has_key(actual, target),
        C::NotHasKey => !has_key(actual, target),
        C::HasValue => has_value(actual, target),
        C::NotHasValue => !has_value(actual, target),
        C::IsEmpty => is_empty(actual),
        C::NotEmpty => !is_empty(actual),
        C::GreaterThan => order(actual, target) == Some(std::cmp::Ordering::Greater),
        C::LessThan => order(actual, target) == Some(std::cmp::Ordering::Less),
        C::Contains => contains(actual, target),
        C::NotContains => !contains(actual, target),
        C::IsNull => is_null(actual),
        C::NotNull => !is_null(actual),
    }
}

/// A finite number, if `s` (trimmed) is one.
fn number(s: &str) -> Option<f64> {
    s.trim().parse::<f64>().ok().filter(|n| n.is_finite())
}

fn equals(actual: &Actual<'_>, target: &str) -> bool {
    let Some(text) = actual.text() else {
        return false;
    };
    match (number(&text), number(target)) {
        (Some(a), Some(t)) => a == t,
        _ => text == target,
    }
}

fn order(actual: &Actual<'_>, target: &str) -> Option<std::cmp::Ordering> {
    let text = actual.text()?;
    match (number(&text), number(target)) {
        (Some(a), Some(t)) => a.partial_cmp(&t),
        _ => Some(text.as_ref().cmp(target)),
    }
}

fn contains(actual: &Actual<'_>, target: &str) -> bool {
    actual.text().is_some_and(|text| text.contains(target))
}

/// The actual value as JSON: JSON as it is, text parsed if it is JSON.
fn as_json<'a>(actual: &'a Actual<'_>) -> Option<Cow<'a, Value>> {
    match actual {
        Actual::Missing => None,
        Actual::Json(v) => Some(Cow::Borrowed(v.as_ref())),
        Actual::Text(s) => serde_json::from_str(s).ok().map(Cow::Owned),
    }
}

fn has_key(actual: &Actual<'_>, target: &str) -> bool {
    matches!(as_json(actual).as_deref(), Some(Value::Object(map)) if map.contains_key(target))
}

fn has_value(actual: &Actual<'_>, target: &str) -> bool {
    let element_equals = |v: &Value| equals(&Actual::Json(Cow::Borrowed(v)), target);
    match as_json(actual).as_deref() {
        Some(Value::Array(items)) => items.iter().any(element_equals),
        Some(Value::Object(map)) => map.values().any(element_equals),
        Some(_) | None => equals(actual, target),
    }
}

fn is_empty(actual: &Actual<'_>) -> bool {
    match actual {
        Actual::Missing => true,
        Actual::Text(s) => s.is_empty(),
        Actual::Json(v) => match v.as_ref() {
            Value::Null => true,
            Value::String(s) => s.is_empty(),
            Value::Array(items) => items.is_empty(),
            Value::Object(map) => map.is_empty(),
            Value::Bool(_) | Value::Number(_) => false,
        },
    }
}

fn is_null(actual: &Actual<'_>) -> bool {
    match actual {
        Actual::Missing => true,
        Actual::Json(v) => v.is_null(),
        Actual::Text(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::AssertionSource;
    use serde_json::json;

    fn text(s: &str) -> Actual<'static> {
        Actual::Text(Cow::Owned(s.to_owned()))
    }

    fn json(v: Value) -> Actual<'static> {
        Actual::Json(Cow::Owned(v))
    }

    fn assertion(comparison: Comparison, target: &str, regex: Option<&str>) -> Assertion {
        Assertion {
            source: AssertionSource::TextBody,
            comparison,
            property: String::new(),
            target: target.into(),
            regex: regex.map(str::to_owned),
        }
    }

    #[test]
    fn every_comparison_true_and_false() {
        use Comparison as C;
        let cases: Vec<(C, Actual<'static>, &str, bool)> = vec![
            (C::Equals, text("200"), "200", true),
            (C::Equals, text("200"), "200.0", true),
            (C::Equals, text("abc"), "abd", false),
            (C::Equals, Actual::Missing, "", false),
            (C::NotEquals, text("abc"), "abd", true),
            (C::NotEquals, json(json!(7)), "7", false),
            (C::NotEquals, Actual::Missing, "x", true),
            (C::HasKey, json(json!({"a": 1})), "a", true),
            (C::HasKey, json(json!({"a": 1})), "b", false),
            (C::HasKey, text(r#"{"a": 1}"#), "a", true),
            (C::HasKey, json(json!(["a"])), "a", false),
            (C::NotHasKey, json(json!({"a": 1})), "b", true),
            (C::NotHasKey, json(json!({"a": 1})), "a", false),
            (C::HasValue, json(json!(["x", 2])), "2", true),
            (C::HasValue, json(json!({"k": "x"})), "x", true),
            (C::HasValue, json(json!(["x", 2])), "3", false),
            (C::HasValue, text("x"), "x", true),
            (C::NotHasValue, json(json!(["x"])), "y", true),
            (C::NotHasValue, json(json!(["x"])), "x", false),
            (C::IsEmpty, json(json!([])), "", true),
            (C::IsEmpty, json(json!({})), "", true),
            (C::IsEmpty, json(Value::Null), "", true),
            (C::IsEmpty, text(""), "", true),
            (C::IsEmpty, Actual::Missing, "", true),
            (C::IsEmpty, json(json!([1])), "", false),
            (C::IsEmpty, json(json!(0)), "", false),
            (C::NotEmpty, text("x"), "", true),
            (C::NotEmpty, text(""), "", false),
            (C::GreaterThan, text("10"), "9", true),
            (C::GreaterThan, text("9"), "10", false),
            (C::GreaterThan, text("b"), "a", true),
            (C::GreaterThan, Actual::Missing, "0", false),
            (C::LessThan, json(json!(1.5)), "2", true),
            (C::LessThan, text("2"), "2", false),
            (C::LessThan, text("a"), "b", true),
            (C::Contains, text("hello world"), "o w", true),
            (C::Contains, json(json!(["admin"])), "admin", true),
            (C::Contains, text("hello"), "x", false),
            (C::Contains, Actual::Missing, "", false),
            (C::NotContains, text("hello"), "x", true),
            (C::NotContains, text("hello"), "ell", false),
            (C::IsNull, json(Value::Null), "", true),
            (C::IsNull, Actual::Missing, "", true),
            (C::IsNull, text("null"), "", false),
            (C::NotNull, json(json!(false)), "", true),
            (C::NotNull, json(Value::Null), "", false),
        ];
        for (comparison, actual, target, expected) in cases {
            assert_eq!(
                compare(comparison, &actual, target),
                expected,
                "{comparison:?} {actual:?} {target:?}"
            );
        }
    }

    #[test]
    fn non_finite_numbers_compare_as_strings() {
        assert!(!compare(Comparison::Equals, &text("NaN"), "nan"));
        assert!(compare(Comparison::Equals, &text("inf"), "inf"));
    }

    #[test]
    fn regex_extracts_the_first_group_or_the_whole_match() {
        let a = assertion(Comparison::Equals, "html", Some("<!doctype (.{4})"));
        let r = evaluate(&a, text("<!doctype html><p>"));
        assert!(r.passed);
        assert_eq!(r.actual.as_deref(), Some("html"));
        let a = assertion(Comparison::Equals, "42", Some(r"\d+"));
        assert!(evaluate(&a, text("answer: 42!")).passed);
        let a = assertion(Comparison::Equals, "42", Some(r"(\d+)"));
        let r = evaluate(&a, json(json!({"n": 42})));
        assert!(r.passed, "{r:?}");
        let a = assertion(Comparison::IsNull, "", Some("zzz(.)"));
        let r = evaluate(&a, text("abc"));
        assert!(r.passed && r.actual.is_none());
        let a = assertion(Comparison::NotNull, "", Some("(unclosed"));
        assert!(!evaluate(&a, text("abc")).passed);
        // An empty regex is no regex.
        let a = assertion(Comparison::Equals, "abc", Some(""));
        assert!(evaluate(&a, text("abc")).passed);
    }

    #[test]
    fn actual_is_reported_and_truncated() {
        let a = assertion(Comparison::Contains, "x", None);
        let long = "é".repeat(MAX_ACTUAL_BYTES);
        let r = evaluate(&a, text(&long));
        let actual = r.actual.unwrap();
        assert!(actual.len() <= MAX_ACTUAL_BYTES && actual.len() >= MAX_ACTUAL_BYTES - 1);
        let r = evaluate(&a, json(json!({"k": [1]})));
        assert_eq!(r.actual.as_deref(), Some(r#"{"k":[1]}"#));
        assert_eq!(r.target, "x");
        assert!(!r.passed);
    }
}
