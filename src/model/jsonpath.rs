//! The JSONPath subset assertions use to point into a JSON body (the `property` of a
//! JSON_BODY assertion):
//!
//! - `$` the whole document (an empty path means the same);
//! - `.key` and `['key']` / `["key"]` object members (`.` may be left out after `$`:
//!   `$key` is not allowed, but `data.items` is read as `$.data.items`);
//! - `[n]` array elements, `[-n]` counting from the end;
//! - `.*` and `[*]` every member or element; `..key`, `..*`, `..[n]` recursive descent;
//! - `.length` the length of an array or string (an object's own `length` member wins,
//!   as in JavaScript).
//!
//! A path without `*` or `..` selects at most one value; one with them selects a list.

use std::borrow::Cow;

use serde_json::Value;

/// Longest path accepted.
pub const MAX_PATH_LEN: usize = 1024;

/// A parsed path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsonPath {
    steps: Vec<Step>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Step {
    /// One selector applied to the current values.
    Child(Selector),
    /// The selector applied to the current values and all their descendants.
    Descend(Selector),
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Selector {
    Key(String),
    Index(i64),
    Wildcard,
}

/// Why a path does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("is not a supported JSON path: {0}")]
pub struct JsonPathError(String);

fn err(message: impl Into<String>) -> JsonPathError {
    JsonPathError(message.into())
}

/// What a path selected.
#[derive(Debug, Clone, PartialEq)]
pub enum Selection<'a> {
    /// A definite path found nothing.
    Nothing,
    /// A definite path found this value.
    One(Cow<'a, Value>),
    /// A path with `*` or `..` found these values (possibly none).
    Many(Vec<Cow<'a, Value>>),
}

impl JsonPath {
    /// Parses `path`; see the module documentation for the grammar.
    pub fn parse(path: &str) -> Result<JsonPath, JsonPathError> {
        if path.len() > MAX_PATH_LEN {
            return Err(err(format!("longer than {MAX_PATH_LEN} characters")));
        }
        let path = path.trim();
        let rest = if let Some(rest) = path.strip_prefix('$') {
            rest
        } else if path.is_empty() || path.starts_with('[') || path.starts_with('.') {
            path
        } else {
            // `data.items` reads as `$.data.items`.
            return JsonPath::parse(&format!("$.{path}"));
        };
        let chars: Vec<char> = rest.chars().collect();
        let mut steps = Vec::new();
        let mut i = 0;
        while i < chars.len() {
            match chars[i] {
                '.' if chars.get(i + 1) == Some(&'.') => {
                    i += 2;
                    let (selector, next) = if chars.get(i) == Some(&'[') {
                        bracket(&chars, i)?
                    } else {
                        dotted(&chars, i)?
                    };
                    steps.push(Step::Descend(selector));
                    i = next;
                }
                '.' => {
                    i += 1;
                    // `$.[1]` is the same as `$[1]`.
                    let (selector, next) = if chars.get(i) == Some(&'[') {
                        bracket(&chars, i)?
                    } else {
                        dotted(&chars, i)?
                    };
                    steps.push(Step::Child(selector));
                    i = next;
                }
                '[' => {
                    let (selector, next) = bracket(&chars, i)?;
                    steps.push(Step::Child(selector));
                    i = next;
                }
                c => return Err(err(format!("unexpected {c:?} at position {}", i + 1))),
            }
        }
        Ok(JsonPath { steps })
    }

    /// Whether the path can select more than one value.
    pub fn is_definite(&self) -> bool {
        self.steps
            .iter()
            .all(|s| matches!(s, Step::Child(Selector::Key(_) | Selector::Index(_))))
    }

    /// Applies the path to `doc`.
    pub fn select<'a>(&self, doc: &'a Value) -> Selection<'a> {
        let mut current: Vec<Cow<'a, Value>> = vec![Cow::Borrowed(doc)];
        for step in &self.steps {
            let mut next = Vec::new();
            for value in &current {
                // Owned values are computed lengths (numbers): nothing to select inside.
                let Cow::Borrowed(value) = value else {
                    continue;
                };
                match step {
                    Step::Child(selector) => apply(selector, value, &mut next),
                    Step::Descend(selector) => descend(selector, value, &mut next),
                }
            }
            current = next;
        }
        if self.is_definite() {
            match current.into_iter().next() {
                Some(value) => Selection::One(value),
                None => Selection::Nothing,
            }
        } else {
            Selection::Many(current)
        }
    }
}

/// A member name after `.`: up to the next `.` or `[`.
fn dotted(chars: &[char], start: usize) -> Result<(Selector, usize), JsonPathError> {
    let mut end = start;
    while end < chars.len() && chars[end] != '.' && chars[end] != '[' {
        end += 1;
    }
    let name: String = chars[start..end].iter().collect();
    if name.is_empty() {
        return Err(err(format!(
            "a member name is missing at position {}",
            start + 1
        )));
    }
    let selector = if name == "*" {
        Selector::Wildcard
    } else {
        Selector::Key(name)
    };
    Ok((selector, end))
}

/// `[n]`, `[*]`, `['key']` or `["key"]` starting at the `[` at `start`.
fn bracket(chars: &[char], start: usize) -> Result<(Selector, usize), JsonPathError> {
    let mut i = start + 1;
    let skip_spaces = |i: &mut usize| {
        while *i < chars.len() && chars[*i] == ' ' {
            *i += 1;
        }
    };
    skip_spaces(&mut i);
    let selector = match chars.get(i) {
        Some(&quote @ ('\'' | '"')) => {
            i += 1;
            let mut key = String::new();
            loop {
                match chars.get(i) {
                    None => return Err(err("a quoted member name is not closed")),
                    Some('\\') => {
                        let Some(&escaped) = chars.get(i + 1) else {
                            return Err(err("a quoted member name is not closed"));
                        };
                        key.push(escaped);
                        i += 2;
                    }
                    Some(&c) if c == quote => {
                        i += 1;
                        break;
                    }
                    Some(&c) => {
                        key.push(c);
                        i += 1;
                    }
                }
            }
            Selector::Key(key)
        }
        Some('*') => {
            i += 1;
            Selector::Wildcard
        }
        Some(_) => {
            let begin = i;
            while i < chars.len() && (chars[i] == '-' || chars[i].is_ascii_digit()) {
                i += 1;
            }
            let text: String = chars[begin..i].iter().collect();
            let index = text.parse::<i64>().map_err(|_| {
                err(format!(
                    "expected an index, '*' or a quoted name at position {}",
                    begin + 1
                ))
            })?;
            Selector::Index(index)
        }
        None => return Err(err("a '[' is not closed")),
    };
    skip_spaces(&mut i);
    if chars.get(i) != Some(&']') {
        return Err(err(format!(
            "expected ']' at position {} (filters, slices and unions are not supported)",
            i + 1
        )));
    }
    Ok((selector, i + 1))
}

/// Pushes what `selector` picks from `value`.
fn apply<'a>(selector: &Selector, value: &'a Value, out: &mut Vec<Cow<'a, Value>>) {
    match (selector, value) {
        (Selector::Key(key), Value::Object(map)) => {
            if let Some(v) = map.get(key) {
                out.push(Cow::Borrowed(v));
            }
        }
        (Selector::Key(key), Value::Array(items)) if key == "length" => {
            out.push(Cow::Owned(Value::from(items.len())));
        }
        (Selector::Key(key), Value::String(s)) if key == "length" => {
            // JavaScript counts UTF-16 code units.
            out.push(Cow::Owned(Value::from(s.encode_utf16().count())));
        }
        (Selector::Index(index), Value::Array(items)) => {
            let len = i64::try_from(items.len()).unwrap_or(i64::MAX);
            let at = if *index < 0 { len + index } else { *index };
            if let Ok(at) = usize::try_from(at)
                && let Some(v) = items.get(at)
            {
                out.push(Cow::Borrowed(v));
            }
        }
        (Selector::Wildcard, Value::Object(map)) => out.extend(map.values().map(Cow::Borrowed)),
        (Selector::Wildcard, Value::Array(items)) => out.extend(items.iter().map(Cow::Borrowed)),
        _ => {}
    }
}

/// Pushes what `selector` picks from `value` and from every value below it, in document
/// order. Iterative, so a deep document cannot overflow the stack.
fn descend<'a>(selector: &Selector, root: &'a Value, out: &mut Vec<Cow<'a, Value>>) {
    let mut stack: Vec<&'a Value> = vec![root];
    while let Some(v) = stack.pop() {
        apply(selector, v, out);
        match v {
            Value::Object(map) => stack.extend(map.values().rev()),
            Value::Array(items) => stack.extend(items.iter().rev()),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn doc() -> Value {
        json!({
            "data": {"items": [{"id": 7, "name": "a"}, {"id": 8, "name": "b"}], "total": 2},
            "odd key": {"x.y": true},
            "empty": [],
            "nothing": null,
            "word": "héllo",
            "obj": {"length": 42}
        })
    }

    fn one(path: &str) -> Option<Value> {
        let d = doc();
        match JsonPath::parse(path).unwrap().select(&d) {
            Selection::One(v) => Some(v.into_owned()),
            Selection::Nothing => None,
            Selection::Many(_) => panic!("{path} should be definite"),
        }
    }

    fn many(path: &str) -> Vec<Value> {
        let d = doc();
        match JsonPath::parse(path).unwrap().select(&d) {
            Selection::Many(v) => v.into_iter().map(Cow::into_owned).collect(),
            other => panic!("{path} should be indefinite: {other:?}"),
        }
    }

    #[test]
    fn root_and_dotted_keys() {
        assert_eq!(one("$"), Some(doc()));
        assert_eq!(one(""), Some(doc()));
        assert_eq!(one("$.data.total"), Some(json!(2)));
        assert_eq!(one("data.total"), Some(json!(2)));
        assert_eq!(one("$.nothing"), Some(Value::Null));
        assert_eq!(one("$.missing"), None);
        assert_eq!(one("$.data.total.deeper"), None);
    }

    #[test]
    fn indexes_and_quoted_keys() {
        assert_eq!(one("$.data.items[0].id"), Some(json!(7)));
        assert_eq!(one("$.data.items[-1].id"), Some(json!(8)));
        assert_eq!(one("$.data.items[2]"), None);
        assert_eq!(one("$.data.items[-3]"), None);
        assert_eq!(one("$['odd key']['x.y']"), Some(json!(true)));
        assert_eq!(one(r#"$["odd key"]["x.y"]"#), Some(json!(true)));
        assert_eq!(one("$.data.items.[1].name"), Some(json!("b")));
        assert_eq!(one("$['data'][ 'items' ][ 1 ]['id']"), Some(json!(8)));
        assert_eq!(one(r"$['it\'s']"), None);
    }

    #[test]
    fn length_of_arrays_strings_and_objects() {
        assert_eq!(one("$.data.items.length"), Some(json!(2)));
        assert_eq!(one("$.empty.length"), Some(json!(0)));
        assert_eq!(one("$.word.length"), Some(json!(5)));
        assert_eq!(one("$.obj.length"), Some(json!(42)));
        assert_eq!(one("$.data.length"), None);
        assert_eq!(one("$.data.items.length.x"), None);
    }

    #[test]
    fn wildcards_and_descent_select_lists() {
        assert_eq!(many("$.data.items[*].id"), vec![json!(7), json!(8)]);
        assert_eq!(many("$.data.items.*.name"), vec![json!("a"), json!("b")]);
        assert_eq!(many("$..id"), vec![json!(7), json!(8)]);
        assert_eq!(many("$..items[1].id"), vec![json!(8)]);
        assert_eq!(many("$..nope"), Vec::<Value>::new());
        assert!(!JsonPath::parse("$..id").unwrap().is_definite());
        assert!(JsonPath::parse("$.a[0]['b']").unwrap().is_definite());
    }

    #[test]
    fn unsupported_or_broken_paths_are_refused() {
        for bad in [
            "$.",
            "$..",
            "$[",
            "$[abc]",
            "$['open",
            "$[?(@.id > 1)]",
            "$[0:2]",
            "$[0,1]",
            "$x",
            "$.a[0]x",
        ] {
            assert!(JsonPath::parse(bad).is_err(), "{bad} should not parse");
        }
        assert!(JsonPath::parse(&format!("$.{}", "a".repeat(MAX_PATH_LEN))).is_err());
    }

    #[test]
    fn deep_documents_do_not_overflow() {
        let mut v = json!(1);
        for _ in 0..500 {
            v = json!([v]);
        }
        let path = JsonPath::parse("$..*").unwrap();
        match path.select(&v) {
            Selection::Many(found) => assert_eq!(found.len(), 500),
            _ => panic!("$..* is indefinite"),
        }
    }
}
