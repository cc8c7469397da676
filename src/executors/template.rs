//! `{{NAME}}` placeholders in check requests, filled from variables: the check's
//! `environmentVariables` and the agent's `SERVICE_SECRET_*` environment.
//!
//! A placeholder is `{{`, optional spaces, a name of letters, digits and `_` (not starting
//! with a digit), optional spaces, `}}`. Unknown names and anything else between braces
//! are left as written. Filled values are not scanned again.

use std::collections::HashMap;

/// Variables by name.
#[derive(Debug, Clone, Default)]
pub struct Variables {
    values: HashMap<String, String>,
}

/// Filling placeholders would make a text longer than its limit.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("filling the placeholders makes it longer than {limit} bytes")]
pub struct TooLong {
    pub limit: usize,
}

impl Variables {
    pub fn new() -> Variables {
        Variables::default()
    }

    /// Sets `name` unless it is already set (the first source wins).
    pub fn insert_if_absent(&mut self, name: impl Into<String>, value: impl Into<String>) {
        self.values
            .entry(name.into())
            .or_insert_with(|| value.into());
    }

    pub fn get(&self, name: &str) -> Option<&str> {
        self.values.get(name).map(String::as_str)
    }

    /// `input` with every known placeholder replaced by its value; an error if the result
    /// would be longer than `limit` bytes.
    pub fn fill(&self, input: &str, limit: usize) -> Result<String, TooLong> {
        let mut out = String::with_capacity(input.len().min(limit));
        let mut rest = input;
        while let Some(open) = rest.find("{{") {
            push_bounded(&mut out, &rest[..open], limit)?;
            let after = &rest[open + 2..];
            match placeholder(after).and_then(|(name, len)| Some((self.get(name)?, len))) {
                Some((value, len)) => {
                    push_bounded(&mut out, value, limit)?;
                    rest = &after[len..];
                }
                None => {
                    // Not a known placeholder: keep the first brace and look again from
                    // the second, so `{{{NAME}}` still fills `{{NAME}}`.
                    push_bounded(&mut out, "{", limit)?;
                    rest = &rest[open + 1..];
                }
            }
        }
        push_bounded(&mut out, rest, limit)?;
        Ok(out)
    }
}

/// The name of the placeholder whose `{{` came just before `s`, and the length of what
/// follows the `{{` up to and including `}}`.
fn placeholder(s: &str) -> Option<(&str, usize)> {
    let close = s.find("}}")?;
    let name = s[..close].trim_matches(' ');
    let mut chars = name.chars();
    let first = chars.next()?;
    let valid = (first.is_ascii_alphabetic() || first == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    valid.then_some((name, close + 2))
}

fn push_bounded(out: &mut String, s: &str, limit: usize) -> Result<(), TooLong> {
    if out.len() + s.len() > limit {
        return Err(TooLong { limit });
    }
    out.push_str(s);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars() -> Variables {
        let mut v = Variables::new();
        v.insert_if_absent("HOST", "example.test");
        v.insert_if_absent("TOKEN", "t0k");
        v.insert_if_absent("_x1", "X");
        v
    }

    #[test]
    fn known_placeholders_are_filled() {
        let v = vars();
        assert_eq!(
            v.fill("https://{{HOST}}/a?t={{ TOKEN }}&{{_x1}}", 1000)
                .unwrap(),
            "https://example.test/a?t=t0k&X"
        );
        assert_eq!(v.fill("{{TOKEN}}{{TOKEN}}", 1000).unwrap(), "t0kt0k");
        assert_eq!(v.fill("{{{TOKEN}}}", 1000).unwrap(), "{t0k}");
    }

    #[test]
    fn unknown_or_malformed_placeholders_stay() {
        let v = vars();
        for text in [
            "{{UNKNOWN}}",
            "{{}}",
            "{{1ABC}}",
            "{{TO KEN}}",
            "{{TOKEN",
            "{TOKEN}",
            "{{ $UUID }}",
            "a {{ b",
        ] {
            assert_eq!(v.fill(text, 1000).unwrap(), text);
        }
    }

    #[test]
    fn first_source_wins() {
        let mut v = vars();
        v.insert_if_absent("TOKEN", "other");
        assert_eq!(v.get("TOKEN"), Some("t0k"));
    }

    #[test]
    fn values_are_not_filled_again() {
        let mut v = Variables::new();
        v.insert_if_absent("A", "{{B}}");
        v.insert_if_absent("B", "b");
        assert_eq!(v.fill("{{A}}", 1000).unwrap(), "{{B}}");
    }

    #[test]
    fn the_result_is_bounded() {
        let mut v = Variables::new();
        v.insert_if_absent("BIG", "x".repeat(600));
        assert_eq!(
            v.fill("{{BIG}}{{BIG}}", 1000).unwrap_err(),
            TooLong { limit: 1000 }
        );
        assert!(v.fill("{{BIG}}", 1000).is_ok());
    }
}
