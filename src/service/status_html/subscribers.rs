//! The links in mail to subscribers, opened in a browser: the confirmation link
//! (`GET /status/<url>/subscriptions/confirm?token=`) makes a PENDING subscription
//! VERIFIED, the unsubscribe link (`GET`, or `POST` as mail clients' one-click
//! unsubscribe of RFC 8058 sends it, on `/status/<url>/subscriptions/unsubscribe?token=`)
//! deletes the subscription. The token alone decides (the page in the path is not
//! looked at: a page whose `url` changed keeps its links working).
//!
//! Answers are small HTML notices with the page's look and the pages' CSP: 200 when the
//! link did its work, 400 for a malformed or missing token, 404 for an unknown one
//! (never issued, or its subscription is gone), 410 for a confirmation link used
//! before. Never a 5xx but for a store failure (503). A `HEAD` uses no token. Tokens
//! are never logged.

use axum::extract::{RawQuery, State};
use axum::http::{Method, StatusCode};
use axum::response::Response;

use super::{html_response, render, unavailable};
use crate::service::context::AppState;
use crate::service::status_notify::links;
use crate::service::store::{StatusPage, TokenPurpose, TokenUse, now_ms};

/// `GET` of a confirmation link.
pub(super) async fn confirm(
    State(ctx): State<AppState>,
    method: Method,
    RawQuery(query): RawQuery,
) -> Response {
    if method == Method::HEAD {
        return looked_at();
    }
    use_link(&ctx, query.as_deref(), TokenPurpose::Verify).await
}

/// `GET` or `POST` of an unsubscribe link.
pub(super) async fn unsubscribe(
    State(ctx): State<AppState>,
    method: Method,
    RawQuery(query): RawQuery,
) -> Response {
    if method == Method::HEAD {
        return looked_at();
    }
    use_link(&ctx, query.as_deref(), TokenPurpose::Unsubscribe).await
}

/// The answer to a `HEAD` (which axum routes to the `GET` handler): link checkers and
/// previews use it, so it uses no token.
fn looked_at() -> Response {
    notice(
        StatusCode::OK,
        None,
        "Subscription link",
        "Open this link in a browser.",
    )
}

/// The value of `token` in the query string, if any.
fn query_token(query: Option<&str>) -> Option<String> {
    url::form_urlencoded::parse(query?.as_bytes())
        .find(|(name, _)| name == "token")
        .map(|(_, v)| v.into_owned())
}

async fn use_link(ctx: &AppState, query: Option<&str>, purpose: TokenPurpose) -> Response {
    let Some(token) = query_token(query).filter(|t| links::well_formed(t, purpose)) else {
        return notice(
            StatusCode::BAD_REQUEST,
            None,
            "This link is not valid",
            "The link is incomplete or damaged. Open it again from the e-mail, or copy the \
             whole address into your browser.",
        );
    };
    let used = ctx
        .store
        .use_subscription_token(&links::token_hash(&token), purpose, now_ms())
        .await;
    let (status, subscriber, heading, text) = match used {
        Err(e) => return unavailable(&e),
        Ok(TokenUse::Unknown) => {
            return notice(
                StatusCode::NOT_FOUND,
                None,
                "This link is not valid",
                "It was not issued by this status page, or the subscription it belongs to \
                 was removed (for example by unsubscribing).",
            );
        }
        Ok(TokenUse::AlreadyUsed(s)) => (
            StatusCode::GONE,
            s,
            "This link was already used",
            "The subscription of {address} is confirmed: it gets e-mails about incidents \
             on {page}.",
        ),
        Ok(TokenUse::Verified(s)) => {
            tracing::info!(subscription = %s.subscription_id, page = %s.page_id, "status page subscription confirmed");
            (
                StatusCode::OK,
                s,
                "Subscription confirmed",
                "{address} will get e-mails about incidents on {page}. Every e-mail has a \
                 link to unsubscribe.",
            )
        }
        Ok(TokenUse::Unsubscribed(s)) => {
            tracing::info!(subscription = %s.subscription_id, page = %s.page_id, "status page subscription removed by its unsubscribe link");
            (
                StatusCode::OK,
                s,
                "You are unsubscribed",
                "{address} gets no more updates of {page}.",
            )
        }
    };
    let page = match ctx
        .store
        .status_page(subscriber.account_id, subscriber.page_id)
        .await
    {
        Ok(page) => page,
        Err(e) => return unavailable(&e),
    };
    let name = page.as_ref().map_or("the status page", |p| p.name.as_str());
    let text = text
        .replace("{address}", &subscriber.address)
        .replace("{page}", &format!("\u{201c}{name}\u{201d}"));
    let page = page
        .as_ref()
        .map(|p| (p, links::page_link(&ctx.public_url, p)));
    notice(status, page, heading, &text)
}

/// The notice (private, never cached: its address holds a token).
fn notice(
    status: StatusCode,
    page: Option<(&StatusPage, String)>,
    heading: &str,
    text: &str,
) -> Response {
    let body = match page {
        Some((page, link)) => render::notice(Some(page), heading, text, Some(&link)),
        None => render::notice(None, heading, text, None),
    };
    html_response(status, body, true)
}
