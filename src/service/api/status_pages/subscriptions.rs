//! `/v1/status-pages/{id}/subscriptions`: subscribers of a page. A bulk creation takes
//! 1 to 100 `{type: "EMAIL", config: "<address>"}` or, as an Outpost extension of the
//! reference, `{type: "WEBHOOK", config: "<http(s) URL>"}`; addresses the page already
//! has (e-mail addresses without regard to case) are skipped.
//!
//! Without `autoVerify` e-mail subscriptions are PENDING: each new one is sent a
//! confirmation mail (queued in the store, sent by `status_notify`) whose link makes it
//! VERIFIED. Webhook subscriptions are VERIFIED at creation. Only VERIFIED subscribers
//! are notified. The answer's `status` is VERIFIED when every subscription of the
//! request is, else PENDING.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde_json::{Value, json};

use super::fields;
use crate::service::api::calendar_date;
use crate::service::api::extract::{ApiJson, parse_id};
use crate::service::auth::ApiAuth;
use crate::service::context::AppState;
use crate::service::errors::ApiError;
use crate::service::store::{
    NewSubscription, PageSubscription, SubscriptionKind, SubscriptionStatus,
};

const PAGE_NOT_FOUND: &str = "No such status page.";
/// Most subscriptions of one bulk request.
const MAX_BULK: usize = 100;
/// Longest webhook URL, in bytes.
const MAX_WEBHOOK_URL: usize = 2048;

fn subscription_json(s: &PageSubscription) -> Value {
    json!({
        "id": s.id,
        "type": s.kind.as_str(),
        "address": s.address,
        "status": s.status.as_str(),
        "created_at": calendar_date(s.created_at),
        "updated_at": calendar_date(s.updated_at),
    })
}

pub async fn list(
    State(ctx): State<AppState>,
    auth: ApiAuth,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let id = parse_id(&id, "statusPageId")?;
    match ctx.store.page_subscriptions(auth.account_id, id).await? {
        Some(subs) => Ok(Json(Value::Array(
            subs.iter().map(subscription_json).collect(),
        ))),
        None => Err(ApiError::not_found(PAGE_NOT_FOUND)),
    }
}

pub async fn bulk_create(
    State(ctx): State<AppState>,
    auth: ApiAuth,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<Value>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let id = parse_id(&id, "statusPageId")?;
    let body = fields::object(body)?;
    let items = match body.get("subscriptions") {
        Some(Value::Array(a)) if a.is_empty() => {
            return Err(ApiError::invalid(
                "subscriptions",
                "must hold at least one subscription",
            ));
        }
        Some(Value::Array(_)) => fields::array(&body, "", "subscriptions", MAX_BULK)?,
        None | Some(Value::Null) => {
            return Err(ApiError::invalid(
                "subscriptions",
                "is required: an array of subscriptions",
            ));
        }
        Some(_) => return Err(ApiError::invalid("subscriptions", "must be an array")),
    };
    let mut targets = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        targets.push(target(item, &format!("subscriptions[{i}]"))?);
    }
    let auto_verify = fields::bool_or(&body, "autoVerify", false)?;
    let email_status = if auto_verify {
        SubscriptionStatus::Verified
    } else {
        SubscriptionStatus::Pending
    };
    let subscriptions: Vec<NewSubscription> = targets
        .into_iter()
        .map(|(kind, address)| NewSubscription {
            kind,
            address,
            // Webhooks have no mailbox to confirm: verified at once.
            status: match kind {
                SubscriptionKind::Email => email_status,
                SubscriptionKind::Webhook => SubscriptionStatus::Verified,
            },
        })
        .collect();
    let status = if subscriptions
        .iter()
        .all(|s| s.status == SubscriptionStatus::Verified)
    {
        SubscriptionStatus::Verified
    } else {
        SubscriptionStatus::Pending
    };
    match ctx
        .store
        .subscribe_to_page(auth.account_id, id, &subscriptions)
        .await?
    {
        Some(outcome) => {
            if outcome.confirmations > 0 {
                ctx.status_notify.wake();
            }
            Ok((
                StatusCode::CREATED,
                Json(json!({
                    "created": outcome.created,
                    "skipped": outcome.skipped,
                    "status": status.as_str(),
                })),
            ))
        }
        None => Err(ApiError::not_found(PAGE_NOT_FOUND)),
    }
}

/// One `{type, config}` of a bulk body: the type and the address (an e-mail address,
/// or the normalized URL of a webhook). Errors name the field under `at`.
fn target(item: &Value, at: &str) -> Result<(SubscriptionKind, String), ApiError> {
    let s = fields::item(item, at)?;
    let kind = match s.get("type") {
        Some(Value::String(t)) => SubscriptionKind::parse(t)
            .ok_or_else(|| ApiError::invalid(&format!("{at}.type"), "must be EMAIL or WEBHOOK"))?,
        None | Some(Value::Null) => {
            return Err(ApiError::invalid(
                &format!("{at}.type"),
                "is required: EMAIL or WEBHOOK",
            ));
        }
        Some(_) => {
            return Err(ApiError::invalid(
                &format!("{at}.type"),
                "must be EMAIL or WEBHOOK",
            ));
        }
    };
    let field = format!("{at}.config");
    let config = match s.get("config") {
        Some(Value::String(c)) => c.trim(),
        None | Some(Value::Null) => {
            let what = match kind {
                SubscriptionKind::Email => "the email address",
                SubscriptionKind::Webhook => "the webhook's http(s) URL",
            };
            return Err(ApiError::invalid(&field, format!("is required: {what}")));
        }
        Some(_) => return Err(ApiError::invalid(&field, "must be a string")),
    };
    match kind {
        SubscriptionKind::Email if fields::valid_email(config) => Ok((kind, config.to_owned())),
        SubscriptionKind::Email => Err(ApiError::invalid(&field, "must be an email address")),
        SubscriptionKind::Webhook => webhook_url(config)
            .map(|url| (kind, url))
            .map_err(|message| ApiError::invalid(&field, message)),
    }
}

/// A webhook subscriber's URL, normalized: absolute http(s) with a host, at most
/// [`MAX_WEBHOOK_URL`] bytes.
fn webhook_url(config: &str) -> Result<String, &'static str> {
    const USAGE: &str =
        "must be an http or https URL with a host, e.g. https://hooks.example.com/status";
    if config.len() > MAX_WEBHOOK_URL {
        return Err("must be a URL of at most 2048 bytes");
    }
    let url = url::Url::parse(config).map_err(|_| USAGE)?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none_or(str::is_empty) {
        return Err(USAGE);
    }
    Ok(url.to_string())
}

pub async fn remove(
    State(ctx): State<AppState>,
    auth: ApiAuth,
    Path((id, subscription_id)): Path<(String, String)>,
) -> Result<StatusCode, ApiError> {
    let id = parse_id(&id, "statusPageId")?;
    let subscription_id = parse_id(&subscription_id, "subscriptionId")?;
    if ctx
        .store
        .delete_page_subscription(auth.account_id, id, subscription_id)
        .await?
    {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::not_found("No such subscription."))
    }
}
