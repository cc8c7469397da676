//! One HTTP/1.1 request on a fresh connection, built by hand so every phase is measured:
//! DNS (hickory), TCP connect, TLS handshake (tokio-rustls), first byte (request written
//! to response head parsed, hyper's HTTP/1 client connection) and download (body read).
//!
//! With a proxy (API checks of a location with `proxyUrl`, see [`super::proxy`]) the
//! connection goes to the proxy: DNS and TCP are those of the proxy, and TCP also
//! covers TLS with an `https://` proxy and the CONNECT exchange of an `https://`
//! target, i.e. everything until a byte path to the target exists; TLS is the
//! handshake with the target inside the tunnel (none for `http://` targets, sent in
//! absolute form to the proxy).
//!
//! Nothing is spawned: hyper's connection future is driven inline next to the request.
//! What a hop has measured and received so far lives in a [`HopProgress`] owned by the
//! caller, so a run cut short by its time limit still reports the phases it got through.

use std::future::{Future, poll_fn};
use std::io;
use std::net::IpAddr;
use std::path::Path;
use std::pin::{Pin, pin};
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::header::{
    ACCEPT, CONNECTION, CONTENT_LENGTH, HOST, HeaderMap, HeaderValue, PROXY_AUTHORIZATION,
    TRANSFER_ENCODING, USER_AGENT,
};
use http::{Method, Request, StatusCode, Uri};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::ext::ReasonPhrase;
use hyper_util::rt::TokioIo;
use rustls::pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_rustls::TlsConnector;
use url::{Host, Position, Url};

use super::ExecEnvError;
use super::connect::connect_any;
use super::http_error::{FetchError, find_io_error};
use super::proxy;
use super::resolve::{AddressList, SystemResolver, literal};
use super::tls::TlsConfigs;
use crate::model::{ErrorKind, IpFamily, ProxyUrl, TimingPhases};

/// Body bytes a URL monitor counts before reading stops and the body is marked truncated.
pub const MAX_BODY_BYTES: u64 = 1024 * 1024;
/// Largest response head (status line and headers) accepted.
pub const MAX_HEAD_BYTES: usize = 64 * 1024;

/// Shared HTTP resources, built once per process: the system resolver, the two TLS
/// client configurations and the HTTP/1 connection settings.
pub struct HttpEnv {
    resolver: SystemResolver,
    tls: TlsConfigs,
    h1: hyper::client::conn::http1::Builder,
    user_agent: HeaderValue,
}

impl HttpEnv {
    /// Reads the system DNS configuration and trust store, plus the PEM bundle at
    /// `extra_ca` (the `NODE_EXTRA_CA_CERTS` file) if given. An unreadable DNS
    /// configuration is not an error (only `/etc/hosts` names resolve then); a bad CA
    /// bundle is [`ExecEnvError::CaBundle`].
    pub fn new(extra_ca: Option<&Path>) -> Result<HttpEnv, ExecEnvError> {
        let tls = TlsConfigs::new(extra_ca)?;
        let mut h1 = hyper::client::conn::http1::Builder::new();
        h1.max_header_size(MAX_HEAD_BYTES);
        let user_agent = HeaderValue::from_str(&format!("outpost/{}", crate::VERSION))
            .unwrap_or_else(|_| HeaderValue::from_static("outpost"));
        Ok(HttpEnv {
            resolver: SystemResolver::from_system(),
            tls,
            h1,
            user_agent,
        })
    }
    /// The process-wide resolver, for other executors that resolve host names.
    pub(crate) fn resolver(&self) -> &SystemResolver {
        &self.resolver
    }
}

/// The phases of one hop, in the order they happen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Dns,
    Tcp,
    Tls,
    FirstByte,
    Download,
}

/// The status line and headers of a response.
#[derive(Debug)]
pub(crate) struct ResponseHead {
    pub(crate) status: StatusCode,
    /// The reason phrase, when the server sent a non-canonical one.
    pub(crate) reason: Option<ReasonPhrase>,
    pub(crate) headers: HeaderMap,
}

/// What one hop has measured and received so far.
#[derive(Debug, Default)]
pub(crate) struct HopProgress {
    /// Finished phases in milliseconds; `total` is left to the caller.
    pub(crate) phases: TimingPhases,
    running: Option<(Phase, Instant)>,
    pub(crate) head: Option<ResponseHead>,
    /// Body bytes counted, at most [`HopOptions::max_body`].
    pub(crate) body_size: u64,
    pub(crate) body_truncated: bool,
    /// The first [`HopOptions::keep_body`] bytes of the body.
    pub(crate) body: Vec<u8>,
    /// The addresses the hop resolved (or the literal) and tried in order.
    pub(crate) addresses: AddressList,
}

impl HopProgress {
    fn begin(&mut self, phase: Phase, at: Instant) {
        self.running = Some((phase, at));
    }

    fn end(&mut self, at: Instant) {
        if let Some((phase, since)) = self.running.take() {
            self.set(phase, at.saturating_duration_since(since));
        }
    }

    fn set(&mut self, phase: Phase, took: Duration) {
        let ms = millis(took);
        match phase {
            Phase::Dns => self.phases.dns = ms,
            Phase::Tcp => self.phases.tcp = ms,
            Phase::Tls => self.phases.tls = ms,
            Phase::FirstByte => self.phases.first_byte = ms,
            Phase::Download => self.phases.download = ms,
        }
    }

    /// Gives the phase still running (the run was cut short) the time it took until `now`.
    pub(crate) fn close_running(&mut self, now: Instant) {
        self.end(now);
    }
}

/// Milliseconds with microsecond resolution.
pub(crate) fn millis(d: Duration) -> f64 {
    (d.as_secs_f64() * 1_000_000.0).round() / 1000.0
}

/// How a hop connects and how much of the answer it reads.
#[derive(Debug, Clone, Copy)]
pub(crate) struct HopOptions {
    /// The family the check pins; `None` tries IPv6 first, then IPv4.
    pub(crate) family: Option<IpFamily>,
    /// Verify the server certificate (`skipSSL: false`).
    pub(crate) verify_tls: bool,
    /// Body bytes counted before reading stops and the body is marked truncated.
    pub(crate) max_body: u64,
    /// Body bytes kept in [`HopProgress::body`] (at most `max_body`).
    pub(crate) keep_body: usize,
}

/// What a hop sends besides the default headers.
#[derive(Debug, Clone)]
pub(crate) struct HopRequest {
    pub(crate) method: Method,
    /// Sent after the defaults (Host, User-Agent, Accept, Connection: close); a name set
    /// here replaces the default of that name. Content-Length, Transfer-Encoding and
    /// Connection are ignored: the framing follows `body` and the connection is closed.
    pub(crate) headers: HeaderMap,
    pub(crate) body: Bytes,
}

impl HopRequest {
    /// A GET without a body or extra headers (what URL monitors send).
    pub(crate) fn get() -> HopRequest {
        HopRequest {
            method: Method::GET,
            headers: HeaderMap::new(),
            body: Bytes::new(),
        }
    }
}

/// Sends `request` to `url` on a fresh connection, directly or through `proxy`,
/// recording phases, head and body into `p`. On success `p.head` is set. On error `p`
/// holds whatever was measured before it.
pub(crate) async fn fetch(
    env: &HttpEnv,
    url: &Url,
    request: &HopRequest,
    opts: HopOptions,
    proxy: Option<&ProxyUrl>,
    p: &mut HopProgress,
) -> Result<(), FetchError> {
    let https = match url.scheme() {
        "http" => false,
        "https" => true,
        _ => {
            return Err(FetchError::new(
                ErrorKind::InvalidJob,
                "only http:// and https:// URLs can be checked",
            ));
        }
    };
    let (Some(host), Some(port)) = (url.host(), url.port_or_known_default()) else {
        return Err(FetchError::new(
            ErrorKind::InvalidJob,
            "the URL has no host",
        ));
    };
    let host_str = url.host_str().unwrap_or_default();
    let target = if host_str.contains(':') && !host_str.starts_with('[') {
        format!("[{host_str}]:{port}")
    } else {
        format!("{host_str}:{port}")
    };
    let hop = Hop {
        url,
        host: host.clone(),
        host_str,
        target: &target,
        https,
        opts,
    };

    let Some(proxy) = proxy else {
        p.addresses = resolve(env, host, opts.family, "the URL's host", p).await?;
        p.begin(Phase::Tcp, Instant::now());
        let tcp = connect_any(&p.addresses, port, &target).await?;
        p.end(Instant::now());
        let request = build_request(env, url, request, None)?;
        return over(env, tcp, &hop, request, p).await;
    };

    // The proxy resolves and reaches the target, so the check's ipFamily is not applied;
    // the proxy itself is reached over either family (IPv6 first).
    p.addresses = resolve(env, proxy.host(), None, "the proxy's host", p)
        .await
        .map_err(|e| FetchError::new(e.kind, format!("the location's proxy: {}", e.message)))?;
    p.begin(Phase::Tcp, Instant::now());
    let tcp = connect_any(
        &p.addresses,
        proxy.port(),
        &format!("the proxy {}", proxy.authority()),
    )
    .await?;
    if !proxy.is_tls() {
        return through(env, tcp, proxy, &hop, request, p).await;
    }
    let server_name = server_name(proxy.host(), &proxy.authority())?;
    let tls = TlsConnector::from(env.tls.verifying.clone())
        .connect(server_name, tcp)
        .await
        .map_err(|e| {
            let e = FetchError::tls(&proxy.authority(), &e);
            FetchError::new(e.kind, format!("the location's proxy: {}", e.message))
        })?;
    through(env, tls, proxy, &hop, request, p).await
}

/// What a hop is about: the target URL and how to reach it.
struct Hop<'a> {
    url: &'a Url,
    host: Host<&'a str>,
    host_str: &'a str,
    /// `host:port`, IPv6 in brackets.
    target: &'a str,
    https: bool,
    opts: HopOptions,
}

/// The addresses of `host` (`what` names it in errors), timed as the DNS phase.
async fn resolve(
    env: &HttpEnv,
    host: Host<&str>,
    family: Option<IpFamily>,
    what: &str,
    p: &mut HopProgress,
) -> Result<AddressList, FetchError> {
    match host {
        Host::Ipv4(ip) => literal(IpAddr::V4(ip), family, what),
        Host::Ipv6(ip) => literal(IpAddr::V6(ip), family, what),
        Host::Domain(name) => {
            p.begin(Phase::Dns, Instant::now());
            let found = env.resolver.lookup_for(name, family).await?;
            p.end(Instant::now());
            Ok(found)
        }
    }
}

/// The name a TLS certificate of `host` must carry.
fn server_name(host: Host<&str>, shown: &str) -> Result<ServerName<'static>, FetchError> {
    match host {
        Host::Ipv4(ip) => Ok(ServerName::IpAddress(IpAddr::V4(ip).into())),
        Host::Ipv6(ip) => Ok(ServerName::IpAddress(IpAddr::V6(ip).into())),
        Host::Domain(name) => ServerName::try_from(name.to_owned()).map_err(|_| {
            FetchError::new(
                ErrorKind::Tls,
                format!("{shown} is not a valid name for a TLS certificate"),
            )
        }),
    }
}

/// The rest of a hop on a stream to the proxy (the TCP phase still running): a tunnel
/// for an `https://` target, the request in absolute form for an `http://` one.
async fn through<S>(
    env: &HttpEnv,
    stream: S,
    proxy: &ProxyUrl,
    hop: &Hop<'_>,
    request: &HopRequest,
    p: &mut HopProgress,
) -> Result<(), FetchError>
where
    S: AsyncRead + AsyncWrite + Unpin + Send,
{
    if hop.https {
        let tunnel = proxy::open_tunnel(stream, proxy, hop.target, &env.user_agent).await?;
        p.end(Instant::now());
        let request = build_request(env, hop.url, request, None)?;
        return over(env, tunnel, hop, request, p).await;
    }
    p.end(Instant::now());
    let request = build_request(env, hop.url, request, Some(proxy))?;
    exchange(env, stream, request, hop.host_str, hop.opts, p).await?;
    match &p.head {
        Some(head) if head.status == StatusCode::PROXY_AUTHENTICATION_REQUIRED => {
            let reason = head
                .reason
                .as_ref()
                .map(|r| String::from_utf8_lossy(r.as_bytes()).into_owned())
                .or_else(|| head.status.canonical_reason().map(str::to_owned))
                .unwrap_or_default();
            Err(proxy::refused(
                &proxy.authority(),
                "request",
                hop.target,
                1,
                head.status.as_u16(),
                &proxy::quoted_reason(&reason),
            ))
        }
        _ => Ok(()),
    }
}

/// TLS with the target if it is `https://`, then the exchange, on a stream that
/// reaches the target (directly or through a tunnel).
async fn over<S>(
    env: &HttpEnv,
    stream: S,
    hop: &Hop<'_>,
    request: Request<Full<Bytes>>,
    p: &mut HopProgress,
) -> Result<(), FetchError>
where
    S: AsyncRead + AsyncWrite + Unpin + Send,
{
    if !hop.https {
        return exchange(env, stream, request, hop.host_str, hop.opts, p).await;
    }
    let server_name = server_name(hop.host.clone(), hop.host_str)?;
    let config = if hop.opts.verify_tls {
        env.tls.verifying.clone()
    } else {
        env.tls.insecure.clone()
    };
    p.begin(Phase::Tls, Instant::now());
    let tls = TlsConnector::from(config)
        .connect(server_name, stream)
        .await
        .map_err(|e| FetchError::tls(hop.host_str, &e))?;
    p.end(Instant::now());
    exchange(env, tls, request, hop.host_str, hop.opts, p).await
}

/// The HTTP/1.1 request and response on an established stream.
async fn exchange<S>(
    env: &HttpEnv,
    stream: S,
    request: Request<Full<Bytes>>,
    host: &str,
    opts: HopOptions,
    p: &mut HopProgress,
) -> Result<(), FetchError>
where
    S: AsyncRead + AsyncWrite + Unpin + Send,
{
    let base = Instant::now();
    let written = AtomicU64::new(0);
    let io = TokioIo::new(WriteClock {
        inner: stream,
        base,
        written: &written,
    });
    let (mut sender, conn) = env
        .h1
        .handshake::<_, Full<Bytes>>(io)
        .await
        .map_err(|e| FetchError::http(host, &e))?;
    p.begin(Phase::FirstByte, base);
    let response = sender.send_request(request);
    let work = async {
        let response = response.await.map_err(|e| FetchError::http(host, &e))?;
        let head_at = Instant::now();
        let written_at = base + Duration::from_nanos(written.load(Ordering::Relaxed));
        p.running = None;
        p.set(
            Phase::FirstByte,
            head_at.saturating_duration_since(written_at),
        );
        p.begin(Phase::Download, head_at);
        let (mut parts, body) = response.into_parts();
        let delimited_by_close = !parts.headers.contains_key(CONTENT_LENGTH)
            && !parts.headers.contains_key(TRANSFER_ENCODING);
        p.head = Some(ResponseHead {
            status: parts.status,
            reason: parts.extensions.remove::<ReasonPhrase>(),
            headers: parts.headers,
        });
        read_body(body, p, host, delimited_by_close, opts).await?;
        p.end(Instant::now());
        Ok(())
    };
    let outcome = drive(conn, work).await;
    drop(sender);
    outcome
}

/// The request with the default headers, the extra headers and the body. Its target
/// is in origin form (`/path?query`), or in absolute form (`http://host/path?query`,
/// never with the URL's credentials) with `Proxy-Authorization` for the proxy when
/// sent to `proxy`.
fn build_request(
    env: &HttpEnv,
    url: &Url,
    hop: &HopRequest,
    proxy: Option<&ProxyUrl>,
) -> Result<Request<Full<Bytes>>, FetchError> {
    let origin_form = &url[Position::BeforePath..Position::AfterQuery];
    let target = match proxy {
        None => std::borrow::Cow::Borrowed(origin_form),
        Some(_) => std::borrow::Cow::Owned(format!(
            "{}://{}",
            url.scheme(),
            &url[Position::BeforeHost..Position::AfterQuery]
        )),
    };
    let uri = Uri::try_from(target.as_ref()).map_err(|_| {
        FetchError::new(
            ErrorKind::InvalidJob,
            "the URL's path or query cannot be sent in an HTTP request",
        )
    })?;
    let mut request = Request::new(Full::new(hop.body.clone()));
    *request.method_mut() = hop.method.clone();
    *request.uri_mut() = uri;
    let mut headers = request_headers(env, url, hop)?;
    if let Some(auth) = proxy.map(proxy::authorization).transpose()?.flatten() {
        headers.insert(PROXY_AUTHORIZATION, auth);
    }
    *request.headers_mut() = headers;
    Ok(request)
}

/// Every header a hop sends (except the framing header hyper adds for the body): Host,
/// User-Agent, Accept and `Connection: close`, then the hop's own, which replace
/// defaults of the same name.
pub(crate) fn request_headers(
    env: &HttpEnv,
    url: &Url,
    hop: &HopRequest,
) -> Result<HeaderMap, FetchError> {
    // The Host header: host plus the port when it is not the scheme's default.
    let authority = &url[Position::BeforeHost..Position::AfterPort];
    let host = HeaderValue::from_str(authority).map_err(|_| {
        FetchError::new(
            ErrorKind::InvalidJob,
            "the URL's host cannot be sent in an HTTP request",
        )
    })?;
    let mut headers = HeaderMap::new();
    headers.insert(HOST, host);
    headers.insert(USER_AGENT, env.user_agent.clone());
    headers.insert(ACCEPT, HeaderValue::from_static("*/*"));
    for name in hop.headers.keys() {
        if matches!(name, &CONTENT_LENGTH | &TRANSFER_ENCODING | &CONNECTION) {
            continue;
        }
        headers.remove(name);
        for value in hop.headers.get_all(name) {
            headers.append(name.clone(), value.clone());
        }
    }
    headers.insert(CONNECTION, HeaderValue::from_static("close"));
    Ok(headers)
}

/// Counts body bytes up to `opts.max_body`, keeping the first `opts.keep_body`.
async fn read_body(
    mut body: Incoming,
    p: &mut HopProgress,
    host: &str,
    delimited_by_close: bool,
    opts: HopOptions,
) -> Result<(), FetchError> {
    while let Some(frame) = body.frame().await {
        match frame {
            Ok(frame) => {
                if let Some(data) = frame.data_ref() {
                    let room = opts.keep_body.saturating_sub(p.body.len());
                    p.body.extend_from_slice(&data[..data.len().min(room)]);
                    let n = data.len() as u64;
                    if p.body_size + n > opts.max_body {
                        p.body_size = opts.max_body;
                        p.body_truncated = true;
                        return Ok(());
                    }
                    p.body_size += n;
                }
            }
            Err(e) => {
                // A body that ends when the connection closes may end without a TLS
                // close_notify; many servers do that and clients accept it.
                let unclean_close =
                    find_io_error(&e).is_some_and(|io| io.kind() == io::ErrorKind::UnexpectedEof);
                if delimited_by_close && unclean_close {
                    return Ok(());
                }
                return Err(FetchError::http(host, &e));
            }
        }
    }
    Ok(())
}

/// Polls `work` to completion while driving the connection `conn` in the same task.
/// `work` is polled first so a request it queues is written in the same pass.
async fn drive<C, W>(conn: C, work: W) -> W::Output
where
    C: Future,
    W: Future,
{
    let mut conn = pin!(conn);
    let mut work = pin!(work);
    let mut conn_done = false;
    poll_fn(move |cx| {
        if let Poll::Ready(out) = work.as_mut().poll(cx) {
            return Poll::Ready(out);
        }
        if !conn_done && conn.as_mut().poll(cx).is_ready() {
            // The connection ended (cleanly or not); `work` sees the outcome now.
            conn_done = true;
            return work.as_mut().poll(cx);
        }
        Poll::Pending
    })
    .await
}

/// A stream that notes when the last write completed (nanoseconds after `base`): the
/// moment the request was written. Flushes are not marked: hyper flushes on every poll,
/// also while waiting for the response.
struct WriteClock<'a, S> {
    inner: S,
    base: Instant,
    written: &'a AtomicU64,
}

impl<S> WriteClock<'_, S> {
    fn mark(&self, poll: &Poll<io::Result<usize>>) {
        if let Poll::Ready(Ok(1..)) = poll {
            let nanos = u64::try_from(self.base.elapsed().as_nanos()).unwrap_or(u64::MAX);
            self.written.store(nanos, Ordering::Relaxed);
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for WriteClock<'_, S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for WriteClock<'_, S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let poll = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.mark(&poll);
        poll
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let poll = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.mark(&poll);
        poll
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    /// Does nothing: the exchange is over once the response is read, and the
    /// connection is then closed with a reset (see `super::connect`), not a FIN.
    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cut_short_phase_gets_its_time_so_far() {
        let mut p = HopProgress::default();
        let t0 = Instant::now();
        p.begin(Phase::Tcp, t0);
        p.close_running(t0 + Duration::from_millis(5));
        assert_eq!(p.phases.tcp, 5.0);
        assert!(p.running.is_none());
    }

    #[test]
    fn millis_keeps_microseconds() {
        assert_eq!(millis(Duration::from_micros(1234)), 1.234);
    }
}
