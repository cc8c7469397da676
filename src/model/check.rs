//! Check definitions: the part of a check that an executor needs to run it.
//!
//! The public API stores the whole check document; [`CheckSpec`] is parsed from that
//! same JSON (unknown fields are ignored), so `outpost check FILE.json` takes the body
//! of `POST /v1/checks/<type>` unchanged.

use serde::{Deserialize, Serialize};

/// Every check type the reference API names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum CheckType {
    Agentic,
    Api,
    Browser,
    Heartbeat,
    Icmp,
    MultiStep,
    Tcp,
    Playwright,
    Url,
    Dns,
}

impl CheckType {
    /// The name used on the wire, e.g. `MULTI_STEP`.
    pub fn as_str(self) -> &'static str {
        match self {
            CheckType::Agentic => "AGENTIC",
            CheckType::Api => "API",
            CheckType::Browser => "BROWSER",
            CheckType::Heartbeat => "HEARTBEAT",
            CheckType::Icmp => "ICMP",
            CheckType::MultiStep => "MULTI_STEP",
            CheckType::Tcp => "TCP",
            CheckType::Playwright => "PLAYWRIGHT",
            CheckType::Url => "URL",
            CheckType::Dns => "DNS",
        }
    }

    /// Parses the wire name.
    pub fn parse(s: &str) -> Option<CheckType> {
        serde_json::from_value(serde_json::Value::String(s.to_owned())).ok()
    }

    /// The agent worker pool that runs this type. Cheap uptime checks never wait
    /// behind long browser jobs because the two pools have separate capacity.
    pub fn pool(self) -> Pool {
        match self {
            CheckType::Url
            | CheckType::Api
            | CheckType::Tcp
            | CheckType::Dns
            | CheckType::Icmp
            | CheckType::Heartbeat => Pool::Uptime,
            CheckType::Agentic
            | CheckType::Browser
            | CheckType::MultiStep
            | CheckType::Playwright => Pool::Heavy,
        }
    }

    /// The longest a single run of this type may take.
    pub fn max_run_time(self) -> std::time::Duration {
        use std::time::Duration;
        match self.pool() {
            Pool::Uptime => Duration::from_secs(30),
            Pool::Heavy if self == CheckType::Playwright => Duration::from_secs(60 * 60),
            Pool::Heavy => Duration::from_secs(4 * 60),
        }
    }
}

impl std::fmt::Display for CheckType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Agent worker pools.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Pool {
    /// URL, API, TCP, DNS, ICMP: short, cheap, many at once.
    Uptime,
    /// Browser, multistep, Playwright suites, agentic: long and memory-hungry.
    Heavy,
}

impl Pool {
    pub fn as_str(self) -> &'static str {
        match self {
            Pool::Uptime => "uptime",
            Pool::Heavy => "heavy",
        }
    }
}

/// What an executor runs. Tagged by `checkType` like the API documents.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "checkType", rename_all = "SCREAMING_SNAKE_CASE")]
pub enum CheckSpec {
    Url(UrlMonitorSpec),
    Api(ApiCheckSpec),
}

impl CheckSpec {
    pub fn check_type(&self) -> CheckType {
        match self {
            CheckSpec::Url(_) => CheckType::Url,
            CheckSpec::Api(_) => CheckType::Api,
        }
    }

    /// Checks every field against the limits of the reference API.
    pub fn validate(&self) -> Result<(), ValidationError> {
        match self {
            CheckSpec::Url(spec) => spec.validate(),
            CheckSpec::Api(spec) => spec.validate(),
        }
    }

    /// Parses and validates a check document (an API body or a file for `outpost check`).
    /// A missing `checkType` is an error naming that field.
    pub fn from_document(doc: &serde_json::Value) -> Result<CheckSpec, ValidationError> {
        let Some(check_type) = doc.get("checkType") else {
            return Err(ValidationError::new("checkType", "is required"));
        };
        let Some(name) = check_type.as_str() else {
            return Err(ValidationError::new("checkType", "must be a string"));
        };
        let spec = match CheckType::parse(name) {
            Some(CheckType::Url) => CheckSpec::Url(deserialize_naming_field(doc)?),
            Some(CheckType::Api) => CheckSpec::Api(deserialize_naming_field(doc)?),
            Some(other) => {
                return Err(ValidationError::new(
                    "checkType",
                    format!("{other} checks are not supported by this version"),
                ));
            }
            None => {
                return Err(ValidationError::new(
                    "checkType",
                    format!("unknown check type {name:?}"),
                ));
            }
        };
        spec.validate()?;
        Ok(spec)
    }
}

/// Deserializes one check type's spec with an error that names the offending field by
/// its JSON path, e.g. `request.assertions[2].source`; a missing field is named by its
/// own path (`request.url`), not its parent's.
fn deserialize_naming_field<T: serde::de::DeserializeOwned>(
    doc: &serde_json::Value,
) -> Result<T, ValidationError> {
    serde_path_to_error::deserialize(doc).map_err(|e| {
        let path = e.path().to_string();
        let msg = e.inner().to_string();
        // serde messages look like "missing field `url`" or "unknown variant `X`, expected ...".
        let missing = msg
            .strip_prefix("missing field `")
            .and_then(|rest| rest.split('`').next());
        let field = match (path.as_str(), missing) {
            (".", Some(name)) => name.to_owned(),
            (".", None) => "body".to_owned(),
            (_, Some(name)) => format!("{path}.{name}"),
            (_, None) => path,
        };
        ValidationError::new(field, msg)
    })
}

/// A check definition that breaks a rule of the API; `field` is the JSON path of the culprit.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct ValidationError {
    pub field: String,
    pub message: String,
}

impl ValidationError {
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            message: message.into(),
        }
    }
}

/// A URL monitor: a GET on a fresh connection, judged by status code and response time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UrlMonitorSpec {
    pub request: UrlRequest,
    /// Milliseconds after which the run is DEGRADED.
    #[serde(default = "default_degraded_ms")]
    pub degraded_response_time: Option<f64>,
    /// Milliseconds after which the run is FAILED.
    #[serde(default = "default_max_ms")]
    pub max_response_time: Option<f64>,
}

fn default_degraded_ms() -> Option<f64> {
    Some(3000.0)
}
fn default_max_ms() -> Option<f64> {
    Some(5000.0)
}

/// Largest response-time threshold the reference API accepts.
pub const MAX_RESPONSE_TIME_LIMIT_MS: f64 = 45_000.0;
/// Longest URL the reference API accepts.
pub const MAX_URL_LEN: usize = 2048;

impl UrlMonitorSpec {
    pub fn validate(&self) -> Result<(), ValidationError> {
        self.request.validate("request")?;
        validate_thresholds(self.degraded_response_time, self.max_response_time)
    }
}

/// Both response-time limits within the API's range, the degraded one not above the max.
fn validate_thresholds(degraded: Option<f64>, max: Option<f64>) -> Result<(), ValidationError> {
    for (field, value) in [("degradedResponseTime", degraded), ("maxResponseTime", max)] {
        if let Some(v) = value
            && !(0.0..=MAX_RESPONSE_TIME_LIMIT_MS).contains(&v)
        {
            return Err(ValidationError::new(
                field,
                format!("must be between 0 and {MAX_RESPONSE_TIME_LIMIT_MS} milliseconds"),
            ));
        }
    }
    if let (Some(d), Some(m)) = (degraded, max)
        && d > m
    {
        return Err(ValidationError::new(
            "degradedResponseTime",
            "must not be greater than maxResponseTime",
        ));
    }
    Ok(())
}

/// The request of a URL monitor.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UrlRequest {
    #[serde(default = "default_method")]
    pub method: String,
    pub url: String,
    #[serde(default = "default_true")]
    pub follow_redirects: bool,
    #[serde(default, rename = "skipSSL")]
    pub skip_ssl: bool,
    #[serde(default)]
    pub ip_family: IpFamily,
    #[serde(default)]
    pub assertions: Vec<Assertion>,
}

fn default_method() -> String {
    "GET".to_owned()
}
fn default_true() -> bool {
    true
}

impl UrlRequest {
    fn validate(&self, at: &str) -> Result<(), ValidationError> {
        if !self.method.eq_ignore_ascii_case("GET") {
            return Err(ValidationError::new(
                format!("{at}.method"),
                "URL monitors only send GET",
            ));
        }
        if self.url.is_empty() || self.url.len() > MAX_URL_LEN {
            return Err(ValidationError::new(
                format!("{at}.url"),
                format!("must be 1 to {MAX_URL_LEN} characters"),
            ));
        }
        let parsed = url::Url::parse(&self.url).map_err(|e| {
            ValidationError::new(format!("{at}.url"), format!("is not a valid URL: {e}"))
        })?;
        if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none() {
            return Err(ValidationError::new(
                format!("{at}.url"),
                "must be an http:// or https:// URL with a host",
            ));
        }
        for (i, a) in self.assertions.iter().enumerate() {
            let field = format!("{at}.assertions[{i}]");
            if a.source != AssertionSource::StatusCode {
                return Err(ValidationError::new(
                    format!("{field}.source"),
                    "URL monitors only assert on STATUS_CODE",
                ));
            }
            if !matches!(
                a.comparison,
                Comparison::Equals
                    | Comparison::NotEquals
                    | Comparison::LessThan
                    | Comparison::GreaterThan
            ) {
                return Err(ValidationError::new(
                    format!("{field}.comparison"),
                    "must be EQUALS, NOT_EQUALS, LESS_THAN or GREATER_THAN",
                ));
            }
            if a.target.trim().parse::<u16>().is_err() {
                return Err(ValidationError::new(
                    format!("{field}.target"),
                    "must be an HTTP status code",
                ));
            }
        }
        Ok(())
    }
}

/// An API check: one HTTP request of any method, with headers, query parameters, a body
/// and authentication, judged by assertions on its response and by its total time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApiCheckSpec {
    pub request: ApiRequest,
    /// Milliseconds after which the run is DEGRADED.
    #[serde(default = "default_api_degraded_ms")]
    pub degraded_response_time: Option<f64>,
    /// Milliseconds after which the run is FAILED.
    #[serde(default = "default_api_max_ms")]
    pub max_response_time: Option<f64>,
    /// A 4xx or 5xx answer does not fail the run by itself (only assertions do).
    #[serde(default)]
    pub should_fail: bool,
    /// Values for the `{{NAME}}` placeholders of the request.
    #[serde(default, deserialize_with = "null_as_empty")]
    pub environment_variables: Vec<EnvironmentVariable>,
}

fn default_api_degraded_ms() -> Option<f64> {
    Some(5000.0)
}
fn default_api_max_ms() -> Option<f64> {
    Some(20000.0)
}

/// A JSON `null` read as an empty list, for the API's nullable arrays.
fn null_as_empty<'de, D, T>(deserializer: D) -> Result<Vec<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Ok(Option::<Vec<T>>::deserialize(deserializer)?.unwrap_or_default())
}

/// Most environment variables a check may carry (the reference API's limit).
pub const MAX_ENVIRONMENT_VARIABLES: usize = 200;
/// Most headers, query parameters or assertions of one API request.
pub const MAX_API_LIST_ITEMS: usize = 100;
/// Largest request body of an API check, before placeholders are filled.
pub const MAX_API_BODY_BYTES: usize = 1024 * 1024;
/// Longest assertion property or regex.
pub const MAX_ASSERTION_EXPR_LEN: usize = 1024;
/// Compiled size limit of an assertion regex, so a pathological pattern is refused.
pub const MAX_REGEX_SIZE: usize = 1024 * 1024;

impl ApiCheckSpec {
    pub fn validate(&self) -> Result<(), ValidationError> {
        self.request.validate("request")?;
        if self.environment_variables.len() > MAX_ENVIRONMENT_VARIABLES {
            return Err(ValidationError::new(
                "environmentVariables",
                format!("at most {MAX_ENVIRONMENT_VARIABLES} variables"),
            ));
        }
        for (i, v) in self.environment_variables.iter().enumerate() {
            if v.key.is_empty() {
                return Err(ValidationError::new(
                    format!("environmentVariables[{i}].key"),
                    "must not be empty",
                ));
            }
        }
        validate_thresholds(self.degraded_response_time, self.max_response_time)
    }
}

/// The request of an API check.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApiRequest {
    pub method: HttpMethod,
    /// May contain `{{NAME}}` placeholders, checked again once they are filled.
    pub url: String,
    #[serde(default = "default_true")]
    pub follow_redirects: bool,
    #[serde(default, rename = "skipSSL")]
    pub skip_ssl: bool,
    #[serde(default)]
    pub ip_family: IpFamily,
    #[serde(default, deserialize_with = "null_as_empty_string")]
    pub body: String,
    #[serde(default)]
    pub body_type: BodyType,
    #[serde(default, deserialize_with = "null_as_empty")]
    pub headers: Vec<KeyValue>,
    #[serde(default, deserialize_with = "null_as_empty")]
    pub query_parameters: Vec<KeyValue>,
    #[serde(default, deserialize_with = "null_as_empty")]
    pub assertions: Vec<Assertion>,
    #[serde(default)]
    pub basic_auth: Option<BasicAuth>,
}

fn null_as_empty_string<'de, D>(deserializer: D) -> Result<String, D::Error>
where
    D: serde::Deserializer<'de>,
{
    Ok(Option::<String>::deserialize(deserializer)?.unwrap_or_default())
}

impl ApiRequest {
    fn validate(&self, at: &str) -> Result<(), ValidationError> {
        if self.url.is_empty() || self.url.len() > MAX_URL_LEN {
            return Err(ValidationError::new(
                format!("{at}.url"),
                format!("must be 1 to {MAX_URL_LEN} characters"),
            ));
        }
        // A URL built from placeholders can only be checked once they are filled.
        if !has_placeholder(&self.url) {
            check_http_url(&self.url).map_err(|m| ValidationError::new(format!("{at}.url"), m))?;
        }
        if self.body.len() > MAX_API_BODY_BYTES {
            return Err(ValidationError::new(
                format!("{at}.body"),
                format!("must be at most {MAX_API_BODY_BYTES} bytes"),
            ));
        }
        for (list, items) in [
            ("headers", &self.headers),
            ("queryParameters", &self.query_parameters),
        ] {
            if items.len() > MAX_API_LIST_ITEMS {
                return Err(ValidationError::new(
                    format!("{at}.{list}"),
                    format!("at most {MAX_API_LIST_ITEMS} items"),
                ));
            }
            for (i, kv) in items.iter().enumerate() {
                if kv.key.is_empty() {
                    return Err(ValidationError::new(
                        format!("{at}.{list}[{i}].key"),
                        "must not be empty",
                    ));
                }
            }
        }
        for (i, h) in self.headers.iter().enumerate() {
            if !has_placeholder(&h.key) && http::HeaderName::from_bytes(h.key.as_bytes()).is_err() {
                return Err(ValidationError::new(
                    format!("{at}.headers[{i}].key"),
                    "is not a valid HTTP header name",
                ));
            }
            if h.value.contains(['\r', '\n', '\0']) {
                return Err(ValidationError::new(
                    format!("{at}.headers[{i}].value"),
                    "must not contain line breaks or NUL",
                ));
            }
        }
        if self.assertions.len() > MAX_API_LIST_ITEMS {
            return Err(ValidationError::new(
                format!("{at}.assertions"),
                format!("at most {MAX_API_LIST_ITEMS} assertions"),
            ));
        }
        for (i, a) in self.assertions.iter().enumerate() {
            a.validate_for_api(&format!("{at}.assertions[{i}]"))?;
        }
        Ok(())
    }
}

/// Whether `s` contains a `{{` that may start a placeholder.
fn has_placeholder(s: &str) -> bool {
    s.contains("{{")
}

/// Checks that `url` is an absolute http:// or https:// URL with a host; the error
/// message says what is wrong.
pub fn check_http_url(url: &str) -> Result<url::Url, String> {
    let parsed = url::Url::parse(url).map_err(|e| format!("is not a valid URL: {e}"))?;
    if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none() {
        return Err("must be an http:// or https:// URL with a host".to_owned());
    }
    Ok(parsed)
}

/// The methods an API check may send.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum HttpMethod {
    Get,
    Post,
    Put,
    Head,
    Delete,
    Patch,
}

impl HttpMethod {
    pub fn as_str(self) -> &'static str {
        match self {
            HttpMethod::Get => "GET",
            HttpMethod::Post => "POST",
            HttpMethod::Put => "PUT",
            HttpMethod::Head => "HEAD",
            HttpMethod::Delete => "DELETE",
            HttpMethod::Patch => "PATCH",
        }
    }
}

/// How the request body is sent; each type but NONE sets a `Content-Type` unless the
/// check sets one itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum BodyType {
    /// `application/json`.
    Json,
    /// `application/x-www-form-urlencoded`; the body is sent as written (`a=1&b=2`).
    Form,
    /// `text/plain`.
    Raw,
    /// `application/json`; a body that is not already a JSON object is sent as
    /// `{"query": <body>}`.
    Graphql,
    /// No `Content-Type`; a non-empty body is still sent as written.
    #[default]
    None,
}

impl BodyType {
    /// The `Content-Type` this body type implies.
    pub fn content_type(self) -> Option<&'static str> {
        match self {
            BodyType::Json | BodyType::Graphql => Some("application/json"),
            BodyType::Form => Some("application/x-www-form-urlencoded"),
            BodyType::Raw => Some("text/plain"),
            BodyType::None => None,
        }
    }
}

/// A header or query parameter.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KeyValue {
    pub key: String,
    #[serde(default, deserialize_with = "null_as_empty_string")]
    pub value: String,
    #[serde(default)]
    pub locked: bool,
}

/// HTTP basic authentication credentials; both may contain placeholders.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BasicAuth {
    #[serde(default, deserialize_with = "null_as_empty_string")]
    pub username: String,
    #[serde(default, deserialize_with = "null_as_empty_string")]
    pub password: String,
}

/// A variable of the check document, filling `{{key}}` placeholders. Values of `secret`
/// (and `locked`) variables never appear in results.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EnvironmentVariable {
    pub key: String,
    #[serde(default)]
    pub value: Option<String>,
    #[serde(default)]
    pub locked: bool,
    #[serde(default)]
    pub secret: bool,
}

impl EnvironmentVariable {
    /// Whether the value must be scrubbed from results.
    pub fn is_secret(&self) -> bool {
        self.secret || self.locked
    }
}

impl Assertion {
    /// The regex to extract the actual value with: `regex` when set and non-empty.
    pub fn regex(&self) -> Option<&str> {
        self.regex.as_deref().filter(|r| !r.is_empty())
    }

    /// Checks an assertion of an API check; `at` is its JSON path.
    fn validate_for_api(&self, at: &str) -> Result<(), ValidationError> {
        use AssertionSource as S;
        if !matches!(
            self.source,
            S::StatusCode | S::JsonBody | S::Headers | S::TextBody | S::ResponseTime
        ) {
            return Err(ValidationError::new(
                format!("{at}.source"),
                "API checks assert on STATUS_CODE, JSON_BODY, HEADERS, TEXT_BODY or RESPONSE_TIME",
            ));
        }
        for (field, value) in [
            ("property", self.property.as_str()),
            ("target", self.target.as_str()),
            ("regex", self.regex().unwrap_or_default()),
        ] {
            if value.len() > MAX_ASSERTION_EXPR_LEN {
                return Err(ValidationError::new(
                    format!("{at}.{field}"),
                    format!("must be at most {MAX_ASSERTION_EXPR_LEN} characters"),
                ));
            }
        }
        if let Some(regex) = self.regex() {
            compile_regex(regex).map_err(|e| ValidationError::new(format!("{at}.regex"), e))?;
        }
        match self.source {
            S::JsonBody if !self.property.is_empty() => {
                super::jsonpath::JsonPath::parse(&self.property)
                    .map_err(|e| ValidationError::new(format!("{at}.property"), e.to_string()))?;
            }
            // A text body's property is a regex when `regex` is not set.
            S::TextBody if self.regex().is_none() && !self.property.is_empty() => {
                compile_regex(&self.property)
                    .map_err(|e| ValidationError::new(format!("{at}.property"), e))?;
            }
            S::Headers
                if !self.property.is_empty()
                    && http::HeaderName::from_bytes(self.property.trim().as_bytes()).is_err() =>
            {
                return Err(ValidationError::new(
                    format!("{at}.property"),
                    "is not a valid HTTP header name",
                ));
            }
            _ => {}
        }
        Ok(())
    }
}

/// Compiles an assertion regex with the size limit every executor uses.
pub fn compile_regex(pattern: &str) -> Result<regex::Regex, String> {
    regex::RegexBuilder::new(pattern)
        .size_limit(MAX_REGEX_SIZE)
        .build()
        .map_err(|e| format!("is not a valid regular expression: {e}"))
}

/// Address family a check connects over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum IpFamily {
    #[default]
    IPv4,
    IPv6,
}

/// One assertion of the reference vocabulary.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Assertion {
    pub source: AssertionSource,
    pub comparison: Comparison,
    #[serde(default)]
    pub property: String,
    #[serde(default)]
    pub target: String,
    #[serde(default)]
    pub regex: Option<String>,
}

/// Where an assertion reads its actual value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum AssertionSource {
    StatusCode,
    JsonBody,
    Headers,
    TextBody,
    ResponseTime,
    ResponseData,
    ResponseCode,
    TextAnswer,
    JsonAnswer,
    Latency,
    PacketLoss,
}

/// How an assertion compares actual and target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Comparison {
    Equals,
    NotEquals,
    HasKey,
    NotHasKey,
    HasValue,
    NotHasValue,
    IsEmpty,
    NotEmpty,
    GreaterThan,
    LessThan,
    Contains,
    NotContains,
    IsNull,
    NotNull,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parses_api_body_with_defaults() {
        let doc =
            json!({"checkType": "URL", "name": "x", "request": {"url": "http://127.0.0.1:1/"}});
        let spec = CheckSpec::from_document(&doc).expect("valid");
        let CheckSpec::Url(u) = spec else {
            panic!("a URL spec: {spec:?}");
        };
        assert!(u.request.follow_redirects);
        assert!(!u.request.skip_ssl);
        assert_eq!(u.request.ip_family, IpFamily::IPv4);
        assert_eq!(u.max_response_time, Some(5000.0));
    }

    #[test]
    fn errors_name_the_field() {
        let doc = json!({"checkType": "URL", "request": {"url": "ftp://x/"}});
        assert_eq!(
            CheckSpec::from_document(&doc).unwrap_err().field,
            "request.url"
        );
        let doc = json!({"checkType": "URL"});
        assert_eq!(CheckSpec::from_document(&doc).unwrap_err().field, "request");
        let doc = json!({"request": {}});
        assert_eq!(
            CheckSpec::from_document(&doc).unwrap_err().field,
            "checkType"
        );
        let doc =
            json!({"checkType": "URL", "maxResponseTime": 50000, "request": {"url": "http://a/"}});
        assert_eq!(
            CheckSpec::from_document(&doc).unwrap_err().field,
            "maxResponseTime"
        );
        let doc = json!({"checkType": "URL", "request": {"url": "http://a/", "assertions": [
            {"source": "STATUS_CODE", "comparison": "EQUALS", "target": "abc"}]}});
        assert_eq!(
            CheckSpec::from_document(&doc).unwrap_err().field,
            "request.assertions[0].target"
        );
    }

    #[test]
    fn parses_an_api_check_with_defaults() {
        let doc = json!({"checkType": "API", "name": "x",
            "request": {"method": "POST", "url": "http://127.0.0.1:1/"}});
        let CheckSpec::Api(a) = CheckSpec::from_document(&doc).expect("valid") else {
            panic!("an API spec");
        };
        assert_eq!(a.request.method, HttpMethod::Post);
        assert!(a.request.follow_redirects);
        assert_eq!(a.request.body_type, BodyType::None);
        assert_eq!(a.degraded_response_time, Some(5000.0));
        assert_eq!(a.max_response_time, Some(20000.0));
        assert!(!a.should_fail);
        assert!(a.environment_variables.is_empty());
        assert_eq!(a.request.basic_auth, None);
    }

    #[test]
    fn api_nullable_fields_accept_null() {
        let doc = json!({"checkType": "API", "environmentVariables": null, "request": {
            "method": "GET", "url": "http://a/", "headers": null, "queryParameters": null,
            "assertions": null, "basicAuth": null, "body": null,
            "assertions": [{"source": "TEXT_BODY", "comparison": "CONTAINS", "regex": null}]}});
        assert!(CheckSpec::from_document(&doc).is_ok());
    }

    #[test]
    fn api_errors_name_the_field() {
        let base = || json!({"checkType": "API", "request": {"method": "GET", "url": "http://a/"}});
        let field = |patch: &dyn Fn(&mut serde_json::Value)| {
            let mut doc = base();
            patch(&mut doc);
            CheckSpec::from_document(&doc).unwrap_err().field
        };
        let assertion = |a: serde_json::Value| {
            move |d: &mut serde_json::Value| {
                d["request"]["assertions"] = json!([
                    {"source": "STATUS_CODE", "comparison": "EQUALS", "target": "200"},
                    {"source": "STATUS_CODE", "comparison": "EQUALS", "target": "200"},
                    a.clone()
                ])
            }
        };
        assert_eq!(
            field(&|d| d["request"]["method"] = json!("TRACE")),
            "request.method"
        );
        assert_eq!(
            field(&|d| {
                d["request"].as_object_mut().unwrap().remove("method");
            }),
            "request.method"
        );
        assert_eq!(
            field(&|d| d["request"]["url"] = json!("ftp://a/")),
            "request.url"
        );
        assert_eq!(field(&|d| d["request"]["url"] = json!("")), "request.url");
        assert_eq!(
            field(&|d| d["request"]["bodyType"] = json!("XML")),
            "request.bodyType"
        );
        assert_eq!(
            field(&|d| d["request"]["headers"] = json!([{"key": "", "value": "x"}])),
            "request.headers[0].key"
        );
        assert_eq!(
            field(&|d| d["request"]["headers"] = json!([{"key": "a b", "value": "x"}])),
            "request.headers[0].key"
        );
        assert_eq!(
            field(&|d| d["request"]["headers"] = json!([{"key": "a", "value": "x\r\ny: z"}])),
            "request.headers[0].value"
        );
        assert_eq!(
            field(&|d| d["request"]["queryParameters"] = json!([{"value": "x"}])),
            "request.queryParameters[0].key"
        );
        assert_eq!(
            field(&assertion(
                json!({"source": "LATENCY", "comparison": "EQUALS"})
            )),
            "request.assertions[2].source"
        );
        assert_eq!(
            field(&assertion(
                json!({"source": "NOPE", "comparison": "EQUALS"})
            )),
            "request.assertions[2].source"
        );
        assert_eq!(
            field(&assertion(
                json!({"source": "JSON_BODY", "comparison": "ALMOST"})
            )),
            "request.assertions[2].comparison"
        );
        assert_eq!(
            field(&assertion(
                json!({"source": "JSON_BODY", "comparison": "EQUALS", "property": "$[?(@.a)]"})
            )),
            "request.assertions[2].property"
        );
        assert_eq!(
            field(&assertion(
                json!({"source": "HEADERS", "comparison": "EQUALS", "regex": "(open"})
            )),
            "request.assertions[2].regex"
        );
        assert_eq!(
            field(&assertion(
                json!({"source": "TEXT_BODY", "comparison": "EQUALS", "property": "[z-a]"})
            )),
            "request.assertions[2].property"
        );
        assert_eq!(
            field(&|d| d["maxResponseTime"] = json!(45001)),
            "maxResponseTime"
        );
        assert_eq!(
            field(&|d| {
                d["degradedResponseTime"] = json!(300);
                d["maxResponseTime"] = json!(200);
            }),
            "degradedResponseTime"
        );
        assert_eq!(
            field(&|d| d["environmentVariables"] = json!([{"key": "", "value": "v"}])),
            "environmentVariables[0].key"
        );
        assert_eq!(
            field(&|d| d["request"]["basicAuth"] = json!({"username": 5, "password": ""})),
            "request.basicAuth.username"
        );
    }

    #[test]
    fn api_urls_with_placeholders_are_checked_at_run_time() {
        let doc = json!({"checkType": "API",
            "request": {"method": "GET", "url": "{{BASE_URL}}/health"}});
        assert!(CheckSpec::from_document(&doc).is_ok());
    }

    #[test]
    fn pools_separate_cheap_from_heavy() {
        assert_eq!(CheckType::Url.pool(), Pool::Uptime);
        assert_eq!(CheckType::Browser.pool(), Pool::Heavy);
        assert_eq!(CheckType::parse("MULTI_STEP"), Some(CheckType::MultiStep));
    }
}
