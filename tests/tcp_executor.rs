//! The TCP monitor executor against real peers on 127.0.0.1: a line echo server (one
//! line back, then close), an echo server that keeps the connection open, a banner
//! server, a silent server, a server that sends more than the response cap, and a
//! closed port.

use std::net::SocketAddr;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpListener;

use outpost::executors::tcp::MAX_RESPONSE_BYTES;
use outpost::executors::{ExecEnv, run_check};
use outpost::model::{CheckSpec, ErrorKind, RunResult, RunStatus};

// ---------------------------------------------------------------- peers

/// Accepts connections forever and hands each to `serve` on its own task.
async fn listen<F, Fut>(serve: F) -> SocketAddr
where
    F: Fn(tokio::net::TcpStream) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(serve(stream));
        }
    });
    addr
}

/// Echoes the first line back, then closes.
async fn line_echo_server() -> SocketAddr {
    listen(|stream| async move {
        let (read, mut write) = stream.into_split();
        let mut line = String::new();
        if BufReader::new(read).read_line(&mut line).await.is_ok() {
            let _ = write.write_all(line.as_bytes()).await;
        }
    })
    .await
}

/// Echoes everything and never closes first.
async fn open_echo_server() -> SocketAddr {
    listen(|mut stream| async move {
        let mut buf = [0u8; 1024];
        while let Ok(n @ 1..) = stream.read(&mut buf).await {
            if stream.write_all(&buf[..n]).await.is_err() {
                break;
            }
        }
    })
    .await
}

const BANNER: &str = "220 outpost-test ESMTP ready\r\n";

/// Sends a banner on connect, then closes.
async fn banner_server() -> SocketAddr {
    listen(|mut stream| async move {
        let _ = stream.write_all(BANNER.as_bytes()).await;
    })
    .await
}

/// Reads one line, answers `text` (maybe nothing), then closes.
async fn fixed_reply_server(text: &'static str) -> SocketAddr {
    listen(move |stream| async move {
        let (read, mut write) = stream.into_split();
        let mut line = String::new();
        if BufReader::new(read).read_line(&mut line).await.is_ok() {
            let _ = write.write_all(text.as_bytes()).await;
        }
    })
    .await
}

/// Accepts and says nothing, holding the connection open.
async fn silent_server() -> SocketAddr {
    listen(|mut stream| async move {
        let mut buf = [0u8; 64];
        while let Ok(1..) = stream.read(&mut buf).await {}
    })
    .await
}

/// Sends twice the response cap, then closes.
async fn big_server() -> SocketAddr {
    listen(|mut stream| async move {
        let _ = stream.write_all(&vec![b'x'; 2 * MAX_RESPONSE_BYTES]).await;
    })
    .await
}

/// A port nothing listens on.
async fn closed_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    listener.local_addr().unwrap().port()
}

// ---------------------------------------------------------------- helpers

fn env() -> ExecEnv {
    ExecEnv::new(None).unwrap()
}

fn tcp_check(host: &str, port: u16, extra: Value) -> CheckSpec {
    let mut request = json!({"hostname": host, "port": port});
    for (k, v) in extra.as_object().unwrap() {
        request[k] = v.clone();
    }
    CheckSpec::from_document(&json!({"checkType": "TCP", "name": "t", "request": request})).unwrap()
}

fn assertion(source: &str, comparison: &str, target: &str) -> Value {
    json!({"source": source, "comparison": comparison, "target": target})
}

async fn run(spec: &CheckSpec) -> RunResult {
    run_check(spec, &env()).await
}

fn data(result: &RunResult) -> Option<&str> {
    result.tcp.as_ref().and_then(|t| t.data.as_deref())
}

// ---------------------------------------------------------------- tests

#[tokio::test]
async fn connect_only_passes_and_reports_the_connect_time() {
    let addr = silent_server().await;
    let result = run(&tcp_check("127.0.0.1", addr.port(), json!({}))).await;
    assert_eq!(result.status, RunStatus::Passed, "{result:?}");
    assert!(!result.has_errors && !result.has_failures);
    let phases = result.timing_phases.unwrap();
    assert_eq!(phases.dns, 0.0, "an IP literal is not resolved");
    assert!(phases.tcp > 0.0);
    assert_eq!(result.response_time, Some(phases.tcp), "connect only");
    assert_eq!(phases.total, phases.tcp);
    let tcp = result.tcp.as_ref().unwrap();
    assert_eq!(tcp.address.as_deref(), Some(addr.to_string().as_str()));
    assert_eq!(tcp.bytes_sent, 0);
    assert_eq!(
        tcp.data, None,
        "nothing is read without data or a data assertion"
    );
}

#[tokio::test]
async fn data_is_sent_and_the_echo_is_asserted() {
    let addr = line_echo_server().await;
    let spec = tcp_check(
        "127.0.0.1",
        addr.port(),
        json!({"data": "ping 42\n", "assertions": [
            assertion("RESPONSE_DATA", "CONTAINS", "ping"),
            assertion("RESPONSE_DATA", "EQUALS", "ping 42\n"),
            assertion("RESPONSE_TIME", "LESS_THAN", "30000"),
        ]}),
    );
    let result = run(&spec).await;
    assert_eq!(result.status, RunStatus::Passed, "{result:?}");
    assert_eq!(data(&result), Some("ping 42\n"));
    let tcp = result.tcp.as_ref().unwrap();
    assert_eq!(tcp.bytes_sent, 8);
    assert_eq!(tcp.data_size, 8);
    assert!(!tcp.data_truncated);
    assert!(result.assertions.iter().all(|a| a.passed));
    assert_eq!(result.assertions[0].actual.as_deref(), Some("ping 42\n"));
    let phases = result.timing_phases.unwrap();
    assert_eq!(
        phases.total,
        phases.dns + phases.tcp + phases.first_byte + phases.download
    );
    assert_eq!(
        result.response_time,
        Some(phases.tcp + phases.first_byte + phases.download)
    );
}

#[tokio::test]
async fn a_false_data_assertion_fails_the_run() {
    let addr = line_echo_server().await;
    for failing in [
        assertion("RESPONSE_DATA", "CONTAINS", "pong"),
        assertion("RESPONSE_DATA", "EQUALS", "ping"),
        assertion("RESPONSE_TIME", "LESS_THAN", "0"),
    ] {
        let spec = tcp_check(
            "127.0.0.1",
            addr.port(),
            json!({"data": "ping\n", "assertions": [failing]}),
        );
        let result = run(&spec).await;
        assert_eq!(result.status, RunStatus::Failed, "{failing}: {result:?}");
        assert!(result.has_failures && !result.has_errors);
        assert!(!result.assertions[0].passed);
    }
}

/// Every comparison TCP monitors accept, once true and once false.
#[tokio::test]
async fn every_comparison_true_and_false() {
    let text = line_echo_server().await;
    let number = fixed_reply_server("42").await;
    let empty = fixed_reply_server("").await;
    let cases: [(SocketAddr, &str, &str, &str, bool); 30] = [
        (text, "RESPONSE_DATA", "EQUALS", "hello\n", true),
        (text, "RESPONSE_DATA", "EQUALS", "hello", false),
        (text, "RESPONSE_DATA", "NOT_EQUALS", "bye\n", true),
        (text, "RESPONSE_DATA", "NOT_EQUALS", "hello\n", false),
        (text, "RESPONSE_DATA", "CONTAINS", "ell", true),
        (text, "RESPONSE_DATA", "CONTAINS", "bye", false),
        (text, "RESPONSE_DATA", "NOT_CONTAINS", "bye", true),
        (text, "RESPONSE_DATA", "NOT_CONTAINS", "ell", false),
        (text, "RESPONSE_DATA", "IS_EMPTY", "", false),
        (empty, "RESPONSE_DATA", "IS_EMPTY", "", true),
        (text, "RESPONSE_DATA", "NOT_EMPTY", "", true),
        (empty, "RESPONSE_DATA", "NOT_EMPTY", "", false),
        // Not numbers: compared as strings.
        (text, "RESPONSE_DATA", "LESS_THAN", "z", true),
        (text, "RESPONSE_DATA", "LESS_THAN", "a", false),
        (text, "RESPONSE_DATA", "GREATER_THAN", "a", true),
        (text, "RESPONSE_DATA", "GREATER_THAN", "z", false),
        // Numbers: compared as numbers ("42" > "100" as strings, not as numbers).
        (number, "RESPONSE_DATA", "EQUALS", "42.0", true),
        (number, "RESPONSE_DATA", "NOT_EQUALS", "42", false),
        (number, "RESPONSE_DATA", "LESS_THAN", "100", true),
        (number, "RESPONSE_DATA", "LESS_THAN", "9", false),
        (number, "RESPONSE_DATA", "GREATER_THAN", "9", true),
        (number, "RESPONSE_DATA", "GREATER_THAN", "100", false),
        (text, "RESPONSE_TIME", "LESS_THAN", "30000", true),
        (text, "RESPONSE_TIME", "LESS_THAN", "0", false),
        (text, "RESPONSE_TIME", "GREATER_THAN", "0", true),
        (text, "RESPONSE_TIME", "GREATER_THAN", "30000", false),
        (text, "RESPONSE_TIME", "NOT_EQUALS", "-1", true),
        (text, "RESPONSE_TIME", "EQUALS", "-1", false),
        (text, "RESPONSE_TIME", "NOT_EQUALS", "30000", true),
        (text, "RESPONSE_TIME", "EQUALS", "30000", false),
    ];
    for (addr, source, comparison, target, expected) in cases {
        let spec = tcp_check(
            "127.0.0.1",
            addr.port(),
            json!({"data": "hello\n", "assertions": [assertion(source, comparison, target)]}),
        );
        let result = run(&spec).await;
        assert!(!result.has_errors, "{result:?}");
        assert_eq!(
            result.assertions[0].passed, expected,
            "{source} {comparison} {target:?} on {:?}",
            result.assertions[0].actual
        );
        let status = if expected {
            RunStatus::Passed
        } else {
            RunStatus::Failed
        };
        assert_eq!(result.status, status);
    }
}

#[tokio::test]
async fn a_banner_is_read_without_sending_anything() {
    let addr = banner_server().await;
    let spec = tcp_check(
        "127.0.0.1",
        addr.port(),
        json!({"assertions": [assertion("RESPONSE_DATA", "CONTAINS", "220 ")]}),
    );
    let result = run(&spec).await;
    assert_eq!(result.status, RunStatus::Passed, "{result:?}");
    assert_eq!(data(&result), Some(BANNER));
    assert_eq!(result.tcp.as_ref().unwrap().bytes_sent, 0);
}

#[tokio::test]
async fn reading_stops_when_the_peer_goes_quiet() {
    let addr = open_echo_server().await;
    let spec = tcp_check(
        "127.0.0.1",
        addr.port(),
        json!({"data": "still here?", "assertions": [
            assertion("RESPONSE_DATA", "EQUALS", "still here?")]}),
    );
    let result = run(&spec).await;
    assert_eq!(result.status, RunStatus::Passed, "{result:?}");
    assert_eq!(data(&result), Some("still here?"));
}

#[tokio::test]
async fn a_long_response_is_cut_at_the_cap() {
    let addr = big_server().await;
    let spec = tcp_check(
        "127.0.0.1",
        addr.port(),
        json!({"assertions": [assertion("RESPONSE_DATA", "NOT_EMPTY", "")]}),
    );
    let result = run(&spec).await;
    assert_eq!(result.status, RunStatus::Passed, "{result:?}");
    let tcp = result.tcp.as_ref().unwrap();
    assert_eq!(tcp.data_size, MAX_RESPONSE_BYTES as u64);
    assert_eq!(tcp.data.as_ref().unwrap().len(), MAX_RESPONSE_BYTES);
    assert!(tcp.data_truncated);
    assert!(result.assertions[0].actual.as_ref().unwrap().len() < MAX_RESPONSE_BYTES);
}

#[tokio::test]
async fn a_refused_port_is_a_connect_error() {
    let port = closed_port().await;
    let result = run(&tcp_check("127.0.0.1", port, json!({}))).await;
    assert_eq!(result.status, RunStatus::Failed);
    assert!(result.has_errors);
    assert!(!result.aborted);
    let error = result.error.unwrap();
    assert_eq!(error.kind, ErrorKind::Connect);
    assert!(error.message.contains("refused"), "{}", error.message);
    assert!(error.message.contains(&format!("127.0.0.1:{port}")));
}

#[tokio::test]
async fn a_peer_that_never_answers_times_out() {
    let addr = silent_server().await;
    let spec = tcp_check(
        "127.0.0.1",
        addr.port(),
        json!({"data": "hello?\n", "assertions": [assertion("RESPONSE_DATA", "NOT_EMPTY", "")]}),
    );
    let env = env().with_run_timeout(Duration::from_millis(300));
    let result = run_check(&spec, &env).await;
    assert_eq!(result.status, RunStatus::Failed);
    assert!(result.aborted);
    let error = result.error.as_ref().unwrap();
    assert_eq!(error.kind, ErrorKind::Timeout);
    assert!(error.message.contains("reading from"), "{}", error.message);
    assert!(
        result.timing_phases.unwrap().tcp > 0.0,
        "the connect is kept"
    );
    assert_eq!(result.tcp.as_ref().unwrap().bytes_sent, 7);
}

#[tokio::test]
async fn response_time_limits_degrade_and_fail() {
    let addr = line_echo_server().await;
    let mut degraded = tcp_check("127.0.0.1", addr.port(), json!({"data": "x\n"}));
    let CheckSpec::Tcp(t) = &mut degraded else {
        unreachable!()
    };
    t.degraded_response_time = Some(0.0);
    let result = run(&degraded).await;
    assert_eq!(result.status, RunStatus::Degraded, "{result:?}");
    assert!(result.is_degraded && !result.has_failures);

    let mut failed = degraded.clone();
    let CheckSpec::Tcp(t) = &mut failed else {
        unreachable!()
    };
    t.max_response_time = Some(0.0);
    let result = run(&failed).await;
    assert_eq!(result.status, RunStatus::Failed);
    assert!(result.has_failures && !result.has_errors);
}

#[tokio::test]
async fn localhost_resolves_with_hickory() {
    let addr = line_echo_server().await;
    let spec = tcp_check(
        "localhost",
        addr.port(),
        json!({"data": "hi\n", "assertions": [assertion("RESPONSE_DATA", "EQUALS", "hi\n")]}),
    );
    let result = run(&spec).await;
    assert_eq!(result.status, RunStatus::Passed, "{result:?}");
    assert_eq!(
        result.tcp.as_ref().unwrap().address.as_deref(),
        Some(addr.to_string().as_str())
    );
    // DNS time is a phase of its own, outside the response time.
    let phases = result.timing_phases.unwrap();
    assert_eq!(
        result.response_time,
        Some(phases.tcp + phases.first_byte + phases.download)
    );
    assert_eq!(phases.total, phases.dns + result.response_time.unwrap());
}

#[tokio::test]
async fn localhost_resolves_with_the_operating_systems_resolver() {
    let addr = line_echo_server().await;
    let env = env().with_os_dns_resolver(true);
    for host in ["localhost", "127.1"] {
        let spec = tcp_check(
            host,
            addr.port(),
            json!({"data": "hi\n", "assertions": [assertion("RESPONSE_DATA", "EQUALS", "hi\n")]}),
        );
        let result = run_check(&spec, &env).await;
        assert_eq!(result.status, RunStatus::Passed, "{host}: {result:?}");
        assert_eq!(
            result.tcp.as_ref().unwrap().address.as_deref(),
            Some(addr.to_string().as_str()),
            "{host}"
        );
    }
}

#[tokio::test]
async fn the_address_family_must_match_an_ip_literal() {
    let addr = silent_server().await;
    let spec = tcp_check("127.0.0.1", addr.port(), json!({"ipFamily": "IPv6"}));
    let result = run(&spec).await;
    assert_eq!(result.error.unwrap().kind, ErrorKind::Dns);
}

#[tokio::test]
async fn invalid_definitions_name_the_field() {
    for (doc, field) in [
        (
            json!({"checkType": "TCP", "request": {"hostname": "127.0.0.1"}}),
            "request.port",
        ),
        (
            json!({"checkType": "TCP", "request": {"hostname": "127.0.0.1", "port": 65536}}),
            "request.port",
        ),
        (
            json!({"checkType": "TCP", "request": {"port": 80}}),
            "request.hostname",
        ),
        (
            json!({"checkType": "TCP", "request": {"hostname": "127.0.0.1", "port": 80,
                "assertions": [{"source": "JSON_BODY", "comparison": "EQUALS"}]}}),
            "request.assertions[0].source",
        ),
    ] {
        assert_eq!(CheckSpec::from_document(&doc).unwrap_err().field, field);
    }
}
