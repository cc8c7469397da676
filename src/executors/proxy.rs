//! API checks through the private location's HTTP proxy (`proxyUrl`, see
//! [`crate::model::proxy`]). The agent connects to the proxy (TCP, then TLS for an
//! `https://` proxy, always verified with the agent's trust store whatever the check's
//! `skipSSL`), and then:
//!
//! - for an `https://` target, asks for a tunnel (`CONNECT host:port HTTP/1.1` with
//!   `Proxy-Authorization: Basic ...` when the URL has credentials) and needs a 2xx
//!   answer; a refusal (407, 403, 502, ...) fails the run with an error naming the proxy
//!   and its status line. TLS with the target (`skipSSL` honoured) and the request run
//!   inside the tunnel as without a proxy.
//! - for an `http://` target, sends the request in absolute form (`GET http://host/path
//!   HTTP/1.1`) to the proxy, with `Proxy-Authorization`. A 407 answer is the proxy's
//!   refusal and fails the run the same way; any other answer is the target's, as the
//!   proxy relays it.
//!
//! Messages name the proxy by `host:port`, never with its credentials; the run's
//! scrubber gets the password and its basic-auth token as well.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Buf, Bytes};
use http::HeaderValue;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};

use super::http_error::FetchError;
use crate::model::{ErrorKind, ProxyUrl};
use crate::scrub::Scrubber;

/// Largest answer head to a CONNECT accepted.
const MAX_CONNECT_HEAD_BYTES: usize = 16 * 1024;
/// Most header lines in an answer to a CONNECT.
const MAX_CONNECT_HEADERS: usize = 64;
/// Longest reason phrase of a proxy's status line quoted in an error.
const MAX_QUOTED_REASON: usize = 100;

/// Adds the proxy's password, and the basic-auth token of its credentials, to `scrubber`.
pub(crate) fn add_secrets(proxy: &ProxyUrl, scrubber: &mut Scrubber) {
    if let Some((user, password)) = proxy.credentials() {
        scrubber.add_secret(&password);
        scrubber.add_basic_auth(&user, &password);
    }
}

/// The `Proxy-Authorization` header value of `proxy`, if it has credentials.
pub(crate) fn authorization(proxy: &ProxyUrl) -> Result<Option<HeaderValue>, FetchError> {
    proxy
        .basic_authorization()
        .map(|value| {
            let mut value = HeaderValue::from_str(&value).map_err(|_| {
                FetchError::new(
                    ErrorKind::InvalidJob,
                    "the location's proxy credentials cannot be sent in a header",
                )
            })?;
            value.set_sensitive(true);
            Ok(value)
        })
        .transpose()
}

/// Asks the proxy at the other end of `stream` for a tunnel to `target` (`host:port`)
/// and returns the stream once the proxy answered 2xx; bytes the proxy sent after its
/// answer are read first from the returned stream.
pub(crate) async fn open_tunnel<S>(
    mut stream: S,
    proxy: &ProxyUrl,
    target: &str,
    user_agent: &HeaderValue,
) -> Result<Tunnel<S>, FetchError>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let name = proxy.authority();
    let mut head = format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n").into_bytes();
    head.extend_from_slice(b"User-Agent: ");
    head.extend_from_slice(user_agent.as_bytes());
    head.extend_from_slice(b"\r\n");
    if let Some(auth) = authorization(proxy)? {
        head.extend_from_slice(b"Proxy-Authorization: ");
        head.extend_from_slice(auth.as_bytes());
        head.extend_from_slice(b"\r\n");
    }
    head.extend_from_slice(b"\r\n");
    let io_error = |e: io::Error| exchange_error(&name, target, &e);
    stream.write_all(&head).await.map_err(io_error)?;
    stream.flush().await.map_err(io_error)?;

    let mut buf: Vec<u8> = Vec::with_capacity(512);
    let mut chunk = [0u8; 2048];
    loop {
        let n = stream.read(&mut chunk).await.map_err(io_error)?;
        if n == 0 {
            return Err(FetchError::new(
                ErrorKind::Connect,
                format!(
                    "the proxy {name} closed the connection before answering the tunnel request to {target}"
                ),
            ));
        }
        buf.extend_from_slice(&chunk[..n]);
        let mut headers = [httparse::EMPTY_HEADER; MAX_CONNECT_HEADERS];
        let mut answer = httparse::Response::new(&mut headers);
        match answer.parse(&buf) {
            Ok(httparse::Status::Complete(len)) => {
                let code = answer.code.unwrap_or(0);
                if !(200..300).contains(&code) {
                    let version = answer.version.unwrap_or(1);
                    let reason = quoted_reason(answer.reason.unwrap_or_default());
                    return Err(refused(&name, "tunnel", target, version, code, &reason));
                }
                let rest = Bytes::copy_from_slice(&buf[len..]);
                return Ok(Tunnel {
                    pending: rest,
                    inner: stream,
                });
            }
            Ok(httparse::Status::Partial) if buf.len() < MAX_CONNECT_HEAD_BYTES => {}
            Ok(httparse::Status::Partial) => {
                return Err(FetchError::protocol(format!(
                    "the proxy {name} answered the tunnel request to {target} with a head larger than {MAX_CONNECT_HEAD_BYTES} bytes"
                )));
            }
            Err(e) => {
                return Err(FetchError::protocol(format!(
                    "the proxy {name} sent an invalid answer to the tunnel request to {target} ({e})"
                )));
            }
        }
    }
}

/// The error of a proxy's refusal: `what` (`tunnel` or `request`) to `target`, with the
/// status line.
pub(crate) fn refused(
    proxy: &str,
    what: &str,
    target: &str,
    version: u8,
    code: u16,
    reason: &str,
) -> FetchError {
    let line = if reason.is_empty() {
        format!("HTTP/1.{version} {code}")
    } else {
        format!("HTTP/1.{version} {code} {reason}")
    };
    FetchError::new(
        ErrorKind::Connect,
        format!("the proxy {proxy} refused the {what} to {target}: {line}"),
    )
}

/// A proxy's reason phrase as quoted in an error: printable ASCII, bounded.
pub(crate) fn quoted_reason(reason: &str) -> String {
    reason
        .chars()
        .filter(|c| c.is_ascii_graphic() || *c == ' ')
        .take(MAX_QUOTED_REASON)
        .collect::<String>()
        .trim()
        .to_owned()
}

fn exchange_error(proxy: &str, target: &str, error: &io::Error) -> FetchError {
    let why = match error.kind() {
        io::ErrorKind::ConnectionReset => "the connection was reset".to_owned(),
        io::ErrorKind::BrokenPipe => "the connection was closed".to_owned(),
        io::ErrorKind::UnexpectedEof => "the connection was closed early".to_owned(),
        _ => error.to_string(),
    };
    FetchError::new(
        ErrorKind::Connect,
        format!("the tunnel request to {target} through the proxy {proxy} failed: {why}"),
    )
}

/// A stream through an open tunnel: what the proxy sent past its answer comes first.
pub(crate) struct Tunnel<S> {
    pending: Bytes,
    inner: S,
}

impl<S: AsyncRead + Unpin> AsyncRead for Tunnel<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if !self.pending.is_empty() {
            let n = self.pending.len().min(buf.remaining());
            buf.put_slice(&self.pending[..n]);
            self.pending.advance(n);
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Tunnel<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn proxy() -> ProxyUrl {
        ProxyUrl::parse("http://user:s3cret@proxy.test:3128").unwrap()
    }

    /// Runs `open_tunnel` against a peer that answers `answer` and returns the outcome
    /// and the request the peer read.
    async fn tunnel_with(answer: &'static [u8]) -> (Result<Vec<u8>, FetchError>, Vec<u8>) {
        let (client, mut server) = tokio::io::duplex(64 * 1024);
        let peer = tokio::spawn(async move {
            let mut request = Vec::new();
            let mut byte = [0u8; 1];
            while !request.ends_with(b"\r\n\r\n") {
                if server.read(&mut byte).await.unwrap() == 0 {
                    break;
                }
                request.push(byte[0]);
            }
            server.write_all(answer).await.unwrap();
            server.shutdown().await.unwrap();
            request
        });
        let ua = HeaderValue::from_static("outpost/test");
        let outcome = match open_tunnel(client, &proxy(), "target.test:443", &ua).await {
            Ok(mut tunnel) => {
                let mut rest = Vec::new();
                tunnel.read_to_end(&mut rest).await.unwrap();
                Ok(rest)
            }
            Err(e) => Err(e),
        };
        (outcome, peer.await.unwrap())
    }

    #[tokio::test]
    async fn a_tunnel_is_asked_with_credentials_and_keeps_early_bytes() {
        let (outcome, request) =
            tunnel_with(b"HTTP/1.1 200 Connection established\r\n\r\nearly").await;
        assert_eq!(outcome.unwrap(), b"early");
        let request = String::from_utf8(request).unwrap();
        assert!(
            request.starts_with("CONNECT target.test:443 HTTP/1.1\r\nHost: target.test:443\r\n"),
            "{request}"
        );
        // base64("user:s3cret")
        assert!(
            request.contains("\r\nProxy-Authorization: Basic dXNlcjpzM2NyZXQ=\r\n"),
            "{request}"
        );
    }

    #[tokio::test]
    async fn a_refusal_names_the_proxy_and_its_status_line_only() {
        let (outcome, _) =
            tunnel_with(b"HTTP/1.1 407 Proxy Authentication Required\r\nContent-Length: 0\r\n\r\n")
                .await;
        let e = outcome.unwrap_err();
        assert_eq!(e.kind, ErrorKind::Connect);
        assert_eq!(
            e.message,
            "the proxy proxy.test:3128 refused the tunnel to target.test:443: HTTP/1.1 407 Proxy Authentication Required"
        );
        assert!(!e.message.contains("s3cret"));
        let (outcome, _) = tunnel_with(b"HTTP/1.0 502\r\n\r\n").await;
        assert!(
            outcome.unwrap_err().message.ends_with(": HTTP/1.0 502"),
            "no reason phrase"
        );
    }

    #[tokio::test]
    async fn garbage_and_silence_are_errors() {
        let (outcome, _) = tunnel_with(b"SSH-2.0-OpenSSH\r\n\r\n").await;
        assert_eq!(outcome.unwrap_err().kind, ErrorKind::Protocol);
        let (outcome, _) = tunnel_with(b"").await;
        let e = outcome.unwrap_err();
        assert!(e.message.contains("closed the connection"), "{}", e.message);
    }

    #[test]
    fn reasons_are_bounded_and_printable() {
        assert_eq!(quoted_reason("Bad\u{7}\nGateway "), "BadGateway");
        assert_eq!(quoted_reason(&"x".repeat(500)).len(), MAX_QUOTED_REASON);
    }

    #[test]
    fn the_scrubber_learns_the_password_and_token() {
        let mut scrubber = Scrubber::default();
        add_secrets(&proxy(), &mut scrubber);
        assert_eq!(scrubber.scrub("s3cret dXNlcjpzM2NyZXQ="), "***** *****");
    }
}
