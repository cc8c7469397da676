//! The URL monitor executor against real peers on loopback: an axum HTTP server, the same
//! router behind tokio-rustls (a private test CA and a self-signed certificate, both
//! made with rcgen), and raw TCP peers that misbehave (never answer, send garbage, hang
//! up mid-body).

mod tls_support;

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use axum::Router;
use axum::extract::Path as UrlPath;
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use outpost::executors::timed_http::MAX_BODY_BYTES;
use outpost::executors::url::{MAX_HEADERS, MAX_REDIRECTS};
use outpost::executors::{ExecEnv, ExecEnvError, run_check};
use outpost::model::{CheckSpec, Comparison, ErrorKind, RunResult, RunStatus};

// ---------------------------------------------------------------- peers

fn router() -> Router {
    Router::new()
        .route("/ok", get(|| async { "hello" }))
        .route("/status/{code}", get(status))
        .route("/redirect-chain/{n}", get(redirect_chain))
        .route(
            "/redirect-loop",
            get(|| async { redirect("/redirect-loop") }),
        )
        .route(
            "/big",
            get(|| async { vec![b'x'; 2 * MAX_BODY_BYTES as usize] }),
        )
        .route("/many-headers", get(many_headers))
        .route("/echo", get(echo))
}

async fn status(UrlPath(code): UrlPath<u16>) -> StatusCode {
    StatusCode::from_u16(code).unwrap()
}

fn redirect(to: &str) -> Response {
    (StatusCode::FOUND, [(header::LOCATION, to.to_owned())]).into_response()
}

/// `/redirect-chain/3` -> `2` -> `1` -> `0` (200); relative Locations.
async fn redirect_chain(UrlPath(n): UrlPath<u32>) -> Response {
    if n == 0 {
        "end of chain".into_response()
    } else {
        redirect(&(n - 1).to_string())
    }
}

async fn many_headers() -> HeaderMap {
    let mut headers = HeaderMap::new();
    for i in 0..(MAX_HEADERS + 20) {
        headers.insert(
            HeaderName::try_from(format!("x-test-{i:03}")).unwrap(),
            HeaderValue::from_static("v"),
        );
    }
    headers
}

/// Answers with the request headers the executor sent, as `x-seen-*` headers.
async fn echo(request: HeaderMap) -> HeaderMap {
    let mut out = HeaderMap::new();
    for (name, seen) in [
        ("host", "x-seen-host"),
        ("user-agent", "x-seen-user-agent"),
        ("connection", "x-seen-connection"),
    ] {
        if let Some(v) = request.get(name) {
            out.insert(seen, v.clone());
        }
    }
    out
}

async fn start_http() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router()).await.unwrap() });
    addr
}

/// A private CA, a server certificate it signed for localhost and 127.0.0.1, and the
/// CA as a PEM file (what NODE_EXTRA_CA_CERTS names), kept with its directory.
struct TestPki {
    _dir: tempfile::TempDir,
    pki: tls_support::TestPki,
}

fn test_pki() -> TestPki {
    let dir = tempfile::tempdir().unwrap();
    let pki = tls_support::TestPki::new(dir.path(), "extra-ca.pem");
    TestPki { _dir: dir, pki }
}

async fn start_https_with_test_ca(pki: &TestPki) -> SocketAddr {
    tls_support::serve(pki.pki.acceptor(), router()).await
}

async fn start_https_self_signed() -> SocketAddr {
    tls_support::serve(tls_support::self_signed(), router()).await
}

/// A TCP peer that accepts connections, reads nothing and never answers. The sockets
/// stay open for the life of the test.
async fn start_silent_peer() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            held.push(socket);
        }
    });
    addr
}

/// A TCP peer that reads the request head and answers each connection with `reply`,
/// then closes.
async fn start_raw_peer(reply: &'static [u8]) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = vec![0u8; 4096];
                let mut seen = Vec::new();
                while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
                    match socket.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => seen.extend_from_slice(&buf[..n]),
                    }
                }
                let _ = socket.write_all(reply).await;
                let _ = socket.shutdown().await;
            });
        }
    });
    addr
}

/// A loopback port with nothing listening (bound once, then released).
async fn closed_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    listener.local_addr().unwrap().port()
}

// ---------------------------------------------------------------- helpers

fn env() -> ExecEnv {
    ExecEnv::new(None).unwrap()
}

/// A URL check document with `extra` merged into its `request`, and `top` merged into
/// the document itself.
fn spec(url: &str, extra: Value, top: Value) -> CheckSpec {
    let mut doc = json!({"checkType": "URL", "name": "test", "request": {"url": url}});
    if let Value::Object(fields) = extra {
        for (k, v) in fields {
            doc["request"][k] = v;
        }
    }
    if let Value::Object(fields) = top {
        for (k, v) in fields {
            doc[k] = v;
        }
    }
    CheckSpec::from_document(&doc).unwrap()
}

async fn run(url: &str, extra: Value) -> RunResult {
    run_check(&spec(url, extra, json!({})), &env()).await
}

fn error_kind(result: &RunResult) -> Option<ErrorKind> {
    result.error.as_ref().map(|e| e.kind)
}

fn status_assertion(comparison: &str, target: &str) -> Value {
    json!({"assertions": [{"source": "STATUS_CODE", "comparison": comparison, "target": target}]})
}

// ---------------------------------------------------------------- tests

#[tokio::test]
async fn http_200_passes_with_every_phase_measured() {
    let addr = start_http().await;
    let result = run(&format!("http://{addr}/ok"), json!({})).await;
    assert_eq!(result.status, RunStatus::Passed, "{result:?}");
    assert!(!result.has_errors && !result.has_failures && !result.aborted);
    let phases = result.timing_phases.unwrap();
    assert_eq!(phases.dns, 0.0, "an IP literal needs no resolution");
    assert!(phases.tcp > 0.0);
    assert_eq!(phases.tls, 0.0, "plain http has no handshake");
    assert!(phases.first_byte > 0.0);
    assert!(phases.download >= 0.0);
    assert!(phases.total >= phases.tcp + phases.first_byte + phases.download);
    assert_eq!(result.response_time, Some(phases.total));
    let response = result.response.unwrap();
    assert_eq!(response.status, 200);
    assert_eq!(response.status_text, "OK");
    assert_eq!(response.url, format!("http://{addr}/ok"));
    assert_eq!(response.body_size, 5);
    assert!(!response.body_truncated);
    assert!(response.body.is_none());
    assert!(response.redirects.is_empty());
}

#[tokio::test]
async fn request_carries_host_user_agent_and_connection_close() {
    let addr = start_http().await;
    let result = run(&format!("http://localhost:{}/echo", addr.port()), json!({})).await;
    assert_eq!(result.status, RunStatus::Passed, "{result:?}");
    let headers = result.response.unwrap().headers;
    assert_eq!(headers["x-seen-host"], format!("localhost:{}", addr.port()));
    assert_eq!(
        headers["x-seen-user-agent"],
        format!("outpost/{}", outpost::VERSION)
    );
    assert_eq!(headers["x-seen-connection"], "close");
}

#[tokio::test]
async fn localhost_is_resolved_through_the_system_configuration() {
    let addr = start_http().await;
    let result = run(&format!("http://localhost:{}/ok", addr.port()), json!({})).await;
    assert_eq!(result.status, RunStatus::Passed, "{result:?}");
    assert!(result.timing_phases.unwrap().dns >= 0.0);
}

#[tokio::test]
async fn status_500_without_assertions_fails() {
    let addr = start_http().await;
    let result = run(&format!("http://{addr}/status/500"), json!({})).await;
    assert_eq!(result.status, RunStatus::Failed);
    assert!(result.has_failures);
    assert!(!result.has_errors, "a 500 is an answer, not an error");
    assert_eq!(result.response.unwrap().status, 500);
    assert!(result.timing_phases.is_some());
}

#[tokio::test]
async fn status_404_without_assertions_fails_but_302_unfollowed_passes() {
    let addr = start_http().await;
    let result = run(&format!("http://{addr}/status/404"), json!({})).await;
    assert_eq!(result.status, RunStatus::Failed);
    let result = run(
        &format!("http://{addr}/redirect-chain/1"),
        json!({"followRedirects": false}),
    )
    .await;
    assert_eq!(result.status, RunStatus::Passed, "{result:?}");
}

#[tokio::test]
async fn equals_200_against_404_fails_the_assertion() {
    let addr = start_http().await;
    let result = run(
        &format!("http://{addr}/status/404"),
        status_assertion("EQUALS", "200"),
    )
    .await;
    assert_eq!(result.status, RunStatus::Failed);
    assert!(result.has_failures);
    assert_eq!(result.assertions.len(), 1);
    let a = &result.assertions[0];
    assert_eq!(a.comparison, Comparison::Equals);
    assert_eq!(a.target, "200");
    assert_eq!(a.actual.as_deref(), Some("404"));
    assert!(!a.passed);
}

#[tokio::test]
async fn each_comparison_true_and_false() {
    let addr = start_http().await;
    let url = format!("http://{addr}/status/404");
    // (comparison, target, expected verdict against 404)
    let cases = [
        ("EQUALS", "404", true),
        ("EQUALS", "200", false),
        ("NOT_EQUALS", "200", true),
        ("NOT_EQUALS", "404", false),
        ("LESS_THAN", "500", true),
        ("LESS_THAN", "404", false),
        ("GREATER_THAN", "400", true),
        ("GREATER_THAN", "404", false),
    ];
    for (comparison, target, expected) in cases {
        let result = run(&url, status_assertion(comparison, target)).await;
        assert_eq!(
            result.assertions[0].passed, expected,
            "{comparison} {target} vs 404"
        );
        let expected_status = if expected {
            RunStatus::Passed
        } else {
            RunStatus::Failed
        };
        assert_eq!(
            result.status, expected_status,
            "an assertion that passes overrides the >= 400 default ({comparison} {target})"
        );
    }
}

#[tokio::test]
async fn redirects_are_followed_and_recorded() {
    let addr = start_http().await;
    let result = run(&format!("http://{addr}/redirect-chain/3"), json!({})).await;
    assert_eq!(result.status, RunStatus::Passed, "{result:?}");
    let response = result.response.unwrap();
    assert_eq!(response.status, 200);
    assert_eq!(
        response.redirects,
        vec![
            format!("http://{addr}/redirect-chain/2"),
            format!("http://{addr}/redirect-chain/1"),
            format!("http://{addr}/redirect-chain/0"),
        ]
    );
    assert_eq!(response.url, format!("http://{addr}/redirect-chain/0"));
    assert_eq!(response.body_size, "end of chain".len() as u64);
}

#[tokio::test]
async fn redirects_are_not_followed_when_disabled() {
    let addr = start_http().await;
    let result = run(
        &format!("http://{addr}/redirect-chain/3"),
        json!({"followRedirects": false}),
    )
    .await;
    let response = result.response.unwrap();
    assert_eq!(response.status, 302);
    assert!(response.redirects.is_empty());
    assert_eq!(response.headers["location"], "2");
    assert_eq!(response.url, format!("http://{addr}/redirect-chain/3"));
}

#[tokio::test]
async fn a_redirect_loop_stops_after_the_limit() {
    let addr = start_http().await;
    let result = run(&format!("http://{addr}/redirect-loop"), json!({})).await;
    assert_eq!(result.status, RunStatus::Failed);
    assert_eq!(error_kind(&result), Some(ErrorKind::Protocol));
    let message = &result.error.as_ref().unwrap().message;
    assert!(message.contains(&MAX_REDIRECTS.to_string()), "{message}");
    assert_eq!(result.response.unwrap().redirects.len(), MAX_REDIRECTS);
}

#[tokio::test]
async fn self_signed_certificate_is_rejected_unless_skip_ssl() {
    let addr = start_https_self_signed().await;
    let url = format!("https://localhost:{}/ok", addr.port());
    let result = run(&url, json!({})).await;
    assert_eq!(result.status, RunStatus::Failed);
    assert_eq!(error_kind(&result), Some(ErrorKind::Tls));
    let message = &result.error.as_ref().unwrap().message;
    assert!(message.contains("not trusted"), "{message}");
    assert!(result.response.is_none());

    let result = run(&url, json!({"skipSSL": true})).await;
    assert_eq!(result.status, RunStatus::Passed, "{result:?}");
    let phases = result.timing_phases.unwrap();
    assert!(phases.tls > 0.0);
    assert!(phases.total >= phases.tcp + phases.tls + phases.first_byte);
}

#[tokio::test]
async fn private_ca_is_trusted_through_the_extra_bundle() {
    let pki = test_pki();
    let addr = start_https_with_test_ca(&pki).await;
    let trusting = ExecEnv::new(Some(&pki.pki.ca_pem_path)).unwrap();
    for host in ["localhost", "127.0.0.1"] {
        let url = format!("https://{host}:{}/ok", addr.port());
        let result = run_check(&spec(&url, json!({}), json!({})), &trusting).await;
        assert_eq!(result.status, RunStatus::Passed, "{host}: {result:?}");
        assert!(result.timing_phases.unwrap().tls > 0.0);
        // Without the bundle the same server is not trusted.
        let result = run(&url, json!({})).await;
        assert_eq!(error_kind(&result), Some(ErrorKind::Tls), "{host}");
    }
}

#[test]
fn a_bad_ca_bundle_path_is_refused() {
    let err = ExecEnv::new(Some(Path::new("/nonexistent/outpost-ca.pem")))
        .err()
        .expect("a missing bundle must be an error");
    assert!(matches!(err, ExecEnvError::CaBundle { .. }), "{err}");
}

#[tokio::test]
async fn connection_refused_is_a_connect_error() {
    let port = closed_port().await;
    let result = run(&format!("http://127.0.0.1:{port}/"), json!({})).await;
    assert_eq!(result.status, RunStatus::Failed);
    assert_eq!(error_kind(&result), Some(ErrorKind::Connect));
    assert!(result.has_errors);
    assert!(!result.aborted);
    let message = &result.error.as_ref().unwrap().message;
    assert!(message.contains("refused"), "{message}");
    assert!(result.timing_phases.is_some());
}

#[tokio::test]
async fn a_silent_server_times_out_with_the_phases_so_far() {
    let addr = start_silent_peer().await;
    let env = env().with_run_timeout(Duration::from_millis(300));
    let result = run_check(
        &spec(&format!("http://{addr}/"), json!({}), json!({})),
        &env,
    )
    .await;
    assert_eq!(result.status, RunStatus::Failed);
    assert_eq!(error_kind(&result), Some(ErrorKind::Timeout));
    assert!(result.aborted);
    let phases = result.timing_phases.unwrap();
    assert!(phases.tcp > 0.0, "the connect finished before the limit");
    assert!(
        phases.first_byte > 0.0,
        "the wait for the answer is reported"
    );
    assert!(phases.total >= phases.first_byte);
    assert!(result.response.is_none());
}

#[tokio::test]
async fn garbage_instead_of_http_is_a_protocol_error() {
    let addr = start_raw_peer(b"SSH-2.0-OpenSSH_9.6\r\n\r\n").await;
    let result = run(&format!("http://{addr}/"), json!({})).await;
    assert_eq!(error_kind(&result), Some(ErrorKind::Protocol), "{result:?}");
}

#[tokio::test]
async fn a_body_cut_short_is_a_protocol_error_with_the_head_kept() {
    let addr =
        start_raw_peer(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly twenty bytes...").await;
    let result = run(&format!("http://{addr}/"), json!({})).await;
    assert_eq!(error_kind(&result), Some(ErrorKind::Protocol), "{result:?}");
    let response = result.response.unwrap();
    assert_eq!(response.status, 200);
    assert_eq!(response.body_size, 20);
}

#[tokio::test]
async fn a_body_delimited_by_close_is_read_to_the_end() {
    let addr = start_raw_peer(b"HTTP/1.1 200 Fine Thanks\r\n\r\nbody until close").await;
    let result = run(&format!("http://{addr}/"), json!({})).await;
    assert_eq!(result.status, RunStatus::Passed, "{result:?}");
    let response = result.response.unwrap();
    assert_eq!(response.status_text, "Fine Thanks");
    assert_eq!(response.body_size, "body until close".len() as u64);
}

#[tokio::test]
async fn ipv6_family_connects_over_ipv6() {
    let Ok(listener) = TcpListener::bind("[::1]:0").await else {
        eprintln!("skipping: cannot bind [::1] on this machine");
        return;
    };
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move { axum::serve(listener, router()).await.unwrap() });

    for url in [
        format!("http://[::1]:{port}/ok"),
        format!("http://localhost:{port}/ok"),
    ] {
        let result = run(&url, json!({"ipFamily": "IPv6"})).await;
        assert_eq!(result.status, RunStatus::Passed, "{url}: {result:?}");
    }
    // A check pinned to IPv4 cannot reach an IPv6 literal; one that pins no family can.
    let result = run(
        &format!("http://[::1]:{port}/ok"),
        json!({"ipFamily": "IPv4"}),
    )
    .await;
    assert_eq!(error_kind(&result), Some(ErrorKind::Dns));
    let result = run(&format!("http://[::1]:{port}/ok"), json!({})).await;
    assert_eq!(result.status, RunStatus::Passed, "{result:?}");
}

#[tokio::test]
async fn ip_family_selects_the_address_family() {
    // An IPv4-only listener: localhost over IPv4 reaches it, localhost over IPv6 is ::1,
    // where nothing listens on that port.
    let addr = start_http().await;
    let port = addr.port();
    let result = run(
        &format!("http://localhost:{port}/ok"),
        json!({"ipFamily": "IPv4"}),
    )
    .await;
    assert_eq!(result.status, RunStatus::Passed, "{result:?}");
    let result = run(
        &format!("http://localhost:{port}/ok"),
        json!({"ipFamily": "IPv6"}),
    )
    .await;
    assert_eq!(error_kind(&result), Some(ErrorKind::Connect), "{result:?}");
    let result = run(
        &format!("http://127.0.0.1:{port}/ok"),
        json!({"ipFamily": "IPv6"}),
    )
    .await;
    assert_eq!(error_kind(&result), Some(ErrorKind::Dns));
    // No family pinned: ::1 comes first and refuses, then 127.0.0.1 answers.
    let result = run(&format!("http://localhost:{port}/ok"), json!({})).await;
    assert_eq!(result.status, RunStatus::Passed, "{result:?}");
}

#[tokio::test]
async fn response_time_thresholds_degrade_and_fail() {
    let addr = start_http().await;
    let url = format!("http://{addr}/ok");
    let env = env();
    // Any run takes more than 0 ms.
    let degraded = run_check(
        &spec(
            &url,
            json!({}),
            json!({"degradedResponseTime": 0, "maxResponseTime": 45000}),
        ),
        &env,
    )
    .await;
    assert_eq!(degraded.status, RunStatus::Degraded, "{degraded:?}");
    assert!(degraded.is_degraded && !degraded.has_failures);

    let failed = run_check(
        &spec(
            &url,
            json!({}),
            json!({"degradedResponseTime": 0, "maxResponseTime": 0}),
        ),
        &env,
    )
    .await;
    assert_eq!(failed.status, RunStatus::Failed);
    assert!(failed.has_failures && !failed.has_errors);

    let passed = run_check(
        &spec(
            &url,
            json!({}),
            json!({"degradedResponseTime": 45000, "maxResponseTime": 45000}),
        ),
        &env,
    )
    .await;
    assert_eq!(passed.status, RunStatus::Passed);
}

#[tokio::test]
async fn a_huge_body_is_counted_up_to_the_cap() {
    let addr = start_http().await;
    let result = run(&format!("http://{addr}/big"), json!({})).await;
    assert_eq!(result.status, RunStatus::Passed, "{result:?}");
    let response = result.response.unwrap();
    assert!(response.body_truncated);
    assert_eq!(response.body_size, MAX_BODY_BYTES);
}

#[tokio::test]
async fn response_headers_are_bounded() {
    let addr = start_http().await;
    let result = run(&format!("http://{addr}/many-headers"), json!({})).await;
    assert_eq!(result.response.unwrap().headers.len(), MAX_HEADERS);
}

#[tokio::test]
async fn https_to_a_plain_http_server_is_a_tls_error() {
    let addr = start_http().await;
    let result = run(&format!("https://{addr}/ok"), json!({"skipSSL": true})).await;
    assert_eq!(error_kind(&result), Some(ErrorKind::Tls), "{result:?}");
    let message = &result.error.as_ref().unwrap().message;
    assert!(message.contains("did not answer with TLS"), "{message}");
}
