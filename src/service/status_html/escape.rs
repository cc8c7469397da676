//! HTML escaping of every user-supplied string, and the checks applied to values that
//! land in attributes or CSS (links, colors).

use std::fmt::Write;

/// Appends `s` to `out` with `& < > " '` escaped (safe in text and quoted attributes).
pub fn push(out: &mut String, s: &str) {
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
}

/// `s` escaped.
pub fn html(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    push(&mut out, s);
    out
}

/// A link usable in `src`/`href`: only absolute http(s) URLs (the API already demands
/// them; anything else, such as `javascript:`, is dropped here too).
pub fn safe_link(s: &str) -> Option<&str> {
    let url = url::Url::parse(s).ok()?;
    matches!(url.scheme(), "http" | "https").then_some(s)
}

/// A CSS color `#RGB` or `#RRGGBB`, or `None`.
pub fn safe_color(s: &str) -> Option<&str> {
    let hex = s.strip_prefix('#')?;
    (matches!(hex.len(), 3 | 6) && hex.bytes().all(|b| b.is_ascii_hexdigit())).then_some(s)
}

/// `s` with every byte outside `[A-Za-z0-9-._~]` percent-encoded (path segments).
pub fn path_segment(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_markup_and_quotes() {
        assert_eq!(
            html(r#"<script>alert("x")</script> & 'y'"#),
            "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &#39;y&#39;"
        );
    }

    #[test]
    fn links_and_colors_are_checked() {
        assert_eq!(
            safe_link("https://a.example/x.png"),
            Some("https://a.example/x.png")
        );
        assert_eq!(safe_link("javascript:alert(1)"), None);
        assert_eq!(safe_link("/relative"), None);
        assert_eq!(safe_color("#1A2B3C"), Some("#1A2B3C"));
        assert_eq!(safe_color("#fff"), Some("#fff"));
        assert_eq!(safe_color("red;}body{x:y"), None);
        assert_eq!(safe_color("#12345"), None);
        assert_eq!(path_segment("a b/c"), "a%20b%2Fc");
    }
}
