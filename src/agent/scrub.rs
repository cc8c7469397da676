//! Removes the agent's API key from every string that leaves the agent (results, error
//! messages from the service, log lines built from outside text).

use std::borrow::Cow;

use crate::model::RunResult;

/// What replaces a secret.
pub const REDACTED: &str = "[redacted]";

/// Replaces the API key, raw or URL-encoded, with [`REDACTED`].
#[derive(Clone)]
pub struct Scrubber {
    needles: Vec<String>,
}

impl Scrubber {
    pub fn new(api_key: &str) -> Scrubber {
        let mut needles = Vec::new();
        if !api_key.is_empty() {
            needles.push(api_key.to_owned());
            let encoded: String =
                url::form_urlencoded::byte_serialize(api_key.as_bytes()).collect();
            if encoded != api_key {
                needles.push(encoded);
            }
        }
        Scrubber { needles }
    }

    /// `text` without any secret.
    pub fn scrub<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let mut out = Cow::Borrowed(text);
        for needle in &self.needles {
            if out.contains(needle.as_str()) {
                out = Cow::Owned(out.replace(needle.as_str(), REDACTED));
            }
        }
        out
    }

    /// Overwrites the API key in binary `data` (an artifact) with `*` bytes of the same
    /// length.
    pub fn mask_bytes(&self, data: &mut [u8]) -> usize {
        crate::scrub::mask_needles(self.needles.iter().map(String::as_bytes), data)
    }

    /// Scrubs `text` in place.
    pub fn scrub_in_place(&self, text: &mut String) {
        if let Cow::Owned(clean) = self.scrub(text) {
            *text = clean;
        }
    }

    /// Scrubs every free-text field of a run result.
    pub fn scrub_result(&self, result: &mut RunResult) {
        if let Some(error) = &mut result.error {
            self.scrub_in_place(&mut error.message);
        }
        if let Some(response) = &mut result.response {
            self.scrub_in_place(&mut response.url);
            self.scrub_in_place(&mut response.status_text);
            for r in &mut response.redirects {
                self.scrub_in_place(r);
            }
            for v in response.headers.values_mut() {
                self.scrub_in_place(v);
            }
            if let Some(body) = &mut response.body {
                self.scrub_in_place(body);
            }
        }
        for a in &mut result.assertions {
            self.scrub_in_place(&mut a.property);
            self.scrub_in_place(&mut a.target);
            if let Some(actual) = &mut a.actual {
                self.scrub_in_place(actual);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{CheckType, ErrorKind};

    #[test]
    fn removes_raw_and_encoded_key() {
        let s = Scrubber::new("k/ey+1");
        assert_eq!(s.scrub("a k/ey+1 b"), "a [redacted] b");
        assert_eq!(s.scrub("?t=k%2Fey%2B1"), "?t=[redacted]");
        assert!(matches!(s.scrub("clean"), Cow::Borrowed(_)));
        let mut r = RunResult::errored(
            CheckType::Url,
            chrono::Utc::now(),
            ErrorKind::Connect,
            "GET http://x/?key=k/ey+1 failed",
        );
        s.scrub_result(&mut r);
        assert_eq!(
            r.error.unwrap().message,
            "GET http://x/?key=[redacted] failed"
        );
    }
}
