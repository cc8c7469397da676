//! The proxy of a private location (`proxyUrl`): the HTTP proxy its agents send API
//! check requests through. One parser for both sides: the public API validates and
//! normalizes what it stores with it, the agent reads the URL handed over with each
//! leased job with it.
//!
//! Accepted: `http://[user[:password]@]host[:port][/]` and the same with `https`
//! (TLS to the proxy itself). Ports default to 80 and 443. No other path, no query, no
//! fragment; user and password are percent-encoded as in any URL.
//!
//! The password is a secret: [`ProxyUrl`]'s `Display` and `Debug` show it masked
//! (`http://user:********@proxy:3128`, the form API answers show), error messages never
//! quote the URL, and only [`ProxyUrl::expose`] gives the full text (for the store and
//! the lease answer).

use std::fmt;

use base64::Engine as _;
use percent_encoding::percent_decode_str;
use url::{Host, Url};

/// Longest `proxyUrl` accepted, in bytes.
pub const MAX_PROXY_URL_LEN: usize = 2048;
/// What the password of a proxy URL is shown as. Sent back in the same URL (same
/// scheme, user, host and port), it keeps the stored password.
pub const PROXY_PASSWORD_MASK: &str = "********";

/// Why a text is not a usable proxy URL. Messages never quote the URL (it may hold a
/// password); they complete a sentence starting with the field name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProxyUrlError {
    #[error("must be at most {MAX_PROXY_URL_LEN} bytes")]
    TooLong,
    #[error("is not a valid URL ({0}); expected http://[user:password@]host[:port]")]
    Unparsable(url::ParseError),
    #[error("must use the http:// or https:// scheme")]
    Scheme,
    #[error("must name the proxy's host")]
    NoHost,
    #[error("must have a port from 1 to 65535")]
    Port,
    #[error("must not have a path, query or fragment (only http://[user:password@]host[:port])")]
    Extra,
    #[error(
        "holds the masked password, which keeps the stored one only for the same scheme, user, host and port; send the password itself"
    )]
    MaskWithoutStored,
}

/// A validated proxy URL.
#[derive(Clone, PartialEq, Eq)]
pub struct ProxyUrl {
    /// `https`: TLS to the proxy.
    tls: bool,
    host: Host<String>,
    port: u16,
    /// Percent-encoded, as in the URL; empty without credentials.
    username: String,
    /// Percent-encoded, as in the URL.
    password: Option<String>,
}

impl ProxyUrl {
    /// Parses and validates `text`.
    pub fn parse(text: &str) -> Result<ProxyUrl, ProxyUrlError> {
        if text.len() > MAX_PROXY_URL_LEN {
            return Err(ProxyUrlError::TooLong);
        }
        let url = Url::parse(text).map_err(ProxyUrlError::Unparsable)?;
        let tls = match url.scheme() {
            "http" => false,
            "https" => true,
            _ => return Err(ProxyUrlError::Scheme),
        };
        let host = url.host().ok_or(ProxyUrlError::NoHost)?.to_owned();
        if matches!(&host, Host::Domain(d) if d.is_empty()) {
            return Err(ProxyUrlError::NoHost);
        }
        let port = url.port_or_known_default().ok_or(ProxyUrlError::Port)?;
        if port == 0 {
            return Err(ProxyUrlError::Port);
        }
        if !matches!(url.path(), "" | "/") || url.query().is_some() || url.fragment().is_some() {
            return Err(ProxyUrlError::Extra);
        }
        let proxy = ProxyUrl {
            tls,
            host,
            port,
            username: url.username().to_owned(),
            password: url.password().map(str::to_owned),
        };
        // The stored (normalized, percent-encoded) form is what is read back and handed
        // to agents: it must keep to the limit too, or a URL accepted here could not be
        // read again.
        if proxy.expose().len() > MAX_PROXY_URL_LEN {
            return Err(ProxyUrlError::TooLong);
        }
        Ok(proxy)
    }

    /// The URL with its password: for the store and the lease answer only.
    pub fn expose(&self) -> String {
        self.render(self.password.as_deref())
    }

    /// The URL as answers show it: the password (if any) replaced by
    /// [`PROXY_PASSWORD_MASK`].
    pub fn masked(&self) -> String {
        self.render(self.password.as_ref().map(|_| PROXY_PASSWORD_MASK))
    }

    fn render(&self, password: Option<&str>) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        let mut out = format!("{scheme}://");
        if !self.username.is_empty() || password.is_some() {
            out.push_str(&self.username);
            if let Some(p) = password {
                out.push(':');
                out.push_str(p);
            }
            out.push('@');
        }
        out.push_str(&self.authority_if_not_default());
        out
    }

    /// `host` or `host:port` when the port is not the scheme's default.
    fn authority_if_not_default(&self) -> String {
        if self.port == self.default_port() {
            self.host.to_string()
        } else {
            self.authority()
        }
    }

    fn default_port(&self) -> u16 {
        if self.tls { 443 } else { 80 }
    }

    /// Whether the password is the mask answers show.
    pub fn has_masked_password(&self) -> bool {
        self.password.as_deref() == Some(PROXY_PASSWORD_MASK)
    }

    /// This URL with a masked password replaced by `stored`'s, which must be the same
    /// proxy (scheme, user, host and port) and have a password. A URL without the mask
    /// is returned as it is.
    pub fn keep_password_of(self, stored: Option<&ProxyUrl>) -> Result<ProxyUrl, ProxyUrlError> {
        if !self.has_masked_password() {
            return Ok(self);
        }
        match stored {
            Some(old)
                if old.tls == self.tls
                    && old.host == self.host
                    && old.port == self.port
                    && old.username == self.username
                    && old.password.is_some() =>
            {
                Ok(ProxyUrl {
                    password: old.password.clone(),
                    ..self
                })
            }
            _ => Err(ProxyUrlError::MaskWithoutStored),
        }
    }

    /// Whether the agent speaks TLS to the proxy (`https://`).
    pub fn is_tls(&self) -> bool {
        self.tls
    }

    /// The proxy's host.
    pub fn host(&self) -> Host<&str> {
        match &self.host {
            Host::Domain(d) => Host::Domain(d.as_str()),
            Host::Ipv4(ip) => Host::Ipv4(*ip),
            Host::Ipv6(ip) => Host::Ipv6(*ip),
        }
    }

    /// The proxy's port (80 or 443 when the URL names none).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `host:port` (IPv6 in brackets), how messages name the proxy.
    pub fn authority(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }

    /// User and password, percent-decoded (invalid UTF-8 replaced); `None` without
    /// credentials.
    pub fn credentials(&self) -> Option<(String, String)> {
        if self.username.is_empty() && self.password.is_none() {
            return None;
        }
        let decode = |s: &str| percent_decode_str(s).decode_utf8_lossy().into_owned();
        Some((
            decode(&self.username),
            decode(self.password.as_deref().unwrap_or_default()),
        ))
    }

    /// The `Proxy-Authorization` value (`Basic base64(user:password)`), if the URL has
    /// credentials.
    pub fn basic_authorization(&self) -> Option<String> {
        let (user, password) = self.credentials()?;
        let token = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
        Some(format!("Basic {token}"))
    }
}

impl fmt::Display for ProxyUrl {
    /// The masked form.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.masked())
    }
}

impl fmt::Debug for ProxyUrl {
    /// The masked form: a proxy URL in a log line shows no password.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("ProxyUrl").field(&self.masked()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A URL within the limit as sent but not once normalized (userinfo characters
    /// percent-encoded three bytes each) is refused; what is accepted parses again from
    /// its stored form.
    #[test]
    fn the_stored_form_keeps_to_the_limit() {
        let expanding = format!("http://u:{}@h:1", "\"".repeat(700));
        assert!(expanding.len() < MAX_PROXY_URL_LEN);
        assert_eq!(ProxyUrl::parse(&expanding), Err(ProxyUrlError::TooLong));
        for text in [
            format!("http://u:{}@h:1", "\"".repeat(600)),
            format!("http://{}:pw@proxy.test", "é".repeat(300)),
            "https://user:p%40ss@[::1]:8443/".to_owned(),
        ] {
            let parsed = ProxyUrl::parse(&text).unwrap();
            let stored = parsed.expose();
            assert!(stored.len() <= MAX_PROXY_URL_LEN, "{}", stored.len());
            assert_eq!(ProxyUrl::parse(&stored), Ok(parsed));
        }
    }

    #[test]
    fn accepted_forms_are_normalized_and_masked() {
        for (text, exposed, masked, authority) in [
            (
                "http://proxy.example:3128",
                "http://proxy.example:3128",
                "http://proxy.example:3128",
                "proxy.example:3128",
            ),
            (
                "http://User:pa%40ss@Proxy.Example:3128/",
                "http://User:pa%40ss@proxy.example:3128",
                "http://User:********@proxy.example:3128",
                "proxy.example:3128",
            ),
            (
                "https://u:p@10.0.0.1",
                "https://u:p@10.0.0.1",
                "https://u:********@10.0.0.1",
                "10.0.0.1:443",
            ),
            (
                "http://u@[::1]:80",
                "http://u@[::1]",
                "http://u@[::1]",
                "[::1]:80",
            ),
        ] {
            let p = ProxyUrl::parse(text).unwrap();
            assert_eq!(p.expose(), exposed, "{text}");
            assert_eq!(p.masked(), masked, "{text}");
            assert_eq!(p.to_string(), masked, "{text}");
            assert_eq!(p.authority(), authority, "{text}");
            assert!(!format!("{p:?}").contains(":p@"), "{p:?}");
            assert_eq!(ProxyUrl::parse(&p.expose()).unwrap(), p, "round trip");
        }
    }

    #[test]
    fn credentials_are_decoded_for_basic_auth() {
        let p = ProxyUrl::parse("http://us%20er:pa%3Ass@h:1").unwrap();
        assert_eq!(
            p.credentials(),
            Some(("us er".to_owned(), "pa:ss".to_owned()))
        );
        // base64("us er:pa:ss")
        assert_eq!(
            p.basic_authorization().as_deref(),
            Some("Basic dXMgZXI6cGE6c3M=")
        );
        assert_eq!(ProxyUrl::parse("http://h:1").unwrap().credentials(), None);
    }

    #[test]
    fn bad_urls_are_refused_without_quoting_them() {
        for (text, error) in [
            ("socks5://u:secret@h:1080", ProxyUrlError::Scheme),
            ("ftp://h", ProxyUrlError::Scheme),
            ("proxy:3128", ProxyUrlError::Scheme),
            ("http://u:secret@h:1/path", ProxyUrlError::Extra),
            ("http://u:secret@h:1/?q", ProxyUrlError::Extra),
            ("http://u:secret@h:1#f", ProxyUrlError::Extra),
            ("http://h:0", ProxyUrlError::Port),
        ] {
            let e = ProxyUrl::parse(text).unwrap_err();
            assert_eq!(e, error, "{text}");
            assert!(!e.to_string().contains("secret"), "{e}");
        }
        for text in ["", "http://", "http://u:secret@h:99999"] {
            let e = ProxyUrl::parse(text).unwrap_err();
            assert!(matches!(e, ProxyUrlError::Unparsable(_)), "{text}: {e:?}");
            assert!(!e.to_string().contains("secret"), "{e}");
        }
        let long = format!("http://h/{}", "a".repeat(MAX_PROXY_URL_LEN));
        assert_eq!(ProxyUrl::parse(&long), Err(ProxyUrlError::TooLong));
    }

    #[test]
    fn the_mask_keeps_the_stored_password_of_the_same_proxy_only() {
        let stored = ProxyUrl::parse("http://u:secret@h:3128").unwrap();
        let back = ProxyUrl::parse(&stored.masked()).unwrap();
        assert!(back.has_masked_password());
        assert_eq!(back.keep_password_of(Some(&stored)).unwrap(), stored);
        for other in [
            "http://u:********@other:3128",
            "http://u:********@h:3129",
            "https://u:********@h:3128",
            "http://v:********@h:3128",
        ] {
            let p = ProxyUrl::parse(other).unwrap();
            assert_eq!(
                p.keep_password_of(Some(&stored)),
                Err(ProxyUrlError::MaskWithoutStored),
                "{other}"
            );
        }
        let p = ProxyUrl::parse("http://u:********@h:3128").unwrap();
        assert_eq!(
            p.keep_password_of(None),
            Err(ProxyUrlError::MaskWithoutStored)
        );
        let fresh = ProxyUrl::parse("http://u:new@other:1").unwrap();
        assert_eq!(fresh.clone().keep_password_of(Some(&stored)), Ok(fresh));
    }
}
