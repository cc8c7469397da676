//! Webhook deliveries: the target parsed from a channel's configuration, the optional
//! HMAC-SHA256 signature, and the request with retries (exponential backoff with
//! jitter) on connection errors, timeouts, 408, 429 and 5xx answers.
//!
//! Shared by alert channels (the body is the JSON of the [`AlertNotice`](super::AlertNotice))
//! and status page webhook subscribers (`status_notify::payload`): [`send`] takes any
//! serializable payload, and [`client`] builds the one HTTP client both use. With a
//! `webhookSecret` the request carries
//! `x-outpost-signature: sha256=<lowercase hex of HMAC-SHA256(secret, body)>`.

use backon::{ExponentialBuilder, Retryable};
use hmac::{Hmac, Mac};
use reqwest::header::{CONTENT_TYPE, HeaderName, HeaderValue, USER_AGENT};
use serde::Serialize;
use serde_json::Value;
use sha2::Sha256;

use super::DeliveryPolicy;

/// Header of the body's signature.
pub const SIGNATURE_HEADER: &str = "x-outpost-signature";
/// Methods a webhook may use.
pub const METHODS: [&str; 6] = ["GET", "POST", "PUT", "HEAD", "DELETE", "PATCH"];
/// Headers a channel may not set (the client or the signature sets them).
pub const RESERVED_HEADERS: [&str; 5] = [
    "content-length",
    "host",
    "transfer-encoding",
    "connection",
    SIGNATURE_HEADER,
];

/// Where and how a webhook channel sends.
#[derive(Debug, Clone)]
pub struct WebhookTarget {
    /// The URL with the channel's query parameters.
    pub url: url::Url,
    pub method: reqwest::Method,
    pub headers: Vec<(HeaderName, HeaderValue)>,
    pub secret: Option<String>,
}

impl WebhookTarget {
    /// A plain JSON POST to `url` with `headers`, unsigned.
    pub fn post(url: url::Url, headers: Vec<(HeaderName, HeaderValue)>) -> WebhookTarget {
        WebhookTarget {
            url,
            method: reqwest::Method::POST,
            headers,
            secret: None,
        }
    }

    /// Parses a normalized webhook configuration. Errors name the field, relative to
    /// `config` (e.g. `headers[1].key`).
    pub fn from_config(config: &Value) -> Result<WebhookTarget, (String, String)> {
        let err = |f: &str, m: &str| (f.to_owned(), m.to_owned());
        let raw_url = config
            .get("url")
            .and_then(Value::as_str)
            .ok_or_else(|| err("url", "is required"))?;
        let mut url = url::Url::parse(raw_url)
            .map_err(|e| err("url", &format!("is not a valid URL: {e}")))?;
        if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
            return Err(err("url", "must be an http or https URL with a host"));
        }
        let method_name = config
            .get("method")
            .and_then(Value::as_str)
            .unwrap_or("POST");
        if !METHODS.contains(&method_name) {
            return Err(err(
                "method",
                &format!("must be one of {}", METHODS.join(", ")),
            ));
        }
        let method = reqwest::Method::from_bytes(method_name.as_bytes())
            .map_err(|_| err("method", "is not a valid method"))?;
        let mut headers = Vec::new();
        for (i, (k, v)) in pairs(config, "headers")?.into_iter().enumerate() {
            let name = HeaderName::from_bytes(k.as_bytes())
                .map_err(|_| err(&format!("headers[{i}].key"), "is not a valid header name"))?;
            if RESERVED_HEADERS.contains(&name.as_str()) {
                return Err(err(
                    &format!("headers[{i}].key"),
                    "is set by Outpost and cannot be configured",
                ));
            }
            let value = HeaderValue::from_str(&v).map_err(|_| {
                err(
                    &format!("headers[{i}].value"),
                    "is not a valid header value",
                )
            })?;
            headers.push((name, value));
        }
        let query = pairs(config, "queryParameters")?;
        if !query.is_empty() {
            let mut q = url.query_pairs_mut();
            for (k, v) in &query {
                q.append_pair(k, v);
            }
        }
        let secret = match config.get("webhookSecret") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) if s.is_empty() => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(_) => return Err(err("webhookSecret", "must be a string or null")),
        };
        Ok(WebhookTarget {
            url,
            method,
            headers,
            secret,
        })
    }
}

/// `[{key, value}]` of a configuration field.
fn pairs(config: &Value, field: &str) -> Result<Vec<(String, String)>, (String, String)> {
    let items = match config.get(field) {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(items)) => items,
        Some(_) => return Err((field.to_owned(), "must be an array".to_owned())),
    };
    items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            let key = item.get("key").and_then(Value::as_str);
            let value = item.get("value").and_then(Value::as_str);
            match (key, value) {
                (Some(k), Some(v)) if !k.is_empty() => Ok((k.to_owned(), v.to_owned())),
                _ => Err((
                    format!("{field}[{i}]"),
                    "must be {key, value} with a non-empty string key and a string value"
                        .to_owned(),
                )),
            }
        })
        .collect()
}

/// The HTTP client of webhook deliveries: `policy.timeout` per request, no redirects
/// followed (a 3xx is a refusal), reqwest's defaults otherwise. Cheap to clone (the
/// clones share one connection pool).
pub fn client(policy: &DeliveryPolicy) -> Result<reqwest::Client, reqwest::Error> {
    reqwest::Client::builder()
        .timeout(policy.timeout)
        .redirect(reqwest::redirect::Policy::none())
        .build()
}

/// `sha256=<hex>`: the signature of `body` under `secret`.
pub fn sign(secret: &str, body: &[u8]) -> String {
    // HMAC accepts keys of any length, so this cannot fail.
    let mut mac = match Hmac::<Sha256>::new_from_slice(secret.as_bytes()) {
        Ok(m) => m,
        Err(_) => return String::new(),
    };
    mac.update(body);
    format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
}

/// Why a delivery failed.
#[derive(Debug, thiserror::Error)]
pub enum DeliveryError {
    #[error("request failed: {0}")]
    Request(#[source] reqwest::Error),
    #[error("receiver answered {0}")]
    Status(reqwest::StatusCode),
    #[error("cannot encode the payload: {0}")]
    Encode(#[from] serde_json::Error),
}

impl DeliveryError {
    /// Worth another try: the network, a timeout, or an answer saying "later".
    pub fn is_transient(&self) -> bool {
        match self {
            DeliveryError::Request(_) => true,
            DeliveryError::Status(s) => {
                s.is_server_error()
                    || *s == reqwest::StatusCode::TOO_MANY_REQUESTS
                    || *s == reqwest::StatusCode::REQUEST_TIMEOUT
            }
            DeliveryError::Encode(_) => false,
        }
    }
}

/// Sends `payload` as JSON to a webhook, retrying transient failures per `policy`.
/// Returns the number of attempts made on success.
pub async fn send<T: Serialize + ?Sized>(
    client: &reqwest::Client,
    policy: &DeliveryPolicy,
    target: &WebhookTarget,
    payload: &T,
) -> Result<usize, DeliveryError> {
    let body = serde_json::to_vec(payload)?;
    let signature = target.secret.as_deref().map(|s| sign(s, &body));
    let with_body = !matches!(target.method, reqwest::Method::GET | reqwest::Method::HEAD);
    let attempts = std::sync::atomic::AtomicUsize::new(0);
    let attempt = || {
        attempts.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut request = client
            .request(target.method.clone(), target.url.clone())
            .header(USER_AGENT, concat!("outpost/", env!("CARGO_PKG_VERSION")))
            .header(CONTENT_TYPE, "application/json");
        for (name, value) in &target.headers {
            request = request.header(name, value);
        }
        if let Some(sig) = &signature {
            request = request.header(SIGNATURE_HEADER, sig);
        }
        if with_body {
            request = request.body(body.clone());
        }
        async move {
            // Without the URL: it can hold a token, and errors are logged.
            let response = request
                .send()
                .await
                .map_err(|e| DeliveryError::Request(e.without_url()))?;
            let status = response.status();
            if status.is_success() {
                Ok(())
            } else {
                Err(DeliveryError::Status(status))
            }
        }
    };
    let backoff = ExponentialBuilder::default()
        .with_min_delay(policy.min_delay)
        .with_max_delay(policy.max_delay)
        .with_max_times(policy.max_retries)
        .with_jitter();
    attempt
        .retry(backoff)
        .when(DeliveryError::is_transient)
        .notify(|e, wait| {
            tracing::debug!(error = %e, retry_in_ms = wait.as_millis() as u64, "webhook delivery failed; retrying");
        })
        .await?;
    Ok(attempts.load(std::sync::atomic::Ordering::Relaxed))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn targets_parse_and_refuse_bad_fields() {
        let t = WebhookTarget::from_config(&json!({
            "url": "http://127.0.0.1:9/hook?x=1", "method": "PUT",
            "headers": [{"key": "X-Team", "value": "ops"}],
            "queryParameters": [{"key": "a b", "value": "c&d"}],
            "webhookSecret": "s3cret"}))
        .unwrap();
        assert_eq!(t.method, reqwest::Method::PUT);
        assert_eq!(t.url.as_str(), "http://127.0.0.1:9/hook?x=1&a+b=c%26d");
        assert_eq!(t.headers[0].0.as_str(), "x-team");
        assert_eq!(t.secret.as_deref(), Some("s3cret"));
        let field = |c: Value| WebhookTarget::from_config(&c).unwrap_err().0;
        assert_eq!(field(json!({})), "url");
        assert_eq!(field(json!({"url": "ftp://x/"})), "url");
        assert_eq!(
            field(json!({"url": "http://x/", "method": "TRACE"})),
            "method"
        );
        assert_eq!(
            field(json!({"url": "http://x/", "headers": [{"key": "Host", "value": "y"}]})),
            "headers[0].key"
        );
        assert_eq!(
            field(json!({"url": "http://x/", "headers": [{"key": "a", "value": "b\nc"}]})),
            "headers[0].value"
        );
    }

    #[test]
    fn signature_is_hmac_sha256_hex() {
        // RFC 4231 test case 2.
        assert_eq!(
            sign("Jefe", b"what do ya want for nothing?"),
            "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }
}
