//! Who may see a private page: a visitor holding one of the page's keys. The key comes
//! once as `?key=` (then lives in an HttpOnly, SameSite=Lax cookie scoped to the page's
//! path) and is checked against the stored hashes on every view, so deleting a key
//! locks out its holders at once.

use axum::http::HeaderMap;
use axum::http::header;

use crate::service::keys::{MAX_KEY_LEN, STATUS_PAGE_KEY_PREFIX, hash};
use crate::service::store::{Store, StoreError};
use uuid::Uuid;

/// Name of the cookie holding a page key.
pub const COOKIE: &str = "outpost_status_key";
/// Cookies with that name looked at per request (one per matching path at most).
const MAX_CANDIDATES: usize = 4;
/// How long the browser keeps the cookie (30 days).
const COOKIE_MAX_AGE_SECS: u64 = 30 * 24 * 3600;

/// Whether `key` has the shape of a status page key (so it is safe in a cookie).
pub fn well_formed(key: &str) -> bool {
    key.len() <= MAX_KEY_LEN
        && key.starts_with(STATUS_PAGE_KEY_PREFIX)
        && key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// Whether `key` is one of the page's keys.
pub async fn valid(store: &Store, page_id: Uuid, key: &str) -> Result<bool, StoreError> {
    if !well_formed(key) {
        return Ok(false);
    }
    store.status_page_key_valid(page_id, &hash(key)).await
}

/// The page keys the browser sent in its cookies.
pub fn cookie_keys(headers: &HeaderMap) -> Vec<&str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .filter(|(name, _)| *name == COOKIE)
        .map(|(_, value)| value.trim_matches('"'))
        .filter(|v| well_formed(v))
        .take(MAX_CANDIDATES)
        .collect()
}

/// Whether any key in the visitor's cookies opens the page.
pub async fn cookie_grants(
    store: &Store,
    page_id: Uuid,
    headers: &HeaderMap,
) -> Result<bool, StoreError> {
    for key in cookie_keys(headers) {
        if valid(store, page_id, key).await? {
            return Ok(true);
        }
    }
    Ok(false)
}

/// The `Set-Cookie` value for a valid, well-formed `key` on `path`.
pub fn set_cookie(key: &str, path: &str, secure: bool) -> String {
    let secure = if secure { "; Secure" } else { "" };
    format!(
        "{COOKIE}={key}; Path={path}; Max-Age={COOKIE_MAX_AGE_SECS}; HttpOnly; SameSite=Lax{secure}"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    #[test]
    fn cookies_are_read_and_shapes_checked() {
        let mut h = HeaderMap::new();
        h.append(
            header::COOKIE,
            HeaderValue::from_static("a=b; outpost_status_key=ops_abc123; x=y"),
        );
        h.append(
            header::COOKIE,
            HeaderValue::from_static("outpost_status_key=bad\"value"),
        );
        assert_eq!(cookie_keys(&h), vec!["ops_abc123"]);
        assert!(!well_formed("ops_a;b"));
        assert!(!well_formed("opk_abc"));
        assert!(set_cookie("ops_x", "/status/a", false).contains("HttpOnly; SameSite=Lax"));
    }
}
