//! API checks through a private location's proxy (`proxyUrl`), at the executor: a real
//! in-process proxy on loopback (plain and TLS, demanding credentials or not) and real
//! HTTP and HTTPS targets. `https://` targets go through a CONNECT tunnel, `http://`
//! targets in absolute form; refusals fail the run naming the proxy's status line; the
//! proxy's password shows nowhere in results (nor in the packet capture of network
//! diagnostics, which re-run a failed hop through the proxy); URL monitors ignore the
//! proxy.

mod proxy_support;
mod require_support;
mod tls_support;

use proxy_support::{ProxySeen, Target, TestPki, TestProxy, basic};
use serde_json::{Value, json};

use outpost::executors::netdiag::PCAP_ARTIFACT;
use outpost::executors::{ExecEnv, run_check_with_proxy};
use outpost::model::{CheckSpec, ErrorKind, ProxyUrl, RunResult, RunStatus};

const USER: &str = "agent";
const PASSWORD: &str = "pr0xy-pa55";

fn env() -> ExecEnv {
    ExecEnv::new(None).unwrap().with_network_diagnostics(false)
}

fn api_check(url: &str, request: Value) -> CheckSpec {
    let mut doc = json!({"checkType": "API", "name": "through the proxy",
        "request": {"method": "GET", "url": url}});
    if let Value::Object(fields) = request {
        for (k, v) in fields {
            doc["request"][k] = v;
        }
    }
    CheckSpec::from_document(&doc).unwrap_or_else(|e| panic!("{e}: {doc}"))
}

fn proxy_url(proxy: &TestProxy, password: &str) -> ProxyUrl {
    ProxyUrl::parse(&proxy.url(Some((USER, password)))).unwrap()
}

async fn run(spec: &CheckSpec, env: &ExecEnv, proxy: &ProxyUrl) -> RunResult {
    run_check_with_proxy(spec, env, Some(proxy)).await.result
}

/// The whole result as JSON text, for "shows nowhere" assertions.
fn text(result: &RunResult) -> String {
    serde_json::to_string(result).unwrap()
}

fn assert_no_password(result: &RunResult, password: &str) {
    let all = text(result);
    assert!(!all.contains(password), "password in {all}");
    let token = basic(USER, password);
    let token = token.trim_start_matches("Basic ");
    assert!(!all.contains(token.trim_end_matches('=')), "token in {all}");
}

#[tokio::test]
async fn an_https_target_is_reached_through_a_connect_tunnel_with_credentials() {
    let proxy = TestProxy::start(Some((USER, PASSWORD))).await;
    let target = Target::https_self_signed().await;
    let url = target.url("/items?x=1");
    let result = run(
        &api_check(&url, json!({"skipSSL": true})),
        &env(),
        &proxy_url(&proxy, PASSWORD),
    )
    .await;
    assert_eq!(result.status, RunStatus::Passed, "{result:?}");
    assert_eq!(
        proxy.seen(),
        [ProxySeen {
            method: "CONNECT".into(),
            target: target.authority(),
            proxy_authorization: Some(basic(USER, PASSWORD)),
            host: Some(target.authority()),
        }]
    );
    let reached = target.seen();
    assert_eq!(reached.len(), 1, "{reached:?}");
    assert_eq!(reached[0].uri, "/items?x=1");
    assert!(!reached[0].headers.contains_key("proxy-authorization"));
    let phases = result.timing_phases.unwrap();
    assert_eq!(phases.dns, 0.0, "a literal proxy address: {phases:?}");
    assert!(phases.tcp > 0.0, "connect + tunnel: {phases:?}");
    assert!(phases.tls > 0.0, "the target's handshake: {phases:?}");
    assert!(phases.total >= phases.tcp + phases.tls + phases.first_byte);
    assert_no_password(&result, PASSWORD);

    // TLS is with the target, through the tunnel: its self-signed certificate is not
    // trusted without skipSSL.
    let result = run(
        &api_check(&url, json!({})),
        &env(),
        &proxy_url(&proxy, PASSWORD),
    )
    .await;
    assert_eq!(result.status, RunStatus::Failed);
    let error = result.error.as_ref().unwrap();
    assert_eq!(error.kind, ErrorKind::Tls, "{error:?}");
    assert!(error.message.contains("not trusted"), "{}", error.message);
    assert_eq!(proxy.seen().len(), 2);
}

#[tokio::test]
async fn an_http_target_gets_the_request_in_absolute_form_with_templates_and_secrets() {
    let proxy = TestProxy::start(Some((USER, PASSWORD))).await;
    let target = Target::http().await;
    let secret = "s3rvice-t0ken";
    let env = env().with_secret_variables([("SERVICE_SECRET_TOKEN", secret)]);
    let doc = json!({"checkType": "API", "name": "templated",
    "environmentVariables": [{"key": "SEGMENT", "value": "seg"}],
    "request": {
        "method": "GET",
        "url": format!("http://{}/path/{{{{SEGMENT}}}}", target.authority()),
        "queryParameters": [{"key": "q", "value": "1"}],
        "headers": [{"key": "X-Token", "value": "{{SERVICE_SECRET_TOKEN}}"}],
        "assertions": [{"source": "TEXT_BODY", "comparison": "EQUALS", "target": "ok"}],
    }});
    let spec = CheckSpec::from_document(&doc).unwrap_or_else(|e| panic!("{e}: {doc}"));
    let result = run(&spec, &env, &proxy_url(&proxy, PASSWORD)).await;
    assert_eq!(result.status, RunStatus::Passed, "{result:?}");
    assert_eq!(
        proxy.seen(),
        [ProxySeen {
            method: "GET".into(),
            target: format!("http://{}/path/seg?q=1", target.authority()),
            proxy_authorization: Some(basic(USER, PASSWORD)),
            host: Some(target.authority()),
        }]
    );
    let reached = target.seen();
    assert_eq!(reached.len(), 1, "{reached:?}");
    assert_eq!(reached[0].uri, "/path/seg?q=1");
    assert_eq!(reached[0].headers["x-token"], secret);
    // What the result says was sent is the target's request, without the proxy's
    // header; the secret is masked.
    let request = result.request.as_ref().unwrap();
    assert!(
        !request.headers.contains_key("proxy-authorization"),
        "{request:?}"
    );
    assert_eq!(request.headers["x-token"], "*****");
    assert!(!text(&result).contains(secret));
    assert_eq!(result.timing_phases.unwrap().tls, 0.0);
    assert_no_password(&result, PASSWORD);
}

/// A failed run whose error is the proxy's 407 refusal of the `what` (tunnel or
/// request) to `target`.
fn assert_refused(result: &RunResult, proxy: &TestProxy, what: &str, target: &Target) {
    assert_eq!(result.status, RunStatus::Failed);
    let error = result.error.as_ref().unwrap();
    assert_eq!(error.kind, ErrorKind::Connect);
    assert_eq!(
        error.message,
        format!(
            "the proxy {} refused the {what} to {}: HTTP/1.1 407 Proxy Authentication Required",
            proxy.addr,
            target.authority()
        )
    );
}

#[tokio::test]
async fn a_refusing_proxy_fails_the_run_naming_its_status_line_only() {
    let wrong = "wr0ng-pa55";
    let proxy = TestProxy::start(Some((USER, PASSWORD))).await;
    let https = Target::https_self_signed().await;
    let result = run(
        &api_check(&https.url("/"), json!({"skipSSL": true})),
        &env(),
        &proxy_url(&proxy, wrong),
    )
    .await;
    assert_refused(&result, &proxy, "tunnel", &https);
    assert!(https.seen().is_empty());
    assert_no_password(&result, wrong);

    // Plain HTTP: the 407 is the proxy's answer, whose body here repeats the
    // credentials it got; they are masked in the result.
    let http = Target::http().await;
    let result = run(
        &api_check(&http.url("/"), json!({})),
        &env(),
        &proxy_url(&proxy, wrong),
    )
    .await;
    assert_refused(&result, &proxy, "request", &http);
    let body = result
        .response
        .as_ref()
        .and_then(|r| r.body.as_deref())
        .unwrap_or_default();
    assert!(body.starts_with("refused credentials: "), "{body}");
    assert!(http.seen().is_empty());
    assert_no_password(&result, wrong);
    assert_eq!(proxy.seen().len(), 2);
}

#[tokio::test]
async fn an_https_proxy_is_spoken_to_over_verified_tls() {
    let dir = tempfile::tempdir().unwrap();
    let pki = TestPki::new(dir.path(), "proxy-test-ca.pem");
    let proxy = TestProxy::start_tls(Some((USER, PASSWORD)), &pki).await;
    let url = proxy_url(&proxy, PASSWORD);
    assert!(url.is_tls());
    let trusting = ExecEnv::new(Some(&pki.ca_pem_path))
        .unwrap()
        .with_network_diagnostics(false);
    let https = Target::https_self_signed().await;
    let http = Target::http().await;
    for target in [&https, &http] {
        let result = run(
            &api_check(&target.url("/ok"), json!({"skipSSL": true})),
            &trusting,
            &url,
        )
        .await;
        assert_eq!(result.status, RunStatus::Passed, "{result:?}");
        assert_eq!(target.seen().len(), 1);
        assert_no_password(&result, PASSWORD);
    }
    let seen = proxy.seen();
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert_eq!(seen[0].method, "CONNECT");
    assert_eq!(seen[1].target, http.url("/ok"));
    assert!(
        seen.iter()
            .all(|s| s.proxy_authorization.as_deref() == Some(basic(USER, PASSWORD).as_str()))
    );

    // The proxy's certificate is checked whatever skipSSL says.
    let result = run(
        &api_check(&https.url("/ok"), json!({"skipSSL": true})),
        &env(),
        &url,
    )
    .await;
    assert_eq!(result.status, RunStatus::Failed);
    let error = result.error.as_ref().unwrap();
    assert_eq!(error.kind, ErrorKind::Tls, "{error:?}");
    assert!(
        error.message.starts_with("the location's proxy: "),
        "{}",
        error.message
    );
    assert_eq!(proxy.seen().len(), 2, "no request past a failed handshake");
}

#[tokio::test]
async fn an_unreachable_proxy_is_a_connect_error_naming_it() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let url = ProxyUrl::parse(&format!("http://{USER}:{PASSWORD}@127.0.0.1:{port}")).unwrap();
    let target = Target::http().await;
    let result = run(&api_check(&target.url("/"), json!({})), &env(), &url).await;
    assert_eq!(result.status, RunStatus::Failed);
    let error = result.error.as_ref().unwrap();
    assert_eq!(error.kind, ErrorKind::Connect);
    assert!(
        error
            .message
            .starts_with(&format!("cannot connect to the proxy 127.0.0.1:{port}: ")),
        "{}",
        error.message
    );
    assert!(target.seen().is_empty());
}

#[tokio::test]
async fn url_monitors_do_not_use_the_proxy() {
    // A proxy that refuses everyone: a URL monitor passes only if it goes direct.
    let proxy = TestProxy::start(Some((USER, PASSWORD))).await;
    let target = Target::http().await;
    let doc = json!({"checkType": "URL", "name": "direct",
        "request": {"url": target.url("/direct")}});
    let spec = CheckSpec::from_document(&doc).unwrap();
    let result = run(&spec, &env(), &proxy_url(&proxy, "not-the-password")).await;
    assert_eq!(result.status, RunStatus::Passed, "{result:?}");
    assert!(proxy.seen().is_empty(), "{:?}", proxy.seen());
    let reached = target.seen();
    assert_eq!(reached.len(), 1);
    assert_eq!(reached[0].uri, "/direct");
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|w| w == needle.as_bytes())
}

#[tokio::test]
async fn diagnostics_rerun_a_refused_tunnel_through_the_proxy_with_credentials_masked() {
    let root = std::process::Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
    if !root {
        require_support::skip(
            "diagnostics_rerun_a_refused_tunnel_through_the_proxy_with_credentials_masked: \
             needs root (NET_RAW) for the packet capture",
        );
        return;
    }
    let wrong = "diag-Wr0ng-pa55";
    let proxy = TestProxy::start(Some((USER, PASSWORD))).await;
    let target = Target::https_self_signed().await;
    let out = run_check_with_proxy(
        &api_check(&target.url("/"), json!({"skipSSL": true})),
        &ExecEnv::new(None).unwrap(),
        Some(&proxy_url(&proxy, wrong)),
    )
    .await;
    let result = &out.result;
    assert_eq!(result.error.as_ref().unwrap().kind, ErrorKind::Connect);
    let diagnostics = result.diagnostics.as_ref().unwrap();
    assert!(diagnostics.available, "{diagnostics:?}");
    assert_eq!(diagnostics.target.as_deref(), Some("127.0.0.1"));
    // The first run and the re-run both went to the proxy; the target saw neither.
    assert_eq!(proxy.seen().len(), 2, "{:?}", proxy.seen());
    assert!(target.seen().is_empty());
    let pcap = out
        .artifacts
        .iter()
        .find(|a| a.name == PCAP_ARTIFACT)
        .unwrap_or_else(|| panic!("no capture: {result:?}"));
    assert!(
        contains(
            &pcap.bytes,
            &format!("CONNECT {} HTTP/1.1", target.authority())
        ),
        "the capture holds the tunnel request"
    );
    assert!(contains(&pcap.bytes, "407 Proxy Authentication Required"));
    let token = basic(USER, wrong);
    assert!(!contains(&pcap.bytes, wrong));
    assert!(!contains(
        &pcap.bytes,
        token.trim_start_matches("Basic ").trim_end_matches('=')
    ));
    assert_no_password(result, wrong);
}
