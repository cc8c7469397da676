//! The agent's scrubber: the shared [`crate::scrub::Scrubber`] loaded with the agent's own
//! API key (and, for everything but the HTTP client, the `SERVICE_SECRET_*` values),
//! applied to every string that leaves the agent (results, error messages from the
//! service, log lines built from outside text, error reports). The executors mask
//! `SERVICE_SECRET_*` values with the same scrubber type.

pub use crate::scrub::{MASK, Scrubber};

/// A scrubber that masks `api_key` in all its encoded forms.
pub fn for_api_key(api_key: &str) -> Scrubber {
    Scrubber::new([api_key])
}

/// A scrubber that masks `api_key` and every secret value `secrets` masks (the
/// `SERVICE_SECRET_*` values of the execution environment).
pub fn for_agent(api_key: &str, secrets: &Scrubber) -> Scrubber {
    let mut scrubber = secrets.clone();
    scrubber.add_secret(api_key);
    scrubber
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{CheckType, ErrorKind, RunResult};

    #[test]
    fn the_agent_scrubber_masks_the_key_and_the_secret_values() {
        let s = for_agent("the-key", &Scrubber::new(["v@lue 1"]));
        assert_eq!(
            s.scrub("k=the-key v=v%40lue%201"),
            format!("k={MASK} v={MASK}")
        );
    }

    #[test]
    fn removes_raw_and_encoded_key() {
        let s = for_api_key("k/ey+1");
        assert_eq!(s.scrub("a k/ey+1 b"), format!("a {MASK} b"));
        assert_eq!(s.scrub("?t=k%2Fey%2B1"), format!("?t={MASK}"));
        assert!(matches!(s.scrub("clean"), std::borrow::Cow::Borrowed(_)));
        let mut r = RunResult::errored(
            CheckType::Url,
            chrono::Utc::now(),
            ErrorKind::Connect,
            "GET http://x/?key=k/ey+1 failed",
        );
        s.scrub_result(&mut r);
        assert_eq!(
            r.error.map(|e| e.message).unwrap_or_default(),
            format!("GET http://x/?key={MASK} failed")
        );
    }
}
