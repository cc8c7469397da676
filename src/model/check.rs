//! Check definitions: the part of a check that an executor needs to run it.
//!
//! The public API stores the whole check document; [`CheckSpec`] is parsed from that
//! same JSON (unknown fields are ignored), so `outpost check FILE.json` takes the body
//! of `POST /v1/checks/<type>` unchanged.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Every check type the reference API names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
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
    Traceroute,
    Ssl,
    Grpc,
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
            CheckType::Traceroute => "TRACEROUTE",
            CheckType::Ssl => "SSL",
            CheckType::Grpc => "GRPC",
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
            | CheckType::Traceroute
            | CheckType::Ssl
            | CheckType::Grpc
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
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
    Tcp(TcpMonitorSpec),
    Dns(DnsMonitorSpec),
    Api(ApiCheckSpec),
    Icmp(IcmpMonitorSpec),
}

impl CheckSpec {
    pub fn check_type(&self) -> CheckType {
        match self {
            CheckSpec::Url(_) => CheckType::Url,
            CheckSpec::Tcp(_) => CheckType::Tcp,
            CheckSpec::Dns(_) => CheckType::Dns,
            CheckSpec::Api(_) => CheckType::Api,
            CheckSpec::Icmp(_) => CheckType::Icmp,
        }
    }

    /// Checks every field against the limits of the reference API.
    pub fn validate(&self) -> Result<(), ValidationError> {
        match self {
            CheckSpec::Url(spec) => spec.validate(),
            CheckSpec::Tcp(spec) => spec.validate(),
            CheckSpec::Dns(spec) => spec.validate(),
            CheckSpec::Api(spec) => spec.validate(),
            CheckSpec::Icmp(spec) => spec.validate(),
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
            Some(CheckType::Tcp) => {
                precheck_tcp(doc)?;
                CheckSpec::Tcp(deserialize_naming_field(doc)?)
            }
            Some(CheckType::Dns) => {
                precheck_dns(doc)?;
                CheckSpec::Dns(deserialize_naming_field(doc)?)
            }
            Some(CheckType::Icmp) => {
                precheck_icmp(doc)?;
                CheckSpec::Icmp(deserialize_naming_field(doc)?)
            }
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

    /// Like [`CheckSpec::from_document`], from the document's JSON text (what agents
    /// lease). URL and API documents, the bulk of the work, are deserialized straight
    /// from the text without a JSON tree in between; other types, and any document the
    /// direct way refuses, go through [`CheckSpec::from_document`], so the answer and
    /// every error message are the same either way.
    pub fn from_json(text: &str) -> Result<CheckSpec, ValidationError> {
        #[derive(Deserialize)]
        struct Kind<'a> {
            #[serde(rename = "checkType", borrow, default)]
            check_type: Option<&'a str>,
        }
        if let Ok(Kind {
            check_type: Some(name),
        }) = serde_json::from_str::<Kind>(text)
        {
            let direct = match CheckType::parse(name) {
                Some(CheckType::Url) => serde_json::from_str(text).ok().map(CheckSpec::Url),
                Some(CheckType::Api) => serde_json::from_str(text).ok().map(CheckSpec::Api),
                _ => None,
            };
            if let Some(spec) = direct.filter(|s| s.validate().is_ok()) {
                return Ok(spec);
            }
        }
        let doc: serde_json::Value = serde_json::from_str(text)
            .map_err(|e| ValidationError::new("body", format!("is not JSON: {e}")))?;
        CheckSpec::from_document(&doc)
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
        validate_thresholds(
            self.degraded_response_time,
            self.max_response_time,
            MAX_RESPONSE_TIME_LIMIT_MS,
        )
    }
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
    /// The address family to connect over; `None` (no `ipFamily` in the document) tries
    /// IPv6 first and falls back to IPv4.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ip_family: Option<IpFamily>,
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
        validate_thresholds(
            self.degraded_response_time,
            self.max_response_time,
            MAX_RESPONSE_TIME_LIMIT_MS,
        )
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
    /// The address family to connect over; `None` (no `ipFamily` in the document) tries
    /// IPv6 first and falls back to IPv4.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ip_family: Option<IpFamily>,
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

/// Address family a check connects over. A check that names none (`ipFamily` absent,
/// `Option<IpFamily>` = `None`) tries IPv6 first and falls back to IPv4.
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
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
    /// Percentage of echo requests without a reply (ICMP monitors; an extension of the
    /// reference vocabulary).
    PacketLoss,
    /// A JSON path over the ICMP summary of a run.
    JsonResponse,
}

/// How an assertion compares actual and target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
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

// ---------------------------------------------------------------- TCP and DNS monitors

/// Most assertions one TCP or DNS monitor may have.
pub const MAX_ASSERTIONS: usize = 100;
/// Longest `request.hostname` or `request.url` of a TCP monitor the reference API accepts.
pub const MAX_TCP_HOST_LEN: usize = 2048;
/// Most bytes of `request.data` a TCP monitor sends.
pub const MAX_TCP_DATA_BYTES: usize = 64 * 1024;
/// Longest `request.query` of a DNS monitor the reference API accepts.
pub const MAX_DNS_QUERY_LEN: usize = 100;
/// Longest `request.nameServer` of a DNS monitor the reference API accepts.
pub const MAX_NAME_SERVER_LEN: usize = 100;
/// Largest response-time threshold of a DNS monitor the reference API accepts.
pub const MAX_DNS_RESPONSE_TIME_LIMIT_MS: f64 = 5_000.0;
/// Longest assertion `property` (a JSON path for JSON_ANSWER).
pub const MAX_PROPERTY_LEN: usize = 512;
/// Port a DNS monitor queries when neither `port` nor `nameServer` names one.
pub const DEFAULT_DNS_PORT: u16 = 53;
/// The DNS response codes a RESPONSE_CODE assertion may name, as DNS tools print them.
pub const DNS_RESPONSE_CODES: &[&str] = &[
    "NOERROR",
    "FORMERR",
    "SERVFAIL",
    "NXDOMAIN",
    "NOTIMP",
    "REFUSED",
    "YXDOMAIN",
    "YXRRSET",
    "NXRRSET",
    "NOTAUTH",
    "NOTZONE",
    "BADVERS",
    "BADSIG",
    "BADKEY",
    "BADTIME",
    "BADMODE",
    "BADNAME",
    "BADALG",
    "BADTRUNC",
    "BADCOOKIE",
];

/// A TCP monitor: a connection to a host and port, optionally sending `data` and
/// judging what comes back.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TcpMonitorSpec {
    pub request: TcpRequest,
    /// Milliseconds after which the run is DEGRADED.
    #[serde(default = "default_degraded_ms")]
    pub degraded_response_time: Option<f64>,
    /// Milliseconds after which the run is FAILED.
    #[serde(default = "default_max_ms")]
    pub max_response_time: Option<f64>,
}

/// The request of a TCP monitor. The host comes from `hostname`, else from `url`
/// (`tcp://host:port` or a bare host).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TcpRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hostname: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Required; `Option` so a missing port is reported as `request.port`.
    #[serde(default, deserialize_with = "deserialize_port")]
    pub port: Option<u16>,
    /// Text sent after connecting.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<String>,
    /// Older name of `data`, used when `data` is absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    /// The address family to connect over; `None` (no `ipFamily` in the document) tries
    /// IPv6 first and falls back to IPv4.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ip_family: Option<IpFamily>,
    #[serde(default)]
    pub assertions: Vec<Assertion>,
}

/// Reads a port given as a JSON number (`53` or `53.0`).
fn deserialize_port<'de, D>(deserializer: D) -> Result<Option<u16>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    use serde::de::Error;
    match Option::<f64>::deserialize(deserializer)? {
        None => Ok(None),
        Some(p) if p.fract() == 0.0 && (1.0..=65535.0).contains(&p) => Ok(Some(p as u16)),
        Some(p) => Err(D::Error::custom(format!(
            "{p} is not a port number between 1 and 65535"
        ))),
    }
}

impl TcpRequest {
    /// The host to connect to (IPv6 literals without brackets), from `hostname` or `url`.
    pub fn host(&self) -> Option<String> {
        if let Some(hostname) = self.hostname.as_deref().filter(|h| !h.is_empty()) {
            return Some(unbracket(hostname).to_owned());
        }
        let url = self.url.as_deref().filter(|u| !u.is_empty())?;
        if url.contains("://") {
            let parsed = url::Url::parse(url).ok()?;
            return parsed.host_str().map(|h| unbracket(h).to_owned());
        }
        Some(unbracket(url).to_owned())
    }

    /// The text to send after connecting: `data`, else `body`.
    pub fn payload(&self) -> Option<&str> {
        self.data
            .as_deref()
            .or(self.body.as_deref())
            .filter(|d| !d.is_empty())
    }

    fn validate(&self, at: &str) -> Result<(), ValidationError> {
        let host_field = if self.hostname.as_deref().is_some_and(|h| !h.is_empty()) {
            format!("{at}.hostname")
        } else if self.url.as_deref().is_some_and(|u| !u.is_empty()) {
            format!("{at}.url")
        } else {
            return Err(ValidationError::new(
                format!("{at}.hostname"),
                "is required (or request.url)",
            ));
        };
        for value in [&self.hostname, &self.url].into_iter().flatten() {
            if value.len() > MAX_TCP_HOST_LEN {
                return Err(ValidationError::new(
                    host_field,
                    format!("must be at most {MAX_TCP_HOST_LEN} characters"),
                ));
            }
        }
        match self.host() {
            Some(host) => validate_host(&host, &host_field)?,
            None => {
                return Err(ValidationError::new(
                    host_field,
                    "must be a host name, an IP address or a URL with a host",
                ));
            }
        }
        if self.port.is_none() {
            return Err(ValidationError::new(format!("{at}.port"), "is required"));
        }
        for (name, value) in [("data", &self.data), ("body", &self.body)] {
            if let Some(v) = value {
                if v.is_empty() {
                    return Err(ValidationError::new(
                        format!("{at}.{name}"),
                        "must not be empty (leave it out or null to only connect)",
                    ));
                }
                if v.len() > MAX_TCP_DATA_BYTES {
                    return Err(ValidationError::new(
                        format!("{at}.{name}"),
                        format!("must be at most {MAX_TCP_DATA_BYTES} bytes"),
                    ));
                }
            }
        }
        validate_assertion_count(&self.assertions, at)?;
        for (i, a) in self.assertions.iter().enumerate() {
            let field = format!("{at}.assertions[{i}]");
            validate_no_regex(a, &field)?;
            match a.source {
                AssertionSource::ResponseData => {
                    if !matches!(
                        a.comparison,
                        Comparison::Equals
                            | Comparison::NotEquals
                            | Comparison::IsEmpty
                            | Comparison::NotEmpty
                            | Comparison::LessThan
                            | Comparison::GreaterThan
                            | Comparison::Contains
                            | Comparison::NotContains
                    ) {
                        return Err(ValidationError::new(
                            format!("{field}.comparison"),
                            "must be EQUALS, NOT_EQUALS, IS_EMPTY, NOT_EMPTY, LESS_THAN, \
                             GREATER_THAN, CONTAINS or NOT_CONTAINS",
                        ));
                    }
                }
                AssertionSource::ResponseTime => validate_response_time_assertion(a, &field)?,
                _ => {
                    return Err(ValidationError::new(
                        format!("{field}.source"),
                        "TCP monitors assert on RESPONSE_DATA or RESPONSE_TIME",
                    ));
                }
            }
        }
        Ok(())
    }
}

impl TcpMonitorSpec {
    pub fn validate(&self) -> Result<(), ValidationError> {
        self.request.validate("request")?;
        validate_thresholds(
            self.degraded_response_time,
            self.max_response_time,
            MAX_RESPONSE_TIME_LIMIT_MS,
        )
    }
}

/// A DNS monitor: one query to one name server, judged by its response code, its
/// answer and its response time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DnsMonitorSpec {
    pub request: DnsRequest,
    /// Milliseconds after which the run is DEGRADED.
    #[serde(default = "default_dns_degraded_ms")]
    pub degraded_response_time: Option<f64>,
    /// Milliseconds after which the run is FAILED.
    #[serde(default = "default_dns_max_ms")]
    pub max_response_time: Option<f64>,
}

fn default_dns_degraded_ms() -> Option<f64> {
    Some(500.0)
}
fn default_dns_max_ms() -> Option<f64> {
    Some(1000.0)
}

/// The request of a DNS monitor.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DnsRequest {
    /// The name asked about; always taken as fully qualified (no search domains).
    pub query: String,
    pub record_type: DnsRecordType,
    /// IP address or host name, optionally with `:port`; absent or empty: the first
    /// name server of the system configuration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name_server: Option<String>,
    #[serde(
        default,
        deserialize_with = "deserialize_port",
        skip_serializing_if = "Option::is_none"
    )]
    pub port: Option<u16>,
    #[serde(default)]
    pub protocol: DnsProtocol,
    #[serde(default)]
    pub assertions: Vec<Assertion>,
}

/// The record types a DNS monitor can ask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[allow(clippy::upper_case_acronyms)]
pub enum DnsRecordType {
    A,
    AAAA,
    CNAME,
    MX,
    TXT,
    SOA,
    NS,
    HTTPS,
}

impl DnsRecordType {
    /// Every type, in the order the reference lists them.
    pub const ALL: [DnsRecordType; 8] = [
        DnsRecordType::A,
        DnsRecordType::AAAA,
        DnsRecordType::CNAME,
        DnsRecordType::MX,
        DnsRecordType::TXT,
        DnsRecordType::SOA,
        DnsRecordType::NS,
        DnsRecordType::HTTPS,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            DnsRecordType::A => "A",
            DnsRecordType::AAAA => "AAAA",
            DnsRecordType::CNAME => "CNAME",
            DnsRecordType::MX => "MX",
            DnsRecordType::TXT => "TXT",
            DnsRecordType::SOA => "SOA",
            DnsRecordType::NS => "NS",
            DnsRecordType::HTTPS => "HTTPS",
        }
    }
}

/// The transport of a DNS query; there is no fallback from one to the other.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum DnsProtocol {
    #[default]
    Udp,
    Tcp,
}

impl DnsProtocol {
    pub fn as_str(self) -> &'static str {
        match self {
            DnsProtocol::Udp => "UDP",
            DnsProtocol::Tcp => "TCP",
        }
    }
}

/// Where a DNS monitor sends its query, as written in the check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NameServerTarget {
    /// An IP address (without brackets) or a host name.
    pub host: String,
    pub port: u16,
}

impl DnsRequest {
    /// The name server the check names, or `None` for the system's. The port is
    /// `port`, else the one in `nameServer`, else 53.
    pub fn name_server_target(&self) -> Option<NameServerTarget> {
        let (host, embedded) = split_name_server(self.name_server.as_deref()?.trim())?;
        Some(NameServerTarget {
            host,
            port: self.port.or(embedded).unwrap_or(DEFAULT_DNS_PORT),
        })
    }

    fn validate(&self, at: &str) -> Result<(), ValidationError> {
        validate_dns_query(&self.query, &format!("{at}.query"))?;
        if let Some(ns) = self.name_server.as_deref() {
            let field = format!("{at}.nameServer");
            if ns.len() > MAX_NAME_SERVER_LEN {
                return Err(ValidationError::new(
                    field,
                    format!("must be at most {MAX_NAME_SERVER_LEN} characters"),
                ));
            }
            if !ns.trim().is_empty() {
                let Some((host, embedded)) = split_name_server(ns.trim()) else {
                    return Err(ValidationError::new(
                        field,
                        "must be an IP address or a host name, optionally with :port",
                    ));
                };
                validate_host(&host, &field)?;
                if let (Some(p), Some(e)) = (self.port, embedded)
                    && p != e
                {
                    return Err(ValidationError::new(
                        format!("{at}.port"),
                        format!("is {p} but nameServer names port {e}"),
                    ));
                }
            }
        }
        validate_assertion_count(&self.assertions, at)?;
        for (i, a) in self.assertions.iter().enumerate() {
            let field = format!("{at}.assertions[{i}]");
            validate_no_regex(a, &field)?;
            match a.source {
                AssertionSource::ResponseTime => validate_response_time_assertion(a, &field)?,
                AssertionSource::ResponseCode => {
                    if matches!(a.comparison, Comparison::Equals | Comparison::NotEquals)
                        && !DNS_RESPONSE_CODES
                            .iter()
                            .any(|c| c.eq_ignore_ascii_case(a.target.trim()))
                    {
                        return Err(ValidationError::new(
                            format!("{field}.target"),
                            format!(
                                "must be a DNS response code ({})",
                                DNS_RESPONSE_CODES.join(", ")
                            ),
                        ));
                    }
                }
                AssertionSource::TextAnswer => {}
                AssertionSource::JsonAnswer => {
                    if a.property.len() > MAX_PROPERTY_LEN {
                        return Err(ValidationError::new(
                            format!("{field}.property"),
                            format!("must be at most {MAX_PROPERTY_LEN} characters"),
                        ));
                    }
                }
                _ => {
                    return Err(ValidationError::new(
                        format!("{field}.source"),
                        "DNS monitors assert on RESPONSE_TIME, RESPONSE_CODE, TEXT_ANSWER or \
                         JSON_ANSWER",
                    ));
                }
            }
        }
        Ok(())
    }
}

impl DnsMonitorSpec {
    pub fn validate(&self) -> Result<(), ValidationError> {
        self.request.validate("request")?;
        validate_thresholds(
            self.degraded_response_time,
            self.max_response_time,
            MAX_DNS_RESPONSE_TIME_LIMIT_MS,
        )
    }
}

// ---------------------------------------------------------------- ICMP monitors

/// Longest `request.hostname` of an ICMP monitor the reference API accepts.
pub const MAX_ICMP_HOST_LEN: usize = 2048;
/// Echo requests an ICMP monitor sends when `pingCount` is absent or null.
pub const DEFAULT_PING_COUNT: u32 = 10;
/// Most echo requests one run of an ICMP monitor may send.
pub const MAX_PING_COUNT: u32 = 50;
/// Largest response-time threshold of an ICMP monitor the reference API accepts.
pub const MAX_ICMP_RESPONSE_TIME_LIMIT_MS: f64 = 300_000.0;
/// The LATENCY statistics an assertion's `property` may name (an empty property is `avg`).
pub const LATENCY_PROPERTIES: [&str; 4] = ["avg", "min", "max", "stdDev"];

/// An ICMP monitor: `pingCount` echo requests to one host, judged by the average
/// round-trip time, the packet loss and assertions on both.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IcmpMonitorSpec {
    pub request: IcmpRequest,
    /// Average latency in milliseconds above which the run is DEGRADED.
    #[serde(default = "default_icmp_degraded_ms")]
    pub degraded_response_time: Option<f64>,
    /// Average latency in milliseconds above which the run is FAILED.
    #[serde(default = "default_icmp_max_ms")]
    pub max_response_time: Option<f64>,
    /// Packet loss in percent above which the run is DEGRADED.
    #[serde(default = "default_degraded_packet_loss")]
    pub degraded_packet_loss_threshold: Option<f64>,
    /// Packet loss in percent above which the run is FAILED.
    #[serde(default = "default_max_packet_loss")]
    pub max_packet_loss_threshold: Option<f64>,
}

fn default_icmp_degraded_ms() -> Option<f64> {
    Some(10_000.0)
}
fn default_icmp_max_ms() -> Option<f64> {
    Some(20_000.0)
}
fn default_degraded_packet_loss() -> Option<f64> {
    Some(10.0)
}
fn default_max_packet_loss() -> Option<f64> {
    Some(20.0)
}

/// The request of an ICMP monitor.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IcmpRequest {
    /// A host name or an IP address (IPv6 with or without brackets).
    pub hostname: String,
    /// Absent or null: IPv4, or the family of an IP address in `hostname`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ip_family: Option<IpFamily>,
    /// Absent or null: [`DEFAULT_PING_COUNT`].
    #[serde(
        default,
        deserialize_with = "deserialize_ping_count",
        skip_serializing_if = "Option::is_none"
    )]
    pub ping_count: Option<u32>,
    #[serde(default, deserialize_with = "null_as_empty")]
    pub assertions: Vec<Assertion>,
}

/// Reads `pingCount` given as a whole JSON number (`3` or `3.0`); the range is checked
/// by validation so its message names the limits.
fn deserialize_ping_count<'de, D>(deserializer: D) -> Result<Option<u32>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    use serde::de::Error;
    match Option::<f64>::deserialize(deserializer)? {
        None => Ok(None),
        Some(n) if n.fract() == 0.0 && (0.0..=f64::from(u32::MAX)).contains(&n) => {
            Ok(Some(n as u32))
        }
        Some(n) => Err(D::Error::custom(format!(
            "{n} is not a whole number between 1 and {MAX_PING_COUNT}"
        ))),
    }
}

impl IcmpRequest {
    /// The host to ping, without brackets around an IPv6 address.
    pub fn host(&self) -> &str {
        unbracket(self.hostname.trim())
    }

    /// The address family pinged: `ipFamily`, else the family of an IP address in
    /// `hostname`, else IPv4.
    pub fn family(&self) -> IpFamily {
        match (self.ip_family, self.host().parse::<std::net::IpAddr>()) {
            (Some(family), _) => family,
            (None, Ok(std::net::IpAddr::V6(_))) => IpFamily::IPv6,
            (None, _) => IpFamily::IPv4,
        }
    }

    /// Echo requests to send.
    pub fn count(&self) -> u32 {
        self.ping_count.unwrap_or(DEFAULT_PING_COUNT)
    }

    fn validate(&self, at: &str) -> Result<(), ValidationError> {
        let host_field = format!("{at}.hostname");
        if self.hostname.trim().is_empty() {
            return Err(ValidationError::new(host_field, "is required"));
        }
        if self.hostname.len() > MAX_ICMP_HOST_LEN {
            return Err(ValidationError::new(
                host_field,
                format!("must be at most {MAX_ICMP_HOST_LEN} characters"),
            ));
        }
        validate_host(self.host(), &host_field)?;
        match (self.ip_family, self.host().parse::<std::net::IpAddr>()) {
            (Some(IpFamily::IPv4), Ok(std::net::IpAddr::V6(_))) => {
                return Err(ValidationError::new(
                    format!("{at}.ipFamily"),
                    "is IPv4 but hostname is an IPv6 address",
                ));
            }
            (Some(IpFamily::IPv6), Ok(std::net::IpAddr::V4(_))) => {
                return Err(ValidationError::new(
                    format!("{at}.ipFamily"),
                    "is IPv6 but hostname is an IPv4 address",
                ));
            }
            _ => {}
        }
        if !(1..=MAX_PING_COUNT).contains(&self.count()) {
            return Err(ValidationError::new(
                format!("{at}.pingCount"),
                format!("must be between 1 and {MAX_PING_COUNT}"),
            ));
        }
        validate_assertion_count(&self.assertions, at)?;
        for (i, a) in self.assertions.iter().enumerate() {
            validate_icmp_assertion(a, &format!("{at}.assertions[{i}]"))?;
        }
        Ok(())
    }
}

/// LATENCY and PACKET_LOSS compare a number; JSON_RESPONSE reads the run's ICMP summary
/// with a JSON path and may extract with a regex.
fn validate_icmp_assertion(a: &Assertion, field: &str) -> Result<(), ValidationError> {
    use AssertionSource as S;
    use Comparison as C;
    if a.target.len() > MAX_ASSERTION_EXPR_LEN {
        return Err(ValidationError::new(
            format!("{field}.target"),
            format!("must be at most {MAX_ASSERTION_EXPR_LEN} characters"),
        ));
    }
    match a.source {
        S::Latency | S::PacketLoss => {
            validate_no_regex(a, field)?;
            if a.source == S::Latency
                && !a.property.is_empty()
                && !LATENCY_PROPERTIES
                    .iter()
                    .any(|p| p.eq_ignore_ascii_case(a.property.trim()))
            {
                return Err(ValidationError::new(
                    format!("{field}.property"),
                    format!("must be one of {}", LATENCY_PROPERTIES.join(", ")),
                ));
            }
            if !matches!(
                a.comparison,
                C::Equals | C::NotEquals | C::LessThan | C::GreaterThan
            ) {
                return Err(ValidationError::new(
                    format!("{field}.comparison"),
                    "must be EQUALS, NOT_EQUALS, LESS_THAN or GREATER_THAN",
                ));
            }
            if !a.target.trim().parse::<f64>().is_ok_and(f64::is_finite) {
                let what = if a.source == S::Latency {
                    "a number of milliseconds"
                } else {
                    "a percentage"
                };
                return Err(ValidationError::new(
                    format!("{field}.target"),
                    format!("must be {what}"),
                ));
            }
        }
        S::JsonResponse => {
            if a.property.len() > MAX_PROPERTY_LEN {
                return Err(ValidationError::new(
                    format!("{field}.property"),
                    format!("must be at most {MAX_PROPERTY_LEN} characters"),
                ));
            }
            super::jsonpath::JsonPath::parse(&a.property)
                .map_err(|e| ValidationError::new(format!("{field}.property"), e.to_string()))?;
            if !matches!(
                a.comparison,
                C::Equals
                    | C::NotEquals
                    | C::IsEmpty
                    | C::NotEmpty
                    | C::GreaterThan
                    | C::LessThan
                    | C::Contains
                    | C::NotContains
                    | C::IsNull
                    | C::NotNull
            ) {
                return Err(ValidationError::new(
                    format!("{field}.comparison"),
                    "must be EQUALS, NOT_EQUALS, IS_EMPTY, NOT_EMPTY, GREATER_THAN, LESS_THAN, \
                     CONTAINS, NOT_CONTAINS, IS_NULL or NOT_NULL",
                ));
            }
            if let Some(regex) = a.regex() {
                if regex.len() > MAX_ASSERTION_EXPR_LEN {
                    return Err(ValidationError::new(
                        format!("{field}.regex"),
                        format!("must be at most {MAX_ASSERTION_EXPR_LEN} characters"),
                    ));
                }
                compile_regex(regex)
                    .map_err(|e| ValidationError::new(format!("{field}.regex"), e))?;
            }
        }
        _ => {
            return Err(ValidationError::new(
                format!("{field}.source"),
                "ICMP monitors assert on LATENCY, PACKET_LOSS or JSON_RESPONSE",
            ));
        }
    }
    Ok(())
}

impl IcmpMonitorSpec {
    pub fn validate(&self) -> Result<(), ValidationError> {
        self.request.validate("request")?;
        validate_thresholds(
            self.degraded_response_time,
            self.max_response_time,
            MAX_ICMP_RESPONSE_TIME_LIMIT_MS,
        )?;
        for (field, value) in [
            (
                "degradedPacketLossThreshold",
                self.degraded_packet_loss_threshold,
            ),
            ("maxPacketLossThreshold", self.max_packet_loss_threshold),
        ] {
            if let Some(v) = value
                && !(v > 0.0 && v <= 100.0)
            {
                return Err(ValidationError::new(
                    field,
                    "must be a percentage above 0 and at most 100",
                ));
            }
        }
        if let (Some(d), Some(m)) = (
            self.degraded_packet_loss_threshold,
            self.max_packet_loss_threshold,
        ) && d > m
        {
            return Err(ValidationError::new(
                "degradedPacketLossThreshold",
                "must not be greater than maxPacketLossThreshold",
            ));
        }
        Ok(())
    }
}

/// Splits `host`, `ip`, `[v6]`, `host:port`, `ip:port` or `[v6]:port`.
fn split_name_server(value: &str) -> Option<(String, Option<u16>)> {
    if value.is_empty() {
        return None;
    }
    if let Ok(ip) = value.parse::<std::net::IpAddr>() {
        return Some((ip.to_string(), None));
    }
    if let Ok(addr) = value.parse::<std::net::SocketAddr>() {
        return Some((addr.ip().to_string(), Some(addr.port())));
    }
    if let Some(inner) = value.strip_prefix('[').and_then(|v| v.strip_suffix(']')) {
        return Some((inner.to_owned(), None));
    }
    match value.rsplit_once(':') {
        Some((host, port)) if !host.contains(':') => {
            let port = port.parse::<u16>().ok().filter(|p| *p != 0)?;
            Some((host.to_owned(), Some(port)))
        }
        Some(_) => None,
        None => Some((value.to_owned(), None)),
    }
}

fn unbracket(host: &str) -> &str {
    host.strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host)
}

/// An IP address, or a host name of 1 to 253 characters in labels of 1 to 63 letters,
/// digits, `-` and `_` (one trailing dot allowed).
fn validate_host(host: &str, field: &str) -> Result<(), ValidationError> {
    if host.parse::<std::net::IpAddr>().is_ok() {
        return Ok(());
    }
    let name = host.strip_suffix('.').unwrap_or(host);
    let valid = !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        });
    if valid {
        Ok(())
    } else {
        Err(ValidationError::new(
            field,
            format!("{host:?} is not an IP address or a valid host name"),
        ))
    }
}

/// 1 to 100 characters, no spaces or control characters, labels of 1 to 63 bytes (one
/// trailing dot allowed). Non-ASCII names are allowed (they are sent as punycode).
fn validate_dns_query(query: &str, field: &str) -> Result<(), ValidationError> {
    if query.is_empty() || query.chars().count() > MAX_DNS_QUERY_LEN {
        return Err(ValidationError::new(
            field,
            format!("must be 1 to {MAX_DNS_QUERY_LEN} characters"),
        ));
    }
    if query.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(ValidationError::new(
            field,
            "must not contain spaces or control characters",
        ));
    }
    let name = query.strip_suffix('.').unwrap_or(query);
    if name.is_empty() && query == "." {
        return Ok(()); // the root
    }
    if name
        .split('.')
        .any(|label| label.is_empty() || label.len() > 63)
    {
        return Err(ValidationError::new(
            field,
            "must be a domain name with labels of 1 to 63 characters",
        ));
    }
    Ok(())
}

/// Both response-time limits within `0..=limit`, the degraded one not above the max.
fn validate_thresholds(
    degraded: Option<f64>,
    max: Option<f64>,
    limit: f64,
) -> Result<(), ValidationError> {
    for (field, value) in [("degradedResponseTime", degraded), ("maxResponseTime", max)] {
        if let Some(v) = value
            && !(0.0..=limit).contains(&v)
        {
            return Err(ValidationError::new(
                field,
                format!("must be between 0 and {limit} milliseconds"),
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

fn validate_assertion_count(assertions: &[Assertion], at: &str) -> Result<(), ValidationError> {
    if assertions.len() > MAX_ASSERTIONS {
        return Err(ValidationError::new(
            format!("{at}.assertions"),
            format!("must have at most {MAX_ASSERTIONS} assertions"),
        ));
    }
    Ok(())
}

fn validate_no_regex(a: &Assertion, field: &str) -> Result<(), ValidationError> {
    if a.regex.as_deref().is_some_and(|r| !r.is_empty()) {
        return Err(ValidationError::new(
            format!("{field}.regex"),
            "regular expressions are not supported by this version",
        ));
    }
    Ok(())
}

fn validate_response_time_assertion(a: &Assertion, field: &str) -> Result<(), ValidationError> {
    if !matches!(
        a.comparison,
        Comparison::Equals | Comparison::NotEquals | Comparison::LessThan | Comparison::GreaterThan
    ) {
        return Err(ValidationError::new(
            format!("{field}.comparison"),
            "RESPONSE_TIME compares with EQUALS, NOT_EQUALS, LESS_THAN or GREATER_THAN",
        ));
    }
    if !a.target.trim().parse::<f64>().is_ok_and(f64::is_finite) {
        return Err(ValidationError::new(
            format!("{field}.target"),
            "must be a number of milliseconds",
        ));
    }
    Ok(())
}

/// Checks the typed fields of a TCP check document one by one, so a wrong type or an
/// unknown enum value is reported with its JSON path instead of as `body`.
fn precheck_tcp(doc: &serde_json::Value) -> Result<(), ValidationError> {
    let request = precheck_request(doc)?;
    for key in ["hostname", "url", "data", "body"] {
        precheck_field::<Option<String>>(request, key, "request")?;
    }
    precheck_field::<Option<f64>>(request, "port", "request")?;
    precheck_port(request)?;
    precheck_field::<Option<IpFamily>>(request, "ipFamily", "request")?;
    precheck_assertions(request)
}

/// Like [`precheck_tcp`], for a DNS check document.
fn precheck_dns(doc: &serde_json::Value) -> Result<(), ValidationError> {
    let request = precheck_request(doc)?;
    for key in ["query", "recordType"] {
        if request.get(key).is_none_or(serde_json::Value::is_null) {
            return Err(ValidationError::new(
                format!("request.{key}"),
                "is required",
            ));
        }
    }
    precheck_field::<String>(request, "query", "request")?;
    precheck_field::<DnsRecordType>(request, "recordType", "request")?;
    precheck_field::<Option<String>>(request, "nameServer", "request")?;
    precheck_port(request)?;
    precheck_field::<DnsProtocol>(request, "protocol", "request")?;
    precheck_assertions(request)
}

/// Like [`precheck_tcp`], for an ICMP check document.
fn precheck_icmp(doc: &serde_json::Value) -> Result<(), ValidationError> {
    let request = precheck_request(doc)?;
    for key in ["degradedPacketLossThreshold", "maxPacketLossThreshold"] {
        precheck_field::<Option<f64>>(doc, key, "")?;
    }
    if request
        .get("hostname")
        .is_none_or(serde_json::Value::is_null)
    {
        return Err(ValidationError::new("request.hostname", "is required"));
    }
    precheck_field::<String>(request, "hostname", "request")?;
    precheck_field::<Option<IpFamily>>(request, "ipFamily", "request")?;
    if let Some(count) = request.get("pingCount") {
        deserialize_ping_count(count)
            .map_err(|e| ValidationError::new("request.pingCount", e.to_string()))?;
    }
    if request
        .get("assertions")
        .is_some_and(serde_json::Value::is_null)
    {
        return Ok(());
    }
    precheck_assertions(request)
}

fn precheck_request(doc: &serde_json::Value) -> Result<&serde_json::Value, ValidationError> {
    for key in ["degradedResponseTime", "maxResponseTime"] {
        precheck_field::<Option<f64>>(doc, key, "")?;
    }
    match doc.get("request") {
        None | Some(serde_json::Value::Null) => Err(ValidationError::new("request", "is required")),
        Some(request) if request.is_object() => Ok(request),
        Some(_) => Err(ValidationError::new("request", "must be an object")),
    }
}

fn precheck_port(request: &serde_json::Value) -> Result<(), ValidationError> {
    match request.get("port") {
        None | Some(serde_json::Value::Null) => Ok(()),
        Some(port) => deserialize_port(port)
            .map(|_| ())
            .map_err(|e| ValidationError::new("request.port", e.to_string())),
    }
}

fn precheck_assertions(request: &serde_json::Value) -> Result<(), ValidationError> {
    let Some(assertions) = request.get("assertions") else {
        return Ok(());
    };
    let Some(list) = assertions.as_array() else {
        return Err(ValidationError::new(
            "request.assertions",
            "must be an array",
        ));
    };
    for (i, a) in list.iter().enumerate() {
        let at = format!("request.assertions[{i}]");
        if !a.is_object() {
            return Err(ValidationError::new(at, "must be an object"));
        }
        for key in ["source", "comparison"] {
            if a.get(key).is_none() {
                return Err(ValidationError::new(format!("{at}.{key}"), "is required"));
            }
        }
        precheck_field::<AssertionSource>(a, "source", &at)?;
        precheck_field::<Comparison>(a, "comparison", &at)?;
        for key in ["property", "target"] {
            precheck_field::<String>(a, key, &at)?;
        }
        precheck_field::<Option<String>>(a, "regex", &at)?;
    }
    Ok(())
}

/// If `parent` has `key`, it must deserialize as `T`; the error names `at.key`.
fn precheck_field<'a, T: Deserialize<'a>>(
    parent: &'a serde_json::Value,
    key: &str,
    at: &str,
) -> Result<(), ValidationError> {
    let Some(value) = parent.get(key) else {
        return Ok(());
    };
    T::deserialize(value).map(|_| ()).map_err(|e| {
        let field = if at.is_empty() {
            key.to_owned()
        } else {
            format!("{at}.{key}")
        };
        ValidationError::new(field, e.to_string())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `from_json` answers exactly what `from_document` answers, errors included.
    #[test]
    fn from_json_agrees_with_from_document() {
        let documents = [
            r#"{"checkType":"URL","request":{"url":"http://127.0.0.1:8080/x","assertions":[{"source":"STATUS_CODE","comparison":"EQUALS","target":"200"}]},"maxResponseTime":3000}"#,
            r#"{"checkType":"URL","request":{"url":"http://a/","url":"http://b/"}}"#,
            r#"{"checkType":"URL","request":{}}"#,
            r#"{"checkType":"URL","request":{"url":"http://a/","ipFamily":"IPv5"}}"#,
            r#"{"checkType":"URL","request":{"url":"http://a/"},"maxResponseTime":-1}"#,
            r#"{"checkType":"API","request":{"method":"POST","url":"https://a/b","body":"{}","bodyType":"JSON","assertions":[{"source":"JSON_BODY","property":"$.a","comparison":"EQUALS","target":"1"}]}}"#,
            r#"{"checkType":"API","request":{"url":"https://a/b"}}"#,
            r#"{"checkType":"TCP","request":{"hostname":"127.0.0.1","port":22}}"#,
            r#"{"checkType":"TCP","request":{"hostname":"127.0.0.1","port":"22"}}"#,
            r#"{"checkType":"BROWSER","script":"x"}"#,
            r#"{"checkType":"SOMETHING"}"#,
            r#"{"request":{"url":"http://a/"}}"#,
            r#""a string""#,
            r#"{"checkType":"URL","request":{"url":"http://a/"}}"#,
        ];
        for text in documents {
            let doc: serde_json::Value = serde_json::from_str(text).unwrap();
            assert_eq!(
                CheckSpec::from_json(text),
                CheckSpec::from_document(&doc),
                "{text}"
            );
        }
        let not_json = CheckSpec::from_json("{oops").unwrap_err();
        assert_eq!(not_json.field, "body");
    }
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
        assert_eq!(u.request.ip_family, None);
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

    fn field_of(doc: serde_json::Value) -> String {
        CheckSpec::from_document(&doc)
            .map(|spec| format!("no error for {spec:?}"))
            .unwrap_or_else(|e| e.field)
    }

    #[test]
    fn tcp_monitor_parses_with_defaults() {
        let doc = json!({"checkType": "TCP", "name": "x",
            "request": {"hostname": "db.example.test", "port": 5432}});
        let Ok(CheckSpec::Tcp(t)) = CheckSpec::from_document(&doc) else {
            panic!("not a TCP monitor")
        };
        assert_eq!(t.request.host().as_deref(), Some("db.example.test"));
        assert_eq!(t.request.port, Some(5432));
        assert_eq!(t.request.ip_family, None);
        assert_eq!(t.request.payload(), None);
        assert_eq!(t.degraded_response_time, Some(3000.0));
        assert_eq!(t.max_response_time, Some(5000.0));

        let doc = json!({"checkType": "TCP", "request": {"url": "tcp://[::1]:25", "port": 25.0,
            "body": "HELO", "ipFamily": "IPv6"}});
        let Ok(CheckSpec::Tcp(t)) = CheckSpec::from_document(&doc) else {
            panic!("not a TCP monitor")
        };
        assert_eq!(t.request.host().as_deref(), Some("::1"));
        assert_eq!(t.request.ip_family, Some(IpFamily::IPv6));
        assert_eq!(t.request.payload(), Some("HELO"));
        assert_eq!(t.request.port, Some(25));
    }

    #[test]
    fn tcp_errors_name_the_field() {
        let req = |extra: serde_json::Value| {
            let mut r = json!({"hostname": "127.0.0.1", "port": 80});
            for (k, v) in extra.as_object().unwrap() {
                r[k] = v.clone();
            }
            json!({"checkType": "TCP", "request": r})
        };
        let cases = [
            (
                json!({"checkType": "TCP", "request": {"hostname": "h"}}),
                "request.port",
            ),
            (req(json!({"port": 70000})), "request.port"),
            (req(json!({"port": 0})), "request.port"),
            (req(json!({"port": 80.5})), "request.port"),
            (req(json!({"port": "80"})), "request.port"),
            (
                json!({"checkType": "TCP", "request": {"port": 80}}),
                "request.hostname",
            ),
            (req(json!({"hostname": "bad host"})), "request.hostname"),
            (req(json!({"hostname": 5})), "request.hostname"),
            (
                json!({"checkType": "TCP", "request": {"url": "tcp://", "port": 1}}),
                "request.url",
            ),
            (req(json!({"ipFamily": "IPv5"})), "request.ipFamily"),
            (req(json!({"data": ""})), "request.data"),
            (
                req(json!({"data": "x".repeat(MAX_TCP_DATA_BYTES + 1)})),
                "request.data",
            ),
            (req(json!({"assertions": {}})), "request.assertions"),
            (
                req(json!({"assertions": [{"source": "STATUS_CODE", "comparison": "EQUALS"}]})),
                "request.assertions[0].source",
            ),
            (
                req(json!({"assertions": [{"source": "NOPE", "comparison": "EQUALS"}]})),
                "request.assertions[0].source",
            ),
            (
                req(json!({"assertions": [{"source": "RESPONSE_DATA", "comparison": "HAS_KEY"}]})),
                "request.assertions[0].comparison",
            ),
            (
                req(json!({"assertions": [{"source": "RESPONSE_DATA"}]})),
                "request.assertions[0].comparison",
            ),
            (
                req(
                    json!({"assertions": [{"source": "RESPONSE_TIME", "comparison": "LESS_THAN",
                "target": "fast"}]}),
                ),
                "request.assertions[0].target",
            ),
            (
                req(
                    json!({"assertions": [{"source": "RESPONSE_TIME", "comparison": "LESS_THAN",
                "target": 100}]}),
                ),
                "request.assertions[0].target",
            ),
            (
                req(
                    json!({"assertions": [{"source": "RESPONSE_DATA", "comparison": "CONTAINS",
                "target": "x", "regex": "(.*)"}]}),
                ),
                "request.assertions[0].regex",
            ),
            (
                json!({"checkType": "TCP", "maxResponseTime": 50000,
                "request": {"hostname": "h", "port": 1}}),
                "maxResponseTime",
            ),
            (
                json!({"checkType": "TCP", "degradedResponseTime": "slow",
                "request": {"hostname": "h", "port": 1}}),
                "degradedResponseTime",
            ),
            (json!({"checkType": "TCP"}), "request"),
        ];
        for (doc, field) in cases {
            assert_eq!(field_of(doc.clone()), field, "{doc}");
        }
    }

    #[test]
    fn dns_monitor_parses_with_defaults() {
        let doc = json!({"checkType": "DNS", "name": "x",
            "request": {"query": "example.test", "recordType": "AAAA"}});
        let Ok(CheckSpec::Dns(d)) = CheckSpec::from_document(&doc) else {
            panic!("not a DNS monitor")
        };
        assert_eq!(d.request.record_type, DnsRecordType::AAAA);
        assert_eq!(d.request.protocol, DnsProtocol::Udp);
        assert_eq!(d.request.name_server_target(), None);
        assert_eq!(d.degraded_response_time, Some(500.0));
        assert_eq!(d.max_response_time, Some(1000.0));
        for t in DnsRecordType::ALL {
            let doc = json!({"checkType": "DNS", "request": {"query": "a.test",
                "recordType": t.as_str(), "protocol": "TCP"}});
            let Ok(CheckSpec::Dns(d)) = CheckSpec::from_document(&doc) else {
                panic!("{t:?} rejected")
            };
            assert_eq!(d.request.record_type, t);
            assert_eq!(d.request.protocol, DnsProtocol::Tcp);
        }
    }

    #[test]
    fn dns_name_servers() {
        let target = |ns: &str, port: Option<u16>| {
            let mut doc = json!({"checkType": "DNS",
                "request": {"query": "a.test", "recordType": "A", "nameServer": ns}});
            if let Some(p) = port {
                doc["request"]["port"] = json!(p);
            }
            let Ok(CheckSpec::Dns(d)) = CheckSpec::from_document(&doc) else {
                panic!("{ns} rejected")
            };
            d.request.name_server_target().map(|t| (t.host, t.port))
        };
        assert_eq!(target("1.1.1.1", None), Some(("1.1.1.1".into(), 53)));
        assert_eq!(
            target("1.1.1.1", Some(5353)),
            Some(("1.1.1.1".into(), 5353))
        );
        assert_eq!(target("1.1.1.1:5353", None), Some(("1.1.1.1".into(), 5353)));
        assert_eq!(target("[::1]:54", None), Some(("::1".into(), 54)));
        assert_eq!(target("::1", None), Some(("::1".into(), 53)));
        assert_eq!(target("[::1]", None), Some(("::1".into(), 53)));
        assert_eq!(
            target("dns.example.test:5300", None),
            Some(("dns.example.test".into(), 5300))
        );
        assert_eq!(
            target("dns.example.test", None),
            Some(("dns.example.test".into(), 53))
        );
        assert_eq!(target("", None), None);
    }

    #[test]
    fn dns_errors_name_the_field() {
        let req = |extra: serde_json::Value| {
            let mut r = json!({"query": "example.test", "recordType": "A"});
            for (k, v) in extra.as_object().unwrap() {
                r[k] = v.clone();
            }
            json!({"checkType": "DNS", "request": r})
        };
        let cases = [
            (
                json!({"checkType": "DNS", "request": {"recordType": "A"}}),
                "request.query",
            ),
            (
                json!({"checkType": "DNS", "request": {"query": "a.test"}}),
                "request.recordType",
            ),
            (req(json!({"recordType": "PTR"})), "request.recordType"),
            (req(json!({"recordType": "a"})), "request.recordType"),
            (req(json!({"protocol": "QUIC"})), "request.protocol"),
            (req(json!({"query": ""})), "request.query"),
            (req(json!({"query": "a b.test"})), "request.query"),
            (req(json!({"query": "a..test"})), "request.query"),
            (
                req(json!({"query": format!("{}.test", "a".repeat(100))})),
                "request.query",
            ),
            (
                req(json!({"nameServer": "not valid!"})),
                "request.nameServer",
            ),
            (
                req(json!({"nameServer": "1.1.1.1:99999"})),
                "request.nameServer",
            ),
            (
                req(json!({"nameServer": "1.1.1.1:53", "port": 54})),
                "request.port",
            ),
            (req(json!({"port": 65536})), "request.port"),
            (
                req(json!({"assertions": [{"source": "RESPONSE_DATA", "comparison": "EQUALS"}]})),
                "request.assertions[0].source",
            ),
            (
                req(
                    json!({"assertions": [{"source": "RESPONSE_CODE", "comparison": "EQUALS",
                "target": "NXDOMIAN"}]}),
                ),
                "request.assertions[0].target",
            ),
            (
                req(
                    json!({"assertions": [{"source": "RESPONSE_TIME", "comparison": "CONTAINS",
                "target": "1"}]}),
                ),
                "request.assertions[0].comparison",
            ),
            (
                req(
                    json!({"assertions": [{"source": "JSON_ANSWER", "comparison": "EQUALS",
                "property": "x".repeat(MAX_PROPERTY_LEN + 1)}]}),
                ),
                "request.assertions[0].property",
            ),
            (
                json!({"checkType": "DNS", "maxResponseTime": 6000,
                "request": {"query": "a.test", "recordType": "A"}}),
                "maxResponseTime",
            ),
            (
                json!({"checkType": "DNS", "degradedResponseTime": 900, "maxResponseTime": 800,
                "request": {"query": "a.test", "recordType": "A"}}),
                "degradedResponseTime",
            ),
        ];
        for (doc, field) in cases {
            assert_eq!(field_of(doc.clone()), field, "{doc}");
        }
        // Response codes are matched without regard to case.
        let doc = req(
            json!({"assertions": [{"source": "RESPONSE_CODE", "comparison": "EQUALS",
            "target": "nxdomain"}]}),
        );
        assert!(CheckSpec::from_document(&doc).is_ok());
    }

    #[test]
    fn tcp_and_dns_specs_survive_a_round_trip() {
        for doc in [
            json!({"checkType": "TCP", "request": {"hostname": "h.test", "port": 25,
                "data": "EHLO x\r\n", "ipFamily": "IPv6", "assertions": [
                {"source": "RESPONSE_DATA", "comparison": "CONTAINS", "target": "250"}]}}),
            json!({"checkType": "DNS", "degradedResponseTime": 100, "request": {
                "query": "a.test", "recordType": "HTTPS", "nameServer": "127.0.0.1:5353",
                "protocol": "TCP", "assertions": [{"source": "JSON_ANSWER",
                "comparison": "EQUALS", "property": "$.Status", "target": "NOERROR"}]}}),
        ] {
            let spec = CheckSpec::from_document(&doc).unwrap();
            let again = CheckSpec::from_document(&serde_json::to_value(&spec).unwrap()).unwrap();
            assert_eq!(spec, again);
        }
    }

    #[test]
    fn icmp_monitor_parses_with_defaults() {
        let doc = json!({"checkType": "ICMP", "name": "x", "request": {"hostname": "h.test"}});
        let Ok(CheckSpec::Icmp(m)) = CheckSpec::from_document(&doc) else {
            panic!("not an ICMP monitor")
        };
        assert_eq!(m.request.host(), "h.test");
        assert_eq!(m.request.family(), IpFamily::IPv4);
        assert_eq!(m.request.count(), DEFAULT_PING_COUNT);
        assert!(m.request.assertions.is_empty());
        assert_eq!(m.degraded_response_time, Some(10_000.0));
        assert_eq!(m.max_response_time, Some(20_000.0));
        assert_eq!(m.degraded_packet_loss_threshold, Some(10.0));
        assert_eq!(m.max_packet_loss_threshold, Some(20.0));
        assert_eq!(CheckSpec::Icmp(m).check_type(), CheckType::Icmp);

        // An IPv6 address (bracketed or not) is pinged over IPv6 unless told otherwise.
        for host in ["::1", "[2001:db8::1]"] {
            let doc = json!({"checkType": "ICMP", "request": {"hostname": host,
                "pingCount": 3.0, "ipFamily": null, "assertions": null},
                "maxPacketLossThreshold": null});
            let Ok(CheckSpec::Icmp(m)) = CheckSpec::from_document(&doc) else {
                panic!("{host} rejected")
            };
            assert_eq!(m.request.family(), IpFamily::IPv6);
            assert_eq!(m.request.count(), 3);
            assert!(!m.request.host().starts_with('['));
            assert_eq!(m.max_packet_loss_threshold, None);
        }
        let doc = json!({"checkType": "ICMP", "request": {"hostname": "h.test",
            "ipFamily": "IPv6", "pingCount": 50, "assertions": [
            {"source": "LATENCY", "property": "stdDev", "comparison": "LESS_THAN", "target": "5"},
            {"source": "PACKET_LOSS", "comparison": "EQUALS", "target": "0"},
            {"source": "JSON_RESPONSE", "property": "$.latency.max", "comparison": "NOT_NULL",
             "regex": "(\\d+)"}]},
            "degradedPacketLossThreshold": 100, "maxPacketLossThreshold": 100});
        let Ok(CheckSpec::Icmp(m)) = CheckSpec::from_document(&doc) else {
            panic!("rejected")
        };
        assert_eq!(m.request.family(), IpFamily::IPv6);
        assert_eq!(m.request.count(), 50);
        assert_eq!(m.request.assertions.len(), 3);
    }

    #[test]
    fn icmp_errors_name_the_field() {
        let req = |extra: serde_json::Value| {
            let mut r = json!({"hostname": "127.0.0.1"});
            for (k, v) in extra.as_object().unwrap() {
                r[k] = v.clone();
            }
            json!({"checkType": "ICMP", "request": r})
        };
        let top = |extra: serde_json::Value| {
            let mut d = json!({"checkType": "ICMP", "request": {"hostname": "h.test"}});
            for (k, v) in extra.as_object().unwrap() {
                d[k] = v.clone();
            }
            d
        };
        let one = |a: serde_json::Value| req(json!({"assertions": [a]}));
        let cases = [
            (json!({"checkType": "ICMP"}), "request"),
            (
                json!({"checkType": "ICMP", "request": {}}),
                "request.hostname",
            ),
            (req(json!({"hostname": ""})), "request.hostname"),
            (req(json!({"hostname": 5})), "request.hostname"),
            (req(json!({"hostname": "bad host"})), "request.hostname"),
            (
                req(json!({"hostname": "a".repeat(MAX_ICMP_HOST_LEN + 1)})),
                "request.hostname",
            ),
            (req(json!({"ipFamily": "IPv5"})), "request.ipFamily"),
            (req(json!({"ipFamily": "IPv6"})), "request.ipFamily"),
            (
                req(json!({"hostname": "::1", "ipFamily": "IPv4"})),
                "request.ipFamily",
            ),
            (req(json!({"pingCount": 0})), "request.pingCount"),
            (req(json!({"pingCount": 51})), "request.pingCount"),
            (req(json!({"pingCount": 2.5})), "request.pingCount"),
            (req(json!({"pingCount": -1})), "request.pingCount"),
            (req(json!({"pingCount": "3"})), "request.pingCount"),
            (req(json!({"assertions": {}})), "request.assertions"),
            (
                one(json!({"source": "STATUS_CODE", "comparison": "EQUALS", "target": "200"})),
                "request.assertions[0].source",
            ),
            (
                one(json!({"source": "NOPE", "comparison": "EQUALS"})),
                "request.assertions[0].source",
            ),
            (
                one(
                    json!({"source": "LATENCY", "property": "median", "comparison": "EQUALS",
                    "target": "1"}),
                ),
                "request.assertions[0].property",
            ),
            (
                one(json!({"source": "LATENCY", "comparison": "CONTAINS", "target": "1"})),
                "request.assertions[0].comparison",
            ),
            (
                one(json!({"source": "LATENCY", "comparison": "LESS_THAN", "target": "fast"})),
                "request.assertions[0].target",
            ),
            (
                one(json!({"source": "PACKET_LOSS", "comparison": "LESS_THAN", "target": "x"})),
                "request.assertions[0].target",
            ),
            (
                one(
                    json!({"source": "PACKET_LOSS", "comparison": "LESS_THAN", "target": "1",
                    "regex": "(.*)"}),
                ),
                "request.assertions[0].regex",
            ),
            (
                one(json!({"source": "JSON_RESPONSE", "property": "$[?(@.a)]",
                    "comparison": "EQUALS"})),
                "request.assertions[0].property",
            ),
            (
                one(json!({"source": "JSON_RESPONSE", "property": "$.rtts",
                    "comparison": "HAS_VALUE", "target": "1"})),
                "request.assertions[0].comparison",
            ),
            (
                one(json!({"source": "JSON_RESPONSE", "comparison": "EQUALS",
                    "regex": "(open"})),
                "request.assertions[0].regex",
            ),
            (top(json!({"maxResponseTime": 300_001})), "maxResponseTime"),
            (
                top(json!({"degradedResponseTime": "slow"})),
                "degradedResponseTime",
            ),
            (
                top(json!({"degradedResponseTime": 3000, "maxResponseTime": 2000})),
                "degradedResponseTime",
            ),
            (
                top(json!({"degradedPacketLossThreshold": 0})),
                "degradedPacketLossThreshold",
            ),
            (
                top(json!({"maxPacketLossThreshold": 100.5})),
                "maxPacketLossThreshold",
            ),
            (
                top(json!({"maxPacketLossThreshold": "lots"})),
                "maxPacketLossThreshold",
            ),
            (
                top(json!({"degradedPacketLossThreshold": 30, "maxPacketLossThreshold": 20})),
                "degradedPacketLossThreshold",
            ),
        ];
        for (doc, field) in cases {
            assert_eq!(field_of(doc.clone()), field, "{doc}");
        }
    }

    #[test]
    fn icmp_spec_survives_a_round_trip() {
        let doc = json!({"checkType": "ICMP", "degradedPacketLossThreshold": 5,
            "request": {"hostname": "[::1]", "pingCount": 4, "assertions": [
            {"source": "JSON_RESPONSE", "property": "$.packetsReceived",
             "comparison": "EQUALS", "target": "4"}]}});
        let spec = CheckSpec::from_document(&doc).unwrap();
        let again = CheckSpec::from_document(&serde_json::to_value(&spec).unwrap()).unwrap();
        assert_eq!(spec, again);
    }

    #[test]
    fn ip_family_is_kept_only_when_the_document_pins_one() {
        for (family, expected) in [
            (None, None),
            (Some("IPv4"), Some(IpFamily::IPv4)),
            (Some("IPv6"), Some(IpFamily::IPv6)),
        ] {
            let mut request = json!({"url": "http://127.0.0.1:1/"});
            if let Some(f) = family {
                request["ipFamily"] = json!(f);
            }
            let doc = json!({"checkType": "URL", "name": "x", "request": request});
            let Ok(CheckSpec::Url(u)) = CheckSpec::from_document(&doc) else {
                panic!("not a URL monitor")
            };
            assert_eq!(u.request.ip_family, expected);
            let again = serde_json::to_value(&u).unwrap();
            assert_eq!(
                again["request"].get("ipFamily").and_then(|v| v.as_str()),
                family
            );
        }
        let doc = json!({"checkType": "API", "request": {"method": "GET",
            "url": "http://127.0.0.1:1/", "ipFamily": "IPv5"}});
        assert_eq!(
            CheckSpec::from_document(&doc).unwrap_err().field,
            "request.ipFamily"
        );
    }
}
