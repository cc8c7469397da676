//! API check executor: one HTTP request of any method on a fresh connection per run (and
//! per redirect hop), with headers, query parameters, a body and basic authentication,
//! judged by assertions on the response and by its total time.
//!
//! Request building:
//! - `{{NAME}}` placeholders in the URL, headers, query parameters, body and basic-auth
//!   credentials are filled from the check's `environmentVariables`, then from the
//!   agent's `SERVICE_SECRET_*` variables; unknown ones stay as written.
//! - Query parameters are appended to the URL form-encoded (`a+b`, `%26`).
//! - The body type sets `Content-Type` (JSON and GRAPHQL `application/json`, FORM
//!   `application/x-www-form-urlencoded`, RAW `text/plain`, NONE nothing); basic auth sets
//!   `Authorization: Basic`; a header the check sets itself wins over both.
//! - Redirects (if followed): 303, and 301/302 after a POST, continue as a GET without the
//!   body; 307 and 308 repeat the method and body. `Authorization` and `Cookie` are not
//!   sent to another origin.
//!
//! Verdict rules:
//! - Any failed assertion fails the run; so does a 4xx or 5xx status unless the check
//!   has `shouldFail` set.
//! - `maxResponseTime` exceeded fails the run; `degradedResponseTime` exceeded marks it
//!   degraded; both compare with the total time of all hops, which is `responseTime`.
//! - Network and protocol errors, and runs past the time limit, are errors (FAILED).
//!
//! The result carries the request sent (the `Authorization` value masked), the response
//! with up to [`MAX_KEPT_BODY_BYTES`] of body text, the timing phases and every
//! assertion's outcome; values of secret variables are masked everywhere in it.
//!
//! On a location with a proxy (`proxyUrl`), every hop goes through it (see
//! [`super::proxy`]); the proxy's password and basic-auth token are masked like
//! secret variables, and the recorded request is the one meant for the target
//! (without the proxy's `Proxy-Authorization`).

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::time::Instant;

use bytes::Bytes;
use chrono::Utc;
use http::header::{AUTHORIZATION, CONTENT_TYPE, COOKIE, PROXY_AUTHORIZATION};
use http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode};
use serde_json::Value;
use url::Url;

use super::assert::{self, Actual};
use super::http_error::FetchError;
use super::netdiag::FailedHop;
use super::template::Variables;
use super::timed_http::{self, HopOptions, HopProgress, HopRequest, millis};
use super::url::{
    MAX_REDIRECTS, describe_limit, public_url, redirect_target, summarize_hop,
    truncate_at_char_boundary,
};
use super::{ExecEnv, Executor};
use crate::model::check::check_http_url;
use crate::model::{
    ApiCheckSpec, Assertion, AssertionResult, AssertionSource, BodyType, CheckType, Comparison,
    ErrorKind, HttpMethod, HttpRequestSummary, ProxyUrl, RunResult,
};
use crate::scrub::MASK;

/// Response body bytes read (and counted) before reading stops; assertions see them all.
pub const MAX_READ_BODY_BYTES: u64 = 10 * 1024 * 1024;
/// Body bytes (request and response) kept in a result.
pub const MAX_KEPT_BODY_BYTES: usize = 64 * 1024;
/// Longest URL once placeholders are filled and query parameters appended.
pub const MAX_FILLED_URL_BYTES: usize = 8 * 1024;
/// Longest request body once placeholders are filled.
pub const MAX_FILLED_BODY_BYTES: usize = 4 * 1024 * 1024;
/// Longest header name, header value, query parameter or credential once filled.
pub const MAX_FILLED_FIELD_BYTES: usize = 16 * 1024;

impl Executor for ApiCheckSpec {
    async fn run(&self, env: &ExecEnv) -> RunResult {
        run_api_check(self, env, None).await.0
    }
}

/// The request of a run, ready to send, and how it is reported.
struct Prepared {
    url: Url,
    request: HopRequest,
    record: HttpRequestSummary,
}

/// Where a run is: the URL and request of the current hop, the redirects followed, the
/// hop's progress.
struct RunState {
    url: Url,
    request: HopRequest,
    redirects: Vec<String>,
    hop: HopProgress,
}

/// Runs the check, through `proxy` if given; on a network-level failure also returns
/// the failed hop (with the run's secrets in its scrubber), so that diagnostics can run
/// it again.
pub(crate) async fn run_api_check(
    spec: &ApiCheckSpec,
    env: &ExecEnv,
    proxy: Option<&ProxyUrl>,
) -> (RunResult, Option<FailedHop>) {
    let started_at = Utc::now();
    let start = Instant::now();
    let vars = variables(spec, env);
    let mut scrubber = env.scrubber.clone();
    if let Some(proxy) = proxy {
        super::proxy::add_secrets(proxy, &mut scrubber);
    }
    for v in &spec.environment_variables {
        if v.is_secret()
            && let Some(value) = &v.value
        {
            scrubber.add_secret(value);
        }
    }
    let prepared = match prepare(spec, &vars, env) {
        Ok(p) => p,
        Err(e) => {
            let mut result =
                RunResult::errored(CheckType::Api, started_at, ErrorKind::InvalidJob, e.message);
            scrubber.scrub_result(&mut result);
            return (result, None);
        }
    };
    if let Some(auth) = &spec.request.basic_auth {
        // The filled credentials: their base64 token must not show up either.
        let user = vars.fill(&auth.username, MAX_FILLED_FIELD_BYTES);
        let pass = vars.fill(&auth.password, MAX_FILLED_FIELD_BYTES);
        if let (Ok(user), Ok(pass)) = (user, pass) {
            scrubber.add_basic_auth(&user, &pass);
        }
    }

    let Prepared {
        url,
        request,
        record,
    } = prepared;
    let mut state = RunState {
        url,
        request,
        redirects: Vec::new(),
        hop: HopProgress::default(),
    };
    let limit = env.run_timeout(CheckType::Api);
    let outcome = match tokio::time::timeout(limit, follow(env, spec, proxy, &mut state)).await {
        Ok(outcome) => outcome,
        Err(_) => Err(FetchError::new(
            ErrorKind::Timeout,
            format!(
                "the API check did not finish within its time limit of {}",
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
    let body = std::mem::take(&mut state.hop.body);
    let failed_hop = match &outcome {
        Err(error) if error.kind.is_network() => Some(FailedHop {
            url: state.url.clone(),
            request: state.request.clone(),
            opts: hop_options(spec),
            addresses: state.hop.addresses,
            proxy: proxy.cloned(),
            kind: error.kind,
            scrubber: scrubber.clone(),
        }),
        _ => None,
    };

    let mut result = match outcome {
        Ok(()) => {
            let (status, assertions) = match &state.hop.head {
                Some(head) => {
                    let view = ResponseView::new(head.status, &head.headers, &body, &state.hop);
                    let assertions: Vec<AssertionResult> = spec
                        .request
                        .assertions
                        .iter()
                        .map(|a| view.evaluate(a, total))
                        .collect();
                    (head.status.as_u16(), assertions)
                }
                None => (0, Vec::new()),
            };
            let assertion_failed = assertions.iter().any(|a| !a.passed);
            let error_status = status >= 400 && !spec.should_fail;
            let too_slow = spec.max_response_time.is_some_and(|max| total > max);
            let degraded = spec.degraded_response_time.is_some_and(|d| total > d);
            let mut r = RunResult::new(
                CheckType::Api,
                started_at,
                stopped_at,
                assertion_failed || error_status || too_slow,
                degraded,
                Some(total),
                None,
            );
            r.assertions = assertions;
            r
        }
        Err(error) => RunResult::new(
            CheckType::Api,
            started_at,
            stopped_at,
            false,
            false,
            None,
            Some(error.into()),
        ),
    };
    result.timing_phases = Some(phases);
    result.request = Some(record);
    result.response = summarize_hop(&state.url, state.redirects, state.hop).map(|mut r| {
        r.body = kept_text(&body);
        r
    });
    result.refresh_status();
    scrubber.scrub_result(&mut result);
    (result, failed_hop)
}

/// How every hop of an API check connects and reads.
fn hop_options(spec: &ApiCheckSpec) -> HopOptions {
    HopOptions {
        family: spec.request.ip_family,
        verify_tls: !spec.request.skip_ssl,
        max_body: MAX_READ_BODY_BYTES,
        keep_body: usize::try_from(MAX_READ_BODY_BYTES).unwrap_or(usize::MAX),
    }
}

/// The check's variables, then the agent's `SERVICE_SECRET_*` ones.
fn variables(spec: &ApiCheckSpec, env: &ExecEnv) -> Variables {
    let mut vars = Variables::new();
    for v in &spec.environment_variables {
        if let Some(value) = &v.value {
            vars.insert_if_absent(v.key.clone(), value.clone());
        }
    }
    for (name, value) in &env.secret_vars {
        vars.insert_if_absent(name.clone(), value.clone());
    }
    vars
}

/// Fills the placeholders of `text` (the field at `field`) with at most `limit` bytes.
fn fill(vars: &Variables, text: &str, field: &str, limit: usize) -> Result<String, FetchError> {
    vars.fill(text, limit)
        .map_err(|e| FetchError::new(ErrorKind::InvalidJob, format!("{field}: {e}")))
}

fn invalid(field: &str, message: &str) -> FetchError {
    FetchError::new(ErrorKind::InvalidJob, format!("{field} {message}"))
}

/// Builds the request of a run: placeholders filled, query appended, headers set.
fn prepare(spec: &ApiCheckSpec, vars: &Variables, env: &ExecEnv) -> Result<Prepared, FetchError> {
    let req = &spec.request;
    let raw_url = fill(vars, &req.url, "request.url", MAX_FILLED_URL_BYTES)?;
    let mut url = check_http_url(&raw_url).map_err(|m| {
        invalid(
            "request.url",
            &format!("{m} (after filling its placeholders)"),
        )
    })?;
    if !req.query_parameters.is_empty() {
        let mut pairs = Vec::with_capacity(req.query_parameters.len());
        for (i, kv) in req.query_parameters.iter().enumerate() {
            let at = format!("request.queryParameters[{i}]");
            let key = fill(vars, &kv.key, &at, MAX_FILLED_FIELD_BYTES)?;
            let value = fill(vars, &kv.value, &at, MAX_FILLED_FIELD_BYTES)?;
            pairs.push((key, value));
        }
        url.query_pairs_mut().extend_pairs(pairs);
    }
    if url.as_str().len() > MAX_FILLED_URL_BYTES {
        return Err(invalid(
            "request.url",
            &format!("is longer than {MAX_FILLED_URL_BYTES} bytes with its query parameters"),
        ));
    }

    let mut body = fill(vars, &req.body, "request.body", MAX_FILLED_BODY_BYTES)?;
    if req.body_type == BodyType::Graphql && !is_json_object(&body) {
        body = serde_json::json!({ "query": body }).to_string();
    }

    let mut headers = HeaderMap::new();
    if let Some(content_type) = req.body_type.content_type() {
        headers.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    }
    if let Some(auth) = &req.basic_auth {
        let user = fill(
            vars,
            &auth.username,
            "request.basicAuth.username",
            MAX_FILLED_FIELD_BYTES,
        )?;
        let pass = fill(
            vars,
            &auth.password,
            "request.basicAuth.password",
            MAX_FILLED_FIELD_BYTES,
        )?;
        if !user.is_empty() || !pass.is_empty() {
            use base64::Engine as _;
            let token = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{pass}"));
            let value = HeaderValue::from_str(&format!("Basic {token}"))
                .map_err(|_| invalid("request.basicAuth", "cannot be sent in a header"))?;
            headers.insert(AUTHORIZATION, value);
        }
    }
    let mut set_by_check: Vec<HeaderName> = Vec::new();
    for (i, kv) in req.headers.iter().enumerate() {
        let at = format!("request.headers[{i}]");
        let key = fill(vars, &kv.key, &at, MAX_FILLED_FIELD_BYTES)?;
        let value = fill(vars, &kv.value, &at, MAX_FILLED_FIELD_BYTES)?;
        let name = HeaderName::from_bytes(key.trim().as_bytes())
            .map_err(|_| invalid(&format!("{at}.key"), "is not a valid HTTP header name"))?;
        let value = HeaderValue::from_str(value.trim())
            .map_err(|_| invalid(&format!("{at}.value"), "cannot be sent in an HTTP header"))?;
        // The check's first header of a name replaces a derived one; more of it add up.
        if set_by_check.contains(&name) {
            headers.append(name, value);
        } else {
            headers.insert(name.clone(), value);
            set_by_check.push(name);
        }
    }

    let request = HopRequest {
        method: method(req.method),
        headers,
        body: Bytes::from(body),
    };
    let sent = timed_http::request_headers(&env.http, &url, &request)?;
    let record = HttpRequestSummary {
        method: req.method.as_str().to_owned(),
        url: public_url(&url),
        headers: recorded_headers(&sent),
        body: kept_text(&request.body),
    };
    Ok(Prepared {
        url,
        request,
        record,
    })
}

fn method(m: HttpMethod) -> Method {
    match m {
        HttpMethod::Get => Method::GET,
        HttpMethod::Post => Method::POST,
        HttpMethod::Put => Method::PUT,
        HttpMethod::Head => Method::HEAD,
        HttpMethod::Delete => Method::DELETE,
        HttpMethod::Patch => Method::PATCH,
    }
}

fn is_json_object(text: &str) -> bool {
    matches!(serde_json::from_str::<Value>(text), Ok(Value::Object(_)))
}

/// Request headers as reported: credentials masked, keeping the scheme
/// (`Basic *****`).
fn recorded_headers(headers: &HeaderMap) -> BTreeMap<String, String> {
    let mut out = super::url::bounded_headers(headers);
    for name in [AUTHORIZATION, PROXY_AUTHORIZATION] {
        if let Some(value) = out.get_mut(name.as_str()) {
            *value = match value.split_once(' ') {
                Some((scheme, _)) if scheme.chars().all(|c| c.is_ascii_alphabetic()) => {
                    format!("{scheme} {MASK}")
                }
                _ => MASK.to_owned(),
            };
        }
    }
    out
}

/// Up to [`MAX_KEPT_BODY_BYTES`] of `body` as text; `None` when empty.
fn kept_text(body: &[u8]) -> Option<String> {
    if body.is_empty() {
        return None;
    }
    // A few bytes more so a character cut by the limit is not turned into U+FFFD.
    let prefix = &body[..body.len().min(MAX_KEPT_BODY_BYTES + 4)];
    let mut text = String::from_utf8_lossy(prefix).into_owned();
    truncate_at_char_boundary(&mut text, MAX_KEPT_BODY_BYTES);
    Some(text)
}

/// Sends the request, following redirects if asked; the final response is in
/// `state.hop`.
async fn follow(
    env: &ExecEnv,
    spec: &ApiCheckSpec,
    proxy: Option<&ProxyUrl>,
    state: &mut RunState,
) -> Result<(), FetchError> {
    let opts = hop_options(spec);
    loop {
        state.hop = HopProgress::default();
        timed_http::fetch(
            &env.http,
            &state.url,
            &state.request,
            opts,
            proxy,
            &mut state.hop,
        )
        .await?;
        if !spec.request.follow_redirects {
            return Ok(());
        }
        let Some(next) = redirect_target(&state.url, state.hop.head.as_ref())? else {
            return Ok(());
        };
        if state.redirects.len() >= MAX_REDIRECTS {
            return Err(FetchError::protocol(format!(
                "the API redirected more than {MAX_REDIRECTS} times"
            )));
        }
        let status = state
            .hop
            .head
            .as_ref()
            .map_or(StatusCode::FOUND, |h| h.status);
        redirect_request(&mut state.request, status, &state.url, &next);
        state.redirects.push(public_url(&next));
        state.url = next;
    }
}

/// Turns the request into the one to send to `next` after a `status` redirect from
/// `from`.
fn redirect_request(request: &mut HopRequest, status: StatusCode, from: &Url, next: &Url) {
    let to_get = match status {
        StatusCode::SEE_OTHER => !matches!(request.method, Method::GET | Method::HEAD),
        StatusCode::MOVED_PERMANENTLY | StatusCode::FOUND => request.method == Method::POST,
        _ => false,
    };
    if to_get {
        request.method = Method::GET;
        request.body = Bytes::new();
        request.headers.remove(CONTENT_TYPE);
    }
    if from.origin() != next.origin() {
        for name in [AUTHORIZATION, PROXY_AUTHORIZATION, COOKIE] {
            request.headers.remove(name);
        }
    }
}

/// The final response as assertions see it.
struct ResponseView<'a> {
    status: StatusCode,
    headers: &'a HeaderMap,
    body: &'a [u8],
    body_truncated: bool,
}

impl<'a> ResponseView<'a> {
    fn new(
        status: StatusCode,
        headers: &'a HeaderMap,
        body: &'a [u8],
        hop: &HopProgress,
    ) -> ResponseView<'a> {
        ResponseView {
            status,
            headers,
            body,
            body_truncated: hop.body_truncated,
        }
    }

    fn text(&self) -> Cow<'a, str> {
        String::from_utf8_lossy(self.body)
    }

    /// The body as JSON, unless it is not JSON or was cut at the read limit.
    fn json(&self) -> Option<Value> {
        if self.body_truncated {
            return None;
        }
        let body = self.body.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(self.body);
        serde_json::from_slice(body).ok()
    }

    /// The headers as a JSON object with lower-case names.
    fn headers_json(&self) -> Value {
        Value::Object(
            super::url::bounded_headers(self.headers)
                .into_iter()
                .map(|(k, v)| (k, Value::String(v)))
                .collect(),
        )
    }

    fn evaluate(&self, a: &Assertion, total_ms: f64) -> AssertionResult {
        match a.source {
            AssertionSource::StatusCode => {
                assert::evaluate(a, Actual::Text(self.status.as_u16().to_string().into()))
            }
            AssertionSource::ResponseTime => {
                assert::evaluate(a, Actual::Text(total_ms.to_string().into()))
            }
            AssertionSource::Headers => self.evaluate_headers(a),
            AssertionSource::TextBody => {
                // The text body's property is a regex when `regex` is not set.
                let regex = a
                    .regex()
                    .or_else(|| Some(a.property.as_str()).filter(|p| !p.is_empty()));
                assert::evaluate_with_regex(a, Actual::Text(self.text()), regex)
            }
            AssertionSource::JsonBody => self.evaluate_json(a),
            _ => assert::outcome(a, None, false),
        }
    }

    fn evaluate_headers(&self, a: &Assertion) -> AssertionResult {
        let property = a.property.trim();
        if property.is_empty() {
            let all = self.headers_json();
            if matches!(a.comparison, Comparison::HasKey | Comparison::NotHasKey) {
                // Header names are case-insensitive.
                let present = HeaderName::from_bytes(a.target.trim().as_bytes())
                    .is_ok_and(|name| self.headers.contains_key(name));
                let passed = present == (a.comparison == Comparison::HasKey);
                return assert::outcome(a, Some(&all.to_string()), passed);
            }
            return assert::evaluate(a, Actual::Json(Cow::Owned(all)));
        }
        let Ok(name) = HeaderName::from_bytes(property.as_bytes()) else {
            return assert::outcome(a, None, false);
        };
        let mut values = self.headers.get_all(&name).iter().peekable();
        if values.peek().is_none() {
            return assert::evaluate(a, Actual::Missing);
        }
        let joined = values
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
            .collect::<Vec<_>>()
            .join(", ");
        assert::evaluate(a, Actual::Text(joined.into()))
    }

    fn evaluate_json(&self, a: &Assertion) -> AssertionResult {
        let Some(doc) = self.json() else {
            // Not JSON: no JSON assertion can pass, not even a negative one.
            return assert::outcome(a, None, false);
        };
        assert::evaluate_json_path(a, &doc)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redirects_change_the_method_like_browsers() {
        let a = Url::parse("http://a.test/x").unwrap();
        let b = Url::parse("http://b.test/y").unwrap();
        let post = || HopRequest {
            method: Method::POST,
            headers: [
                (CONTENT_TYPE, HeaderValue::from_static("application/json")),
                (AUTHORIZATION, HeaderValue::from_static("Bearer x")),
            ]
            .into_iter()
            .collect(),
            body: Bytes::from_static(b"{}"),
        };
        for (status, method, keeps_body) in [
            (StatusCode::SEE_OTHER, Method::GET, false),
            (StatusCode::FOUND, Method::GET, false),
            (StatusCode::MOVED_PERMANENTLY, Method::GET, false),
            (StatusCode::TEMPORARY_REDIRECT, Method::POST, true),
            (StatusCode::PERMANENT_REDIRECT, Method::POST, true),
        ] {
            let mut r = post();
            redirect_request(&mut r, status, &a, &a);
            assert_eq!(r.method, method, "{status}");
            assert_eq!(!r.body.is_empty(), keeps_body, "{status}");
            assert_eq!(r.headers.contains_key(CONTENT_TYPE), keeps_body, "{status}");
            assert!(
                r.headers.contains_key(AUTHORIZATION),
                "same origin keeps it"
            );
        }
        let mut r = post();
        redirect_request(&mut r, StatusCode::TEMPORARY_REDIRECT, &a, &b);
        assert!(!r.headers.contains_key(AUTHORIZATION));
        let mut put = post();
        put.method = Method::PUT;
        redirect_request(&mut put, StatusCode::FOUND, &a, &a);
        assert_eq!(put.method, Method::PUT);
        let mut head = post();
        head.method = Method::HEAD;
        redirect_request(&mut head, StatusCode::SEE_OTHER, &a, &a);
        assert_eq!(head.method, Method::HEAD);
    }

    #[test]
    fn recorded_credentials_are_masked() {
        let mut h = HeaderMap::new();
        h.insert(
            AUTHORIZATION,
            HeaderValue::from_static("Basic dXNlcjpwYXNz"),
        );
        h.insert(PROXY_AUTHORIZATION, HeaderValue::from_static("opaque"));
        let out = recorded_headers(&h);
        assert_eq!(out["authorization"], "Basic *****");
        assert_eq!(out["proxy-authorization"], "*****");
    }

    #[test]
    fn kept_text_is_bounded_at_a_char_boundary() {
        assert_eq!(kept_text(b""), None);
        let body = "é".repeat(MAX_KEPT_BODY_BYTES);
        let kept = kept_text(body.as_bytes()).unwrap();
        assert_eq!(kept.len(), MAX_KEPT_BODY_BYTES);
        assert!(!kept.contains('\u{FFFD}'));
    }
}
