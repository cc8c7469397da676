//! What every string of an error report goes through before it is queued: the agent's
//! scrubber (its key, `SERVICE_SECRET_*` values), URLs replaced by `<url>` (check URLs
//! must never leave in a report, and no report needs one), control characters other
//! than line breaks and tabs removed, and a length cap (after scrubbing, so a secret is
//! never cut in half and left readable).

use std::sync::LazyLock;

use regex::Regex;

use crate::scrub::Scrubber;

/// What a URL is replaced with.
pub const URL_MASK: &str = "<url>";
/// Appended to a string that was cut.
const CUT_MARK: &str = " [truncated]";

/// `scheme://` and everything up to the next space or quote.
static URL: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r#"(?i)\b[a-z][a-z0-9+.\-]*://[^\s"'<>`]*"#).ok());

/// `text` scrubbed, without URLs or stray control characters, at most `max_bytes`.
pub fn clean(scrubber: &Scrubber, text: &str, max_bytes: usize) -> String {
    let scrubbed = scrubber.scrub(text);
    let without_urls = match URL.as_ref() {
        Some(re) => re.replace_all(&scrubbed, URL_MASK).into_owned(),
        // The pattern is a constant that compiles; without it, keep no text at all
        // rather than risk a URL.
        None => "(message withheld)".to_owned(),
    };
    let printable: String = without_urls
        .chars()
        .filter(|c| !c.is_control() || matches!(c, '\n' | '\t'))
        .collect();
    cut(printable, max_bytes)
}

/// `text` cut to at most `max_bytes` on a character boundary, marked when cut.
fn cut(text: String, max_bytes: usize) -> String {
    if text.len() <= max_bytes {
        return text;
    }
    let mut end = max_bytes.saturating_sub(CUT_MARK.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let mut out = text[..end].to_owned();
    if out.len() + CUT_MARK.len() <= max_bytes {
        out.push_str(CUT_MARK);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scrub::MASK;

    #[test]
    fn secrets_urls_and_control_characters_go() {
        let s = Scrubber::new(["s3cr3t", "agent-key"]);
        let out = clean(
            &s,
            "GET https://user:s3cr3t@example.com/a?b=c failed; key agent-key\u{7}\nnext line",
            1000,
        );
        assert_eq!(out, format!("GET {URL_MASK} failed; key {MASK}\nnext line"));
        assert!(!out.contains("s3cr3t") && !out.contains("example.com"));
        assert_eq!(clean(&s, "ws://10.0.0.1:80/x", 100), URL_MASK);
        assert_eq!(clean(&s, "no url: std::fmt", 100), "no url: std::fmt");
    }

    #[test]
    fn long_text_is_cut_after_scrubbing() {
        let s = Scrubber::new(["abcdefgh"]);
        let text = format!("{}abcdefgh", "x".repeat(20));
        // Scrubbed it is 25 bytes ("x" * 20 and the mask): cut to 22.
        let out = clean(&s, &text, 22);
        assert!(out.len() <= 22, "{out}");
        assert!(out.ends_with(CUT_MARK), "{out}");
        assert!(!out.contains("abc"), "no piece of the secret: {out}");
        let wide = "é".repeat(40);
        let out = clean(&s, &wide, 25);
        assert!(out.len() <= 25 && out.starts_with('é'), "{out}");
        assert_eq!(clean(&s, "short", 30), "short");
    }
}
