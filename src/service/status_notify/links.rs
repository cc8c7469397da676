//! The links in mail to subscribers: the page, and the confirmation and unsubscribe
//! links with their tokens. A token is 256 random bits (`keys::generate`) used in
//! exactly one mail; only its SHA-256 is stored (`Store::add_subscription_tokens`).
//! Links are on the service's public URL (also for pages with a custom domain, which is
//! served over plain HTTP only).

use uuid::Uuid;

use crate::service::keys::{self, SUBSCRIPTION_UNSUBSCRIBE_PREFIX, SUBSCRIPTION_VERIFY_PREFIX};
use crate::service::store::{NewToken, StatusPage, TokenPurpose};

/// Route of confirmation links (`?token=`), served by `status_html`.
pub const CONFIRM_ROUTE: &str = "/status/{url}/subscriptions/confirm";
/// Route of unsubscribe links (`?token=`; GET, and POST for one-click unsubscribe).
pub const UNSUBSCRIBE_ROUTE: &str = "/status/{url}/subscriptions/unsubscribe";

/// Where a status page is read: `https://<custom domain>/` when it has one, else
/// `<public url>/status/<url>` (the path the page server is to answer on).
pub fn page_link(public_url: &str, page: &StatusPage) -> String {
    match page.custom_domain.as_deref().filter(|d| !d.is_empty()) {
        Some(domain) => format!("https://{domain}/"),
        None => format!(
            "{}/status/{}",
            public_url.trim_end_matches('/'),
            path_segment(&page.url)
        ),
    }
}

/// `route` for `page` on `public_url`, with `token`.
fn token_link(public_url: &str, route: &str, page: &StatusPage, token: &str) -> String {
    format!(
        "{}{}?token={token}",
        public_url.trim_end_matches('/'),
        route.replace("{url}", &path_segment(&page.url))
    )
}

/// The confirmation link of a VERIFY token.
pub fn confirm_link(public_url: &str, page: &StatusPage, token: &str) -> String {
    token_link(public_url, CONFIRM_ROUTE, page, token)
}

/// The unsubscribe link of an UNSUBSCRIBE token.
pub fn unsubscribe_link(public_url: &str, page: &StatusPage, token: &str) -> String {
    token_link(public_url, UNSUBSCRIBE_ROUTE, page, token)
}

/// The prefix of tokens for `purpose`.
pub fn prefix(purpose: TokenPurpose) -> &'static str {
    match purpose {
        TokenPurpose::Verify => SUBSCRIPTION_VERIFY_PREFIX,
        TokenPurpose::Unsubscribe => SUBSCRIPTION_UNSUBSCRIBE_PREFIX,
    }
}

/// Whether `token` has the shape of a token for `purpose` (prefix and 64 hex digits),
/// checked before anything is looked up.
pub fn well_formed(token: &str, purpose: TokenPurpose) -> bool {
    token
        .strip_prefix(prefix(purpose))
        .is_some_and(|hex| hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// The hex SHA-256 of a token, as stored.
pub fn token_hash(token: &str) -> String {
    hex::encode(keys::hash(token))
}

/// A fresh token: the plaintext for the mail, the row to store.
pub struct Issued {
    pub token: String,
    pub row: NewToken,
}

/// Issues a token of `purpose` for a subscription.
pub fn issue(subscription_id: Uuid, purpose: TokenPurpose) -> Issued {
    let key = keys::generate(prefix(purpose));
    Issued {
        row: NewToken {
            subscription_id,
            purpose,
            hash_hex: hex::encode(&key.hash),
        },
        token: key.plaintext,
    }
}

/// Percent-encodes what is not safe in one path segment.
fn path_segment(segment: &str) -> String {
    let mut out = String::with_capacity(segment.len());
    for b in segment.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_random_prefixed_and_stored_hashed() {
        let id = Uuid::new_v4();
        let a = issue(id, TokenPurpose::Verify);
        let b = issue(id, TokenPurpose::Verify);
        assert_ne!(a.token, b.token);
        assert!(well_formed(&a.token, TokenPurpose::Verify));
        assert!(!well_formed(&a.token, TokenPurpose::Unsubscribe));
        assert_eq!(a.row.hash_hex, token_hash(&a.token));
        assert!(!a.row.hash_hex.contains(&a.token[4..]));
        let u = issue(id, TokenPurpose::Unsubscribe);
        assert!(u.token.starts_with("osu_") && well_formed(&u.token, TokenPurpose::Unsubscribe));
        for bad in [
            "",
            "osv_",
            "osv_xyz",
            &format!("{}0", a.token),
            &a.token.replace("osv_", "ops_"),
        ] {
            assert!(!well_formed(bad, TokenPurpose::Verify), "{bad}");
        }
    }
}
