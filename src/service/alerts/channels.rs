//! Alert channel documents of the public API (`AlertChannelCreate`): validation and
//! normalization of a create/update body, and the JSON a channel is shown as (the
//! webhook secret masked).
//!
//! Every type of the reference is stored and validated. Delivered: WEBHOOK, EMAIL (over
//! the service's SMTP server, see `alerts::email`) and SLACK (its incoming-webhook URL).
//! SLACK_APP, SMS, CALL, PAGERDUTY and OPSGENIE need the vendors' hosted services, which a
//! private network does not reach: their channels are kept, and an alert for them is
//! logged as not delivered. Secret fields (`webhookSecret`, `serviceKey`, `apiKey`) are
//! shown masked; the mask sent back keeps the stored value.

use serde_json::{Map, Value, json};
use uuid::Uuid;

use super::webhook::WebhookTarget;
use crate::service::errors::ApiError;
use crate::service::store::{ChannelRecord, ChannelWrite, SubscriptionRecord, SubscriptionWrite};

/// Channel types of the reference API.
pub const REFERENCE_TYPES: [&str; 8] = [
    "EMAIL",
    "SLACK",
    "SLACK_APP",
    "WEBHOOK",
    "SMS",
    "PAGERDUTY",
    "OPSGENIE",
    "CALL",
];
/// The types whose alerts this version delivers.
pub const DELIVERED_TYPES: [&str; 3] = ["EMAIL", "WEBHOOK", "SLACK"];
/// Configuration fields shown masked.
pub const SECRET_FIELDS: [&str; 3] = ["webhookSecret", "serviceKey", "apiKey"];
/// Opsgenie regions and priorities.
pub const OPSGENIE_REGIONS: [&str; 2] = ["US", "EU"];
pub const OPSGENIE_PRIORITIES: [&str; 5] = ["P1", "P2", "P3", "P4", "P5"];
/// What a stored webhook secret is shown as; sent back unchanged, it keeps the secret.
pub const SECRET_MASK: &str = "*****";
/// Longest webhook URL.
pub const MAX_URL_LEN: usize = 2048;
/// Most headers and most query parameters of a webhook.
pub const MAX_PAIRS: usize = 50;
/// Longest header or parameter key and value.
pub const MAX_PAIR_LEN: usize = 4096;
/// Longest webhook secret, name and template.
pub const MAX_SECRET_LEN: usize = 256;
pub const MAX_NAME_LEN: usize = 255;
pub const MAX_TEMPLATE_LEN: usize = 64 * 1024;
/// Longest e-mail address.
pub const MAX_ADDRESS_LEN: usize = 254;
/// Most subscriptions set by one request.
pub const MAX_SUBSCRIPTIONS: usize = 1000;

/// Builds the stored form of a channel from a create body, or from an update body
/// (`existing`: the stored channel; the update replaces every field, and a masked
/// webhook secret keeps the stored one). Errors are 400s naming the field.
pub fn normalize_channel(
    body: Value,
    existing: Option<&ChannelRecord>,
) -> Result<ChannelWrite, ApiError> {
    let Value::Object(body) = body else {
        return Err(ApiError::invalid("body", "must be a JSON object"));
    };
    let channel_type = match body.get("type") {
        Some(Value::String(t)) if REFERENCE_TYPES.contains(&t.as_str()) => t.clone(),
        None | Some(Value::Null) => return Err(ApiError::invalid("type", "is required")),
        Some(_) => {
            return Err(ApiError::invalid(
                "type",
                format!("must be one of {}", REFERENCE_TYPES.join(", ")),
            ));
        }
    };
    let config = match body.get("config") {
        Some(Value::Object(c)) => c,
        None | Some(Value::Null) => return Err(ApiError::invalid("config", "is required")),
        Some(_) => return Err(ApiError::invalid("config", "must be an object")),
    };
    // A masked secret sent back keeps the stored one (of a channel of the same type).
    let old = |field: &str| {
        existing
            .filter(|e| e.channel_type == channel_type)
            .and_then(|e| e.config.get(field))
            .and_then(Value::as_str)
    };
    let secret = |field: &str| -> Result<Option<String>, ApiError> {
        Ok(match string_field(config, field, MAX_SECRET_LEN)? {
            Some(SECRET_MASK) => old(field).map(str::to_owned),
            Some("") | None => None,
            Some(s) => Some(s.to_owned()),
        })
    };
    let config = match channel_type.as_str() {
        "WEBHOOK" => webhook_config(config, secret("webhookSecret")?)?,
        "EMAIL" => email_config(config)?,
        "SLACK" => slack_config(config)?,
        "SLACK_APP" => json!({
            "channel": required(config, "channel", MAX_NAME_LEN)?,
            "name": string_field(config, "name", MAX_NAME_LEN)?,
        }),
        "SMS" | "CALL" => phone_config(config)?,
        "PAGERDUTY" => json!({
            "serviceKey": secret("serviceKey")?
                .ok_or_else(|| ApiError::invalid("config.serviceKey", "is required"))?,
            "account": string_field(config, "account", MAX_NAME_LEN)?,
            "serviceName": string_field(config, "serviceName", MAX_NAME_LEN)?,
        }),
        _ => opsgenie_config(config, secret("apiKey")?)?,
    };
    let flag = |field: &str, default: bool| match body.get(field) {
        None | Some(Value::Null) => Ok(default),
        Some(Value::Bool(b)) => Ok(*b),
        Some(_) => Err(ApiError::invalid(field, "must be a boolean")),
    };
    let ssl_expiry_threshold = match body.get("sslExpiryThreshold") {
        None | Some(Value::Null) => 30,
        Some(v) => match v.as_i64() {
            Some(n) if (1..=30).contains(&n) => n,
            _ => {
                return Err(ApiError::invalid(
                    "sslExpiryThreshold",
                    "must be an integer between 1 and 30",
                ));
            }
        },
    };
    let subscriptions = match body.get("subscriptions") {
        None | Some(Value::Null) => None,
        Some(Value::Array(items)) => {
            if items.len() > MAX_SUBSCRIPTIONS {
                return Err(ApiError::invalid(
                    "subscriptions",
                    format!("must have at most {MAX_SUBSCRIPTIONS} items"),
                ));
            }
            Some(
                items
                    .iter()
                    .enumerate()
                    .map(|(i, item)| subscription(item, &format!("subscriptions[{i}].")))
                    .collect::<Result<Vec<_>, _>>()?,
            )
        }
        Some(_) => return Err(ApiError::invalid("subscriptions", "must be an array")),
    };
    Ok(ChannelWrite {
        channel_type,
        config,
        send_recovery: flag("sendRecovery", true)?,
        send_failure: flag("sendFailure", true)?,
        send_degraded: flag("sendDegraded", false)?,
        ssl_expiry: flag("sslExpiry", false)?,
        ssl_expiry_threshold,
        auto_subscribe: flag("autoSubscribe", false)?,
        subscriptions,
    })
}

/// Parses one subscription (`AlertChannelSubscriptionCreate`): a `checkId` (a UUID) or a
/// `groupId`, not both, and `activated`. `prefix` goes before field names in errors.
pub fn subscription(item: &Value, prefix: &str) -> Result<SubscriptionWrite, ApiError> {
    let Value::Object(o) = item else {
        let field = if prefix.is_empty() {
            "body"
        } else {
            prefix.trim_end_matches('.')
        };
        return Err(ApiError::invalid(
            field,
            "must be an object {checkId or groupId, activated}",
        ));
    };
    let check_id = match o.get("checkId") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(
            Uuid::parse_str(s)
                .map_err(|_| ApiError::invalid(&format!("{prefix}checkId"), "must be a UUID"))?,
        ),
        Some(_) => {
            return Err(ApiError::invalid(
                &format!("{prefix}checkId"),
                "must be a string (a check id)",
            ));
        }
    };
    let group_id = match o.get("groupId") {
        None | Some(Value::Null) => None,
        Some(_) => {
            return Err(ApiError::invalid(
                &format!("{prefix}groupId"),
                "check groups are not supported by this version; subscribe checks by checkId",
            ));
        }
    };
    if check_id.is_none() && group_id.is_none() {
        return Err(ApiError::invalid(
            &format!("{prefix}checkId"),
            "is required (a checkId or a groupId, not both)",
        ));
    }
    let activated = match o.get("activated") {
        Some(Value::Bool(b)) => *b,
        None | Some(Value::Null) => {
            return Err(ApiError::invalid(
                &format!("{prefix}activated"),
                "is required",
            ));
        }
        Some(_) => {
            return Err(ApiError::invalid(
                &format!("{prefix}activated"),
                "must be a boolean",
            ));
        }
    };
    Ok(SubscriptionWrite {
        check_id,
        group_id,
        activated,
    })
}

fn string_field<'a>(
    config: &'a Map<String, Value>,
    field: &str,
    max: usize,
) -> Result<Option<&'a str>, ApiError> {
    match config.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.chars().count() <= max => Ok(Some(s)),
        Some(Value::String(_)) => Err(ApiError::invalid(
            &format!("config.{field}"),
            format!("must be at most {max} characters"),
        )),
        Some(_) => Err(ApiError::invalid(
            &format!("config.{field}"),
            "must be a string",
        )),
    }
}

fn pair_list(config: &Map<String, Value>, field: &str) -> Result<Value, ApiError> {
    let items = match config.get(field) {
        None | Some(Value::Null) => return Ok(json!([])),
        Some(Value::Array(items)) if items.len() <= MAX_PAIRS => items,
        Some(Value::Array(_)) => {
            return Err(ApiError::invalid(
                &format!("config.{field}"),
                format!("must have at most {MAX_PAIRS} items"),
            ));
        }
        Some(_) => {
            return Err(ApiError::invalid(
                &format!("config.{field}"),
                "must be an array of {key, value}",
            ));
        }
    };
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let key = item.get("key").and_then(Value::as_str);
        let value = item.get("value").and_then(Value::as_str);
        let locked = item.get("locked").and_then(Value::as_bool).unwrap_or(false);
        match (key, value) {
            (Some(k), Some(v))
                if !k.is_empty() && k.len() <= MAX_PAIR_LEN && v.len() <= MAX_PAIR_LEN =>
            {
                out.push(json!({"key": k, "value": v, "locked": locked}));
            }
            _ => {
                return Err(ApiError::invalid(
                    &format!("config.{field}[{i}]"),
                    format!(
                        "must be {{key, value}} with a non-empty key, strings of at most {MAX_PAIR_LEN} bytes"
                    ),
                ));
            }
        }
    }
    Ok(Value::Array(out))
}

/// A string field that must be there and not be blank.
fn required<'a>(
    config: &'a Map<String, Value>,
    field: &str,
    max: usize,
) -> Result<&'a str, ApiError> {
    match string_field(config, field, max)? {
        Some(v) if !v.trim().is_empty() => Ok(v),
        _ => Err(ApiError::invalid(&format!("config.{field}"), "is required")),
    }
}

/// SLACK: an incoming-webhook URL and an optional channel name.
fn slack_config(config: &Map<String, Value>) -> Result<Value, ApiError> {
    let url = required(config, "url", MAX_URL_LEN)?;
    match url::Url::parse(url) {
        Ok(u) if matches!(u.scheme(), "http" | "https") && u.host_str().is_some() => {}
        _ => {
            return Err(ApiError::invalid(
                "config.url",
                "must be an http or https URL with a host",
            ));
        }
    }
    Ok(json!({"url": url, "channel": string_field(config, "channel", MAX_NAME_LEN)?}))
}

/// SMS and CALL: a phone number in E.164 form (`+` and 8 to 15 digits) and a name.
fn phone_config(config: &Map<String, Value>) -> Result<Value, ApiError> {
    let number = required(config, "number", 16)?;
    let digits = number.strip_prefix('+').unwrap_or("");
    if !(8..=15).contains(&digits.len()) || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(ApiError::invalid(
            "config.number",
            "must be a phone number in E.164 form: + and 8 to 15 digits",
        ));
    }
    Ok(json!({"number": number, "name": string_field(config, "name", MAX_NAME_LEN)?}))
}

/// OPSGENIE: an API key, a region (US or EU, default US) and an alert priority (P1 to P5,
/// default P3).
fn opsgenie_config(
    config: &Map<String, Value>,
    api_key: Option<String>,
) -> Result<Value, ApiError> {
    let api_key = api_key.ok_or_else(|| ApiError::invalid("config.apiKey", "is required"))?;
    let one_of =
        |field: &str, allowed: &[&str], default: &str| match string_field(config, field, 8)? {
            None => Ok(default.to_owned()),
            Some(v) if allowed.contains(&v.to_ascii_uppercase().as_str()) => {
                Ok(v.to_ascii_uppercase())
            }
            Some(_) => Err(ApiError::invalid(
                &format!("config.{field}"),
                format!("must be one of {}", allowed.join(", ")),
            )),
        };
    Ok(json!({
        "apiKey": api_key,
        "region": one_of("region", &OPSGENIE_REGIONS, "US")?,
        "priority": one_of("priority", &OPSGENIE_PRIORITIES, "P3")?,
        "name": string_field(config, "name", MAX_NAME_LEN)?,
    }))
}

fn webhook_config(config: &Map<String, Value>, secret: Option<String>) -> Result<Value, ApiError> {
    let url = match string_field(config, "url", MAX_URL_LEN)? {
        Some(u) if !u.is_empty() => u,
        _ => return Err(ApiError::invalid("config.url", "is required")),
    };
    let method = string_field(config, "method", 16)?
        .unwrap_or("POST")
        .to_ascii_uppercase();
    let normalized = json!({
        "name": string_field(config, "name", MAX_NAME_LEN)?.unwrap_or(""),
        "webhookType": string_field(config, "webhookType", 64)?.unwrap_or("WEBHOOK_GENERIC"),
        "url": url,
        "method": method,
        "headers": pair_list(config, "headers")?,
        "queryParameters": pair_list(config, "queryParameters")?,
        "template": string_field(config, "template", MAX_TEMPLATE_LEN)?,
        "webhookSecret": secret,
    });
    WebhookTarget::from_config(&normalized)
        .map_err(|(field, message)| ApiError::invalid(&format!("config.{field}"), message))?;
    Ok(normalized)
}

/// A plausible address: one `@` between a non-empty local part and a dotted domain, no
/// whitespace or control characters.
pub fn valid_address(s: &str) -> bool {
    let Some((local, domain)) = s.split_once('@') else {
        return false;
    };
    !local.is_empty()
        && !domain.is_empty()
        && !domain.contains('@')
        && domain.contains('.')
        && !domain.starts_with('.')
        && !domain.ends_with('.')
        && s.len() <= MAX_ADDRESS_LEN
        && !s.chars().any(|c| c.is_whitespace() || c.is_control())
}

fn email_config(config: &Map<String, Value>) -> Result<Value, ApiError> {
    match string_field(config, "address", MAX_ADDRESS_LEN)? {
        Some(a) if valid_address(a) => Ok(json!({"address": a})),
        Some(_) => Err(ApiError::invalid(
            "config.address",
            "must be an e-mail address",
        )),
        None => Err(ApiError::invalid("config.address", "is required")),
    }
}

/// A subscription as the API shows it (`AlertChanelSubscription`).
pub fn subscription_json(s: &SubscriptionRecord) -> Value {
    json!({
        "id": s.id,
        "checkId": s.check_id,
        "groupId": s.group_id,
        "activated": s.activated,
    })
}

/// A channel as the API shows it (`AlertChannel`), its secrets masked.
pub fn channel_json(c: &ChannelRecord) -> Value {
    let mut config = c.config.clone();
    for field in SECRET_FIELDS {
        if let Some(secret) = config.get_mut(field)
            && secret.is_string()
        {
            *secret = json!(SECRET_MASK);
        }
    }
    json!({
        "id": c.id,
        "type": c.channel_type,
        "config": config,
        "subscriptions": c.subscriptions.iter().map(subscription_json).collect::<Vec<_>>(),
        "sendRecovery": c.send_recovery,
        "sendFailure": c.send_failure,
        "sendDegraded": c.send_degraded,
        "sslExpiry": c.ssl_expiry,
        "sslExpiryThreshold": c.ssl_expiry_threshold,
        "autoSubscribe": c.auto_subscribe,
        "created_at": c.created_at,
        "updated_at": c.updated_at,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field_of(e: ApiError) -> String {
        e.message.split(':').next().unwrap_or("").to_owned()
    }

    #[test]
    fn webhook_and_email_channels_normalize() {
        let w = normalize_channel(
            json!({"type": "WEBHOOK", "config": {"url": "http://127.0.0.1:1/h", "webhookSecret": "k"}}),
            None,
        )
        .unwrap();
        assert_eq!(w.config["method"], "POST");
        assert_eq!(w.config["webhookSecret"], "k");
        assert!(w.send_failure && w.send_recovery && !w.send_degraded);
        assert_eq!(w.ssl_expiry_threshold, 30);
        let e = normalize_channel(
            json!({"type": "EMAIL", "config": {"address": "ops@example.com"}}),
            None,
        )
        .unwrap();
        assert_eq!(e.config, json!({"address": "ops@example.com"}));
    }

    #[test]
    fn every_reference_type_is_stored_with_its_secrets_masked() {
        let ok = |b: Value| normalize_channel(b, None).expect("valid channel");
        let slack = ok(json!({"type": "SLACK",
            "config": {"url": "https://hooks.slack.example/T/B/x", "channel": "#ops"}}));
        assert_eq!(slack.config["channel"], "#ops");
        ok(json!({"type": "SLACK_APP", "config": {"channel": "C123"}}));
        let sms =
            ok(json!({"type": "SMS", "config": {"number": "+31612345678", "name": "on call"}}));
        assert_eq!(sms.config["number"], "+31612345678");
        ok(json!({"type": "CALL", "config": {"number": "+14155550100"}}));
        let opsgenie = ok(json!({"type": "OPSGENIE",
            "config": {"apiKey": "og-key", "region": "eu", "priority": "p1"}}));
        assert_eq!(opsgenie.config["region"], "EU");
        assert_eq!(opsgenie.config["priority"], "P1");
        let pd = ok(json!({"type": "PAGERDUTY", "config": {"serviceKey": "pd-key"}}));

        let record = |w: ChannelWrite| ChannelRecord {
            id: 7,
            account_id: Uuid::nil(),
            channel_type: w.channel_type,
            config: w.config,
            send_recovery: w.send_recovery,
            send_failure: w.send_failure,
            send_degraded: w.send_degraded,
            ssl_expiry: w.ssl_expiry,
            ssl_expiry_threshold: w.ssl_expiry_threshold,
            auto_subscribe: w.auto_subscribe,
            subscriptions: Vec::new(),
            created_at: chrono::Utc::now(),
            updated_at: None,
        };
        let stored = record(pd);
        let shown = channel_json(&stored);
        assert_eq!(shown["config"]["serviceKey"], SECRET_MASK);
        let again = normalize_channel(
            json!({"type": "PAGERDUTY", "config": shown["config"].clone()}),
            Some(&stored),
        )
        .expect("update");
        assert_eq!(again.config["serviceKey"], "pd-key");
        let shown = channel_json(&record(opsgenie));
        assert_eq!(shown["config"]["apiKey"], SECRET_MASK);
    }

    #[test]
    fn errors_name_fields() {
        let f = |b: Value| field_of(normalize_channel(b, None).unwrap_err());
        assert_eq!(f(json!({"config": {}})), "type");
        assert_eq!(f(json!({"type": "SLACK", "config": {}})), "config.url");
        assert_eq!(
            f(json!({"type": "SLACK", "config": {"url": "ftp://x/"}})),
            "config.url"
        );
        assert_eq!(
            f(json!({"type": "SLACK_APP", "config": {}})),
            "config.channel"
        );
        assert_eq!(
            f(json!({"type": "SMS", "config": {"number": "0612"}})),
            "config.number"
        );
        assert_eq!(f(json!({"type": "CALL", "config": {}})), "config.number");
        assert_eq!(
            f(json!({"type": "PAGERDUTY", "config": {}})),
            "config.serviceKey"
        );
        assert_eq!(
            f(json!({"type": "OPSGENIE", "config": {}})),
            "config.apiKey"
        );
        assert_eq!(
            f(json!({"type": "OPSGENIE", "config": {"apiKey": "k", "region": "MARS"}})),
            "config.region"
        );
        assert_eq!(f(json!({"type": "NOPE", "config": {}})), "type");
        assert_eq!(f(json!({"type": "WEBHOOK"})), "config");
        assert_eq!(f(json!({"type": "WEBHOOK", "config": {}})), "config.url");
        assert_eq!(
            f(json!({"type": "WEBHOOK", "config": {"url": "gopher://x/"}})),
            "config.url"
        );
        assert_eq!(
            f(json!({"type": "EMAIL", "config": {"address": "not an address"}})),
            "config.address"
        );
        assert_eq!(
            f(json!({"type": "EMAIL", "config": {"address": "a@b.c"}, "sslExpiryThreshold": 31})),
            "sslExpiryThreshold"
        );
        assert_eq!(
            f(json!({"type": "EMAIL", "config": {"address": "a@b.c"},
                "subscriptions": [{"checkId": "x", "activated": true}]})),
            "subscriptions[0].checkId"
        );
        assert_eq!(
            f(json!({"type": "EMAIL", "config": {"address": "a@b.c"},
                "subscriptions": [{"groupId": 4, "activated": true}]})),
            "subscriptions[0].groupId"
        );
    }

    #[test]
    fn masked_secret_is_kept_and_shown_masked() {
        let first = normalize_channel(
            json!({"type": "WEBHOOK", "config": {"url": "http://127.0.0.1:1/h", "webhookSecret": "k"}}),
            None,
        )
        .unwrap();
        let record = ChannelRecord {
            id: 1,
            account_id: Uuid::nil(),
            channel_type: first.channel_type.clone(),
            config: first.config.clone(),
            send_recovery: true,
            send_failure: true,
            send_degraded: false,
            ssl_expiry: false,
            ssl_expiry_threshold: 30,
            auto_subscribe: false,
            created_at: chrono::Utc::now(),
            updated_at: None,
            subscriptions: vec![],
        };
        let shown = channel_json(&record);
        assert_eq!(shown["config"]["webhookSecret"], SECRET_MASK);
        let again = normalize_channel(
            json!({"type": "WEBHOOK", "config": shown["config"].clone()}),
            Some(&record),
        )
        .unwrap();
        assert_eq!(again.config["webhookSecret"], "k");
    }
}
