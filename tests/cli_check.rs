//! `outpost check FILE.json`: the real binary against an in-process HTTP server on
//! loopback. Exit 0 and a PASSED result, exit 1 on a failed check, exit 2 on bad input
//! with the culprit named on stderr.

use std::net::SocketAddr;
use std::path::Path;
use std::process::Output;

use axum::Router;
use axum::body::Bytes;
use axum::http::{HeaderMap, Method, StatusCode};
use axum::routing::{any, get};
use serde_json::{Value, json};
use tokio::net::TcpListener;

async fn start_server() -> SocketAddr {
    let router = Router::new().route("/ok", get(|| async { "fine" })).route(
        "/broken",
        get(|| async { (StatusCode::INTERNAL_SERVER_ERROR, "oops") }),
    );
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    addr
}

/// A server whose `/api` answers any method with what it received, as JSON.
async fn start_api_server() -> SocketAddr {
    async fn echo(method: Method, headers: HeaderMap, body: Bytes) -> axum::Json<Value> {
        let headers: serde_json::Map<String, Value> = headers
            .iter()
            .map(|(k, v)| {
                let v = String::from_utf8_lossy(v.as_bytes()).into_owned();
                (k.as_str().to_owned(), Value::String(v))
            })
            .collect();
        axum::Json(json!({
            "method": method.as_str(),
            "headers": headers,
            "body": String::from_utf8_lossy(&body),
        }))
    }
    let router = Router::new().route("/api", any(echo));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    addr
}

/// Runs `outpost check <file>` off the async threads so the server keeps answering.
async fn outpost_check(file: &Path) -> Output {
    outpost_check_with_env(file, &[]).await
}

/// Like [`outpost_check`], with extra environment variables for the process.
async fn outpost_check_with_env(file: &Path, vars: &[(&str, &str)]) -> Output {
    let file = file.to_owned();
    let vars: Vec<(String, String)> = vars
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    tokio::task::spawn_blocking(move || {
        std::process::Command::new(env!("CARGO_BIN_EXE_outpost"))
            .arg("check")
            .arg(file)
            .env_remove("NODE_EXTRA_CA_CERTS")
            .env_remove("USE_OS_DNS_RESOLVER")
            .env("LOG_LEVEL", "WARN")
            .envs(vars)
            .output()
            .unwrap()
    })
    .await
    .unwrap()
}

fn write(dir: &tempfile::TempDir, name: &str, contents: &str) -> std::path::PathBuf {
    let path = dir.path().join(name);
    std::fs::write(&path, contents).unwrap();
    path
}

fn stdout_json(output: &Output) -> Value {
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}): {}\nstderr: {}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    })
}

#[tokio::test]
async fn a_passing_check_exits_0_with_its_result() {
    let addr = start_server().await;
    let dir = tempfile::tempdir().unwrap();
    let doc =
        json!({"checkType": "URL", "name": "ok", "request": {"url": format!("http://{addr}/ok")}});
    let output = outpost_check(&write(&dir, "ok.json", &doc.to_string())).await;
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let result = stdout_json(&output);
    assert_eq!(result["checkType"], "URL");
    assert_eq!(result["status"], "PASSED");
    assert_eq!(result["hasErrors"], false);
    assert_eq!(result["hasFailures"], false);
    assert_eq!(result["response"]["status"], 200);
    assert_eq!(result["response"]["bodySize"], 4);
    let phases = &result["timingPhases"];
    for phase in ["dns", "tcp", "tls", "firstByte", "download", "total"] {
        assert!(phases[phase].is_number(), "{phase} missing: {phases}");
    }
    assert_eq!(result["responseTime"], phases["total"]);
}

#[tokio::test]
async fn a_failing_check_exits_1_with_its_result() {
    let addr = start_server().await;
    let dir = tempfile::tempdir().unwrap();
    let doc = json!({"checkType": "URL", "request": {
        "url": format!("http://{addr}/broken"),
        "assertions": [{"source": "STATUS_CODE", "comparison": "EQUALS", "target": "200"}]
    }});
    let output = outpost_check(&write(&dir, "broken.json", &doc.to_string())).await;
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let result = stdout_json(&output);
    assert_eq!(result["status"], "FAILED");
    assert_eq!(result["hasFailures"], true);
    assert_eq!(result["response"]["status"], 500);
    assert_eq!(result["assertions"][0]["passed"], false);
    assert_eq!(result["assertions"][0]["actual"], "500");
}

#[tokio::test]
async fn an_unreachable_target_exits_1_with_a_connect_error() {
    let port = {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        l.local_addr().unwrap().port()
    };
    let dir = tempfile::tempdir().unwrap();
    let doc = json!({"checkType": "URL", "request": {"url": format!("http://127.0.0.1:{port}/")}});
    let output = outpost_check(&write(&dir, "refused.json", &doc.to_string())).await;
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let result = stdout_json(&output);
    assert_eq!(result["hasErrors"], true);
    assert_eq!(result["error"]["kind"], "CONNECT");
}

#[tokio::test]
async fn invalid_json_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let output = outpost_check(&write(&dir, "bad.json", "{\"checkType\": \"URL\",")).await;
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    assert!(output.stdout.is_empty());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("not valid JSON"), "{stderr}");
}

#[tokio::test]
async fn an_invalid_definition_exits_2_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    for (doc, field) in [
        (
            json!({"checkType": "URL", "request": {"url": "ftp://example.test/"}}),
            "request.url",
        ),
        (
            json!({"request": {"url": "http://127.0.0.1/"}}),
            "checkType",
        ),
        (
            json!({"checkType": "URL", "maxResponseTime": 99999, "request": {"url": "http://127.0.0.1/"}}),
            "maxResponseTime",
        ),
        (
            json!({"checkType": "TCP", "request": {"hostname": "127.0.0.1", "port": 70000}}),
            "request.port",
        ),
        (
            json!({"checkType": "DNS", "request": {"query": "a.test", "recordType": "PTR"}}),
            "request.recordType",
        ),
    ] {
        let output = outpost_check(&write(&dir, "invalid.json", &doc.to_string())).await;
        assert_eq!(output.status.code(), Some(2), "{doc}: {output:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(field), "{field} not named: {stderr}");
    }
}

#[tokio::test]
async fn a_missing_file_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let output = outpost_check(&dir.path().join("absent.json")).await;
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    assert!(String::from_utf8_lossy(&output.stderr).contains("cannot read"));
}

// ---------------------------------------------------------------- TCP and DNS monitors

/// Echoes one line back, then closes.
async fn start_line_echo() -> SocketAddr {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let (read, mut write) = stream.into_split();
                let mut line = String::new();
                if BufReader::new(read).read_line(&mut line).await.is_ok() {
                    let _ = write.write_all(line.as_bytes()).await;
                }
            });
        }
    });
    addr
}

/// A UDP name server on loopback that answers every query NXDOMAIN.
async fn start_nxdomain_server() -> SocketAddr {
    use hickory_server::proto::op::{Message, MessageType, ResponseCode};
    let socket = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let addr = socket.local_addr().unwrap();
    tokio::spawn(async move {
        let mut buf = vec![0u8; 1500];
        while let Ok((n, peer)) = socket.recv_from(&mut buf).await {
            let Ok(query) = Message::from_vec(&buf[..n]) else {
                continue;
            };
            let mut answer = Message::new();
            answer
                .set_id(query.id())
                .set_message_type(MessageType::Response)
                .set_op_code(query.op_code())
                .set_recursion_desired(query.recursion_desired())
                .set_response_code(ResponseCode::NXDomain)
                .add_queries(query.queries().to_vec());
            let _ = socket.send_to(&answer.to_vec().unwrap(), peer).await;
        }
    });
    addr
}

#[tokio::test]
async fn a_tcp_check_exits_0_with_the_received_data() {
    let addr = start_line_echo().await;
    let dir = tempfile::tempdir().unwrap();
    let doc = json!({"checkType": "TCP", "request": {
        "hostname": "127.0.0.1", "port": addr.port(), "data": "hello\n",
        "assertions": [{"source": "RESPONSE_DATA", "comparison": "EQUALS", "target": "hello\n"}]
    }});
    let output = outpost_check(&write(&dir, "tcp.json", &doc.to_string())).await;
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let result = stdout_json(&output);
    assert_eq!(result["checkType"], "TCP");
    assert_eq!(result["status"], "PASSED");
    assert_eq!(result["tcp"]["data"], "hello\n");
    assert_eq!(result["tcp"]["bytesSent"], 6);
    assert_eq!(result["assertions"][0]["passed"], true);
    assert!(
        result["responseTime"].as_f64().unwrap()
            <= result["timingPhases"]["total"].as_f64().unwrap()
    );
    assert!(result["timingPhases"]["tcp"].is_number());
}

/// `127.1` is an IPv4 address to getaddrinfo only: the check reaching the echo server
/// shows the variable switched TCP monitors to the operating system's resolver.
#[tokio::test]
async fn use_os_dns_resolver_switches_tcp_monitors_to_getaddrinfo() {
    let addr = start_line_echo().await;
    let dir = tempfile::tempdir().unwrap();
    let doc = json!({"checkType": "TCP", "request": {"hostname": "127.1", "port": addr.port(),
        "data": "x\n"}});
    let file = write(&dir, "os.json", &doc.to_string());
    let output = outpost_check_with_env(&file, &[("USE_OS_DNS_RESOLVER", "true")]).await;
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let result = stdout_json(&output);
    assert_eq!(result["tcp"]["address"], addr.to_string());
}

#[tokio::test]
async fn a_tcp_check_on_a_closed_port_exits_1_with_a_connect_error() {
    let port = {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        l.local_addr().unwrap().port()
    };
    let dir = tempfile::tempdir().unwrap();
    let doc = json!({"checkType": "TCP", "request": {"hostname": "127.0.0.1", "port": port}});
    let output = outpost_check(&write(&dir, "closed.json", &doc.to_string())).await;
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    assert_eq!(stdout_json(&output)["error"]["kind"], "CONNECT");
}

#[tokio::test]
async fn a_dns_check_asserts_on_the_response_code() {
    let server = start_nxdomain_server().await;
    let dir = tempfile::tempdir().unwrap();
    let request = |assertions: Value| {
        json!({"checkType": "DNS", "request": {"query": "gone.example.test", "recordType": "A",
            "nameServer": server.ip().to_string(), "port": server.port(),
            "assertions": assertions}})
    };
    let asserted = request(json!([
        {"source": "RESPONSE_CODE", "comparison": "EQUALS", "target": "NXDOMAIN"}
    ]));
    let output = outpost_check(&write(&dir, "nx.json", &asserted.to_string())).await;
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let result = stdout_json(&output);
    assert_eq!(result["checkType"], "DNS");
    assert_eq!(result["dns"]["responseCode"], "NXDOMAIN");
    assert_eq!(result["dns"]["jsonAnswer"]["Status"], "NXDOMAIN");
    assert_eq!(result["dns"]["nameServer"], server.to_string());

    let plain = request(json!([]));
    let output = outpost_check(&write(&dir, "plain.json", &plain.to_string())).await;
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let result = stdout_json(&output);
    assert_eq!(result["hasFailures"], true);
    assert_eq!(result["hasErrors"], false);
}

#[tokio::test]
async fn an_api_check_exits_0_with_its_request_and_assertions() {
    let addr = start_api_server().await;
    let dir = tempfile::tempdir().unwrap();
    let doc = json!({"checkType": "API", "name": "api", "request": {
        "method": "POST",
        "url": format!("http://{addr}/api"),
        "bodyType": "JSON",
        "body": "{\"hello\":\"world\"}",
        "queryParameters": [{"key": "q", "value": "a b"}],
        "assertions": [
            {"source": "STATUS_CODE", "comparison": "EQUALS", "target": "200"},
            {"source": "JSON_BODY", "property": "$.method", "comparison": "EQUALS", "target": "POST"},
            {"source": "JSON_BODY", "property": "$.headers.content-type", "comparison": "EQUALS",
             "target": "application/json"},
            {"source": "HEADERS", "property": "Content-Type", "comparison": "CONTAINS", "target": "json"},
        ]
    }});
    let output = outpost_check(&write(&dir, "api.json", &doc.to_string())).await;
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let result = stdout_json(&output);
    assert_eq!(result["checkType"], "API");
    assert_eq!(result["status"], "PASSED");
    assert_eq!(result["request"]["method"], "POST");
    assert_eq!(result["request"]["url"], format!("http://{addr}/api?q=a+b"));
    assert_eq!(result["request"]["body"], "{\"hello\":\"world\"}");
    assert_eq!(result["response"]["status"], 200);
    let echoed: Value = serde_json::from_str(result["response"]["body"].as_str().unwrap()).unwrap();
    assert_eq!(echoed["body"], "{\"hello\":\"world\"}");
    let assertions = result["assertions"].as_array().unwrap();
    assert_eq!(assertions.len(), 4);
    assert!(
        assertions.iter().all(|a| a["passed"] == true),
        "{assertions:?}"
    );
    assert_eq!(assertions[1]["actual"], "POST");
}

#[tokio::test]
async fn a_failing_api_assertion_exits_1() {
    let addr = start_api_server().await;
    let dir = tempfile::tempdir().unwrap();
    let doc = json!({"checkType": "API", "request": {
        "method": "GET",
        "url": format!("http://{addr}/api"),
        "assertions": [
            {"source": "JSON_BODY", "property": "$.method", "comparison": "EQUALS", "target": "PUT"},
        ]
    }});
    let output = outpost_check(&write(&dir, "api-fail.json", &doc.to_string())).await;
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let result = stdout_json(&output);
    assert_eq!(result["status"], "FAILED");
    assert_eq!(result["hasFailures"], true);
    assert_eq!(result["hasErrors"], false);
    assert_eq!(result["assertions"][0]["passed"], false);
    assert_eq!(result["assertions"][0]["actual"], "GET");
}

#[tokio::test]
async fn service_secrets_fill_placeholders_and_never_reach_stdout() {
    let addr = start_api_server().await;
    let dir = tempfile::tempdir().unwrap();
    let secret = "cli-s3cret value";
    let doc = json!({"checkType": "API", "request": {
        "method": "GET",
        "url": format!("http://{addr}/api"),
        "headers": [{"key": "X-Token", "value": "{{SERVICE_SECRET_CLI_TOKEN}}"}],
        "queryParameters": [{"key": "t", "value": "{{SERVICE_SECRET_CLI_TOKEN}}"}],
        "assertions": [
            {"source": "JSON_BODY", "property": "$.headers.x-token", "comparison": "EQUALS",
             "target": "cli-s3cret value"},
        ]
    }});
    let output = outpost_check_with_env(
        &write(&dir, "secret.json", &doc.to_string()),
        &[("SERVICE_SECRET_CLI_TOKEN", secret)],
    )
    .await;
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    for form in [secret, "cli-s3cret+value", "cli-s3cret%20value"] {
        assert!(!stdout.contains(form), "{form} leaked: {stdout}");
        assert!(!stderr.contains(form), "{form} leaked: {stderr}");
    }
    let result = stdout_json(&output);
    assert_eq!(result["assertions"][0]["passed"], true);
    assert_eq!(result["assertions"][0]["actual"], "*****");
    assert_eq!(result["assertions"][0]["target"], "*****");
    assert_eq!(result["request"]["headers"]["x-token"], "*****");
}

#[tokio::test]
async fn an_invalid_api_definition_exits_2_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    for (doc, field) in [
        (
            json!({"checkType": "API", "request": {"method": "FETCH", "url": "http://127.0.0.1/"}}),
            "request.method",
        ),
        (
            json!({"checkType": "API", "request": {"method": "GET", "url": "http://127.0.0.1/",
                "assertions": [{"source": "PACKET_LOSS", "comparison": "EQUALS"}]}}),
            "request.assertions[0].source",
        ),
        (
            json!({"checkType": "API", "request": {"method": "GET", "url": "http://127.0.0.1/",
                "assertions": [{"source": "JSON_BODY", "comparison": "EQUALS", "property": "$.a[?(@.b)]"}]}}),
            "request.assertions[0].property",
        ),
    ] {
        let output = outpost_check(&write(&dir, "invalid-api.json", &doc.to_string())).await;
        assert_eq!(output.status.code(), Some(2), "{doc}: {output:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(field), "{field} not named: {stderr}");
    }
}

// ---------------------------------------------------------------- ICMP monitors

/// Pings 127.0.0.1 with the process's own privileges: root (as in CI) pings over a raw
/// socket, anyone else where `net.ipv4.ping_group_range` admits their group; without
/// either the result must say so (tests/icmp_executor.rs covers both cases for sure).
#[tokio::test]
async fn an_icmp_check_pings_loopback() {
    let dir = tempfile::tempdir().unwrap();
    let doc = json!({"checkType": "ICMP", "name": "ping", "request": {
        "hostname": "127.0.0.1", "pingCount": 2,
        "assertions": [{"source": "PACKET_LOSS", "comparison": "EQUALS", "target": "0"}]}});
    let output = outpost_check(&write(&dir, "ping.json", &doc.to_string())).await;
    let result = stdout_json(&output);
    assert_eq!(result["checkType"], "ICMP");
    if result["error"]["kind"] == "PERMISSION" {
        assert_eq!(output.status.code(), Some(1), "{output:?}");
        let message = result["error"]["message"].as_str().unwrap();
        assert!(message.contains("net.ipv4.ping_group_range"), "{message}");
        assert!(message.contains("CAP_NET_RAW"), "{message}");
        return;
    }
    assert_eq!(output.status.code(), Some(0), "{result}");
    assert_eq!(result["status"], "PASSED");
    assert_eq!(result["icmp"]["address"], "127.0.0.1");
    assert_eq!(result["icmp"]["packetsSent"], 2);
    assert_eq!(result["icmp"]["packetsReceived"], 2);
    assert_eq!(result["responseTime"], result["icmp"]["latency"]["avg"]);
    assert_eq!(result["assertions"][0]["passed"], true);
}

#[tokio::test]
async fn an_invalid_icmp_definition_exits_2_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    for (doc, field) in [
        (
            json!({"checkType": "ICMP", "request": {"hostname": "127.0.0.1", "pingCount": 51}}),
            "request.pingCount",
        ),
        (
            json!({"checkType": "ICMP", "request": {}}),
            "request.hostname",
        ),
        (
            json!({"checkType": "ICMP", "maxPacketLossThreshold": 0,
                "request": {"hostname": "127.0.0.1"}}),
            "maxPacketLossThreshold",
        ),
        (
            json!({"checkType": "ICMP", "request": {"hostname": "127.0.0.1", "assertions": [
                {"source": "LATENCY", "property": "p99", "comparison": "LESS_THAN",
                 "target": "5"}]}}),
            "request.assertions[0].property",
        ),
    ] {
        let output = outpost_check(&write(&dir, "invalid-icmp.json", &doc.to_string())).await;
        assert_eq!(output.status.code(), Some(2), "{doc}: {output:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(field), "{field} not named: {stderr}");
    }
}
