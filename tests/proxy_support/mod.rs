//! Loopback peers for API checks through a private location's proxy: an in-test HTTP
//! proxy (tokio, in-process; plain, or behind TLS with a certificate of a test CA) that
//! records what it receives (CONNECT tunnels and absolute-form requests, each with its
//! `Proxy-Authorization`) and can demand credentials (407 otherwise), and HTTP and HTTPS
//! (self-signed) targets that record the requests reaching them.

#![allow(dead_code)]

use crate::tls_support;
pub use crate::tls_support::TestPki;

use std::net::SocketAddr;

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, Method, Uri};
use base64::Engine as _;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;

/// What the proxy received: one request head.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProxySeen {
    pub method: String,
    /// The request target as sent: `host:port` for CONNECT, a full URL otherwise.
    pub target: String,
    pub proxy_authorization: Option<String>,
    pub host: Option<String>,
}

struct ProxyState {
    /// The `Proxy-Authorization` value demanded, if any.
    required: Option<String>,
    seen: Mutex<Vec<ProxySeen>>,
}

/// The in-test proxy.
pub struct TestProxy {
    pub addr: SocketAddr,
    /// `https` when the proxy speaks TLS.
    pub scheme: &'static str,
    state: Arc<ProxyState>,
}

/// `Basic base64(user:password)`.
pub fn basic(user: &str, password: &str) -> String {
    let token = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
    format!("Basic {token}")
}

impl TestProxy {
    /// A plain HTTP proxy; with `required` (user, password) it answers 407 to requests
    /// without exactly those credentials.
    pub async fn start(required: Option<(&str, &str)>) -> TestProxy {
        TestProxy::spawn(required, None).await
    }

    /// A proxy spoken to over TLS, with a certificate for 127.0.0.1 and localhost
    /// signed by `pki`'s CA.
    pub async fn start_tls(required: Option<(&str, &str)>, pki: &TestPki) -> TestProxy {
        TestProxy::spawn(required, Some(pki.acceptor())).await
    }

    async fn spawn(required: Option<(&str, &str)>, tls: Option<TlsAcceptor>) -> TestProxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let state = Arc::new(ProxyState {
            required: required.map(|(u, p)| basic(u, p)),
            seen: Mutex::new(Vec::new()),
        });
        let scheme = if tls.is_some() { "https" } else { "http" };
        let shared = state.clone();
        tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let state = shared.clone();
                let tls = tls.clone();
                tokio::spawn(async move {
                    match tls {
                        Some(acceptor) => {
                            if let Ok(stream) = acceptor.accept(tcp).await {
                                serve(stream, state).await;
                            }
                        }
                        None => serve(tcp, state).await,
                    }
                });
            }
        });
        TestProxy {
            addr,
            scheme,
            state,
        }
    }

    /// The proxy's URL, with `user:password@` when given.
    pub fn url(&self, credentials: Option<(&str, &str)>) -> String {
        match credentials {
            Some((u, p)) => format!("{}://{u}:{p}@{}", self.scheme, self.addr),
            None => format!("{}://{}", self.scheme, self.addr),
        }
    }

    /// Every request head received so far, in order.
    pub fn seen(&self) -> Vec<ProxySeen> {
        self.state.seen.lock().unwrap().clone()
    }
}

/// Reads one request head; returns it with the bytes read past it.
async fn read_head<S: AsyncRead + Unpin>(stream: &mut S) -> Option<(ProxySeen, Vec<u8>, usize)> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
        let mut headers = [httparse::EMPTY_HEADER; 64];
        let mut req = httparse::Request::new(&mut headers);
        if let httparse::Status::Complete(len) = req.parse(&buf).ok()? {
            let header = |name: &str| {
                req.headers
                    .iter()
                    .find(|h| h.name.eq_ignore_ascii_case(name))
                    .map(|h| String::from_utf8_lossy(h.value).into_owned())
            };
            let seen = ProxySeen {
                method: req.method?.to_owned(),
                target: req.path?.to_owned(),
                proxy_authorization: header("proxy-authorization"),
                host: header("host"),
            };
            return Some((seen, buf, len));
        }
    }
}

/// One client connection of the proxy.
async fn serve<S>(mut client: S, state: Arc<ProxyState>)
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let Some((seen, buf, len)) = read_head(&mut client).await else {
        return;
    };
    state.seen.lock().unwrap().push(seen.clone());
    if let Some(required) = &state.required
        && seen.proxy_authorization.as_deref() != Some(required)
    {
        // A chatty proxy: the body repeats the credentials it got.
        let body = format!("refused credentials: {:?}", seen.proxy_authorization);
        let answer = format!(
            "HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic realm=\"test\"\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        let _ = client.write_all(answer.as_bytes()).await;
        let _ = client.shutdown().await;
        return;
    }
    if seen.method == "CONNECT" {
        let Ok(mut upstream) = TcpStream::connect(&seen.target).await else {
            let _ = client
                .write_all(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
                .await;
            return;
        };
        if client
            .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
            .await
            .is_err()
            || upstream.write_all(&buf[len..]).await.is_err()
        {
            return;
        }
        let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
        return;
    }
    // Absolute form: forward in origin form, without Proxy-Authorization.
    let Ok(url) = url::Url::parse(&seen.target) else {
        let _ = client
            .write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
            .await;
        return;
    };
    let upstream_addr = format!(
        "{}:{}",
        url.host_str().unwrap_or_default(),
        url.port_or_known_default().unwrap_or(80)
    );
    let Ok(mut upstream) = TcpStream::connect(&upstream_addr).await else {
        let _ = client
            .write_all(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
            .await;
        return;
    };
    let head = String::from_utf8_lossy(&buf[..len]).into_owned();
    let mut lines = head.split("\r\n");
    let _request_line = lines.next();
    let path = &url[url::Position::BeforePath..url::Position::AfterQuery];
    let mut out = format!("{} {path} HTTP/1.1\r\n", seen.method);
    for line in lines.filter(|l| !l.is_empty()) {
        if !line
            .to_ascii_lowercase()
            .starts_with("proxy-authorization:")
        {
            out.push_str(line);
            out.push_str("\r\n");
        }
    }
    out.push_str("\r\n");
    if upstream.write_all(out.as_bytes()).await.is_err()
        || upstream.write_all(&buf[len..]).await.is_err()
    {
        return;
    }
    let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
}

/// A request as a target received it.
#[derive(Debug, Clone)]
pub struct TargetSeen {
    pub method: String,
    /// The request target (origin form when it came through the proxy or directly).
    pub uri: String,
    pub headers: HeaderMap,
}

type TargetLog = Arc<Mutex<Vec<TargetSeen>>>;

/// A loopback target answering `ok` to any request, recording it.
pub struct Target {
    pub addr: SocketAddr,
    pub scheme: &'static str,
    log: TargetLog,
}

async fn record(
    State(log): State<TargetLog>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
) -> &'static str {
    log.lock().unwrap().push(TargetSeen {
        method: method.to_string(),
        uri: uri.to_string(),
        headers,
    });
    "ok"
}

impl Target {
    /// A plain HTTP target.
    pub async fn http() -> Target {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let log = TargetLog::default();
        let app = Router::new().fallback(record).with_state(log.clone());
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Target {
            addr,
            scheme: "http",
            log,
        }
    }

    /// An HTTPS target with a self-signed certificate (checks need `skipSSL`).
    pub async fn https_self_signed() -> Target {
        let log = TargetLog::default();
        let app = Router::new().fallback(record).with_state(log.clone());
        let addr = tls_support::serve(tls_support::self_signed(), app).await;
        Target {
            addr,
            scheme: "https",
            log,
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}://{}{path}", self.scheme, self.addr)
    }

    /// `host:port`.
    pub fn authority(&self) -> String {
        self.addr.to_string()
    }

    /// Every request received so far, in order.
    pub fn seen(&self) -> Vec<TargetSeen> {
        self.log.lock().unwrap().clone()
    }
}
