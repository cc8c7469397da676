//! `/v1/status-pages/{id}/subscriptions`: email subscribers of a page. A bulk creation
//! takes 1 to 100 `{type: "EMAIL", config: "<address>"}`; addresses the page already
//! has (without regard to case) are skipped. Without `autoVerify` subscriptions are
//! PENDING until their owner confirms; only VERIFIED ones are notified.

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
use crate::service::store::{PageSubscription, SubscriptionStatus};

const PAGE_NOT_FOUND: &str = "No such status page.";
/// Most subscriptions of one bulk request.
const MAX_BULK: usize = 100;

fn subscription_json(s: &PageSubscription) -> Value {
    json!({
        "id": s.id,
        "type": s.kind,
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
    let mut addresses = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let at = format!("subscriptions[{i}]");
        let s = fields::item(item, &at)?;
        match s.get("type") {
            Some(Value::String(t)) if t == "EMAIL" => {}
            None | Some(Value::Null) => {
                return Err(ApiError::invalid(
                    &format!("{at}.type"),
                    "is required: EMAIL",
                ));
            }
            Some(_) => return Err(ApiError::invalid(&format!("{at}.type"), "must be EMAIL")),
        }
        match s.get("config") {
            Some(Value::String(a)) if fields::valid_email(a.trim()) => {
                addresses.push(a.trim().to_owned());
            }
            None | Some(Value::Null) => {
                return Err(ApiError::invalid(
                    &format!("{at}.config"),
                    "is required: the email address",
                ));
            }
            Some(_) => {
                return Err(ApiError::invalid(
                    &format!("{at}.config"),
                    "must be an email address",
                ));
            }
        }
    }
    let auto_verify = fields::bool_or(&body, "autoVerify", false)?;
    let status = if auto_verify {
        SubscriptionStatus::Verified
    } else {
        SubscriptionStatus::Pending
    };
    match ctx
        .store
        .subscribe_to_page(auth.account_id, id, &addresses, status)
        .await?
    {
        Some(outcome) => Ok((
            StatusCode::CREATED,
            Json(json!({
                "created": outcome.created,
                "skipped": outcome.skipped,
                "status": status.as_str(),
            })),
        )),
        None => Err(ApiError::not_found(PAGE_NOT_FOUND)),
    }
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
