//! URL monitor executor: a GET on a fresh connection per run (and per redirect hop),
//! judged by its status code and its total time.
//!
//! Verdict rules:
//! - With `STATUS_CODE` assertions, the run fails if any assertion fails.
//! - With no assertions, a final status of 400 or more fails the run (a URL monitor
//!   exists to say "this page answers"; a 4xx/5xx page does not).
//! - `maxResponseTime` exceeded fails the run; `degradedResponseTime` exceeded marks it
//!   degraded. Both compare with `total`, which is also `responseTime`.
//! - Network and protocol errors, and runs past the time limit, are errors (FAILED);
//!   a run past the limit is also `aborted` and keeps the phases measured so far.

use std::collections::BTreeMap;
use std::time::Instant;

use chrono::Utc;
use http::StatusCode;
use http::header::LOCATION;
use url::Url;

use super::http_error::FetchError;
use super::netdiag::FailedHop;
use super::timed_http::{self, HopOptions, HopProgress, HopRequest, ResponseHead, millis};
use super::{ExecEnv, Executor};
use crate::model::check::MAX_URL_LEN;
use crate::model::{
    Assertion, AssertionResult, AssertionSource, CheckType, Comparison, ErrorKind,
    HttpResponseSummary, RunResult, UrlMonitorSpec,
};

pub use super::timed_http::HttpEnv;

/// Redirects a run follows before it gives up.
pub const MAX_REDIRECTS: usize = 10;
/// Response headers kept in a result.
pub const MAX_HEADERS: usize = 50;
/// Bytes of one header value kept in a result.
pub const MAX_HEADER_VALUE_BYTES: usize = 1024;

impl Executor for UrlMonitorSpec {
    async fn run(&self, env: &ExecEnv) -> RunResult {
        run_url_monitor(self, env).await.0
    }
}

/// Where a run is: the URL of the current hop, the redirects followed, the hop's progress.
struct RunState {
    url: Url,
    redirects: Vec<String>,
    hop: HopProgress,
}

/// Runs the monitor; on a network-level failure also returns the failed hop, so that
/// diagnostics can run it again.
pub(crate) async fn run_url_monitor(
    spec: &UrlMonitorSpec,
    env: &ExecEnv,
) -> (RunResult, Option<FailedHop>) {
    let started_at = Utc::now();
    let start = Instant::now();
    let url = match Url::parse(&spec.request.url) {
        Ok(url) => url,
        Err(e) => {
            let result = RunResult::errored(
                CheckType::Url,
                started_at,
                ErrorKind::InvalidJob,
                format!("the URL is invalid: {e}"),
            );
            return (result, None);
        }
    };
    let mut state = RunState {
        url,
        redirects: Vec::new(),
        hop: HopProgress::default(),
    };
    let limit = env.run_timeout(CheckType::Url);
    let outcome = match tokio::time::timeout(limit, follow(env, spec, &mut state)).await {
        Ok(outcome) => outcome,
        Err(_) => Err(FetchError::new(
            ErrorKind::Timeout,
            format!(
                "the URL check did not finish within its time limit of {}",
                describe_limit(limit)
            ),
        )),
    };
    let end = Instant::now();
    let stopped_at = Utc::now();
    state.hop.close_running(end);
    let total = millis(end.saturating_duration_since(start));
    let mut phases = state.hop.phases;
    phases.total = total;
    let failed_hop = match &outcome {
        Err(error) if error.kind.is_network() => Some(FailedHop {
            url: state.url.clone(),
            request: HopRequest::get(),
            opts: hop_options(spec),
            addresses: state.hop.addresses,
            proxy: None,
            kind: error.kind,
            scrubber: env.scrubber.clone(),
        }),
        _ => None,
    };

    let mut result = match outcome {
        Ok(()) => {
            let status = state.hop.head.as_ref().map_or(0, |h| h.status.as_u16());
            let assertions: Vec<AssertionResult> = spec
                .request
                .assertions
                .iter()
                .map(|a| evaluate(a, status))
                .collect();
            let assertion_failed = if assertions.is_empty() {
                status >= 400
            } else {
                assertions.iter().any(|a| !a.passed)
            };
            let too_slow = spec.max_response_time.is_some_and(|max| total > max);
            let degraded = spec.degraded_response_time.is_some_and(|d| total > d);
            let mut r = RunResult::new(
                CheckType::Url,
                started_at,
                stopped_at,
                assertion_failed || too_slow,
                degraded,
                Some(total),
                None,
            );
            r.assertions = assertions;
            r
        }
        Err(error) => RunResult::new(
            CheckType::Url,
            started_at,
            stopped_at,
            false,
            false,
            None,
            Some(error.into()),
        ),
    };
    result.timing_phases = Some(phases);
    result.response = summarize(state);
    result.refresh_status();
    (result, failed_hop)
}

/// How every hop of a URL monitor connects and reads.
fn hop_options(spec: &UrlMonitorSpec) -> HopOptions {
    HopOptions {
        family: spec.request.ip_family,
        verify_tls: !spec.request.skip_ssl,
        max_body: timed_http::MAX_BODY_BYTES,
        keep_body: 0,
    }
}

/// Fetches the URL, following redirects if asked; the final response is in `state.hop`.
async fn follow(
    env: &ExecEnv,
    spec: &UrlMonitorSpec,
    state: &mut RunState,
) -> Result<(), FetchError> {
    let opts = hop_options(spec);
    let request = HopRequest::get();
    loop {
        state.hop = HopProgress::default();
        timed_http::fetch(&env.http, &state.url, &request, opts, None, &mut state.hop).await?;
        if !spec.request.follow_redirects {
            return Ok(());
        }
        let Some(next) = redirect_target(&state.url, state.hop.head.as_ref())? else {
            return Ok(());
        };
        if state.redirects.len() >= MAX_REDIRECTS {
            return Err(FetchError::protocol(format!(
                "the URL redirected more than {MAX_REDIRECTS} times"
            )));
        }
        state.redirects.push(public_url(&next));
        state.url = next;
    }
}

/// The URL a redirect response to a request for `url` points to, or `None` if the
/// response is not a redirect (301, 302, 303, 307, 308 with a Location).
pub(crate) fn redirect_target(
    url: &Url,
    head: Option<&ResponseHead>,
) -> Result<Option<Url>, FetchError> {
    let Some(head) = head else {
        return Ok(None);
    };
    if !matches!(
        head.status,
        StatusCode::MOVED_PERMANENTLY
            | StatusCode::FOUND
            | StatusCode::SEE_OTHER
            | StatusCode::TEMPORARY_REDIRECT
            | StatusCode::PERMANENT_REDIRECT
    ) {
        return Ok(None);
    }
    let Some(location) = head.headers.get(LOCATION) else {
        return Ok(None);
    };
    let host = url.host_str().unwrap_or_default();
    let location = location.to_str().map_err(|_| {
        FetchError::protocol(format!(
            "{host} sent a redirect with an unreadable Location"
        ))
    })?;
    let next = url
        .join(location)
        .map_err(|_| FetchError::protocol(format!("{host} sent a redirect to an invalid URL")))?;
    if !matches!(next.scheme(), "http" | "https") || next.host_str().is_none() {
        return Err(FetchError::protocol(format!(
            "{host} redirected to a URL that is not http:// or https://"
        )));
    }
    if next.as_str().len() > MAX_URL_LEN {
        return Err(FetchError::protocol(format!(
            "{host} redirected to a URL longer than {MAX_URL_LEN} characters"
        )));
    }
    Ok(Some(next))
}

/// Compares the final status with one assertion. Anything but a numeric STATUS_CODE
/// assertion with EQUALS, NOT_EQUALS, LESS_THAN or GREATER_THAN fails (validation
/// rejects those before a run; this guards jobs that skipped it).
fn evaluate(assertion: &Assertion, status: u16) -> AssertionResult {
    let target = assertion.target.trim().parse::<u16>().ok();
    let passed = match (assertion.source, target) {
        (AssertionSource::StatusCode, Some(target)) => match assertion.comparison {
            Comparison::Equals => status == target,
            Comparison::NotEquals => status != target,
            Comparison::LessThan => status < target,
            Comparison::GreaterThan => status > target,
            _ => false,
        },
        _ => false,
    };
    AssertionResult {
        source: assertion.source,
        comparison: assertion.comparison,
        property: assertion.property.clone(),
        target: assertion.target.clone(),
        actual: Some(status.to_string()),
        passed,
    }
}

/// The response part of a result, if a response head arrived on the last hop.
fn summarize(state: RunState) -> Option<HttpResponseSummary> {
    let RunState {
        url,
        redirects,
        hop,
    } = state;
    summarize_hop(&url, redirects, hop)
}

/// The response part of a result from the last hop (to `url`), if a head arrived; the
/// body is not kept.
pub(crate) fn summarize_hop(
    url: &Url,
    redirects: Vec<String>,
    hop: HopProgress,
) -> Option<HttpResponseSummary> {
    let ResponseHead {
        status,
        reason,
        headers,
    } = hop.head?;
    let status_text = match &reason {
        Some(reason) => String::from_utf8_lossy(reason.as_bytes()).into_owned(),
        None => status.canonical_reason().unwrap_or_default().to_owned(),
    };
    Some(HttpResponseSummary {
        status: status.as_u16(),
        status_text,
        url: public_url(url),
        redirects,
        headers: bounded_headers(&headers),
        body: None,
        body_size: hop.body_size,
        body_truncated: hop.body_truncated,
    })
}

/// At most [`MAX_HEADERS`] headers; repeated ones joined with `, `; values cut at
/// [`MAX_HEADER_VALUE_BYTES`].
pub(crate) fn bounded_headers(headers: &http::HeaderMap) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for name in headers.keys() {
        if out.len() >= MAX_HEADERS {
            break;
        }
        let mut value = String::new();
        for (i, v) in headers.get_all(name).iter().enumerate() {
            if i > 0 {
                value.push_str(", ");
            }
            value.push_str(&String::from_utf8_lossy(v.as_bytes()));
            if value.len() >= MAX_HEADER_VALUE_BYTES {
                break;
            }
        }
        truncate_at_char_boundary(&mut value, MAX_HEADER_VALUE_BYTES);
        out.insert(name.as_str().to_owned(), value);
    }
    out
}

pub(crate) fn truncate_at_char_boundary(s: &mut String, max: usize) {
    if s.len() > max {
        let mut cut = max;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
    }
}

/// The URL as reported: without user name and password.
pub(crate) fn public_url(url: &Url) -> String {
    if url.username().is_empty() && url.password().is_none() {
        return url.as_str().to_owned();
    }
    let mut clean = url.clone();
    // Only fails for URLs that cannot have credentials, which then have none.
    let _ = clean.set_username("");
    let _ = clean.set_password(None);
    clean.into()
}

pub(crate) fn describe_limit(limit: std::time::Duration) -> String {
    if limit.subsec_millis() == 0 {
        format!("{} s", limit.as_secs())
    } else {
        format!("{} ms", limit.as_millis())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn assertion(comparison: Comparison, target: &str) -> Assertion {
        Assertion {
            source: AssertionSource::StatusCode,
            comparison,
            property: String::new(),
            target: target.into(),
            regex: None,
        }
    }

    #[test]
    fn status_comparisons() {
        assert!(evaluate(&assertion(Comparison::Equals, "200"), 200).passed);
        assert!(!evaluate(&assertion(Comparison::Equals, "200"), 404).passed);
        assert!(evaluate(&assertion(Comparison::NotEquals, "500"), 200).passed);
        assert!(!evaluate(&assertion(Comparison::NotEquals, "200"), 200).passed);
        assert!(evaluate(&assertion(Comparison::LessThan, "400"), 200).passed);
        assert!(!evaluate(&assertion(Comparison::LessThan, "400"), 404).passed);
        assert!(evaluate(&assertion(Comparison::GreaterThan, "199"), 200).passed);
        assert!(!evaluate(&assertion(Comparison::GreaterThan, "200"), 200).passed);
        assert!(!evaluate(&assertion(Comparison::Contains, "200"), 200).passed);
        assert!(!evaluate(&assertion(Comparison::Equals, "abc"), 200).passed);
        assert_eq!(
            evaluate(&assertion(Comparison::Equals, "200"), 404).actual,
            Some("404".into())
        );
    }

    #[test]
    fn headers_are_bounded() {
        let mut map = http::HeaderMap::new();
        for i in 0..80 {
            map.insert(
                http::HeaderName::try_from(format!("x-h{i}")).unwrap(),
                HeaderValue::from_static("v"),
            );
        }
        let out = bounded_headers(&map);
        assert_eq!(out.len(), MAX_HEADERS);
        let mut big = http::HeaderMap::new();
        big.insert(
            "x-big",
            HeaderValue::from_bytes("é".repeat(1000).as_bytes()).unwrap(),
        );
        big.append("x-big", HeaderValue::from_static("second"));
        let out = bounded_headers(&big);
        assert!(out["x-big"].len() <= MAX_HEADER_VALUE_BYTES);
        assert!(out["x-big"].starts_with("éé"));
    }

    #[test]
    fn credentials_are_not_reported() {
        let url = Url::parse("https://user:secret@example.test/p?q=1").unwrap();
        assert_eq!(public_url(&url), "https://example.test/p?q=1");
    }
}
