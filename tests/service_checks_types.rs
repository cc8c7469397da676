//! Public API for every check type: `/v1/checks/{api,tcp,dns,icmp}`, the generic
//! `POST /v1/checks` and `PUT /v1/checks/{id}`, list filters (the status filter on
//! the latest FINAL results and heartbeat states), masked secrets, and the check type
//! flowing into jobs, sessions and results.

mod heartbeat_support;
mod service_support;

use std::collections::HashMap;

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use service_support::{TestService, error_body, result_for};

use outpost::model::{CheckSpec, CheckType, RunStatus};

const MASK: &str = "*****";
const SCRIPT: &str = "const { test } = require('@playwright/test')\ntest('home', async ({ page }) => { await page.goto('http://127.0.0.1:9/') })";

/// A minimal valid body per type (privateLocations added by `create`).
fn body_of(segment: &str, name: &str) -> Value {
    let request = match segment {
        "url" => json!({"url": "http://127.0.0.1:9/"}),
        "api" => json!({"method": "POST", "url": "http://127.0.0.1:9/api"}),
        "tcp" => json!({"hostname": "127.0.0.1", "port": 9}),
        "dns" => json!({"query": "example.test", "recordType": "A"}),
        "icmp" => json!({"hostname": "127.0.0.1"}),
        "browser" | "multistep" => {
            return json!({"name": name, "script": SCRIPT, "privateLocations": ["local"]});
        }
        other => panic!("no body for {other}"),
    };
    json!({"name": name, "request": request, "privateLocations": ["local"]})
}

fn merged(mut base: Value, extra: Value) -> Value {
    if let (Value::Object(b), Value::Object(e)) = (&mut base, extra) {
        for (k, v) in e {
            b.insert(k, v);
        }
    }
    base
}

async fn send(svc: &TestService, method: Method, path: &str, body: &Value) -> reqwest::Response {
    svc.api(method, path).json(body).send().await.unwrap()
}

/// Creates a check through `/v1/checks/<segment>`; asserts 201 and returns the body.
async fn create(svc: &TestService, segment: &str, name: &str, extra: Value) -> Value {
    let body = merged(body_of(segment, name), extra);
    let resp = send(svc, Method::POST, &format!("/v1/checks/{segment}"), &body).await;
    let status = resp.status();
    let out: Value = resp.json().await.unwrap();
    assert_eq!(status, StatusCode::CREATED, "{out}");
    out
}

async fn get_json(svc: &TestService, path: &str) -> Value {
    let resp = svc.api(Method::GET, path).send().await.unwrap();
    assert_eq!(resp.status(), StatusCode::OK, "GET {path}");
    resp.json().await.unwrap()
}

/// PUTs `body` to `path`; asserts 200 and returns the answer.
async fn put_ok(svc: &TestService, path: &str, body: &Value) -> Value {
    let resp = send(svc, Method::PUT, path, body).await;
    let status = resp.status();
    let out: Value = resp.json().await.unwrap();
    assert_eq!(status, StatusCode::OK, "PUT {path}: {out}");
    out
}

/// Asserts that the check `created` is what `GET /v1/checks/{id}` answers and the only
/// check of its type in the list.
async fn assert_stored_alone_of_its_type(svc: &TestService, created: &Value) {
    let id = created["id"].as_str().unwrap();
    assert_eq!(&get_json(svc, &format!("/v1/checks/{id}")).await, created);
    let check_type = created["checkType"].as_str().unwrap();
    let listed = get_json(svc, &format!("/v1/checks?checkType={check_type}")).await;
    assert_eq!(listed, json!([created.clone()]));
}

/// Asserts a 400 whose message names `field` first.
async fn assert_names(resp: reqwest::Response, field: &str, what: &str) -> String {
    let err = error_body(resp, StatusCode::BAD_REQUEST).await;
    let message = err["message"].as_str().unwrap().to_owned();
    assert!(
        message.starts_with(&format!("{field}:")),
        "{what}: message {message:?} should name {field}"
    );
    message
}

#[tokio::test]
async fn api_tcp_dns_crud_with_reference_defaults() {
    let svc = TestService::start().await;
    // (segment, type, degradedResponseTime, maxResponseTime, request defaults)
    let cases = [
        (
            "api",
            "API",
            5000,
            20000,
            json!({"followRedirects": true, "skipSSL": false, "ipFamily": "IPv4", "body": "",
                "bodyType": "NONE", "headers": [], "queryParameters": [], "assertions": []}),
        ),
        (
            "tcp",
            "TCP",
            3000,
            5000,
            json!({"ipFamily": "IPv4", "data": null, "body": null, "assertions": []}),
        ),
        (
            "dns",
            "DNS",
            500,
            1000,
            json!({"protocol": "UDP", "assertions": []}),
        ),
    ];
    for (segment, check_type, degraded, max, request_defaults) in cases {
        let created = create(&svc, segment, &format!("{segment} one"), json!({})).await;
        let id = created["id"].as_str().unwrap().to_owned();
        assert_eq!(created["checkType"], check_type);
        assert_eq!(created["degradedResponseTime"], degraded, "{segment}");
        assert_eq!(created["maxResponseTime"], max, "{segment}");
        assert_eq!(created["frequency"], 10);
        assert_eq!(created["activated"], true);
        assert_eq!(created["doubleCheck"], true);
        assert_eq!(created["tags"], json!([]));
        for (k, v) in request_defaults.as_object().unwrap() {
            assert_eq!(&created["request"][k], v, "{segment}: request.{k}");
        }
        assert!(created["created_at"].is_string() && created["updated_at"].is_string());
        assert_eq!(get_json(&svc, &format!("/v1/checks/{id}")).await, created);

        // Typed update: top-level fields replace, the rest is kept.
        let resp = send(
            &svc,
            Method::PUT,
            &format!("/v1/checks/{segment}/{id}"),
            &json!({"name": format!("{segment} two"), "maxResponseTime": max - 1}),
        )
        .await;
        assert_eq!(resp.status(), StatusCode::OK);
        let updated: Value = resp.json().await.unwrap();
        assert_eq!(updated["name"], format!("{segment} two"));
        assert_eq!(updated["maxResponseTime"], max - 1);
        assert_eq!(updated["request"], created["request"]);
        assert_eq!(updated["created_at"], created["created_at"]);

        // Generic update: the type comes from the stored check.
        let resp = send(
            &svc,
            Method::PUT,
            &format!("/v1/checks/{id}"),
            &json!({"tags": ["generic"], "degradedResponseTime": null}),
        )
        .await;
        assert_eq!(resp.status(), StatusCode::OK);
        let updated: Value = resp.json().await.unwrap();
        assert_eq!(updated["checkType"], check_type);
        assert_eq!(updated["tags"], json!(["generic"]));
        assert_eq!(updated["degradedResponseTime"], Value::Null);
        assert_eq!(updated["name"], format!("{segment} two"));
        assert_eq!(get_json(&svc, &format!("/v1/checks/{id}")).await, updated);

        // A typed route of another type refuses the check.
        let other = if segment == "tcp" { "dns" } else { "tcp" };
        let resp = send(
            &svc,
            Method::PUT,
            &format!("/v1/checks/{other}/{id}"),
            &json!({"name": "x"}),
        )
        .await;
        assert_names(resp, "checkType", "typed update of another type").await;
    }
    let all: Vec<Value> = get_json(&svc, "/v1/checks")
        .await
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(all.len(), 3);
    svc.stop().await;
}

#[tokio::test]
async fn invalid_bodies_are_400s_naming_the_field() {
    let svc = TestService::start().await;
    let cases: Vec<(&str, Value, &str)> = vec![
        (
            "api",
            json!({"request": {"url": "http://127.0.0.1/"}}),
            "request.method",
        ),
        ("api", json!({"request": {"method": "GET"}}), "request.url"),
        (
            "api",
            json!({"request": {"method": "FETCH", "url": "http://127.0.0.1/"}}),
            "request.method",
        ),
        (
            "api",
            json!({"request": {"method": "GET", "url": "http://127.0.0.1/",
                "assertions": [{"source": "LATENCY", "comparison": "EQUALS"}]}}),
            "request.assertions[0].source",
        ),
        ("api", json!({"maxResponseTime": 45001}), "maxResponseTime"),
        (
            "api",
            json!({"environmentVariables": [{"key": "", "value": "v"}]}),
            "environmentVariables[0].key",
        ),
        (
            "api",
            json!({"environmentVariables": [{"key": "K", "value": 1}]}),
            "environmentVariables[0].value",
        ),
        (
            "tcp",
            json!({"request": {"hostname": "127.0.0.1"}}),
            "request.port",
        ),
        (
            "tcp",
            json!({"request": {"hostname": "127.0.0.1", "port": 70000}}),
            "request.port",
        ),
        ("tcp", json!({"request": {"port": 80}}), "request.hostname"),
        (
            "tcp",
            json!({"request": {"hostname": "h", "port": 1, "data": ""}}),
            "request.data",
        ),
        (
            "dns",
            json!({"request": {"query": "a.test"}}),
            "request.recordType",
        ),
        (
            "dns",
            json!({"request": {"query": "a.test", "recordType": "PTR"}}),
            "request.recordType",
        ),
        (
            "dns",
            json!({"request": {"query": "a.test", "recordType": "A", "protocol": "QUIC"}}),
            "request.protocol",
        ),
        ("dns", json!({"maxResponseTime": 6000}), "maxResponseTime"),
        ("dns", json!({"request": null}), "request"),
        ("dns", json!({"request": "a.test"}), "request"),
        ("tcp", json!({"name": ""}), "name"),
        ("tcp", json!({"frequency": 7}), "frequency"),
        (
            "tcp",
            json!({"privateLocations": ["nowhere"]}),
            "privateLocations",
        ),
        ("tcp", json!({"tags": [""]}), "tags[0]"),
    ];
    for (segment, extra, field) in cases {
        let body = merged(body_of(segment, "bad"), extra.clone());
        let resp = send(&svc, Method::POST, &format!("/v1/checks/{segment}"), &body).await;
        assert_names(resp, field, &format!("{segment} {extra}")).await;
    }
    // Nothing was stored.
    assert_eq!(get_json(&svc, "/v1/checks").await, json!([]));

    // The same rules apply to updates, and a refused update changes nothing.
    let created = create(&svc, "tcp", "db", json!({})).await;
    let id = created["id"].as_str().unwrap();
    let resp = send(
        &svc,
        Method::PUT,
        &format!("/v1/checks/{id}"),
        &json!({"request": {"hostname": "127.0.0.1", "port": 0}}),
    )
    .await;
    assert_names(resp, "request.port", "update").await;
    assert_eq!(get_json(&svc, &format!("/v1/checks/{id}")).await, created);
    svc.stop().await;
}

#[tokio::test]
async fn the_route_type_must_match_the_body_check_type() {
    let svc = TestService::start().await;
    let body = merged(body_of("tcp", "db"), json!({"checkType": "DNS"}));
    let resp = send(&svc, Method::POST, "/v1/checks/tcp", &body).await;
    assert_names(resp, "checkType", "POST tcp with DNS").await;
    let body = merged(body_of("api", "api"), json!({"checkType": "URL"}));
    let resp = send(&svc, Method::POST, "/v1/checks/api", &body).await;
    assert_names(resp, "checkType", "POST api with URL").await;

    // The route's own type in the body is fine.
    let body = merged(body_of("dns", "ns"), json!({"checkType": "DNS"}));
    let created = create(&svc, "dns", "ns", body).await;
    let id = created["id"].as_str().unwrap();
    assert_eq!(created["checkType"], "DNS");

    // An update cannot change the type, on either route.
    for path in [format!("/v1/checks/{id}"), format!("/v1/checks/dns/{id}")] {
        let resp = send(
            &svc,
            Method::PUT,
            &path,
            &merged(body_of("tcp", "now tcp"), json!({"checkType": "TCP"})),
        )
        .await;
        assert_names(resp, "checkType", &path).await;
    }
    assert_eq!(get_json(&svc, &format!("/v1/checks/{id}")).await, created);
    svc.stop().await;
}

#[tokio::test]
async fn generic_create_takes_the_type_from_the_body() {
    let svc = TestService::start().await;
    let body = merged(body_of("tcp", "generic tcp"), json!({"checkType": "TCP"}));
    let resp = send(&svc, Method::POST, "/v1/checks", &body).await;
    assert_eq!(resp.status(), StatusCode::CREATED);
    let created: Value = resp.json().await.unwrap();
    assert_eq!(created["checkType"], "TCP");
    assert_eq!(created["request"]["ipFamily"], "IPv4");
    assert_eq!(created["maxResponseTime"], 5000);

    let resp = send(&svc, Method::POST, "/v1/checks", &body_of("tcp", "no type")).await;
    assert_names(resp, "checkType", "no checkType").await;
    let body = merged(body_of("tcp", "x"), json!({"checkType": "SMOKE_SIGNAL"}));
    let resp = send(&svc, Method::POST, "/v1/checks", &body).await;
    assert_names(resp, "checkType", "unknown type").await;
    svc.stop().await;
}

/// The types the reference creates through `POST /v1/checks` only (Playwright suites,
/// agentic, traceroute, SSL and gRPC checks; stored-only until their executors exist):
/// created with the defaults of their reference schemas, shown as the reference's read
/// schemas describe them, listed by type, updated through `PUT /v1/checks/{id}`,
/// validated field by field, and never dispatched to agents.
#[tokio::test]
async fn generic_only_types_are_stored_validated_and_never_run() {
    use outpost::service::reference_schema::{component, validate};
    let svc = TestService::start().await;
    let cases = [
        (
            "PLAYWRIGHT",
            json!({"codeBundlePath": "suites/shop.tgz", "engine": "node"}),
            "ChecksV1PlaywrightCheck",
            ("testCommand", json!("npx playwright test")),
            (json!({"browsers": "chromium"}), "browsers"),
        ),
        (
            "AGENTIC",
            json!({"intent": {"goal": "a visitor can pay"}}),
            "ChecksV1GenericCheck",
            ("aiAutoRepairEnabled", Value::Null),
            (json!({"intent": null}), "intent"),
        ),
        (
            "TRACEROUTE",
            json!({"request": {"url": "db.internal", "protocol": "TCP", "port": 5432}}),
            "ChecksV1TracerouteMonitor",
            ("maxResponseTime", Value::Null),
            (
                json!({"request": {"url": "h", "timeout": 31}}),
                "request.timeout",
            ),
        ),
        (
            "SSL",
            json!({"request": {"sslConfig": {"hostname": "shop.test"}}}),
            "ChecksV1SslMonitor",
            ("sslConfig", json!(443)),
            (
                json!({"request": {"sslConfig": {"hostname": "h", "port": 0}}}),
                "request.sslConfig.port",
            ),
        ),
        (
            "GRPC",
            json!({"request": {"url": "grpc.internal", "port": 50051}}),
            "ChecksV1GrpcMonitor",
            ("degradedResponseTime", Value::Null),
            (json!({"request": {"port": 50051}}), "request.url"),
        ),
    ];
    let mut ids = Vec::new();
    for (check_type, extra, read_schema, (default_field, default), (bad, bad_field)) in cases {
        let mut body = merged(
            json!({"name": format!("{check_type} check"), "privateLocations": ["local"], "checkType": check_type}),
            extra,
        );
        let resp = send(&svc, Method::POST, "/v1/checks", &body).await;
        let status = resp.status();
        let created: Value = resp.json().await.unwrap();
        assert_eq!(status, StatusCode::CREATED, "{check_type}: {created}");
        assert_eq!(created["checkType"], check_type);
        if default_field == "sslConfig" {
            assert_eq!(
                created["request"]["sslConfig"]["port"], default,
                "{created}"
            );
        } else {
            assert_eq!(created[default_field], default, "{check_type}: {created}");
        }
        let schema = component(read_schema).unwrap();
        validate(schema, &created, "").unwrap_or_else(|e| panic!("{check_type}: {e}"));
        let id = created["id"].as_str().unwrap().to_owned();
        assert_stored_alone_of_its_type(&svc, &created).await;

        let updated = put_ok(&svc, &format!("/v1/checks/{id}"), &json!({"muted": true})).await;
        assert_eq!(updated["muted"], true);
        assert_eq!(updated["name"], created["name"]);

        // A field error is a 400 naming the field, on create and on update.
        let resp = send(&svc, Method::PUT, &format!("/v1/checks/{id}"), &bad).await;
        assert_names(resp, bad_field, &format!("PUT {check_type} {bad}")).await;
        for (k, v) in bad.as_object().unwrap() {
            body[k] = v.clone();
        }
        let resp = send(&svc, Method::POST, "/v1/checks", &body).await;
        assert_names(resp, bad_field, &format!("POST {check_type} {bad}")).await;
        assert_eq!(get_json(&svc, &format!("/v1/checks/{id}")).await, updated);

        // No typed route: the reference has none for these types.
        let segment = check_type.to_lowercase();
        let resp = send(&svc, Method::POST, &format!("/v1/checks/{segment}"), &body).await;
        assert!(
            resp.status().is_client_error(),
            "{segment}: {}",
            resp.status()
        );
        ids.push(id);
    }

    let resp = send(
        &svc,
        Method::POST,
        "/v2/check-sessions/trigger",
        &json!({"target": {"checkId": ids}}),
    )
    .await;
    let err = error_body(resp, StatusCode::BAD_REQUEST).await;
    let message = err["message"].as_str().unwrap();
    assert!(message.contains("cannot run yet"), "{message}");
    for check_type in ["AGENTIC", "GRPC", "PLAYWRIGHT", "SSL", "TRACEROUTE"] {
        assert!(message.contains(check_type), "{message}");
    }
    svc.stop().await;
}

#[tokio::test]
async fn secret_variables_are_masked_in_answers_but_reach_agents() {
    let svc = TestService::start().await;
    let vars = json!([
        {"key": "BASE", "value": "http://127.0.0.1:9"},
        {"key": "TOKEN", "value": "tok-s3cr3t-value", "secret": true},
        {"key": "PIN", "value": "4711-locked", "locked": true},
    ]);
    let body = json!({
        "request": {"method": "GET", "url": "{{BASE}}/x",
            "headers": [{"key": "authorization", "value": "Bearer {{TOKEN}}"}]},
        "environmentVariables": vars,
    });
    let created = create(&svc, "api", "with secrets", body).await;
    let id = created["id"].as_str().unwrap().to_owned();
    let masked = json!([
        {"key": "BASE", "value": "http://127.0.0.1:9"},
        {"key": "TOKEN", "value": MASK, "secret": true},
        {"key": "PIN", "value": MASK, "locked": true},
    ]);
    assert_eq!(created["environmentVariables"], masked);
    let got = get_json(&svc, &format!("/v1/checks/{id}")).await;
    assert_eq!(got["environmentVariables"], masked);
    let listed = get_json(&svc, "/v1/checks").await;
    assert_eq!(listed[0]["environmentVariables"], masked);
    for answer in [&created, &got, &listed] {
        let text = answer.to_string();
        assert!(!text.contains("tok-s3cr3t-value") && !text.contains("4711-locked"));
    }

    // Sending the read document back keeps the hidden values; a secret stays secret.
    let mut echo = got.clone();
    echo["name"] = json!("renamed");
    echo["environmentVariables"][1]["secret"] = json!(false);
    let resp = send(&svc, Method::PUT, &format!("/v1/checks/api/{id}"), &echo).await;
    assert_eq!(resp.status(), StatusCode::OK);
    let updated: Value = resp.json().await.unwrap();
    assert_eq!(updated["name"], "renamed");
    assert_eq!(updated["environmentVariables"], masked);

    // Agents get the stored document with the real values.
    svc.trigger_ids(&[&id]).await;
    let agent = svc.agent();
    agent.hello().await;
    let jobs = agent.lease(10, 0).await;
    assert_eq!(jobs.len(), 1);
    let check: Value = serde_json::from_str(jobs[0].check.get()).unwrap();
    assert_eq!(
        check["environmentVariables"][1]["value"],
        "tok-s3cr3t-value"
    );
    assert_eq!(check["environmentVariables"][1]["secret"], true);
    assert_eq!(check["environmentVariables"][2]["value"], "4711-locked");
    let Ok(CheckSpec::Api(spec)) = CheckSpec::from_json(jobs[0].check.get()) else {
        panic!("the job is not an API check: {check}")
    };
    assert_eq!(spec.environment_variables.len(), 3);

    // A new secret value replaces the stored one and is masked too.
    let resp = send(
        &svc,
        Method::PUT,
        &format!("/v1/checks/{id}"),
        &json!({"environmentVariables": [{"key": "TOKEN", "value": "rotated-value", "secret": true}]}),
    )
    .await;
    assert_eq!(resp.status(), StatusCode::OK);
    let updated: Value = resp.json().await.unwrap();
    assert_eq!(
        updated["environmentVariables"],
        json!([{"key": "TOKEN", "value": MASK, "secret": true}])
    );
    let stored = svc
        .handle
        .store()
        .get_check(svc.tenant.account.id, id.parse().unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        stored.document["environmentVariables"][0]["value"],
        "rotated-value"
    );
    svc.stop().await;
}

#[tokio::test]
async fn list_filters_by_type_tag_and_name() {
    let svc = TestService::start().await;
    create(&svc, "url", "Homepage", json!({"tags": ["web", "prod"]})).await;
    create(&svc, "api", "Orders API", json!({"tags": ["api", "prod"]})).await;
    create(&svc, "tcp", "Postgres primary", json!({"tags": ["db"]})).await;
    create(
        &svc,
        "tcp",
        "Postgres replica",
        json!({"tags": ["db", "staging"]}),
    )
    .await;
    create(&svc, "dns", "Ärzte-Zone", json!({})).await;

    // Checks created in the same millisecond have no defined order between them, so
    // answers are compared as sets; paging is checked by putting the pages together.
    let names = |v: Value| -> Vec<String> {
        let mut names: Vec<String> = v
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap().to_owned())
            .collect();
        names.sort();
        names
    };
    let cases: Vec<(&str, Vec<&str>)> = vec![
        (
            "checkType=TCP",
            vec!["Postgres primary", "Postgres replica"],
        ),
        ("checkType=DNS", vec!["Ärzte-Zone"]),
        ("checkType=ICMP", vec![]),
        ("checkType=GRPC", vec![]),
        ("tag=prod", vec!["Homepage", "Orders API"]),
        ("tag=web&tag=staging", vec!["Homepage", "Postgres replica"]),
        ("tag=nope", vec![]),
        (
            "search=postgres",
            vec!["Postgres primary", "Postgres replica"],
        ),
        ("search=REPLICA", vec!["Postgres replica"]),
        ("search=%C3%A4rzte", vec!["Ärzte-Zone"]),
        ("search=api&checkType=API", vec!["Orders API"]),
        ("search=api&checkType=TCP", vec![]),
        ("checkType=TCP&tag=staging", vec!["Postgres replica"]),
        ("tag=db&search=primary", vec!["Postgres primary"]),
        // No check ran yet: none has a status (tests below give them one).
        ("status=passing&applyGroupSettings=true", vec![]),
        ("status=failing", vec![]),
    ];
    for (query, expected) in cases {
        let got = names(get_json(&svc, &format!("/v1/checks?{query}")).await);
        assert_eq!(got, expected, "{query}");
    }
    for filter in ["checkType=TCP", "search=postgres"] {
        let mut pages = Vec::new();
        for page in 1..=3 {
            let got =
                names(get_json(&svc, &format!("/v1/checks?{filter}&limit=1&page={page}")).await);
            pages.push(got);
        }
        assert_eq!(pages[0].len(), 1, "{filter}");
        assert_eq!(pages[1].len(), 1, "{filter}");
        assert!(pages[2].is_empty(), "{filter}");
        let mut both = [pages[0][0].clone(), pages[1][0].clone()];
        both.sort();
        assert_eq!(both, ["Postgres primary", "Postgres replica"], "{filter}");
    }
    for (query, field) in [
        ("checkType=FAX", "checkType"),
        ("tag=", "tag"),
        ("limit=many", "limit"),
        ("page=0", "page"),
        ("status=PASSING", "status"),
        ("status=", "status"),
    ] {
        let resp = svc
            .api(Method::GET, &format!("/v1/checks?{query}"))
            .send()
            .await
            .unwrap();
        assert_names(resp, field, query).await;
    }
    svc.stop().await;
}

/// Sorted names of the checks `GET /v1/checks?{query}` lists.
async fn listed_names(svc: &TestService, query: &str) -> Vec<String> {
    let listed = get_json(svc, &format!("/v1/checks?{query}")).await;
    let mut names: Vec<String> = listed
        .as_array()
        .unwrap_or_else(|| panic!("{query}: {listed}"))
        .iter()
        .map(|c| c["name"].as_str().unwrap_or_default().to_owned())
        .collect();
    names.sort();
    names
}

/// Triggers `checks` (name -> id) and answers each job with its status.
async fn run_once(svc: &TestService, outcomes: &[(&str, RunStatus)], ids: &HashMap<&str, String>) {
    let wanted: Vec<&str> = outcomes
        .iter()
        .map(|(name, _)| ids[name].as_str())
        .collect();
    svc.trigger_ids(&wanted).await;
    let agent = svc.agent();
    agent.hello().await;
    let jobs = agent.lease(100, 0).await;
    assert_eq!(jobs.len(), outcomes.len());
    let mut results = Vec::new();
    for job in &jobs {
        let (_, status) = outcomes
            .iter()
            .find(|(name, _)| ids[name] == job.check_id.to_string())
            .expect("a job of a triggered check");
        results.push(result_for(job, *status));
    }
    let out = agent.submit(results).await;
    assert!(
        out.outcomes
            .iter()
            .all(|o| o.status == outpost::protocol::SubmitStatus::Accepted)
    );
}

#[tokio::test]
async fn list_filters_by_status_of_the_latest_final_result() {
    use heartbeat_support::{
        SEC, advance, create_heartbeat, heartbeat_body, id_and_url, ping, start_manual,
    };
    let (svc, clock) = start_manual().await;
    let mut ids = HashMap::new();
    for name in ["flaky", "steady", "slow", "never ran"] {
        let created = create(&svc, "url", name, json!({})).await;
        ids.insert(name, created["id"].as_str().unwrap().to_owned());
    }
    // Heartbeats: pinged (a day's period), never pinged, and one that misses its deadline.
    let mut ping_urls = HashMap::new();
    for (name, period) in [("pinged", 86_400), ("silent", 60), ("missed", 30)] {
        let created = create_heartbeat(&svc, heartbeat_body(name, period, 0)).await;
        let (id, url) = id_and_url(&created);
        ids.insert(name, id);
        ping_urls.insert(name, url);
    }
    for name in ["pinged", "missed"] {
        let (status, _) = ping(&svc, &ping_urls[name], Method::POST).await;
        assert_eq!(status, StatusCode::OK);
    }
    advance(&svc, &clock, 31 * SEC).await;

    run_once(
        &svc,
        &[
            ("flaky", RunStatus::Passed),
            ("steady", RunStatus::Failed),
            ("slow", RunStatus::Degraded),
        ],
        &ids,
    )
    .await;
    // The latest FINAL result decides, not the first nor the majority.
    run_once(
        &svc,
        &[("flaky", RunStatus::Failed), ("steady", RunStatus::Passed)],
        &ids,
    )
    .await;

    let cases: Vec<(&str, Vec<&str>)> = vec![
        ("status=passing", vec!["pinged", "steady"]),
        ("status=failing", vec!["flaky", "missed"]),
        ("status=degraded", vec!["slow"]),
        ("status=failing&checkType=URL", vec!["flaky"]),
        ("status=failing&checkType=HEARTBEAT", vec!["missed"]),
        ("status=passing&search=STEA", vec!["steady"]),
        ("status=passing&search=pin&limit=1&page=1", vec!["pinged"]),
        ("status=degraded&search=flaky", vec![]),
    ];
    for (query, expected) in cases {
        assert_eq!(listed_names(&svc, query).await, expected, "{query}");
    }
    // Without the filter every check is listed, those without a status too.
    assert_eq!(listed_names(&svc, "").await.len(), 7);
    svc.stop().await;
}

#[tokio::test]
async fn tcp_sessions_and_results_carry_the_stored_type() {
    let svc = TestService::start().await;
    let created = create(&svc, "tcp", "db port", json!({})).await;
    let id = created["id"].as_str().unwrap().to_owned();
    let sessions = svc.trigger_ids(&[&id]).await;
    assert_eq!(sessions.len(), 1);
    assert_eq!(sessions[0]["checkType"], "TCP");
    let session_id = sessions[0]["checkSessionId"].as_str().unwrap().to_owned();

    let agent = svc.agent();
    agent.hello().await;
    let jobs = agent.lease(10, 0).await;
    assert_eq!(jobs.len(), 1);
    let spec = CheckSpec::from_json(jobs[0].check.get()).unwrap();
    assert_eq!(spec.check_type(), CheckType::Tcp);
    let CheckSpec::Tcp(tcp) = spec else {
        panic!("not a TCP monitor")
    };
    assert_eq!(tcp.request.port, Some(9));

    // The hand-made result claims URL: the stored check's type wins.
    let submitted = result_for(&jobs[0], RunStatus::Passed);
    assert_eq!(submitted.result.check_type, CheckType::Url);
    let out = agent.submit(vec![submitted]).await;
    assert_eq!(
        out.outcomes[0].status,
        outpost::protocol::SubmitStatus::Accepted
    );

    let session = svc.get_session(&session_id).await;
    assert_eq!(session["checkType"], "TCP");
    assert_eq!(session["status"], "PASSED");
    let results = session["results"].as_array().unwrap();
    assert_eq!(results.len(), 1);
    assert_eq!(results[0]["checkType"], "TCP");
    let result_id = results[0]["checkResultId"].as_str().unwrap();
    let result = get_json(&svc, &format!("/v1/check-results/{id}/{result_id}")).await;
    assert_eq!(result["checkType"], "TCP");
    let listed = get_json(&svc, &format!("/v1/check-results/{id}")).await;
    assert_eq!(listed[0]["checkType"], "TCP");
    svc.stop().await;
}

#[tokio::test]
async fn icmp_routes_answer_cleanly() {
    let svc = TestService::start().await;
    let resp = send(
        &svc,
        Method::POST,
        "/v1/checks/icmp",
        &body_of("icmp", "ping"),
    )
    .await;
    let status = resp.status();
    let out: Value = resp.json().await.unwrap();
    if status == StatusCode::CREATED {
        // Once the model knows ICMP monitors, the route creates them with their defaults.
        assert_eq!(out["checkType"], "ICMP");
        assert_eq!(out["degradedPacketLossThreshold"], 10);
        assert_eq!(out["maxPacketLossThreshold"], 20);
        assert_eq!(out["request"]["pingCount"], 10);
    } else {
        assert_eq!(status, StatusCode::BAD_REQUEST, "{out}");
        assert_eq!(
            out["message"],
            "checkType: ICMP checks are not supported by this version"
        );
    }
    // Malformed bodies and the update route are clean 4xx answers too.
    for body in [json!({}), json!({"request": 5}), json!([1, 2])] {
        let resp = send(&svc, Method::POST, "/v1/checks/icmp", &body).await;
        assert!(resp.status().is_client_error(), "{body}: {}", resp.status());
    }
    let url = create(&svc, "url", "site", json!({})).await;
    let path = format!("/v1/checks/icmp/{}", url["id"].as_str().unwrap());
    let resp = send(&svc, Method::PUT, &path, &json!({"name": "x"})).await;
    assert_names(resp, "checkType", "icmp update of a URL check").await;
    let resp = send(
        &svc,
        Method::PUT,
        "/v1/checks/icmp/00000000-0000-0000-0000-000000000000",
        &json!({"name": "x"}),
    )
    .await;
    error_body(resp, StatusCode::NOT_FOUND).await;
    svc.stop().await;
}

/// Browser and multistep checks (stored-only until their executors exist): created on
/// their typed routes and the generic one with the reference defaults, read, listed by
/// type, updated, and validated as their create schemas say.
#[tokio::test]
async fn browser_and_multistep_checks_are_stored_and_validated() {
    let svc = TestService::start().await;
    for (segment, check_type) in [("browser", "BROWSER"), ("multistep", "MULTI_STEP")] {
        let created = create(
            &svc,
            segment,
            &format!("{segment} journey"),
            json!({"runtimeId": "2025.04", "tags": ["ui"],
                "environmentVariables": [{"key": "PASSWORD", "value": "hunter2", "secret": true}]}),
        )
        .await;
        let id = created["id"].as_str().unwrap().to_owned();
        assert_eq!(created["checkType"], check_type);
        assert_eq!(created["script"], SCRIPT);
        assert_eq!(created["runtimeId"], "2025.04");
        assert_eq!(created["frequency"], 10);
        assert_eq!(created["activated"], true);
        assert_eq!(created["doubleCheck"], true);
        assert_eq!(created["locations"], json!([]));
        assert_eq!(created["privateLocations"], json!(["local"]));
        assert_eq!(created["description"], Value::Null);
        assert_eq!(created["intent"], Value::Null);
        assert_eq!(created["environmentVariables"][0]["value"], MASK);
        assert!(created.get("request").is_none());
        assert_stored_alone_of_its_type(&svc, &created).await;

        // Typed update merges; generic update takes the stored type.
        let resp = send(
            &svc,
            Method::PUT,
            &format!("/v1/checks/{segment}/{id}"),
            &json!({"frequency": 1, "script": "test('x', () => {})"}),
        )
        .await;
        assert_eq!(resp.status(), StatusCode::OK);
        let updated: Value = resp.json().await.unwrap();
        assert_eq!(updated["frequency"], 1);
        assert_eq!(updated["script"], "test('x', () => {})");
        assert_eq!(updated["name"], created["name"]);
        assert_eq!(updated["environmentVariables"][0]["value"], MASK);
        let resp = send(
            &svc,
            Method::PUT,
            &format!("/v1/checks/{id}"),
            &json!({"runtimeId": null, "muted": true}),
        )
        .await;
        assert_eq!(resp.status(), StatusCode::OK);
        let updated: Value = resp.json().await.unwrap();
        assert_eq!(updated["checkType"], check_type);
        assert_eq!(updated["runtimeId"], Value::Null);
        assert_eq!(updated["muted"], true);

        // Field errors, on create and on update (which leaves the check unchanged).
        let path = format!("/v1/checks/{segment}");
        for (extra, field) in [
            (json!({"script": ""}), "script"),
            (json!({"script": null}), "script"),
            (json!({"script": ["x"]}), "script"),
            (json!({"runtimeId": "2023.02"}), "runtimeId"),
            (json!({"runtimeId": 2025}), "runtimeId"),
            (json!({"frequency": 0, "frequencyOffset": 10}), "frequency"),
            (json!({"frequency": 7}), "frequency"),
            (json!({"privateLocations": []}), "privateLocations"),
            (
                json!({"privateLocations": ["elsewhere"]}),
                "privateLocations",
            ),
            (json!({"locations": ["eu-west-1"]}), "locations"),
            (json!({"name": ""}), "name"),
            (json!({"intent": {"goal": ""}}), "intent.goal"),
            (
                json!({"intent": {"goal": "g", "requiredOutcomes": [""]}}),
                "intent.requiredOutcomes",
            ),
            (
                json!({"environmentVariables": [{"key": ""}]}),
                "environmentVariables[0].key",
            ),
        ] {
            let body = merged(body_of(segment, "bad"), extra.clone());
            let resp = send(&svc, Method::POST, &path, &body).await;
            assert_names(resp, field, &format!("POST {segment} {extra}")).await;
            let resp = send(&svc, Method::PUT, &format!("{path}/{id}"), &extra).await;
            assert_names(resp, field, &format!("PUT {segment} {extra}")).await;
        }
        let mut no_script = body_of(segment, "bad");
        no_script.as_object_mut().unwrap().remove("script");
        let resp = send(&svc, Method::POST, &path, &no_script).await;
        assert_names(resp, "script", "no script").await;
        assert_eq!(get_json(&svc, &format!("/v1/checks/{id}")).await, updated);
    }

    // The generic create takes the type from the body; typed routes of other types
    // refuse script checks and the reverse.
    let body = merged(
        body_of("multistep", "generic"),
        json!({"checkType": "MULTI_STEP"}),
    );
    let resp = send(&svc, Method::POST, "/v1/checks", &body).await;
    assert_eq!(resp.status(), StatusCode::CREATED);
    let generic: Value = resp.json().await.unwrap();
    assert_eq!(generic["checkType"], "MULTI_STEP");
    let gid = generic["id"].as_str().unwrap();
    let resp = send(
        &svc,
        Method::PUT,
        &format!("/v1/checks/browser/{gid}"),
        &json!({"name": "x"}),
    )
    .await;
    assert_names(resp, "checkType", "browser route, multistep check").await;
    let url = create(&svc, "url", "site", json!({})).await;
    let uid = url["id"].as_str().unwrap();
    let resp = send(
        &svc,
        Method::PUT,
        &format!("/v1/checks/multistep/{uid}"),
        &json!({"name": "x"}),
    )
    .await;
    assert_names(resp, "checkType", "multistep route, URL check").await;
    let resp = send(
        &svc,
        Method::POST,
        "/v1/checks/browser",
        &merged(body_of("browser", "b"), json!({"checkType": "MULTI_STEP"})),
    )
    .await;
    assert_names(resp, "checkType", "browser route, multistep body").await;

    // Another account sees none of them.
    let other = svc.other_tenant("theirs").await;
    let resp = svc
        .api_as(&other, Method::GET, &format!("/v1/checks/{gid}"))
        .send()
        .await
        .unwrap();
    error_body(resp, StatusCode::NOT_FOUND).await;
    svc.stop().await;
}

/// No agent is handed a job it cannot run: the scheduler advances script checks'
/// schedules without sessions, and a trigger skips them, answering 400 with the reason
/// when nothing else was selected.
#[tokio::test]
async fn script_checks_are_never_dispatched_to_agents() {
    let svc = TestService::start().await;
    let browser = create(&svc, "browser", "journey", json!({"frequency": 1})).await;
    let bid = browser["id"].as_str().unwrap().to_owned();
    let multi = create(&svc, "multistep", "steps", json!({"frequency": 1})).await;
    let mid = multi["id"].as_str().unwrap().to_owned();
    let url = create(&svc, "url", "site", json!({"frequency": 1})).await;
    let uid = url["id"].as_str().unwrap().to_owned();

    let resp = send(
        &svc,
        Method::POST,
        "/v2/check-sessions/trigger",
        &json!({"target": {"checkId": [bid, mid]}}),
    )
    .await;
    let err = error_body(resp, StatusCode::BAD_REQUEST).await;
    let message = err["message"].as_str().unwrap();
    assert!(
        message.contains("BROWSER and MULTI_STEP checks"),
        "{message}"
    );
    assert!(message.contains("cannot run yet"), "{message}");
    assert!(message.contains(&bid), "{message}");

    // Mixed selections and "everything" start only the runnable check.
    let sessions = svc.trigger_ids(&[&bid, &uid]).await;
    assert_eq!(sessions.len(), 1);
    assert_eq!(sessions[0]["checkId"], uid.as_str());
    let resp = send(&svc, Method::POST, "/v1/check-sessions/trigger", &json!({})).await;
    assert_eq!(resp.status(), StatusCode::CREATED);
    let all: Value = resp.json().await.unwrap();
    let ids: Vec<&str> = all["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["checkId"].as_str().unwrap())
        .collect();
    assert_eq!(ids, vec![uid.as_str()]);

    // A scheduler pass an hour ahead: every schedule is due, only the URL check runs.
    let store = svc.handle.store();
    let later = outpost::service::store::now_ms() + 3_600_000;
    let runs = store.run_due_schedules(later, 100).await.unwrap();
    assert_eq!(runs.sessions, 1);
    assert_eq!(
        store.earliest_schedule().await.unwrap().map(|t| t > later),
        Some(true)
    );

    // An agent with free capacity in both pools gets the three URL jobs, nothing else.
    let agent = svc.agent();
    agent.hello().await;
    let resp = agent
        .post(outpost::protocol::paths::LEASE)
        .json(&outpost::protocol::LeaseRequest {
            agent_id: agent.id,
            capacity: outpost::protocol::PoolCapacity {
                uptime: 10,
                heavy: 10,
            },
            wait_secs: 0,
        })
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let leased: outpost::protocol::LeaseResponse = resp.json().await.unwrap();
    assert_eq!(leased.jobs.len(), 3);
    assert!(leased.jobs.iter().all(|j| j.check_id.to_string() == uid));
    svc.stop().await;
}
