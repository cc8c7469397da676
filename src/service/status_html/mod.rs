//! Status pages served as HTML to browsers: `GET /status/<url>`, and `GET /` on a
//! page's custom domain (by the `Host` header; on any other host `/` stays the API's
//! JSON 404).
//!
//! - A page with `redirectTo` answers 302 to it. An unknown page is a 404 HTML page.
//! - A private page (`isPrivate`) needs one of its keys ([`access`]): `?key=RAW` answers
//!   303 to the clean address with the key in a cookie, or 401 with the key form when
//!   the key is not the page's; without a valid cookie the visitor gets the 401 key
//!   form, which shows nothing of the page but its colors.
//! - One render costs a fixed number of queries whatever the number of cards and
//!   services: the page with its cards and services, its latest incidents, and the
//!   checks linked to all its services in one statement.
//! - Answers are `text/html` (left alone by the JSON error middleware), with a
//!   Content-Security-Policy that allows no script.
//! - The confirmation and unsubscribe links of subscribers' mail ([`subscribers`])
//!   answer small notices with the page's look.

mod access;
mod cache;
mod escape;
mod render;
mod state;
mod subscribers;
mod theme;

use std::sync::Arc;
use std::time::Instant;

use axum::body::{Body, Bytes};
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use chrono::Utc;

use super::api::routes::{Area, Routes};
use super::context::AppState;
use super::errors::ApiError;
use super::store::{StatusPage, StoreError};

pub use cache::PageCache;
pub use state::ServiceState;

const CSP: &str = "default-src 'none'; style-src 'unsafe-inline'; img-src http: https: data:; \
                   form-action 'self'; base-uri 'none'; frame-ancestors 'none'";

/// The pages' routes: no key, the page's own keys guard private pages; the
/// subscribers' links carry their own tokens.
pub fn routes() -> Routes {
    use crate::service::status_notify::links::{CONFIRM_ROUTE, UNSUBSCRIBE_ROUTE};
    Routes::new(Area::Open)
        .get("/status/{url}", by_url)
        .get("/", by_host)
        .get(CONFIRM_ROUTE, subscribers::confirm)
        .get(UNSUBSCRIBE_ROUTE, subscribers::unsubscribe)
        .post(UNSUBSCRIBE_ROUTE, subscribers::unsubscribe)
}

/// The cache key of the page at `/status/{url}`.
fn url_address(url: &str) -> String {
    format!("url:{url}")
}

/// Holds the render lock of the page at `/status/{url}` until the guard is dropped, as
/// a render in progress would (for tests of what visitors get meanwhile).
pub async fn hold_render(ctx: &AppState, url: &str) -> tokio::sync::OwnedMutexGuard<()> {
    ctx.status_pages
        .render_lock(&url_address(url))
        .lock_owned()
        .await
}

/// A page found at an address, with what the cache had of it.
struct Served {
    page: Arc<StatusPage>,
    /// The path of its address, for redirects and cookies.
    path: String,
    /// Its cache key.
    address: String,
    /// The cache's lookup it comes from.
    serial: u64,
    /// When that lookup began.
    at: Instant,
    /// Its HTML as rendered from that lookup, if the cache had it.
    body: Option<Bytes>,
}

/// The page at `address`: from the cache while current, else from `lookup` (kept in
/// the cache). `path_of` gives the path of its address.
async fn find(
    ctx: &AppState,
    address: String,
    lookup: impl std::future::Future<Output = Result<Option<StatusPage>, StoreError>>,
    path_of: impl FnOnce(&StatusPage) -> String,
) -> Result<Option<Served>, StoreError> {
    let generation = ctx.store.write_generation();
    let cached = match ctx.status_pages.current(&address, generation) {
        Some(c) => c,
        None => {
            let at = Instant::now();
            let Some(page) = lookup.await? else {
                ctx.status_pages.forget(&address);
                return Ok(None);
            };
            ctx.status_pages
                .put_page(&address, generation, at, Arc::new(page))
        }
    };
    Ok(Some(Served {
        path: path_of(&cached.page),
        page: cached.page,
        address,
        serial: cached.serial,
        at: cached.at,
        body: cached.body,
    }))
}

async fn by_url(
    State(ctx): State<AppState>,
    Path(url): Path<String>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
) -> Response {
    let found = find(
        &ctx,
        url_address(&url),
        ctx.store.status_page_by_url(&url),
        |page| format!("/status/{}", escape::path_segment(&page.url)),
    )
    .await;
    match found {
        Ok(served) => serve(&ctx, served, query.as_deref(), &headers).await,
        Err(e) => unavailable(&e),
    }
}

/// The host named by the `Host` header, lowercase, without port or final dot.
fn host_name(headers: &HeaderMap) -> Option<String> {
    let host = headers.get(header::HOST)?.to_str().ok()?;
    if host.starts_with('[') {
        return None;
    }
    let name = host.rsplit_once(':').map_or(host, |(name, _)| name);
    let name = name.trim_end_matches('.').to_ascii_lowercase();
    (!name.is_empty()).then_some(name)
}

async fn by_host(
    State(ctx): State<AppState>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
) -> Response {
    let found = match host_name(&headers) {
        Some(host) => {
            let lookup = ctx.store.status_page_by_domain(&host);
            match find(&ctx, format!("host:{host}"), lookup, |_| "/".to_owned()).await {
                Ok(found) => found,
                Err(e) => return unavailable(&e),
            }
        }
        None => None,
    };
    // On any other host `/` is no page: the API's JSON 404.
    let Some(served) = found else {
        return ApiError::not_found("no status page is served for this host").into_response();
    };
    serve(&ctx, Some(served), query.as_deref(), &headers).await
}

fn html_response(status: StatusCode, body: impl Into<Body>, private: bool) -> Response {
    let cache = if private {
        "private, no-store"
    } else {
        "no-cache"
    };
    (
        status,
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, cache),
            (header::CONTENT_SECURITY_POLICY, CSP),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            (header::REFERRER_POLICY, "no-referrer"),
        ],
        body.into(),
    )
        .into_response()
}

fn unavailable(e: &StoreError) -> Response {
    tracing::error!(error = %e, "status page render failed");
    html_response(StatusCode::SERVICE_UNAVAILABLE, render::unavailable(), true)
}

fn redirect(status: StatusCode, location: &str) -> Response {
    match HeaderValue::from_str(location) {
        Ok(v) => {
            let mut r = html_response(status, String::new(), true);
            r.headers_mut().insert(header::LOCATION, v);
            r
        }
        Err(_) => html_response(StatusCode::NOT_FOUND, render::not_found(), false),
    }
}

/// The value of `key` in the query string, if any.
fn query_key(query: Option<&str>) -> Option<String> {
    url::form_urlencoded::parse(query?.as_bytes())
        .find(|(name, _)| name == "key")
        .map(|(_, v)| v.into_owned())
}

async fn serve(
    ctx: &AppState,
    served: Option<Served>,
    query: Option<&str>,
    headers: &HeaderMap,
) -> Response {
    let Some(served) = served else {
        return html_response(StatusCode::NOT_FOUND, render::not_found(), false);
    };
    let (page, path) = (&served.page, &served.path);
    if let Some(target) = page
        .settings
        .get("redirectTo")
        .and_then(serde_json::Value::as_str)
        .and_then(escape::safe_link)
    {
        return redirect(StatusCode::FOUND, target);
    }
    let private = page
        .settings
        .get("isPrivate")
        .and_then(serde_json::Value::as_bool)
        .unwrap_or(false);
    let presented = query_key(query);
    if !private {
        if presented.is_some() {
            return redirect(StatusCode::SEE_OTHER, path);
        }
        return render_page(ctx, served, false).await;
    }
    if let Some(key) = presented {
        return match access::valid(&ctx.store, page.id, &key).await {
            Ok(true) => {
                let secure = ctx.public_url.starts_with("https:");
                let mut r = redirect(StatusCode::SEE_OTHER, path);
                if let Ok(cookie) = HeaderValue::from_str(&access::set_cookie(&key, path, secure)) {
                    r.headers_mut().insert(header::SET_COOKIE, cookie);
                }
                r
            }
            Ok(false) => html_response(
                StatusCode::UNAUTHORIZED,
                render::key_form(page, path, true),
                true,
            ),
            Err(e) => unavailable(&e),
        };
    }
    match access::cookie_grants(&ctx.store, page.id, headers).await {
        Ok(true) => render_page(ctx, served, true).await,
        Ok(false) => html_response(
            StatusCode::UNAUTHORIZED,
            render::key_form(page, path, false),
            true,
        ),
        Err(e) => unavailable(&e),
    }
}

/// The page's HTML: as the cache has it, or rendered now. One render at a time per
/// page; a visitor arriving while another renders gets the latest render instead of
/// waiting (see `cache.rs`).
async fn render_page(ctx: &AppState, served: Served, private: bool) -> Response {
    if let Some(body) = served.body {
        return html_response(StatusCode::OK, body, private);
    }
    let cache = &ctx.status_pages;
    let lock = cache.render_lock(&served.address);
    let _rendering = match lock.clone().try_lock_owned() {
        Ok(guard) => guard,
        Err(_) => {
            if let Some(body) = cache.latest(&served.address, served.page.id) {
                return html_response(StatusCode::OK, body, private);
            }
            // Nothing rendered yet (or too long ago): wait for the running render.
            lock.lock_owned().await
        }
    };
    // Rendered from this lookup or a later one by the visitor this one waited for?
    if let Some(body) = cache.rendered_since(&served.address, served.serial, served.page.id) {
        return html_response(StatusCode::OK, body, private);
    }
    let page = served.page.clone();
    let queried = Instant::now();
    let incidents = ctx
        .store
        .page_incidents(&[page.id], render::INCIDENTS_SHOWN)
        .await;
    let checks = ctx
        .store
        .service_checks(page.account_id, &page.service_ids())
        .await;
    let (mut incidents, checks) = match (incidents, checks) {
        (Ok(incidents), Ok(checks)) => (incidents, checks),
        (Err(e), _) | (_, Err(e)) => return unavailable(&e),
    };
    let incidents = incidents.remove(&page.id).unwrap_or_default();
    // Building the HTML (about 0.3 ms for 200 services on an idle machine, more under
    // load) runs off the runtime's workers, so the requests they serve meanwhile do not
    // wait for it; the queries above run on sqlx's connection threads.
    let rendering = Instant::now();
    let rendered =
        tokio::task::spawn_blocking(move || render::page(&page, &incidents, &checks, Utc::now()))
            .await;
    tracing::debug!(
        page = %served.page.id,
        query_ms = (rendering - queried).as_secs_f64() * 1000.0,
        render_ms = rendering.elapsed().as_secs_f64() * 1000.0,
        "status page rendered"
    );
    let body = match rendered {
        Ok(html) => Bytes::from(html),
        Err(e) => {
            tracing::error!(error = %e, "status page render failed");
            return html_response(StatusCode::SERVICE_UNAVAILABLE, render::unavailable(), true);
        }
    };
    cache.put_body(
        &served.address,
        served.serial,
        served.page.id,
        served.at,
        body.clone(),
    );
    html_response(StatusCode::OK, body, private)
}
