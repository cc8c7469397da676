//! The API check executor against real peers on loopback: an axum server that records
//! every request it receives and echoes it back as JSON, the same router behind
//! tokio-rustls with a self-signed certificate (rcgen), and fixed JSON and text answers
//! for the assertion tables.

mod tls_support;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path as UrlPath, Query, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get};
use base64::Engine as _;
use serde_json::{Value, json};
use tokio::net::TcpListener;

use outpost::executors::api::{MAX_KEPT_BODY_BYTES, MAX_READ_BODY_BYTES};
use outpost::executors::{ExecEnv, run_check};
use outpost::model::{CheckSpec, ErrorKind, RunResult, RunStatus};

// ---------------------------------------------------------------- peers

/// One request as the server received it.
#[derive(Debug, Clone)]
struct Seen {
    method: String,
    path: String,
    query: Option<String>,
    headers: HeaderMap,
    body: String,
}

impl Seen {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .get(name)
            .and_then(|v| std::str::from_utf8(v.as_bytes()).ok())
    }
}

type Log = Arc<Mutex<Vec<Seen>>>;

/// The fixed JSON document of `/json`, byte for byte.
const JSON_DOC: &str = r#"{"data":{"items":[{"id":7,"name":"alpha"},{"id":8,"name":"beta"}],"total":2,"tags":["a","b"],"empty":[],"nothing":null,"title":"Hello World","flag":true}}"#;

fn router(log: Log) -> Router {
    Router::new()
        .route("/echo", any(echo))
        .route("/echo/{*rest}", any(echo))
        .route("/json", get(json_doc))
        .route("/status/{code}", any(status))
        .route("/redirect/{code}", any(redirect))
        .route("/redirect-to", any(redirect_to))
        .route("/big-json", get(big_json))
        .route(
            "/huge",
            get(|| async { vec![b'x'; MAX_READ_BODY_BYTES as usize + 1024] }),
        )
        .route("/not-json", get(|| async { "<html>not json</html>" }))
        .with_state(log)
}

/// Records the request and answers with it as JSON; the `x-token` request header is sent
/// back as `x-echo-token` and the method as `x-echo-method` (for HEAD).
async fn echo(
    State(log): State<Log>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let seen = Seen {
        method: method.to_string(),
        path: uri.path().to_owned(),
        query: uri.query().map(str::to_owned),
        headers: headers.clone(),
        body: String::from_utf8_lossy(&body).into_owned(),
    };
    log.lock().unwrap().push(seen.clone());
    let header_map: serde_json::Map<String, Value> = headers
        .iter()
        .map(|(k, v)| {
            (
                k.as_str().to_owned(),
                Value::String(String::from_utf8_lossy(v.as_bytes()).into_owned()),
            )
        })
        .collect();
    let doc = json!({
        "method": seen.method,
        "path": seen.path,
        "query": seen.query,
        "headers": header_map,
        "body": seen.body,
    });
    let mut response = (
        [(header::CONTENT_TYPE, "application/json")],
        doc.to_string(),
    )
        .into_response();
    response
        .headers_mut()
        .insert("x-echo-method", method.as_str().parse().unwrap());
    if let Some(token) = headers.get("x-token") {
        response.headers_mut().insert("x-echo-token", token.clone());
    }
    response
}

async fn json_doc() -> Response {
    (
        [
            (header::CONTENT_TYPE, "application/json"),
            (header::HeaderName::from_static("x-custom"), "SomeValue"),
            (header::HeaderName::from_static("x-number"), "42"),
            (header::HeaderName::from_static("x-version"), "v1.2.3"),
            (header::HeaderName::from_static("x-empty"), ""),
        ],
        JSON_DOC,
    )
        .into_response()
}

async fn status(UrlPath(code): UrlPath<u16>) -> StatusCode {
    StatusCode::from_u16(code).unwrap()
}

/// `/redirect/307` answers 307 with `Location: /echo`.
async fn redirect(UrlPath(code): UrlPath<u16>) -> Response {
    (
        StatusCode::from_u16(code).unwrap(),
        [(header::LOCATION, "/echo")],
    )
        .into_response()
}

/// `/redirect-to?url=...` answers 307 to any URL.
async fn redirect_to(Query(q): Query<std::collections::HashMap<String, String>>) -> Response {
    (
        StatusCode::TEMPORARY_REDIRECT,
        [(header::LOCATION, q["url"].clone())],
    )
        .into_response()
}

/// A JSON document larger than the kept body, with its interesting part at the end.
async fn big_json() -> Response {
    let doc = json!({"pad": "x".repeat(2 * MAX_KEPT_BODY_BYTES), "ok": true});
    (
        [(header::CONTENT_TYPE, "application/json")],
        doc.to_string(),
    )
        .into_response()
}

struct Peer {
    addr: SocketAddr,
    log: Log,
}

impl Peer {
    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    fn seen(&self) -> Vec<Seen> {
        self.log.lock().unwrap().clone()
    }

    fn last(&self) -> Seen {
        self.seen().pop().expect("the server saw a request")
    }
}

async fn start_http() -> Peer {
    let log = Log::default();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = router(log.clone());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    Peer { addr, log }
}

/// A TLS listener for axum: handshakes inline and skips connections that fail one.
async fn start_https_self_signed() -> Peer {
    let log = Log::default();
    let addr = tls_support::serve(tls_support::self_signed(), router(log.clone())).await;
    Peer { addr, log }
}

// ---------------------------------------------------------------- helpers

fn env() -> ExecEnv {
    ExecEnv::new(None).unwrap()
}

/// An API check document: `request` merged over `{"method": "GET", "url": url}` and
/// `top` merged into the document.
fn doc(url: &str, request: Value, top: Value) -> Value {
    let mut doc = json!({"checkType": "API", "name": "test",
        "request": {"method": "GET", "url": url}});
    if let Value::Object(fields) = request {
        for (k, v) in fields {
            doc["request"][k] = v;
        }
    }
    if let Value::Object(fields) = top {
        for (k, v) in fields {
            doc[k] = v;
        }
    }
    doc
}

fn spec(url: &str, request: Value, top: Value) -> CheckSpec {
    let d = doc(url, request, top);
    CheckSpec::from_document(&d).unwrap_or_else(|e| panic!("{e}: {d}"))
}

async fn run(url: &str, request: Value) -> RunResult {
    run_check(&spec(url, request, json!({})), &env()).await
}

fn error_kind(result: &RunResult) -> Option<ErrorKind> {
    result.error.as_ref().map(|e| e.kind)
}

/// The response body of a result as JSON (what `/echo` answered).
fn echoed(result: &RunResult) -> Value {
    let body = result
        .response
        .as_ref()
        .and_then(|r| r.body.as_deref())
        .unwrap_or_else(|| panic!("no response body: {result:?}"));
    serde_json::from_str(body).unwrap()
}

/// One row of an assertion table: the assertion and whether it must pass.
struct Case {
    source: &'static str,
    property: &'static str,
    comparison: &'static str,
    target: &'static str,
    regex: Option<&'static str>,
    passes: bool,
}

fn case(
    source: &'static str,
    property: &'static str,
    comparison: &'static str,
    target: &'static str,
    passes: bool,
) -> Case {
    Case {
        source,
        property,
        comparison,
        target,
        regex: None,
        passes,
    }
}

fn with_regex(mut c: Case, regex: &'static str) -> Case {
    c.regex = Some(regex);
    c
}

/// Runs one check against `/json` holding every case as an assertion, and compares
/// each assertion's verdict with the table.
async fn check_table(peer: &Peer, cases: &[Case]) {
    let assertions: Vec<Value> = cases
        .iter()
        .map(|c| {
            json!({"source": c.source, "property": c.property, "comparison": c.comparison,
                "target": c.target, "regex": c.regex})
        })
        .collect();
    let result = run(&peer.url("/json"), json!({ "assertions": assertions })).await;
    assert!(result.error.is_none(), "{result:?}");
    assert_eq!(result.assertions.len(), cases.len());
    for (c, r) in cases.iter().zip(&result.assertions) {
        assert_eq!(
            r.passed, c.passes,
            "{} {:?} {} {:?} (regex {:?}): actual {:?}",
            c.source, c.property, c.comparison, c.target, c.regex, r.actual
        );
    }
    let expected_status = if cases.iter().all(|c| c.passes) {
        RunStatus::Passed
    } else {
        RunStatus::Failed
    };
    assert_eq!(result.status, expected_status);
}

// ---------------------------------------------------------------- assertion tables

#[tokio::test]
async fn status_code_every_comparison() {
    let peer = start_http().await;
    let s = "STATUS_CODE";
    check_table(
        &peer,
        &[
            case(s, "", "EQUALS", "200", true),
            case(s, "", "EQUALS", "404", false),
            case(s, "", "NOT_EQUALS", "404", true),
            case(s, "", "NOT_EQUALS", "200", false),
            // A status is not an object: HAS_KEY never holds.
            case(s, "", "HAS_KEY", "200", false),
            case(s, "", "NOT_HAS_KEY", "200", true),
            case(s, "", "HAS_VALUE", "200", true),
            case(s, "", "HAS_VALUE", "201", false),
            case(s, "", "NOT_HAS_VALUE", "201", true),
            case(s, "", "NOT_HAS_VALUE", "200", false),
            case(s, "", "IS_EMPTY", "", false),
            case(s, "", "NOT_EMPTY", "", true),
            case(s, "", "GREATER_THAN", "199", true),
            case(s, "", "GREATER_THAN", "200", false),
            case(s, "", "LESS_THAN", "201", true),
            case(s, "", "LESS_THAN", "200", false),
            case(s, "", "CONTAINS", "20", true),
            case(s, "", "CONTAINS", "5", false),
            case(s, "", "NOT_CONTAINS", "5", true),
            case(s, "", "NOT_CONTAINS", "20", false),
            case(s, "", "IS_NULL", "", false),
            case(s, "", "NOT_NULL", "", true),
        ],
    )
    .await;
}

#[tokio::test]
async fn response_time_every_comparison() {
    let peer = start_http().await;
    let s = "RESPONSE_TIME";
    check_table(
        &peer,
        &[
            case(s, "", "LESS_THAN", "100000000", true),
            case(s, "", "LESS_THAN", "0", false),
            case(s, "", "GREATER_THAN", "-1", true),
            case(s, "", "GREATER_THAN", "100000000", false),
            case(s, "", "EQUALS", "-1", false),
            case(s, "", "NOT_EQUALS", "-1", true),
            case(s, "", "HAS_KEY", "x", false),
            case(s, "", "NOT_HAS_KEY", "x", true),
            case(s, "", "HAS_VALUE", "-1", false),
            case(s, "", "NOT_HAS_VALUE", "-1", true),
            case(s, "", "IS_EMPTY", "", false),
            case(s, "", "NOT_EMPTY", "", true),
            case(s, "", "CONTAINS", "x", false),
            case(s, "", "NOT_CONTAINS", "x", true),
            case(s, "", "IS_NULL", "", false),
            case(s, "", "NOT_NULL", "", true),
            // The whole-number part, extracted by a regex, is below the limit.
            with_regex(case(s, "", "LESS_THAN", "100000000", true), r"^(\d+)"),
        ],
    )
    .await;
}

#[tokio::test]
async fn headers_every_comparison() {
    let peer = start_http().await;
    let s = "HEADERS";
    check_table(
        &peer,
        &[
            // Header names are case-insensitive.
            case(s, "X-Custom", "EQUALS", "SomeValue", true),
            case(s, "x-custom", "EQUALS", "Other", false),
            case(s, "x-custom", "NOT_EQUALS", "Other", true),
            case(s, "X-CUSTOM", "NOT_EQUALS", "SomeValue", false),
            // Without a property, the headers as a whole.
            case(s, "", "HAS_KEY", "Content-Type", true),
            case(s, "", "HAS_KEY", "x-absent", false),
            case(s, "", "NOT_HAS_KEY", "x-absent", true),
            case(s, "", "NOT_HAS_KEY", "X-Custom", false),
            case(s, "", "HAS_VALUE", "SomeValue", true),
            case(s, "", "HAS_VALUE", "nope", false),
            case(s, "", "NOT_HAS_VALUE", "nope", true),
            case(s, "", "NOT_HAS_VALUE", "SomeValue", false),
            case(s, "x-empty", "IS_EMPTY", "", true),
            case(s, "x-custom", "IS_EMPTY", "", false),
            case(s, "x-custom", "NOT_EMPTY", "", true),
            case(s, "x-empty", "NOT_EMPTY", "", false),
            case(s, "x-number", "GREATER_THAN", "41", true),
            case(s, "x-number", "GREATER_THAN", "42", false),
            case(s, "x-number", "LESS_THAN", "43", true),
            case(s, "x-number", "LESS_THAN", "42", false),
            case(s, "x-custom", "CONTAINS", "Value", true),
            case(s, "x-custom", "CONTAINS", "value", false),
            case(s, "x-custom", "NOT_CONTAINS", "zzz", true),
            case(s, "x-custom", "NOT_CONTAINS", "Some", false),
            case(s, "x-absent", "IS_NULL", "", true),
            case(s, "x-custom", "IS_NULL", "", false),
            case(s, "x-custom", "NOT_NULL", "", true),
            case(s, "x-absent", "NOT_NULL", "", false),
            case(s, "x-absent", "EQUALS", "", false),
            with_regex(case(s, "x-version", "EQUALS", "1", true), r"v(\d+)\."),
            with_regex(
                case(s, "x-version", "GREATER_THAN", "2", false),
                r"\.(\d+)\.",
            ),
            with_regex(case(s, "x-version", "IS_NULL", "", true), r"^release-(.*)"),
        ],
    )
    .await;
}

#[tokio::test]
async fn text_body_every_comparison() {
    let peer = start_http().await;
    let s = "TEXT_BODY";
    let title = r#""title":"([^"]+)""#;
    let total = r#""total":(\d+)"#;
    let absent = r"<html>(.*)</html>";
    check_table(
        &peer,
        &[
            case(s, "", "EQUALS", JSON_DOC, true),
            case(s, "", "EQUALS", "x", false),
            case(s, "", "NOT_EQUALS", "x", true),
            case(s, "", "NOT_EQUALS", JSON_DOC, false),
            // A body that is a JSON object has keys.
            case(s, "", "HAS_KEY", "data", true),
            case(s, "", "HAS_KEY", "zzz", false),
            case(s, "", "NOT_HAS_KEY", "zzz", true),
            case(s, "", "NOT_HAS_KEY", "data", false),
            with_regex(case(s, "", "HAS_VALUE", "Hello World", true), title),
            with_regex(case(s, "", "HAS_VALUE", "nope", false), title),
            with_regex(case(s, "", "NOT_HAS_VALUE", "nope", true), title),
            with_regex(case(s, "", "NOT_HAS_VALUE", "Hello World", false), title),
            with_regex(case(s, "", "IS_EMPTY", "", true), absent),
            case(s, "", "IS_EMPTY", "", false),
            case(s, "", "NOT_EMPTY", "", true),
            with_regex(case(s, "", "NOT_EMPTY", "", false), absent),
            with_regex(case(s, "", "GREATER_THAN", "1", true), total),
            with_regex(case(s, "", "GREATER_THAN", "2", false), total),
            with_regex(case(s, "", "LESS_THAN", "3", true), total),
            with_regex(case(s, "", "LESS_THAN", "2", false), total),
            case(s, "", "CONTAINS", "Hello World", true),
            case(s, "", "CONTAINS", "Goodbye", false),
            case(s, "", "NOT_CONTAINS", "Goodbye", true),
            case(s, "", "NOT_CONTAINS", "Hello", false),
            with_regex(case(s, "", "IS_NULL", "", true), absent),
            case(s, "", "IS_NULL", "", false),
            case(s, "", "NOT_NULL", "", true),
            with_regex(case(s, "", "NOT_NULL", "", false), absent),
            // The vendor's style: the property is the regex.
            case(s, r#""title":"(\w+)"#, "EQUALS", "Hello", true),
            case(s, r#""title":"(\w+)"#, "EQUALS", "World", false),
        ],
    )
    .await;
}

#[tokio::test]
async fn json_body_every_comparison() {
    let peer = start_http().await;
    let s = "JSON_BODY";
    check_table(
        &peer,
        &[
            case(s, "$.data.items[0].id", "EQUALS", "7", true),
            case(s, "$.data.items[0].id", "EQUALS", "8", false),
            case(s, "$.data.title", "EQUALS", "Hello World", true),
            case(s, "$.data.flag", "EQUALS", "true", true),
            case(s, "$.data.items[1].name", "NOT_EQUALS", "alpha", true),
            case(s, "$.data.items[1].name", "NOT_EQUALS", "beta", false),
            case(s, "$.data", "HAS_KEY", "items", true),
            case(s, "$.data", "HAS_KEY", "nope", false),
            case(s, "$.data", "NOT_HAS_KEY", "nope", true),
            case(s, "$.data", "NOT_HAS_KEY", "items", false),
            case(s, "$.data.tags", "HAS_VALUE", "b", true),
            case(s, "$.data.tags", "HAS_VALUE", "c", false),
            case(s, "$.data.tags", "NOT_HAS_VALUE", "c", true),
            case(s, "$.data.tags", "NOT_HAS_VALUE", "a", false),
            case(s, "$.data.empty", "IS_EMPTY", "", true),
            case(s, "$.data.nothing", "IS_EMPTY", "", true),
            case(s, "$.data.tags", "IS_EMPTY", "", false),
            case(s, "$.data.tags", "NOT_EMPTY", "", true),
            case(s, "$.data.empty", "NOT_EMPTY", "", false),
            case(s, "$.data.total", "GREATER_THAN", "1", true),
            case(s, "$.data.total", "GREATER_THAN", "2", false),
            case(s, "$.data.items.length", "LESS_THAN", "3", true),
            case(s, "$.data.items.length", "LESS_THAN", "2", false),
            case(s, "$.data.title", "CONTAINS", "World", true),
            case(s, "$.data.title", "CONTAINS", "world", false),
            case(s, "$.data.title", "NOT_CONTAINS", "world", true),
            case(s, "$.data.title", "NOT_CONTAINS", "World", false),
            case(s, "$.data.nothing", "IS_NULL", "", true),
            case(s, "$.data.missing", "IS_NULL", "", true),
            case(s, "$.data.total", "IS_NULL", "", false),
            case(s, "$.data.flag", "NOT_NULL", "", true),
            case(s, "$.data.nothing", "NOT_NULL", "", false),
        ],
    )
    .await;
}

#[tokio::test]
async fn json_path_variants() {
    let peer = start_http().await;
    let s = "JSON_BODY";
    check_table(
        &peer,
        &[
            case(s, "$['data']['items'][1]['id']", "EQUALS", "8", true),
            case(s, r#"$["data"].items[1].name"#, "EQUALS", "beta", true),
            case(s, "$.data.items[-1].name", "EQUALS", "beta", true),
            case(s, "$.data.items.[0].name", "EQUALS", "alpha", true),
            case(s, "data.total", "EQUALS", "2", true),
            case(s, "$.data.items.length", "EQUALS", "2", true),
            case(s, "$.data.title.length", "EQUALS", "11", true),
            case(s, "$..id", "HAS_VALUE", "8", true),
            case(s, "$..id", "HAS_VALUE", "9", false),
            case(s, "$.data.items[*].name", "CONTAINS", "alpha", true),
            case(s, "$.data.items[*].name", "HAS_VALUE", "gamma", false),
            case(s, "$.data.items[5].id", "EQUALS", "7", false),
            case(s, "$", "HAS_KEY", "data", true),
            case(s, "", "HAS_KEY", "data", true),
            with_regex(case(s, "$.data.title", "EQUALS", "World", true), r"(\w+)$"),
            with_regex(
                case(s, "$.data.items", "EQUALS", "8", true),
                r#""id":(\d+),"name":"beta""#,
            ),
        ],
    )
    .await;
}

#[tokio::test]
async fn json_assertions_fail_on_a_body_that_is_not_json() {
    let peer = start_http().await;
    let result = run(
        &peer.url("/not-json"),
        json!({"assertions": [
            {"source": "JSON_BODY", "property": "$.a", "comparison": "NOT_EQUALS", "target": "x"},
            {"source": "JSON_BODY", "property": "$.a", "comparison": "IS_NULL"},
            {"source": "TEXT_BODY", "comparison": "CONTAINS", "target": "not json"},
        ]}),
    )
    .await;
    assert_eq!(result.status, RunStatus::Failed);
    assert!(!result.assertions[0].passed);
    assert!(!result.assertions[1].passed);
    assert!(result.assertions[2].passed);
}

// ---------------------------------------------------------------- requests

#[tokio::test]
async fn each_method_reaches_the_server_with_its_body() {
    let peer = start_http().await;
    for method in ["GET", "POST", "PUT", "PATCH", "DELETE"] {
        let result = run(
            &peer.url("/echo"),
            json!({"method": method, "body": "{\"n\":1}", "bodyType": "JSON"}),
        )
        .await;
        assert_eq!(result.status, RunStatus::Passed, "{method}: {result:?}");
        let seen = peer.last();
        assert_eq!(seen.method, method);
        assert_eq!(seen.body, "{\"n\":1}", "{method}");
        assert_eq!(seen.header("content-type"), Some("application/json"));
        let request = result.request.as_ref().unwrap();
        assert_eq!(request.method, method);
        assert_eq!(request.body.as_deref(), Some("{\"n\":1}"));
        assert_eq!(echoed(&result)["method"], method);
    }
    let result = run(&peer.url("/echo"), json!({"method": "HEAD"})).await;
    assert_eq!(result.status, RunStatus::Passed, "{result:?}");
    assert_eq!(peer.last().method, "HEAD");
    let response = result.response.unwrap();
    assert_eq!(response.headers["x-echo-method"], "HEAD");
    assert_eq!(response.body_size, 0, "a HEAD answer has no body");
    assert!(response.body.is_none());
}

#[tokio::test]
async fn each_body_type_sets_its_content_type() {
    let peer = start_http().await;
    let cases = [
        ("JSON", r#"{"a":1}"#, Some("application/json"), r#"{"a":1}"#),
        (
            "FORM",
            "a=1&b=two+words",
            Some("application/x-www-form-urlencoded"),
            "a=1&b=two+words",
        ),
        ("RAW", "plain words", Some("text/plain"), "plain words"),
        (
            "GRAPHQL",
            "query { user { id } }",
            Some("application/json"),
            r#"{"query":"query { user { id } }"}"#,
        ),
        (
            "GRAPHQL",
            r#"{"query":"{ a }","variables":{"x":1}}"#,
            Some("application/json"),
            r#"{"query":"{ a }","variables":{"x":1}}"#,
        ),
        ("NONE", "as is", None, "as is"),
        ("NONE", "", None, ""),
    ];
    for (body_type, body, content_type, sent) in cases {
        run(
            &peer.url("/echo"),
            json!({"method": "POST", "bodyType": body_type, "body": body}),
        )
        .await;
        let seen = peer.last();
        assert_eq!(seen.header("content-type"), content_type, "{body_type}");
        assert_eq!(seen.body, sent, "{body_type}");
    }
    // A Content-Type the check sets wins.
    run(
        &peer.url("/echo"),
        json!({"method": "POST", "bodyType": "JSON", "body": "{}",
            "headers": [{"key": "Content-Type", "value": "application/vnd.api+json"}]}),
    )
    .await;
    assert_eq!(
        peer.last().header("content-type"),
        Some("application/vnd.api+json")
    );
}

#[tokio::test]
async fn headers_are_sent_and_recorded() {
    let peer = start_http().await;
    let result = run(
        &peer.url("/echo"),
        json!({"headers": [
            {"key": "X-One", "value": "1"},
            {"key": "x-many", "value": "a"},
            {"key": "X-Many", "value": "b"},
            {"key": "User-Agent", "value": "custom-agent"},
        ]}),
    )
    .await;
    assert_eq!(result.status, RunStatus::Passed, "{result:?}");
    let seen = peer.last();
    assert_eq!(seen.header("x-one"), Some("1"));
    let many: Vec<_> = seen
        .headers
        .get_all("x-many")
        .iter()
        .map(|v| v.to_str().unwrap())
        .collect();
    assert_eq!(many, ["a", "b"]);
    assert_eq!(seen.header("user-agent"), Some("custom-agent"));
    assert_eq!(seen.header("connection"), Some("close"));
    let recorded = &result.request.as_ref().unwrap().headers;
    assert_eq!(recorded["x-one"], "1");
    assert_eq!(recorded["x-many"], "a, b");
    assert_eq!(recorded["user-agent"], "custom-agent");
    assert_eq!(recorded["host"], peer.addr.to_string());
}

#[tokio::test]
async fn query_parameters_are_appended_encoded() {
    let peer = start_http().await;
    let result = run(
        &peer.url("/echo?x=1"),
        json!({"queryParameters": [
            {"key": "q", "value": "a b&c=d"},
            {"key": "ü", "value": "/?#"},
        ]}),
    )
    .await;
    assert_eq!(result.status, RunStatus::Passed, "{result:?}");
    let seen = peer.last();
    assert_eq!(
        seen.query.as_deref(),
        Some("x=1&q=a+b%26c%3Dd&%C3%BC=%2F%3F%23")
    );
    assert_eq!(
        result.request.unwrap().url,
        peer.url("/echo?x=1&q=a+b%26c%3Dd&%C3%BC=%2F%3F%23")
    );
}

#[tokio::test]
async fn basic_auth_is_sent_and_masked() {
    let peer = start_http().await;
    let result = run(
        &peer.url("/echo"),
        json!({"basicAuth": {"username": "alice", "password": "wonder land"}}),
    )
    .await;
    assert_eq!(result.status, RunStatus::Passed, "{result:?}");
    let token = base64::engine::general_purpose::STANDARD.encode("alice:wonder land");
    assert_eq!(
        peer.last().header("authorization"),
        Some(format!("Basic {token}").as_str())
    );
    let request = result.request.as_ref().unwrap();
    assert_eq!(request.headers["authorization"], "Basic *****");
    // The echo of the header in the response body is masked too.
    assert_eq!(echoed(&result)["headers"]["authorization"], "Basic *****");
    let text = serde_json::to_string(&result).unwrap();
    assert!(!text.contains(&token), "{text}");
    assert!(!text.contains(token.trim_end_matches('=')), "{text}");

    // A header the check sets itself wins over basic auth.
    run(
        &peer.url("/echo"),
        json!({"basicAuth": {"username": "alice", "password": "x"},
            "headers": [{"key": "Authorization", "value": "Bearer abc"}]}),
    )
    .await;
    assert_eq!(peer.last().header("authorization"), Some("Bearer abc"));
}

#[tokio::test]
async fn redirects_keep_or_change_the_method() {
    let peer = start_http().await;
    // (status, method after the redirect, body kept)
    for (code, method, keeps_body) in [
        (301, "GET", false),
        (302, "GET", false),
        (303, "GET", false),
        (307, "POST", true),
        (308, "POST", true),
    ] {
        let result = run(
            &peer.url(&format!("/redirect/{code}")),
            json!({"method": "POST", "bodyType": "JSON", "body": "{\"k\":1}"}),
        )
        .await;
        assert_eq!(result.status, RunStatus::Passed, "{code}: {result:?}");
        let seen = peer.last();
        assert_eq!(seen.path, "/echo", "{code}");
        assert_eq!(seen.method, method, "{code}");
        assert_eq!(seen.body.is_empty(), !keeps_body, "{code}");
        assert_eq!(
            seen.header("content-type").is_some(),
            keeps_body,
            "{code}: no content type without a body"
        );
        let response = result.response.unwrap();
        assert_eq!(response.redirects, vec![peer.url("/echo")], "{code}");
        assert_eq!(response.url, peer.url("/echo"));
        // The request recorded is the one the check sent first.
        assert_eq!(result.request.unwrap().method, "POST");
    }
    // A PUT keeps its method on a 302.
    run(
        &peer.url("/redirect/302"),
        json!({"method": "PUT", "body": "x"}),
    )
    .await;
    assert_eq!(peer.last().method, "PUT");
}

#[tokio::test]
async fn redirects_are_not_followed_when_disabled() {
    let peer = start_http().await;
    let result = run(
        &peer.url("/redirect/307"),
        json!({"followRedirects": false, "assertions": [
            {"source": "STATUS_CODE", "comparison": "EQUALS", "target": "307"}]}),
    )
    .await;
    assert_eq!(result.status, RunStatus::Passed, "{result:?}");
    assert!(peer.seen().is_empty());
    let response = result.response.unwrap();
    assert_eq!(response.headers["location"], "/echo");
    assert!(response.redirects.is_empty());
}

#[tokio::test]
async fn credentials_are_not_sent_to_another_origin() {
    let peer = start_http().await;
    // 127.0.0.1 and localhost are different origins on the same server.
    let other = format!("http://localhost:{}/echo", peer.addr.port());
    let same = peer.url("/echo");
    for (target, keeps) in [(same, true), (other, false)] {
        run(
            &peer.url(&format!("/redirect-to?url={target}")),
            json!({"basicAuth": {"username": "u", "password": "p"},
                "headers": [{"key": "Cookie", "value": "c=1"}, {"key": "X-Other", "value": "o"}]}),
        )
        .await;
        let seen = peer.last();
        assert_eq!(seen.header("authorization").is_some(), keeps, "{target}");
        assert_eq!(seen.header("cookie").is_some(), keeps, "{target}");
        assert_eq!(seen.header("x-other"), Some("o"), "{target}");
    }
}

#[tokio::test]
async fn skip_ssl_both_ways() {
    let peer = start_https_self_signed().await;
    let url = format!("https://localhost:{}/echo", peer.addr.port());
    let result = run(&url, json!({"method": "POST", "body": "over tls"})).await;
    assert_eq!(result.status, RunStatus::Failed);
    assert_eq!(error_kind(&result), Some(ErrorKind::Tls), "{result:?}");
    assert!(
        peer.seen().is_empty(),
        "nothing is sent to an untrusted peer"
    );
    assert!(result.request.is_some(), "the request is still reported");

    let result = run(
        &url,
        json!({"method": "POST", "body": "over tls", "skipSSL": true}),
    )
    .await;
    assert_eq!(result.status, RunStatus::Passed, "{result:?}");
    assert_eq!(peer.last().body, "over tls");
    assert!(result.timing_phases.unwrap().tls > 0.0);
}

#[tokio::test]
async fn status_4xx_5xx_fails_unless_should_fail() {
    let peer = start_http().await;
    let url = peer.url("/status/503");
    let result = run(&url, json!({})).await;
    assert_eq!(result.status, RunStatus::Failed);
    assert!(result.has_failures && !result.has_errors);

    let expect_503 = json!({"assertions": [
        {"source": "STATUS_CODE", "comparison": "EQUALS", "target": "503"}]});
    let result = run(&url, expect_503.clone()).await;
    assert!(result.assertions[0].passed);
    assert_eq!(
        result.status,
        RunStatus::Failed,
        "without shouldFail an error status fails the run"
    );

    let result = run_check(&spec(&url, expect_503, json!({"shouldFail": true})), &env()).await;
    assert_eq!(result.status, RunStatus::Passed, "{result:?}");
    let result = run_check(
        &spec(
            &url,
            json!({"assertions": [
                {"source": "STATUS_CODE", "comparison": "EQUALS", "target": "200"}]}),
            json!({"shouldFail": true}),
        ),
        &env(),
    )
    .await;
    assert_eq!(
        result.status,
        RunStatus::Failed,
        "assertions still count with shouldFail"
    );
}

#[tokio::test]
async fn response_time_thresholds_degrade_and_fail() {
    let peer = start_http().await;
    let url = peer.url("/echo");
    let env = env();
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

    let passed = run_check(&spec(&url, json!({}), json!({})), &env).await;
    assert_eq!(passed.status, RunStatus::Passed, "defaults: 5 s and 20 s");
    assert_eq!(
        passed.response_time,
        Some(passed.timing_phases.unwrap().total)
    );
}

#[tokio::test]
async fn bodies_are_kept_up_to_the_cap_but_assertions_see_them_whole() {
    let peer = start_http().await;
    let result = run(
        &peer.url("/big-json"),
        json!({"assertions": [
            {"source": "JSON_BODY", "property": "$.ok", "comparison": "EQUALS", "target": "true"}]}),
    )
    .await;
    assert_eq!(result.status, RunStatus::Passed, "{result:?}");
    let response = result.response.unwrap();
    assert_eq!(response.body.as_ref().unwrap().len(), MAX_KEPT_BODY_BYTES);
    assert!(response.body_size > MAX_KEPT_BODY_BYTES as u64);
    assert!(!response.body_truncated);

    let result = run(&peer.url("/huge"), json!({})).await;
    assert_eq!(result.status, RunStatus::Passed, "{result:?}");
    let response = result.response.unwrap();
    assert!(response.body_truncated);
    assert_eq!(response.body_size, MAX_READ_BODY_BYTES);
}

#[tokio::test]
async fn connection_refused_is_a_connect_error_with_the_request() {
    let port = {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        l.local_addr().unwrap().port()
    };
    let result = run(&format!("http://127.0.0.1:{port}/x"), json!({})).await;
    assert_eq!(error_kind(&result), Some(ErrorKind::Connect));
    assert_eq!(result.status, RunStatus::Failed);
    assert_eq!(
        result.request.unwrap().url,
        format!("http://127.0.0.1:{port}/x")
    );
    assert!(result.response.is_none());
}

// ---------------------------------------------------------------- placeholders and secrets

/// Every form a secret may take on the way out.
fn secret_forms(secret: &str) -> Vec<String> {
    vec![
        secret.to_owned(),
        percent_encoding::utf8_percent_encode(secret, percent_encoding::NON_ALPHANUMERIC)
            .to_string(),
        percent_encoding::utf8_percent_encode(secret, PATH_SET).to_string(),
        url::form_urlencoded::byte_serialize(secret.as_bytes()).collect(),
    ]
}

#[tokio::test]
async fn placeholders_are_filled_and_secrets_never_reported() {
    let peer = start_http().await;
    let process_secret = "svc p@ss/wörd&=";
    let check_secret = "chk s3cret+%";
    let env = env().with_secret_variables([
        ("SERVICE_SECRET_TOKEN", process_secret),
        ("NOT_A_SECRET", "ignored"),
    ]);
    let check = spec(
        "http://{{HOST}}/echo/{{SERVICE_SECRET_TOKEN}}",
        json!({
            "method": "POST",
            "bodyType": "JSON",
            "body": "{\"a\":\"{{SERVICE_SECRET_TOKEN}}\",\"b\":\"{{CHECK_SECRET}}\",\"c\":\"{{UNKNOWN}}\",\"d\":\"{{NOT_A_SECRET}}\"}",
            "headers": [
                {"key": "X-Token", "value": "{{SERVICE_SECRET_TOKEN}}"},
                {"key": "X-Check", "value": "{{CHECK_SECRET}}"},
                {"key": "X-Plain", "value": "{{PLAIN}}"},
            ],
            "queryParameters": [
                {"key": "t", "value": "{{SERVICE_SECRET_TOKEN}}"},
                {"key": "c", "value": "{{CHECK_SECRET}}"},
            ],
            "basicAuth": {"username": "{{PLAIN}}", "password": "{{SERVICE_SECRET_TOKEN}}"},
            "assertions": [
                {"source": "HEADERS", "property": "x-echo-token", "comparison": "CONTAINS",
                 "target": "wörd"},
                {"source": "JSON_BODY", "property": "$.headers.x-token", "comparison": "CONTAINS",
                 "target": "p@ss"},
            ],
        }),
        json!({"environmentVariables": [
            {"key": "HOST", "value": peer.addr.to_string()},
            {"key": "PLAIN", "value": "visible-value"},
            {"key": "CHECK_SECRET", "value": check_secret, "secret": true},
        ]}),
    );
    let result = run_check(&check, &env).await;
    assert!(result.error.is_none(), "{result:?}");

    // The server got every placeholder filled.
    let seen = peer.last();
    assert_eq!(
        seen.path,
        format!(
            "/echo/{}",
            percent_encoding::utf8_percent_encode(process_secret, PATH_SET)
        )
    );
    assert_eq!(seen.header("x-token"), Some(process_secret));
    assert_eq!(seen.header("x-check"), Some(check_secret));
    assert_eq!(seen.header("x-plain"), Some("visible-value"));
    let query: Vec<(String, String)> =
        url::form_urlencoded::parse(seen.query.as_deref().unwrap().as_bytes())
            .into_owned()
            .collect();
    assert_eq!(
        query,
        vec![
            ("t".to_owned(), process_secret.to_owned()),
            ("c".to_owned(), check_secret.to_owned()),
        ]
    );
    let body: Value = serde_json::from_str(&seen.body).unwrap();
    assert_eq!(body["a"], process_secret);
    assert_eq!(body["b"], check_secret);
    assert_eq!(body["c"], "{{UNKNOWN}}", "unknown placeholders stay");
    assert_eq!(
        body["d"], "{{NOT_A_SECRET}}",
        "only SERVICE_SECRET_* variables are taken"
    );
    let token =
        base64::engine::general_purpose::STANDARD.encode(format!("visible-value:{process_secret}"));
    assert_eq!(
        seen.header("authorization"),
        Some(format!("Basic {token}").as_str())
    );

    // The assertions saw the real values...
    assert!(result.assertions[0].passed, "{:?}", result.assertions[0]);
    assert!(result.assertions[1].passed, "{:?}", result.assertions[1]);
    // ...but no form of any secret is in the result.
    let text = serde_json::to_string(&result).unwrap();
    for secret in [process_secret, check_secret] {
        for form in secret_forms(secret) {
            assert!(!text.contains(&form), "{form:?} leaked: {text}");
        }
    }
    assert!(!text.contains(&token), "the basic-auth token leaked");
    assert!(!text.contains(token.trim_end_matches('=')));
    assert!(text.contains("visible-value"), "non-secret values stay");
    assert!(text.contains("*****"));
    let echoed = echoed(&result);
    assert_eq!(echoed["headers"]["x-token"], "*****");
    assert_eq!(echoed["headers"]["x-plain"], "visible-value");
}

/// The set the URL parser percent-encodes in a path.
const PATH_SET: &percent_encoding::AsciiSet = &percent_encoding::CONTROLS
    .add(b' ')
    .add(b'"')
    .add(b'<')
    .add(b'>')
    .add(b'`')
    .add(b'#')
    .add(b'?')
    .add(b'{')
    .add(b'}');

#[tokio::test]
async fn secrets_in_error_messages_are_masked() {
    // A secret that ends up in the host name: the connect error names the host.
    let port = {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        l.local_addr().unwrap().port()
    };
    let env = env().with_secret_variables([("SERVICE_SECRET_HOST", "localhost")]);
    let check = spec(
        &format!("http://{{{{SERVICE_SECRET_HOST}}}}:{port}/"),
        json!({}),
        json!({}),
    );
    let result = run_check(&check, &env).await;
    assert_eq!(error_kind(&result), Some(ErrorKind::Connect), "{result:?}");
    let text = serde_json::to_string(&result).unwrap();
    assert!(!text.contains("localhost"), "{text}");
    assert!(text.contains("cannot connect to *****"), "{text}");
}

#[tokio::test]
async fn a_url_invalid_after_filling_is_an_invalid_job_naming_the_field() {
    let result = run("{{UNSET}}/health", json!({})).await;
    assert_eq!(error_kind(&result), Some(ErrorKind::InvalidJob));
    let message = &result.error.as_ref().unwrap().message;
    assert!(message.starts_with("request.url"), "{message}");
    let result = run(
        "http://127.0.0.1:1/",
        json!({"headers": [{"key": "{{NAME}}", "value": "x"}]}),
    )
    .await;
    assert_eq!(error_kind(&result), Some(ErrorKind::InvalidJob));
    let message = &result.error.as_ref().unwrap().message;
    assert!(message.starts_with("request.headers[0].key"), "{message}");
}

#[test]
fn invalid_definitions_name_the_field() {
    let base = doc("http://127.0.0.1/", json!({}), json!({}));
    let cases: Vec<(Value, &str)> = vec![
        (json!({"request": {"method": "OPTIONS"}}), "request.method"),
        (json!({"request": {"url": "mailto:a@b"}}), "request.url"),
        (json!({"request": {"bodyType": "XML"}}), "request.bodyType"),
        (
            json!({"request": {"assertions": [
                {"source": "STATUS_CODE", "comparison": "EQUALS", "target": "200"},
                {"source": "STATUS_CODE", "comparison": "EQUALS", "target": "200"},
                {"source": "RESPONSE_DATA", "comparison": "EQUALS", "target": "200"}]}}),
            "request.assertions[2].source",
        ),
        (
            json!({"request": {"assertions": [
                {"source": "JSON_BODY", "comparison": "EQUALS", "property": "$.a[1:2]"}]}}),
            "request.assertions[0].property",
        ),
        (
            json!({"request": {"assertions": [
                {"source": "TEXT_BODY", "comparison": "EQUALS", "regex": "(("}]}}),
            "request.assertions[0].regex",
        ),
        (json!({"degradedResponseTime": -1}), "degradedResponseTime"),
        (
            json!({"environmentVariables": [{"value": "x"}]}),
            "environmentVariables[0].key",
        ),
    ];
    for (patch, field) in cases {
        let mut d = base.clone();
        for (k, v) in patch.as_object().unwrap() {
            if k == "request" {
                for (rk, rv) in v.as_object().unwrap() {
                    d["request"][rk] = rv.clone();
                }
            } else {
                d[k] = v.clone();
            }
        }
        let err = CheckSpec::from_document(&d).unwrap_err();
        assert_eq!(err.field, field, "{d}: {err}");
    }
}
