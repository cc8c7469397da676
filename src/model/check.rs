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
}

impl CheckSpec {
    pub fn check_type(&self) -> CheckType {
        match self {
            CheckSpec::Url(_) => CheckType::Url,
        }
    }

    /// Checks every field against the limits of the reference API.
    pub fn validate(&self) -> Result<(), ValidationError> {
        match self {
            CheckSpec::Url(spec) => spec.validate(),
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
        match CheckType::parse(name) {
            Some(CheckType::Url) => {}
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
        }
        let spec: CheckSpec = serde_path_to_error_like(doc)?;
        spec.validate()?;
        Ok(spec)
    }
}

/// Deserializes with an error that names the offending field where serde tells it.
fn serde_path_to_error_like(doc: &serde_json::Value) -> Result<CheckSpec, ValidationError> {
    CheckSpec::deserialize(doc).map_err(|e| {
        let msg = e.to_string();
        // serde_json messages look like "missing field `url`" or "unknown variant `X`, expected ...".
        let field = msg
            .split('`')
            .nth(1)
            .filter(|_| msg.starts_with("missing field"))
            .map(str::to_owned)
            .unwrap_or_else(|| "body".to_owned());
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
        for (field, value) in [
            ("degradedResponseTime", self.degraded_response_time),
            ("maxResponseTime", self.max_response_time),
        ] {
            if let Some(v) = value
                && !(0.0..=MAX_RESPONSE_TIME_LIMIT_MS).contains(&v)
            {
                return Err(ValidationError::new(
                    field,
                    format!("must be between 0 and {MAX_RESPONSE_TIME_LIMIT_MS} milliseconds"),
                ));
            }
        }
        if let (Some(d), Some(m)) = (self.degraded_response_time, self.max_response_time)
            && d > m
        {
            return Err(ValidationError::new(
                "degradedResponseTime",
                "must not be greater than maxResponseTime",
            ));
        }
        Ok(())
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
        let CheckSpec::Url(u) = spec;
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
    fn pools_separate_cheap_from_heavy() {
        assert_eq!(CheckType::Url.pool(), Pool::Uptime);
        assert_eq!(CheckType::Browser.pool(), Pool::Heavy);
        assert_eq!(CheckType::parse("MULTI_STEP"), Some(CheckType::MultiStep));
    }
}
