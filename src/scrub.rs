//! Secret scrubbing: every occurrence of a secret value in text that leaves the process
//! is replaced by [`MASK`]. A secret is looked for as written and in the forms it takes
//! when it travels in a request: percent-encoded (as a URL path, query or component
//! encoder writes it, with upper- or lower-case hex), form-encoded (`+` for spaces),
//! JSON-escaped, in lower case (as a URL's host name is written), and for basic-auth
//! credentials the base64 of `user:password`.
//!
//! Matching is plain substring search over every needle, so overlapping secrets are all
//! masked; text longer than [`MAX_SCRUB_BYTES`] is cut to that length first (and a secret
//! cut in half at the end is masked too), so scrubbing time is bounded.

use std::borrow::Cow;

use base64::Engine as _;
use percent_encoding::{AsciiSet, CONTROLS, NON_ALPHANUMERIC, utf8_percent_encode};

use crate::model::RunResult;

/// What a secret is replaced with.
pub const MASK: &str = "*****";
/// Longest text scrubbed; longer text is cut to this length first.
pub const MAX_SCRUB_BYTES: usize = 128 * 1024;
/// Most needles (secret forms) one scrubber holds.
const MAX_NEEDLES: usize = 4096;

/// The `url` crate's encode sets (WHATWG URL standard), to find a secret in a URL the way
/// the URL parser wrote it.
const FRAGMENT: &AsciiSet = &CONTROLS.add(b' ').add(b'"').add(b'<').add(b'>').add(b'`');
const QUERY: &AsciiSet = &CONTROLS
    .add(b' ')
    .add(b'"')
    .add(b'#')
    .add(b'<')
    .add(b'>')
    .add(b'\'');
const PATH: &AsciiSet = &FRAGMENT.add(b'#').add(b'?').add(b'{').add(b'}');
const USERINFO: &AsciiSet = &PATH
    .add(b'/')
    .add(b':')
    .add(b';')
    .add(b'=')
    .add(b'@')
    .add(b'[')
    .add(b'\\')
    .add(b']')
    .add(b'^')
    .add(b'|');
/// JavaScript's `encodeURIComponent`.
const COMPONENT: &AsciiSet = &USERINFO.add(b'$').add(b'%').add(b'&').add(b'+').add(b',');
/// RFC 3986 unreserved characters stay, everything else is encoded.
const STRICT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// Replaces secret values (and their encoded forms) with [`MASK`].
#[derive(Debug, Clone, Default)]
pub struct Scrubber {
    /// Distinct non-empty needles, longest first.
    needles: Vec<String>,
    /// A prebuilt substring searcher per needle, same order: scrubbing runs on every
    /// result, so searchers are not rebuilt per string.
    finders: Vec<memchr::memmem::Finder<'static>>,
}

impl Scrubber {
    /// A scrubber for the given secret values; empty values are ignored.
    pub fn new<I, S>(secrets: I) -> Scrubber
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut scrubber = Scrubber::default();
        for secret in secrets {
            scrubber.add_secret(secret.as_ref());
        }
        scrubber
    }

    /// Adds a secret value and its encoded forms.
    pub fn add_secret(&mut self, secret: &str) {
        if secret.is_empty() {
            return;
        }
        let mut forms = vec![secret.to_owned()];
        // URL parsers lower-case host names.
        let lower = secret.to_lowercase();
        if lower != secret {
            forms.push(lower);
        }
        for set in [FRAGMENT, QUERY, PATH, USERINFO, COMPONENT, STRICT] {
            let encoded = utf8_percent_encode(secret, set).to_string();
            forms.push(lowercase_hex(&encoded));
            forms.push(encoded);
        }
        let form: String = url::form_urlencoded::byte_serialize(secret.as_bytes()).collect();
        forms.push(lowercase_hex(&form));
        forms.push(form);
        if let Ok(json) = serde_json::to_string(secret) {
            forms.push(json[1..json.len() - 1].to_owned());
        }
        for form in forms {
            self.add_needle(form);
        }
    }

    /// Adds the `Authorization: Basic` token of `username:password` (the credentials
    /// themselves are added only if they are secrets).
    pub fn add_basic_auth(&mut self, username: &str, password: &str) {
        if username.is_empty() && password.is_empty() {
            return;
        }
        let token =
            base64::engine::general_purpose::STANDARD.encode(format!("{username}:{password}"));
        // Also without padding, as some clients send it.
        self.add_needle(token.trim_end_matches('=').to_owned());
        self.add_needle(token);
    }

    fn add_needle(&mut self, needle: String) {
        if needle.is_empty() || self.needles.contains(&needle) {
            return;
        }
        if self.needles.len() >= MAX_NEEDLES {
            tracing::warn!("too many secret values to scrub; ignoring the rest");
            return;
        }
        let at = self.needles.partition_point(|n| n.len() >= needle.len());
        self.finders.insert(
            at,
            memchr::memmem::Finder::new(needle.as_bytes()).into_owned(),
        );
        self.needles.insert(at, needle);
    }

    /// Whether there is nothing to scrub.
    pub fn is_empty(&self) -> bool {
        self.needles.is_empty()
    }

    /// `text` with every secret form masked, cut to [`MAX_SCRUB_BYTES`] first.
    pub fn scrub<'a>(&self, text: &'a str) -> Cow<'a, str> {
        if self.needles.is_empty() {
            return Cow::Borrowed(text);
        }
        let (text, cut) = if text.len() > MAX_SCRUB_BYTES {
            let mut end = MAX_SCRUB_BYTES;
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            (&text[..end], true)
        } else {
            (text, false)
        };
        let mut ranges: Vec<(usize, usize)> = Vec::new();
        for (needle, finder) in self.needles.iter().zip(&self.finders) {
            let step = needle.chars().next().map_or(1, char::len_utf8);
            let mut from = 0;
            // Needles are UTF-8, so a match starts and ends on character boundaries.
            while let Some(found) = finder.find(&text.as_bytes()[from..]) {
                let start = from + found;
                ranges.push((start, start + needle.len()));
                from = start + step;
            }
            if cut {
                // A secret cut in half by the length limit: mask the piece that is left.
                if let Some(start) = partial_suffix(text, needle) {
                    ranges.push((start, text.len()));
                }
            }
        }
        if ranges.is_empty() {
            return if cut {
                Cow::Owned(text.to_owned())
            } else {
                Cow::Borrowed(text)
            };
        }
        ranges.sort_unstable();
        let mut out = String::with_capacity(text.len());
        let mut copied = 0;
        let mut iter = ranges.into_iter().peekable();
        while let Some((start, mut end)) = iter.next() {
            while let Some(&(next_start, next_end)) = iter.peek() {
                if next_start > end {
                    break;
                }
                end = end.max(next_end);
                iter.next();
            }
            if start >= copied {
                out.push_str(&text[copied..start]);
                out.push_str(MASK);
                copied = end;
            } else if end > copied {
                copied = end;
            }
        }
        out.push_str(&text[copied..]);
        Cow::Owned(out)
    }

    /// Scrubs `text` in place.
    pub fn scrub_string(&self, text: &mut String) {
        if let Cow::Owned(clean) = self.scrub(text) {
            *text = clean;
        }
    }

    /// Overwrites every secret form in binary `data` (a packet capture) with `*` bytes of
    /// the same length, so lengths and offsets stay valid. Returns how many were masked.
    /// A secret split across two packets is not found.
    pub fn mask_bytes(&self, data: &mut [u8]) -> usize {
        mask_needles(self.needles.iter().map(String::as_bytes), data)
    }

    /// Scrubs every string and object key of a JSON value.
    pub fn scrub_json(&self, value: &mut serde_json::Value) {
        use serde_json::Value;
        if self.is_empty() {
            return;
        }
        let mut stack = vec![value];
        while let Some(v) = stack.pop() {
            match v {
                Value::String(s) => self.scrub_string(s),
                Value::Array(items) => stack.extend(items.iter_mut()),
                Value::Object(map) => {
                    let dirty: Vec<String> = map
                        .keys()
                        .filter(|k| matches!(self.scrub(k), Cow::Owned(_)))
                        .cloned()
                        .collect();
                    for key in dirty {
                        if let Some(inner) = map.remove(&key) {
                            map.insert(self.scrub(&key).into_owned(), inner);
                        }
                    }
                    stack.extend(map.values_mut());
                }
                _ => {}
            }
        }
    }

    /// Scrubs the keys and values of a header map, rebuilding it only when a key changes.
    fn scrub_map(&self, map: &mut std::collections::BTreeMap<String, String>) {
        for value in map.values_mut() {
            self.scrub_string(value);
        }
        if map.keys().any(|k| matches!(self.scrub(k), Cow::Owned(_))) {
            *map = std::mem::take(map)
                .into_iter()
                .map(|(k, v)| (self.scrub(&k).into_owned(), v))
                .collect();
        }
    }

    /// Scrubs every free-text field of a run result: the error message, the request
    /// (URL, headers, body), the response (status text, URLs, headers, body) and the
    /// assertions (property, target, actual).
    pub fn scrub_result(&self, result: &mut RunResult) {
        if self.is_empty() {
            return;
        }
        if let Some(error) = &mut result.error {
            self.scrub_string(&mut error.message);
        }
        if let Some(request) = &mut result.request {
            self.scrub_string(&mut request.method);
            self.scrub_string(&mut request.url);
            self.scrub_map(&mut request.headers);
            if let Some(body) = &mut request.body {
                self.scrub_string(body);
            }
        }
        if let Some(response) = &mut result.response {
            self.scrub_string(&mut response.status_text);
            self.scrub_string(&mut response.url);
            for url in &mut response.redirects {
                self.scrub_string(url);
            }
            self.scrub_map(&mut response.headers);
            if let Some(body) = &mut response.body {
                self.scrub_string(body);
            }
        }
        if let Some(diagnostics) = &mut result.diagnostics
            && let Some(reason) = &mut diagnostics.reason
        {
            self.scrub_string(reason);
        }
        for artifact in &mut result.artifacts {
            self.scrub_string(&mut artifact.name);
        }
        for assertion in &mut result.assertions {
            self.scrub_string(&mut assertion.property);
            self.scrub_string(&mut assertion.target);
            if let Some(actual) = &mut assertion.actual {
                self.scrub_string(actual);
            }
        }
    }
}

/// `%2f` instead of `%2F`: some encoders write lower-case hex.
fn lowercase_hex(encoded: &str) -> String {
    let mut out = String::with_capacity(encoded.len());
    let mut chars = encoded.chars();
    while let Some(c) = chars.next() {
        out.push(c);
        if c == '%' {
            for hex in chars.by_ref().take(2) {
                out.push(hex.to_ascii_lowercase());
            }
        }
    }
    out
}

/// Where the longest proper prefix of `needle` that ends `text` starts, if one does.
fn partial_suffix(text: &str, needle: &str) -> Option<usize> {
    let max = needle.len().saturating_sub(1).min(text.len());
    (1..=max)
        .rev()
        .filter(|&n| needle.is_char_boundary(n) && text.is_char_boundary(text.len() - n))
        .find(|&n| text.ends_with(&needle[..n]))
        .map(|n| text.len() - n)
}

/// Overwrites every occurrence of each needle in `data` with `*` bytes; returns the
/// number of occurrences masked.
pub fn mask_needles<'a, I>(needles: I, data: &mut [u8]) -> usize
where
    I: IntoIterator<Item = &'a [u8]>,
{
    let mut masked = 0;
    for needle in needles {
        let Some(&first) = needle.first() else {
            continue;
        };
        let mut from = 0;
        while from + needle.len() <= data.len() {
            let Some(offset) = data[from..=data.len() - needle.len()]
                .iter()
                .position(|&b| b == first)
            else {
                break;
            };
            let at = from + offset;
            if &data[at..at + needle.len()] == needle {
                data[at..at + needle.len()].fill(b'*');
                masked += 1;
                from = at + needle.len();
            } else {
                from = at + 1;
            }
        }
    }
    masked
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{
        AssertionResult, AssertionSource, CheckType, Comparison, ErrorKind, HttpRequestSummary,
        HttpResponseSummary,
    };

    const SECRET: &str = "s3cr3t value/&=+ü";

    #[test]
    fn raw_and_encoded_forms_are_masked() {
        let s = Scrubber::new([SECRET]);
        assert_eq!(s.scrub(&format!("a {SECRET} b")), "a ***** b");
        let strict = utf8_percent_encode(SECRET, STRICT).to_string();
        assert_eq!(s.scrub(&format!("?k={strict}")), "?k=*****");
        assert_eq!(
            s.scrub(&format!("?k={}", lowercase_hex(&strict))),
            "?k=*****"
        );
        let form: String = url::form_urlencoded::byte_serialize(SECRET.as_bytes()).collect();
        assert!(form.contains('+'), "{form}");
        assert_eq!(s.scrub(&format!("k={form}&x=1")), "k=*****&x=1");
        // What the URL parser makes of a secret placed in a path.
        let url = url::Url::parse(&format!("http://h/p/{SECRET}")).unwrap();
        assert_eq!(s.scrub(url.as_str()), "http://h/p/*****");
        let host = url::Url::parse("http://Secret-Host.test/").unwrap();
        assert_eq!(
            Scrubber::new(["Secret-Host"]).scrub(host.as_str()),
            "http://*****.test/"
        );
        let json = serde_json::to_string(&serde_json::json!({ "k": "quote\"d" })).unwrap();
        let q = Scrubber::new(["quote\"d"]);
        assert_eq!(q.scrub(&json), r#"{"k":"*****"}"#);
    }

    #[test]
    fn basic_auth_token_is_masked() {
        let mut s = Scrubber::default();
        s.add_basic_auth("user", "pa55word");
        let token = base64::engine::general_purpose::STANDARD.encode("user:pa55word");
        assert_eq!(s.scrub(&format!("Basic {token}")), "Basic *****");
        assert_eq!(s.scrub("user pa55word"), "user pa55word");
    }

    #[test]
    fn overlapping_and_repeated_secrets_are_all_masked() {
        let s = Scrubber::new(["abcd", "cdef", "zz"]);
        assert_eq!(s.scrub("xabcdefx zz zzz"), "x*****x ***** *****");
        assert_eq!(s.scrub("nothing here"), "nothing here");
        assert!(matches!(s.scrub("nothing here"), Cow::Borrowed(_)));
    }

    #[test]
    fn empty_secrets_are_ignored() {
        let s = Scrubber::new(["", ""]);
        assert!(s.is_empty());
        assert_eq!(s.scrub("text"), "text");
    }

    #[test]
    fn long_text_is_cut_and_a_secret_split_by_the_cut_is_masked() {
        let s = Scrubber::new(["SECRETVALUE"]);
        let mut text = "x".repeat(MAX_SCRUB_BYTES - 6);
        text.push_str("SECRETVALUE and more");
        let out = s.scrub(&text);
        assert!(out.len() <= MAX_SCRUB_BYTES);
        assert!(
            out.ends_with(&format!("x{MASK}")),
            "{}",
            &out[out.len() - 20..]
        );
        assert!(!out.contains("SECRE"));
        // A multi-byte character at the cut is not split.
        let mut text = "x".repeat(MAX_SCRUB_BYTES - 1);
        text.push('é');
        let out = s.scrub(&text);
        assert_eq!(out.len(), MAX_SCRUB_BYTES - 1);
    }

    #[test]
    fn json_strings_and_keys_are_masked() {
        let s = Scrubber::new(["tok"]);
        let mut v = serde_json::json!({"tok": ["a tok", 1, {"k": "tok"}]});
        s.scrub_json(&mut v);
        assert_eq!(
            v,
            serde_json::json!({"*****": ["a *****", 1, {"k": "*****"}]})
        );
    }

    #[test]
    fn every_text_field_of_a_result_is_masked() {
        let s = Scrubber::new(["tok"]);
        let now = chrono::Utc::now();
        let mut r = RunResult::errored(CheckType::Api, now, ErrorKind::Connect, "to tok failed");
        r.request = Some(HttpRequestSummary {
            method: "GET".into(),
            url: "http://h/?t=tok".into(),
            headers: [("x-tok".to_owned(), "tok".to_owned())].into(),
            body: Some("b tok".into()),
        });
        r.response = Some(HttpResponseSummary {
            status: 200,
            status_text: "tok".into(),
            url: "http://h/tok".into(),
            redirects: vec!["http://h/tok".into()],
            headers: [("x".to_owned(), "tok".to_owned())].into(),
            body: Some("tok".into()),
            body_size: 3,
            body_truncated: false,
        });
        r.assertions.push(AssertionResult {
            source: AssertionSource::TextBody,
            comparison: Comparison::Equals,
            property: "tok".into(),
            target: "tok".into(),
            actual: Some("tok".into()),
            passed: true,
        });
        s.scrub_result(&mut r);
        let text = serde_json::to_string(&r).unwrap();
        assert!(!text.contains("tok"), "{text}");
        assert!(text.contains("x-*****"), "{text}");
    }

    #[test]
    fn secrets_in_binary_data_are_masked_in_place() {
        let s = Scrubber::new(["s3cr3t"]);
        let mut data = b"\x00\x01GET /?k=s3cr3t HTTP/1.1\r\nx: s3cr3t\r\n\xff".to_vec();
        let len = data.len();
        assert_eq!(s.mask_bytes(&mut data), 2);
        assert_eq!(data.len(), len);
        assert!(!data.windows(6).any(|w| w == b"s3cr3t"));
        assert!(data.windows(14).any(|w| w == b"k=****** HTTP/"));
        let mut tail = b"xxs3cr".to_vec();
        assert_eq!(s.mask_bytes(&mut tail), 0);
    }
}
